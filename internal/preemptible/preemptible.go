// Package preemptible lets the plugin that preempts in a profile tell the
// profile's other plugins which pods its preemption may evict, for their own
// dry runs: Coscheduling asks whether a whole gang would fit once the room
// preemption can make is made, and must ask the preemption that will run
// (ElasticQuota's takes borrowers' pods whatever their priority, and leaves
// namespaces at their min alone; DefaultPreemption takes lower-priority pods).
package preemptible

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
)

// Rule returns, for one preemptor, whether each pod may be its victim. The
// returned function may keep state across calls (a cap on what one
// namespace gives up): call it once per pod of one dry run.
type Rule func(preemptor *v1.Pod) func(victim *v1.Pod) bool

var (
	mu    sync.RWMutex
	rules = map[fwk.Handle]Rule{}
)

// Provide records the rule of the preemption that runs in h's profile.
func Provide(h fwk.Handle, r Rule) {
	mu.Lock()
	defer mu.Unlock()
	rules[h] = r
}

// For returns the rule of h's profile: the one provided, else
// DefaultPreemption's (pods of lower priority than the preemptor).
func For(h fwk.Handle) Rule {
	mu.RLock()
	defer mu.RUnlock()
	if r := rules[h]; r != nil {
		return r
	}
	return LowerPriority
}

// LowerPriority is DefaultPreemption's rule: pods of lower priority.
func LowerPriority(preemptor *v1.Pod) func(*v1.Pod) bool {
	prio := corev1helpers.PodPriority(preemptor)
	return func(victim *v1.Pod) bool { return corev1helpers.PodPriority(victim) < prio }
}
