package leadership

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/utils/clock"
)

// A process that stood still (SIGSTOP, a paused VM, a frozen cgroup) for
// longer than its lease lasts wakes believing it leads while another
// replica has led since: its informers have not yet delivered what happened
// meanwhile, and the bindings it had in flight or decides in the next
// moments use that stale view (the soak's paused-leader fault bound a pod
// over its namespace's quota max this way). client-go's elector notices
// within a retry period and the scheduler exits, but the binding goroutines
// wake at the same instant. The fence closes that window: it beats every
// FenceBeat, and a binding path that asks Fenced is refused while the last
// beat is older than FenceGap (the process is waking and the beat has not
// run yet) and for FenceHold after a beat that found such a gap, long enough
// for the elector to renew the lease (still the leader: bindings resume)
// or give it up (the process exits).
//
// Time is the monotonic clock's: a wall-clock step (NTP) neither fences
// nor prolongs a hold, and a machine suspended whole (a laptop) does not
// count as standing still (its monotonic clock stops too).
var (
	FenceBeat = 250 * time.Millisecond
	FenceGap  = 5 * time.Second
	// FenceHold is kube-scheduler's default lease duration.
	FenceHold = 15 * time.Second
)

// Fence tells a binding path whether this process may have stood still.
type Fence struct {
	clock clock.WithTicker

	mu sync.Mutex
	// last beat, the end of the hold, how long the last gap lasted, and
	// how many gaps were seen.
	last, until time.Time
	stood       time.Duration
	gaps        uint64
}

var (
	// The process's fence, how many running schedulers use it, and how to
	// stop its beat when the last one stops.
	fenceMu         sync.Mutex
	processFence    *Fence
	fenceUsers      int
	stopBeat        context.CancelFunc
	fenceMetricOnce sync.Once
	fenceClock      clock.WithTicker = clock.RealClock{}

	// disabled: fences never hold (DisableFence).
	disabled atomic.Bool

	fencedBindings = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Name:           "berth_fenced_bindings_total",
		StabilityLevel: k8smetrics.ALPHA,
		Help:           "Bindings a plugin refused or confirmed against the API because this scheduler process had stood still (paused or starved) longer than the fence allows, by plugin; refused pods are retried.",
	}, []string{"plugin"})
)

// ProcessFence is the process's fence for a plugin built with the
// scheduler's context ctx. It beats while some such context is live and
// stops with the last one: nothing runs in a scheduler whose profiles
// enable no plugin that asks, nor after the scheduler stopped (a process
// that runs schedulers one after another, as scheduler_perf does, keeps no
// goroutine between them). A fence started again counts from its start:
// the time it was stopped is not the process standing still.
func ProcessFence(ctx context.Context) *Fence {
	fenceMu.Lock()
	defer fenceMu.Unlock()
	fenceMetricOnce.Do(func() { legacyregistry.MustRegister(fencedBindings) })
	if processFence == nil {
		processFence = NewFence(fenceClock)
	}
	if fenceUsers == 0 {
		processFence.restart()
		beatCtx, cancel := context.WithCancel(context.Background())
		stopBeat = cancel
		go processFence.run(beatCtx)
	}
	fenceUsers++
	context.AfterFunc(ctx, func() {
		fenceMu.Lock()
		defer fenceMu.Unlock()
		if fenceUsers--; fenceUsers == 0 {
			stopBeat()
		}
	})
	return processFence
}

// DisableFence turns every fence off for the process: a scheduler that
// binds nothing for real and leads nothing (kubectl berth simulate) must not
// stall when its terminal is suspended.
func DisableFence() { disabled.Store(true) }

// NewFence returns a fence that beats only when Beat is called (tests).
func NewFence(c clock.WithTicker) *Fence {
	return &Fence{clock: c, last: c.Now()}
}

func (f *Fence) run(ctx context.Context) {
	t := f.clock.NewTicker(FenceBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			f.Beat()
		}
	}
}

// restart counts the beat from now: a fence that was stopped did not see
// the process stand still. A hold in progress stays.
func (f *Fence) restart() {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = now
}

// Beat records that the process runs; a beat after a gap holds the fence.
// The hold is set before the beat is, under one lock: a binding that asks
// in between cannot see a fresh beat without the hold.
func (f *Fence) Beat() {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if gap := now.Sub(f.last); gap > FenceGap {
		f.stood, f.until = gap, now.Add(FenceHold)
		f.gaps++
	}
	f.last = now
}

// Refused counts a binding a plugin refused (or confirmed) while fenced.
func (f *Fence) Refused(plugin string) { fencedBindings.WithLabelValues(plugin).Inc() }

// Fenced reports whether a binding must wait, and why.
func (f *Fence) Fenced() (bool, string) {
	if disabled.Load() {
		return false, ""
	}
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if gap := now.Sub(f.last); gap > FenceGap {
		return true, fmt.Sprintf("this scheduler stood still for %s (paused or starved) and may have decided on a stale view; binding waits until its lease is confirmed", gap.Round(time.Second))
	}
	if now.Before(f.until) {
		return true, fmt.Sprintf("this scheduler stood still for %s (paused or starved) and may have decided on a stale view; binding waits %s for its lease to be confirmed", f.stood.Round(time.Second), f.until.Sub(now).Round(time.Second))
	}
	return false, ""
}

// Epoch counts the gaps seen so far, and stale says whether the process is
// standing still now (its last beat is older than FenceGap): a reading
// taken before work and compared after it tells whether the process stood
// still during it.
func (f *Fence) Epoch() (gaps uint64, stale bool) {
	if disabled.Load() {
		return 0, false
	}
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gaps, now.Sub(f.last) > FenceGap
}
