package leadership

import (
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
var (
	FenceBeat = 250 * time.Millisecond
	FenceGap  = 5 * time.Second
	// FenceHold is kube-scheduler's default lease duration.
	FenceHold = 15 * time.Second
)

// Fence tells a binding path whether this process may have stood still.
type Fence struct {
	clock clock.WithTicker
	// last beat and the end of the hold, UnixNano (0: none).
	last, until atomic.Int64
	// stood is how long the last gap lasted, for the message.
	stood atomic.Int64
}

var (
	processFence *Fence
	fenceOnce    sync.Once

	fencedBindings = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Name:           "berth_fenced_bindings_total",
		StabilityLevel: k8smetrics.ALPHA,
		Help:           "Bindings a plugin refused because this scheduler process had stood still (paused or starved) longer than the fence allows, by plugin; the pods are retried.",
	}, []string{"plugin"})
)

// ProcessFence is the process's fence, started on first use (a plugin's
// constructor): nothing runs in a scheduler whose profiles enable no plugin
// that asks.
func ProcessFence() *Fence {
	fenceOnce.Do(func() {
		legacyregistry.MustRegister(fencedBindings)
		processFence = NewFence(clock.RealClock{})
		go processFence.run()
	})
	return processFence
}

// NewFence returns a fence that beats only when Beat is called (tests).
func NewFence(c clock.WithTicker) *Fence {
	f := &Fence{clock: c}
	f.last.Store(c.Now().UnixNano())
	return f
}

func (f *Fence) run() {
	t := f.clock.NewTicker(FenceBeat)
	defer t.Stop()
	for range t.C() {
		f.Beat()
	}
}

// Beat records that the process runs; a beat after a gap holds the fence.
func (f *Fence) Beat() {
	now := f.clock.Now()
	if gap := now.Sub(time.Unix(0, f.last.Swap(now.UnixNano()))); gap > FenceGap {
		f.stood.Store(int64(gap))
		f.until.Store(now.Add(FenceHold).UnixNano())
	}
}

// Refused counts a binding plugin refused while fenced.
func (f *Fence) Refused(plugin string) { fencedBindings.WithLabelValues(plugin).Inc() }

// Fenced reports whether a binding must wait, and why.
func (f *Fence) Fenced() (bool, string) {
	now := f.clock.Now()
	if gap := now.Sub(time.Unix(0, f.last.Load())); gap > FenceGap {
		return true, fmt.Sprintf("this scheduler stood still for %s (paused or starved) and may have decided on a stale view; binding waits until its lease is confirmed", gap.Round(time.Second))
	}
	if until := f.until.Load(); until != 0 && now.UnixNano() < until {
		return true, fmt.Sprintf("this scheduler stood still for %s (paused or starved) and may have decided on a stale view; binding waits %s for its lease to be confirmed", time.Duration(f.stood.Load()).Round(time.Second), time.Unix(0, until).Sub(now).Round(time.Second))
	}
	return false, ""
}
