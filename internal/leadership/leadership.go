// Package leadership tells a plugin whether its scheduler process is the one
// that schedules: kube-scheduler runs scheduling cycles only while it holds
// its lease, but tells plugins nothing about it, while a plugin's informers
// and background loops run in every replica. Writes a plugin makes for users
// (status, events) belong to the leader alone.
//
// The signal is client-go's leader-election metrics hook, its one public
// callback on acquiring and losing a lease: this package installs a
// leaderelection.MetricsProvider when it is imported. client-go keeps the
// first provider installed in a process, and this package initializes before
// component-base's (kube-scheduler's main imports that one for its
// leader_election_* metrics), so this provider also records those two metrics,
// with upstream's names, help and labels: Berth's /metrics has them as
// kube-scheduler's does.
package leadership

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	k8smetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// configured: a leader elector was created in this process.
	configured atomic.Bool
	// leading: it holds its lease.
	leading atomic.Bool
)

func init() {
	leaderelection.SetProvider(provider{})
}

// kube-scheduler's leader-election metrics (component-base's
// metrics/prometheus/clientgo/leaderelection defines them; this provider
// stands in for that one's, see the package comment).
var (
	masterStatus = k8smetrics.NewGaugeVec(&k8smetrics.GaugeOpts{
		Name:           "leader_election_master_status",
		StabilityLevel: k8smetrics.ALPHA,
		Help:           "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})
	slowpath = k8smetrics.NewCounterVec(&k8smetrics.CounterOpts{
		Name:           "leader_election_slowpath_total",
		StabilityLevel: k8smetrics.ALPHA,
		Help:           "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
	}, []string{"name"})
	registerOnce sync.Once
)

type provider struct{}

// NewLeaderMetric is called when a leader elector is created; the metrics
// are registered then, as upstream's are.
func (provider) NewLeaderMetric() leaderelection.LeaderMetric {
	registerOnce.Do(func() { legacyregistry.MustRegister(masterStatus, slowpath) })
	configured.Store(true)
	return metric{}
}

type metric struct{}

func (metric) On(name string) {
	leading.Store(true)
	masterStatus.WithLabelValues(name).Set(1)
}

func (metric) Off(name string) {
	leading.Store(false)
	masterStatus.WithLabelValues(name).Set(0)
}

func (metric) SlowpathExercised(name string) { slowpath.WithLabelValues(name).Inc() }

// State reports whether a leader elector runs in this process and, if so,
// whether it holds its lease. Before the scheduler creates its elector (after
// its caches synced) and in a scheduler without leader election, configured
// is false.
func State() (isConfigured, isLeading bool) {
	return configured.Load(), leading.Load()
}

// ElectionGrace: a scheduler creates its leader elector right after its
// caches synced; one with no elector this long after runs without leader
// election. A variable so that tests need not wait.
var ElectionGrace = 5 * time.Second

// Writer says whether this process writes status and events for users: it
// holds the scheduler's lease, or it runs without leader election. Replicas
// waiting for the lease write nothing (two writers would fight), nor does a
// process whose scheduler has not synced its caches.
type Writer struct {
	// synced: when the scheduler's informer synced (UnixNano; 0 before).
	synced atomic.Int64
}

// NewWriter returns a Writer that learns, until ctx ends, when synced (the
// scheduler's own pod informer's) first returns true.
func NewWriter(ctx context.Context, synced cache.InformerSynced) *Writer {
	w := &Writer{}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), synced) {
			w.synced.Store(time.Now().UnixNano())
		}
	}()
	return w
}

// Allowed reports whether the process may write now.
func (w *Writer) Allowed() bool {
	if configured, leading := State(); configured {
		return leading
	}
	t := w.synced.Load()
	return t != 0 && time.Since(time.Unix(0, t)) >= ElectionGrace
}

// allowedPoll is how often OnAllowed looks.
var allowedPoll = time.Second

// OnAllowed calls f, on a goroutine of its own, each time the process comes
// to be allowed to write with its pod informer synced (it took the lease;
// without leader election, it synced and ElectionGrace passed), until ctx
// ends: a replica that takes over does at once what the one before it left
// undone, from a full cache (a scheduler that takes the lease before it
// starts its informers, delayCacheUntilActive, is called once they
// synced). It looks every second; f runs within a second of the change,
// and one call ends before the next begins.
func (w *Writer) OnAllowed(ctx context.Context, f func()) {
	go func() {
		t := time.NewTicker(allowedPoll)
		defer t.Stop()
		was := false
		for {
			now := w.synced.Load() != 0 && w.Allowed()
			if now && !was {
				f()
			}
			was = now
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// SetSynced overrides when the scheduler synced (the zero time: not yet),
// for tests.
func (w *Writer) SetSynced(t time.Time) {
	if t.IsZero() {
		w.synced.Store(0)
		return
	}
	w.synced.Store(t.UnixNano())
}
