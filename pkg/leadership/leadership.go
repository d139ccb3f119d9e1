// Package leadership tells a plugin whether its scheduler process is the one
// that schedules: kube-scheduler runs scheduling cycles only while it holds
// its lease, but tells plugins nothing about it, while a plugin's informers
// and background loops run in every replica. Writes a plugin makes for users
// (status, events) belong to the leader alone.
//
// The signal is client-go's leader-election metrics hook, its one public
// callback on acquiring and losing a lease: this package installs a
// leaderelection.MetricsProvider when it is imported (the first provider
// installed in a process wins; kube-scheduler installs none).
package leadership

import (
	"sync/atomic"

	"k8s.io/client-go/tools/leaderelection"
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

type provider struct{}

func (provider) NewLeaderMetric() leaderelection.LeaderMetric {
	configured.Store(true)
	return metric{}
}

type metric struct{}

func (metric) On(string)                { leading.Store(true) }
func (metric) Off(string)               { leading.Store(false) }
func (metric) SlowpathExercised(string) {}

// State reports whether a leader elector runs in this process and, if so,
// whether it holds its lease. Before the scheduler creates its elector (after
// its caches synced) and in a scheduler without leader election, configured
// is false.
func State() (isConfigured, isLeading bool) {
	return configured.Load(), leading.Load()
}
