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

// Victims is one dry run's view of what the preemption may take: Eligible
// says whether p may go given what is taken so far, Take counts p as taken,
// Release undoes a Take (a victim reprieved, or a node given up). A cap on
// what one namespace gives up thus counts only the victims a dry run keeps,
// as the preemption itself takes the fewest that make room.
type Victims interface {
	Eligible(p *v1.Pod) bool
	Take(p *v1.Pod)
	Release(p *v1.Pod)
}

// Rule returns the Victims of one dry run for the pods that would preempt
// together (a gang's members still to place; they share a namespace and a
// priority).
type Rule func(preemptors []*v1.Pod) Victims

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
// DefaultPreemption's (pods of lower priority than the preemptors).
func For(h fwk.Handle) Rule {
	mu.RLock()
	defer mu.RUnlock()
	if r := rules[h]; r != nil {
		return r
	}
	return LowerPriority
}

// LowerPriority is DefaultPreemption's rule: pods of lower priority than the
// first preemptor.
func LowerPriority(preemptors []*v1.Pod) Victims {
	if len(preemptors) == 0 {
		return lowerThan(-1 << 31)
	}
	return lowerThan(corev1helpers.PodPriority(preemptors[0]))
}

type lowerThan int32

func (l lowerThan) Eligible(p *v1.Pod) bool { return corev1helpers.PodPriority(p) < int32(l) }
func (lowerThan) Take(*v1.Pod)              {}
func (lowerThan) Release(*v1.Pod)           {}
