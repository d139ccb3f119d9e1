package elasticquota

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/berth-scheduler/berth/internal/mutant"
)

const stateKey fwk.StateKey = "PreFilter" + Name

// Reasons a pod is refused, the label of the denials metric.
const (
	reasonMax     = "max"
	reasonBorrow  = "borrow"
	reasonNoQuota = "no-quota"
)

// preFilterState is the quota arithmetic of one pod, taken in PreFilter and
// kept current by AddPod/RemovePod while preemption simulates removals.
type preFilterState struct {
	pod       *v1.Pod
	prio      int32
	hasQuota  bool
	quotaName string
	// keys are req's resources, sorted, for stable messages.
	keys     []v1.ResourceName
	req      vec // accounted resources only
	min, max vec // shared with the manager, read-only
	// used and the totals hold only req's resources.
	used, totalUsed, totalMin vec
	// withinMin: the namespace stays within its min with this pod.
	withinMin bool
	// gang is the arithmetic of the members the pod's gang (a
	// scheduler-plugins PodGroup) still needs, pod included, summed: the
	// quota admits them together, and a preemption for the pod must make
	// room for all of them in the quota. Nil for a pod of no gang, or whose
	// gang needs no other member.
	gang *preFilterState
	// gangName is the gang's key, gangSize the number of members it sums.
	gangName string
	gangSize int
	// room is whether the gang's quota admits it with every pod it may
	// preempt gone, in the whole cluster: decided once per cycle, shared by
	// the clones the preemption makes per node.
	room *gangRoom
}

// gangRoom holds gangFits's answer for one cycle.
type gangRoom struct {
	once   sync.Once
	denial *denial
}

// check returns the answer, computing it on first use.
func (r *gangRoom) check(compute func() *denial) *denial {
	r.once.Do(func() { r.denial = compute() })
	return r.denial
}

func (s *preFilterState) Clone() fwk.StateData {
	c := *s
	c.used = make(vec, len(s.used))
	c.used.add(s.used, 1)
	c.totalUsed = make(vec, len(s.totalUsed))
	c.totalUsed.add(s.totalUsed, 1)
	if s.gang != nil {
		c.gang = s.gang.Clone().(*preFilterState)
	}
	return &c
}

// snapshot takes the arithmetic for pod: its own namespace and the totals,
// for the resources it requests, nominated pods of no lower priority included.
func (m *manager) snapshot(pod *v1.Pod, req vec, prio int32) *preFilterState {
	return m.snapshotExcluding(pod, req, prio, nil, nil)
}

// snapshotExcluding is snapshot for pods that preempt together (a gang's
// members, whose summed request is req): none of them counts as nominated.
// The pods in gone do not count at all: a pod group's preemption removed
// them from the snapshot to see whether the group fits without them.
func (m *manager) snapshotExcluding(pod *v1.Pod, req vec, prio int32, together []*v1.Pod, gone sets.Set[types.UID]) *preFilterState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	s := &preFilterState{pod: pod, prio: prio}
	q := m.quotas[pod.Namespace]
	if q == nil {
		return s
	}
	s.hasQuota, s.quotaName, s.min, s.max = true, q.name, q.min, q.max
	s.req = make(vec, len(req))
	for name, x := range req {
		if q.accounted.Has(name) {
			s.req[name] = x
			s.keys = append(s.keys, name)
		}
	}
	slices.Sort(s.keys)
	s.used, s.totalUsed, s.totalMin = make(vec, len(s.req)), make(vec, len(s.req)), make(vec, len(s.req))
	used := m.nsUsed[pod.Namespace]
	for name := range s.req {
		s.used[name] = used[name]
		s.totalUsed[name] = m.totalUsed[name]
		s.totalMin[name] = m.totalMin[name]
	}
	for uid, e := range m.nominated {
		if uid == pod.UID || e.prio < prio || slices.ContainsFunc(together, func(p *v1.Pod) bool { return p.UID == uid }) {
			continue
		}
		_, quotaed := m.quotas[e.ns]
		for name := range s.req {
			if e.ns == pod.Namespace {
				s.used[name] += e.req[name]
			}
			if quotaed {
				s.totalUsed[name] += e.req[name]
			}
		}
	}
	for uid := range gone {
		if e := m.pods[uid]; e != nil {
			s.adjust(e.ns, e.req, m.quotas[e.ns] != nil, -1)
		}
	}
	s.withinMin = s.fitsMin()
	return s
}

