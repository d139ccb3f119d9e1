// Package handletest holds test doubles for the parts of a framework handle
// that plugins' unit tests watch: the pod activator and the event recorder.
package handletest

import (
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
)

// Recorder is a framework.PodActivator and an events.EventRecorder that
// remember what they were given. The zero value is ready to use.
type Recorder struct {
	mu        sync.Mutex
	activated []string
	events    []string
	before    func(regarding runtime.Object)
}

var (
	_ events.EventRecorderLogger = &Recorder{}
)

// Activate records the keys (namespace/name) of pods.
func (r *Recorder) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range pods {
		r.activated = append(r.activated, k)
	}
}

// Eventf records "<type> <reason> <regarding's name>: <note>".
func (r *Recorder) Eventf(regarding runtime.Object, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	before := r.before
	r.mu.Unlock()
	if before != nil {
		before(regarding) // outside the lock: it may block
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	name := ""
	if m, ok := regarding.(metav1.Object); ok {
		name = m.GetName()
	}
	r.events = append(r.events, fmt.Sprintf("%s %s %s: %s", eventtype, reason, name, fmt.Sprintf(note, args...)))
}

// BeforeEvent sets a function that Eventf calls, with the event's object,
// before it records the event: a test holds a writer there (the function
// may block) to order what the code under test does.
func (r *Recorder) BeforeEvent(f func(regarding runtime.Object)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.before = f
}

// WithLogger returns r.
func (r *Recorder) WithLogger(klog.Logger) events.EventRecorderLogger { return r }

// Events returns the events recorded so far.
func (r *Recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Activated returns the keys of the pods activated so far, in order.
func (r *Recorder) Activated() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.activated)
}

// Take returns the activated keys (sorted) and the events, and forgets them.
func (r *Recorder) Take() (activated, evs []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	activated, evs = r.activated, r.events
	r.activated, r.events = nil, nil
	slices.Sort(activated)
	return activated, evs
}
