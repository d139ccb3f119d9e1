package framework

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// HoldName is a test-only Permit plugin: pods labelled HoldLabel=true wait at
// Permit (their binding cycle does not start) until the test releases them,
// so that a test can act between the scheduling decision and the binding.
const (
	HoldName  = "TestHold"
	HoldLabel = "berth.io/test-hold"
)

// Hold keeps the handles of every profile that enables TestHold.
type Hold struct {
	mu      sync.Mutex
	handles []fwk.Handle
}

// Factory is the plugin factory to put in the registry under HoldName.
func (h *Hold) Factory(_ context.Context, _ runtime.Object, handle fwk.Handle) (fwk.Plugin, error) {
	h.mu.Lock()
	h.handles = append(h.handles, handle)
	h.mu.Unlock()
	return &holdPlugin{held: map[types.UID]bool{}}, nil
}

// Waiting counts the held pods.
func (h *Hold) Waiting() int {
	n := 0
	h.each(func(fwk.WaitingPod) { n++ })
	return n
}

// NodeOf returns the node the scheduler chose for a held pod ("" if the pod
// is not held).
func (h *Hold) NodeOf(namespace, name string) string {
	node := ""
	h.each(func(wp fwk.WaitingPod) {
		if p := wp.GetPod(); p.Namespace == namespace && p.Name == name {
			node = p.Spec.NodeName
		}
	})
	return node
}

// ReleaseAll lets every held pod go on to binding at once.
func (h *Hold) ReleaseAll() {
	h.each(func(wp fwk.WaitingPod) { wp.Allow(HoldName) })
}

// each visits every waiting pod once: profiles may share the scheduler's
// map of waiting pods, so one pod can be seen through several handles.
func (h *Hold) each(f func(fwk.WaitingPod)) {
	h.mu.Lock()
	handles := append([]fwk.Handle(nil), h.handles...)
	h.mu.Unlock()
	seen := map[types.UID]bool{}
	for _, handle := range handles {
		handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
			if uid := wp.GetPod().UID; !seen[uid] {
				seen[uid] = true
				f(wp)
			}
		})
	}
}

// holdPlugin holds each pod once: a pod that is retried after a failed
// binding goes straight on.
type holdPlugin struct {
	mu   sync.Mutex
	held map[types.UID]bool
}

var _ fwk.PermitPlugin = &holdPlugin{}

func (*holdPlugin) Name() string { return HoldName }

func (p *holdPlugin) Permit(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) (*fwk.Status, time.Duration) {
	if pod.Labels[HoldLabel] != "true" {
		return nil, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[pod.UID] {
		return nil, 0
	}
	p.held[pod.UID] = true
	return fwk.NewStatus(fwk.Wait), 2 * time.Minute
}