// fitsMin: every requested resource the min names stays within it, and the
// min names at least one of them.
func (s *preFilterState) fitsMin() bool {
	named := false
	for name, x := range s.req {
		mn, ok := s.min[name]
		if !ok {
			continue
		}
		named = true
		if s.used[name]+x > mn {
			return false
		}
	}
	return named
}

// adjust applies another pod's addition (sign 1) or removal (-1) to the
// arithmetic; quotaed says whether that pod's namespace has a quota.
func (s *preFilterState) adjust(ns string, req vec, quotaed bool, sign int64) {
	if !s.hasQuota {
		return
	}
	if s.gang != nil {
		s.gang.adjust(ns, req, quotaed, sign)
	}
	for name := range s.req {
		if ns == s.pod.Namespace {
			s.used[name] += sign * req[name]
		}
		if quotaed {
			s.totalUsed[name] += sign * req[name]
		}
	}
	s.withinMin = s.fitsMin()
}

// denial says why a pod is refused.
type denial struct {
	reason string
	// unresolvable: no preemption can help.
	unresolvable bool
	msg          string
}

func (d *denial) status() *fwk.Status {
	code := fwk.Unschedulable
	if d.unresolvable {
		code = fwk.UnschedulableAndUnresolvable
	}
	return fwk.NewStatus(code, d.msg)
}

// admit applies the rule: used + request ≤ max, and either used + request ≤
// min or all quotas' used + request ≤ the sum of their min. A resource the
// quota names only in max is limited by max alone.
func (s *preFilterState) admit() *denial {
	ns := s.pod.Namespace
	for _, name := range s.keys {
		x, u := s.req[name], s.used[name]
		if mx, ok := s.max[name]; ok && !mutant.On(mutant.QuotaIgnoresMax) {
			if x > mx {
				return &denial{reason: reasonMax, unresolvable: true, msg: fmt.Sprintf(
					"pod's %s request %s exceeds the max %s of ElasticQuota %s/%s",
					name, fmtQ(name, x), fmtQ(name, mx), ns, s.quotaName)}
			}
			if u+x > mx {
				return &denial{reason: reasonMax, msg: fmt.Sprintf(
					"ElasticQuota %s/%s: %s used %s + request %s exceeds max %s",
					ns, s.quotaName, name, fmtQ(name, u), fmtQ(name, x), fmtQ(name, mx))}
			}
		}
		mn, ok := s.min[name]
		if !ok || u+x <= mn {
			continue
		}
		if s.totalUsed[name]+x > s.totalMin[name] {
			// The namespace's own numbers only: the pod's author may not
			// read what other namespaces use (the totals).
			return &denial{reason: reasonBorrow, msg: fmt.Sprintf(
				"ElasticQuota %s/%s: %s used %s + request %s exceeds min %s by %s, and there is not enough unused min to borrow it",
				ns, s.quotaName, name, fmtQ(name, u), fmtQ(name, x), fmtQ(name, mn), fmtQ(name, u+x-mn))}
		}
	}
	return nil
}

// admitAll applies the rule to the pod and then to its gang's members
// together (see gang).
func (s *preFilterState) admitAll() *denial {
	if d := s.admit(); d != nil {
		return d
	}
	if s.gang == nil {
		return nil
	}
	d := s.gang.admit()
	if d != nil {
		d.msg = fmt.Sprintf("pod group %s needs %d more members placed, and together they do not fit: %s", s.gangName, s.gangSize, strings.TrimPrefix(d.msg, "pod's "))
	}
	return d
}

// victimState is the arithmetic by which preemption chooses victims for the
// pod: its gang's when it has one, since victims that let one member in but
// not the gang would be evicted in vain.
func (s *preFilterState) victimState() *preFilterState {
	if s.gang != nil {
		return s.gang
	}
	return s
}
