// Package leakcheck is the goleak options Berth's unit tests share: the
// goroutines a process keeps by design, which are no test's leak.
package leakcheck

import "go.uber.org/goleak"

// Options ignores klog's flush daemon (one per process, for its lifetime).
func Options() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
	}
}
