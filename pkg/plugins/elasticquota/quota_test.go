package elasticquota

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func eq(ns string, min, max v1.ResourceList) *schedv1alpha1.ElasticQuota {
	return &schedv1alpha1.ElasticQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"},
		Spec:       schedv1alpha1.ElasticQuotaSpec{Min: min, Max: max},
	}
}

func pod(ns, name, cpu string, prio int32, node string) *v1.Pod {
	w := st.MakePod().Namespace(ns).Name(name).UID(ns + "/" + name).Priority(prio).Node(node)
	if cpu != "" {
		w = w.Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu})
	}
	return w.Obj()
}

func TestPodRequest(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	p := st.MakePod().Namespace("a").Name("p").
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1", v1.ResourceMemory: "1Gi"}).
		InitReq(map[v1.ResourceName]string{v1.ResourceCPU: "3"}).Obj()
	p.Spec.Overhead = rl("cpu", "100m")
	if got := podRequest(p); got[v1.ResourceCPU] != 3100 || got[v1.ResourceMemory] != 1<<30 || got[v1.ResourcePods] != 1 {
		t.Errorf("init container and overhead: got %v, want cpu 3100m (init max + overhead), memory 1Gi, pods 1", got)
	}
	// A sidecar (restartable init container) runs beside the app containers.
	p.Spec.InitContainers[0].RestartPolicy = &always
	p.Spec.InitContainers[0].Resources.Requests = rl("cpu", "500m")
	if got := podRequest(p); got[v1.ResourceCPU] != 1600 {
		t.Errorf("sidecar: got cpu %dm, want 1600m", got[v1.ResourceCPU])
	}
}

func TestManagerAccounting(t *testing.T) {
	m := newManager()
	m.setQuota("a", newQuota(eq("a", rl("cpu", "4"), rl("cpu", "8")), nil))
	check := func(step string, nsUsed, total int64) {
		t.Helper()
		if got := m.nsUsed["a"][v1.ResourceCPU]; got != nsUsed {
			t.Errorf("%s: used %dm, want %dm", step, got, nsUsed)
		}
		if got := m.totalUsed[v1.ResourceCPU]; got != total {
			t.Errorf("%s: total used %dm, want %dm", step, got, total)
		}
	}
	m.observe(pod("a", "pending", "1", 0, ""))
	check("pending pod", 0, 0)
	m.observe(pod("a", "bound", "1", 0, "n1"))
	check("bound pod", 1000, 1000)
	reserved := pod("a", "reserved", "2", 0, "")
	m.assume(reserved, false)
	check("reserved", 3000, 3000)
	m.observe(reserved) // an update of the pending pod while it is reserved
	check("reserved pod updated while pending", 3000, 3000)
	m.unassume(reserved, false)
	check("unreserved", 1000, 1000)
	m.assume(reserved, false)
	bound := reserved.DeepCopy()
	bound.Spec.NodeName = "n1"
	m.observe(bound)
	m.unassume(reserved, false) // too late: seen bound
	check("bound after reserve", 3000, 3000)
	done := bound.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	m.observe(done)
	check("terminal pod", 1000, 1000)
	m.forgetPod(types.UID("a/bound"))
	check("deleted pod", 0, 0)

	// Usage in a namespace without a quota counts once it gets one.
	m.observe(pod("b", "x", "2", 0, "n1"))
	if m.totalUsed[v1.ResourceCPU] != 0 {
		t.Errorf("namespace without quota counted in totals")
	}
	m.setQuota("b", newQuota(eq("b", rl("cpu", "2"), nil), nil))
	if m.totalUsed[v1.ResourceCPU] != 2000 || m.totalMin[v1.ResourceCPU] != 6000 {
		t.Errorf("after quota b: total used %d min %d, want 2000 and 6000", m.totalUsed[v1.ResourceCPU], m.totalMin[v1.ResourceCPU])
	}
	m.setQuota("b", nil)
	if m.totalUsed[v1.ResourceCPU] != 0 || m.totalMin[v1.ResourceCPU] != 4000 {
		t.Errorf("after removing quota b: total used %d min %d", m.totalUsed[v1.ResourceCPU], m.totalMin[v1.ResourceCPU])
	}
	if !m.dirty.Has("a") {
		t.Errorf("namespace a should be marked for a status write")
	}
}

// A pod this scheduler reserved gets NominatedNodeName written before its
// PreBind plugins run (the NominatedNodeNameForExpectation gate, whenever a
// PreBind plugin has work, as Explain has for a pod that asks): the informer's
// update of that still-unbound pod must not count it a second time as a
// nominated pod. The demo found it: a quota's fourth pod refused with "cpu
// used 6 ... exceeds max 4" while four pods were reserved or bound.
func TestReservedPodNominatedBeforeBindCountsOnce(t *testing.T) {
	m := newManager()
	m.setQuota("a", newQuota(eq("a", rl("cpu", "2"), rl("cpu", "4")), nil))
	reserved := pod("a", "reserved", "1", 10, "")
	m.assume(reserved, false)
	nominated := reserved.DeepCopy()
	nominated.Status.NominatedNodeName = "n1"
	m.observe(nominated)
	next := pod("a", "next", "1", 0, "")
	s := m.snapshot(next, podRequest(next), 0)
	if got := s.used[v1.ResourceCPU]; got != 1000 {
		t.Errorf("after the NominatedNodeName write of a reserved pod: namespace used %dm in admission, want 1000m (counted once)", got)
	}
	if got := s.totalUsed[v1.ResourceCPU]; got != 1000 {
		t.Errorf("after the NominatedNodeName write of a reserved pod: total used %dm, want 1000m", got)
	}
	// Unreserved while nominated (a pod group's cycle reverting restores the
	// nomination in memory only): it counts as nominated, as a preemptor
	// waiting for its node would.
	m.unassume(nominated, false)
	if got := m.snapshot(next, podRequest(next), 0).used[v1.ResourceCPU]; got != 1000 {
		t.Errorf("unreserved, still nominated: used %dm, want 1000m (as a nominated pod)", got)
	}
	// A failed binding clears NominatedNodeName through the API: the
	// informer's update leaves nothing counted.
	m.observe(reserved)
	if got := m.snapshot(next, podRequest(next), 0).used[v1.ResourceCPU]; got != 0 {
		t.Errorf("unreserved, nomination cleared: used %dm, want 0", got)
	}
	m.assume(reserved, false)
	m.observe(nominated)
	bound := reserved.DeepCopy()
	bound.Spec.NodeName = "n1"
	m.observe(bound)
	if got := m.snapshot(next, podRequest(next), 0).used[v1.ResourceCPU]; got != 1000 {
		t.Errorf("bound: used %dm, want 1000m", got)
	}
}

func TestEffectiveQuota(t *testing.T) {
	older, newer := eq("a", nil, nil), eq("a", nil, nil)
	older.Name, newer.Name = "z-old", "a-new"
	older.CreationTimestamp = metav1.Unix(100, 0)
	newer.CreationTimestamp = metav1.Unix(200, 0)
	if got := effectiveQuota([]*schedv1alpha1.ElasticQuota{newer, older}); got.Name != "z-old" {
		t.Errorf("got %s, want the oldest", got.Name)
	}
	q := newQuota(eq("a", rl("cpu", "1", "memory", "1Gi"), rl("nvidia.com/gpu", "2")), sets.New[v1.ResourceName]("cpu", "nvidia.com/gpu"))
	if !q.accounted.Equal(sets.New[v1.ResourceName]("cpu", "nvidia.com/gpu")) || len(q.min) != 1 {
		t.Errorf("resources arg not applied: accounted %v min %v", sets.List(q.accounted), q.min)
	}
}

func TestAdmission(t *testing.T) {
	// Namespaces a and b: min 4, max 8 cpu each; c: max-only gpu.
	setup := func() *manager {
		m := newManager()
		m.setQuota("a", newQuota(eq("a", rl("cpu", "4"), rl("cpu", "8")), nil))
		m.setQuota("b", newQuota(eq("b", rl("cpu", "4"), rl("cpu", "8")), nil))
		m.setQuota("c", newQuota(eq("c", nil, rl("nvidia.com/gpu", "2")), nil))
		return m
	}
	tests := []struct {
		name       string
		used       []*v1.Pod
		nominated  []*v1.Pod
		pod        *v1.Pod
		noQuota    bool
		wantReason string
		wantCode   fwk.Code
		wantMsg    string
		withinMin  bool
	}{
		{name: "within min", used: []*v1.Pod{pod("a", "u", "2", 0, "n")}, pod: pod("a", "p", "2", 0, ""), withinMin: true},
		{name: "borrowing what b leaves", used: []*v1.Pod{pod("a", "u", "4", 0, "n")}, pod: pod("a", "p", "4", 0, "")},
		{name: "borrowing refused: b uses its min",
			used: []*v1.Pod{pod("a", "u", "4", 0, "n"), pod("b", "u", "3", 0, "n")}, pod: pod("a", "p", "2", 0, ""),
			wantReason: reasonBorrow, wantCode: fwk.Unschedulable,
			// Only the namespace's own numbers: the pod's author may not read
			// other teams' usage (issue 51, item 10).
			wantMsg: "ElasticQuota a/quota: cpu used 4 + request 2 exceeds min 4 by 2, and there is not enough unused min to borrow it"},
		{name: "above max", used: []*v1.Pod{pod("a", "u", "7", 0, "n")}, pod: pod("a", "p", "2", 0, ""),
			wantReason: reasonMax, wantCode: fwk.Unschedulable, wantMsg: "ElasticQuota a/quota: cpu used 7 + request 2 exceeds max 8"},
		{name: "request alone above max", pod: pod("a", "p", "9", 0, ""),
			wantReason: reasonMax, wantCode: fwk.UnschedulableAndUnresolvable, wantMsg: "pod's cpu request 9 exceeds the max 8 of ElasticQuota a/quota"},
		{name: "#683: within min although all used + request exceeds all min",
			used: []*v1.Pod{pod("a", "u", "8", 0, "n")}, pod: pod("b", "p", "2", 0, ""), withinMin: true},
		{name: "nominated pod of higher priority counts", used: []*v1.Pod{pod("a", "u", "3", 0, "n")},
			nominated: []*v1.Pod{pod("a", "nom", "5", 10, "")}, pod: pod("a", "p", "1", 0, ""),
			wantReason: reasonMax, wantCode: fwk.Unschedulable},
		{name: "nominated pod of lower priority does not", used: []*v1.Pod{pod("a", "u", "3", 0, "n")},
			nominated: []*v1.Pod{pod("a", "nom", "5", 0, "")}, pod: pod("a", "p", "1", 10, ""), withinMin: true},
		{name: "max-only resource: limited by max alone",
			used: []*v1.Pod{st.MakePod().Namespace("c").Name("g").UID("g").Node("n").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj()},
			pod:  st.MakePod().Namespace("c").Name("p").UID("p").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj()},
		{name: "max-only resource: above max",
			used:       []*v1.Pod{st.MakePod().Namespace("c").Name("g").UID("g").Node("n").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "2"}).Obj()},
			pod:        st.MakePod().Namespace("c").Name("p").UID("p").Req(map[v1.ResourceName]string{"nvidia.com/gpu": "1"}).Obj(),
			wantReason: reasonMax, wantCode: fwk.Unschedulable},
		{name: "namespace without quota", pod: pod("free", "p", "100", 0, ""), noQuota: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := setup()
			for _, p := range tc.used {
				m.observe(p)
			}
			for _, p := range tc.nominated {
				p.Status.NominatedNodeName = "n"
				m.observe(p)
			}
			s := m.snapshot(tc.pod, podRequest(tc.pod), corev1helpers.PodPriority(tc.pod))
			if s.hasQuota == tc.noQuota {
				t.Fatalf("hasQuota = %v", s.hasQuota)
			}
			if s.withinMin != tc.withinMin {
				t.Errorf("withinMin = %v, want %v", s.withinMin, tc.withinMin)
			}
			d := s.admit()
			if tc.noQuota {
				if d != nil {
					t.Fatalf("pod without quota refused: %s", d.msg)
				}
				return
			}
			if tc.wantReason == "" {
				if d != nil {
					t.Fatalf("refused: %s", d.msg)
				}
				return
			}
			if d == nil {
				t.Fatalf("admitted, want %s", tc.wantReason)
			}
			if d.reason != tc.wantReason || d.status().Code() != tc.wantCode || !strings.Contains(d.msg, tc.wantMsg) {
				t.Errorf("got %s %v %q, want %s %v %q", d.reason, d.status().Code(), d.msg, tc.wantReason, tc.wantCode, tc.wantMsg)
			}
			if strings.Contains(d.msg, "all quotas") {
				t.Errorf("the refusal %q shows the cluster's totals to the pod's author", d.msg)
			}
		})
	}
}

func TestStateAdjust(t *testing.T) {
	m := newManager()
	m.setQuota("a", newQuota(eq("a", rl("cpu", "4"), rl("cpu", "8")), nil))
	m.setQuota("b", newQuota(eq("b", rl("cpu", "4"), rl("cpu", "8")), nil))
	m.observe(pod("a", "u", "7", 0, "n"))
	p := pod("a", "p", "2", 0, "")
	s := m.snapshot(p, podRequest(p), 0)
	if s.admit() == nil {
		t.Fatal("want refusal above max")
	}
	c := s.Clone().(*preFilterState)
	c.adjust("a", podRequest(pod("a", "u", "7", 0, "n")), true, -1)
	if d := c.admit(); d != nil {
		t.Errorf("after removing the namespace's own pod: %s", d.msg)
	}
	if !c.withinMin {
		t.Errorf("after removing the namespace's own pod the pod is within min")
	}
	if s.used[v1.ResourceCPU] != 7000 {
		t.Errorf("Clone shares used with the original")
	}
}

func victim(p *v1.Pod) *preemption.DomainVictim {
	pi, _ := framework.NewPodInfo(p)
	return &preemption.DomainVictim{Victim: preemption.NewPodVictim(pi, nil, nil)}
}

func names(vs []*preemption.DomainVictim) []string {
	var out []string
	for _, v := range vs {
		out = append(out, v.Pods()[0].GetPod().Name)
	}
	return out
}

func TestEligibleVictims(t *testing.T) {
	m := newManager()
	m.setQuota("a", newQuota(eq("a", rl("cpu", "4"), rl("cpu", "8")), nil))
	m.setQuota("b", newQuota(eq("b", rl("cpu", "4"), rl("cpu", "8")), nil))
	m.setQuota("c", newQuota(eq("c", rl("cpu", "4"), rl("cpu", "8")), nil))
	// a borrows 4 (used 8, four pods of 2); c is at its min; b is empty.
	onNode := []*v1.Pod{
		pod("a", "a-high", "2", 100, "n"), pod("a", "a-low", "2", 1, "n"), pod("a", "a-mid", "2", 50, "n"), pod("a", "a-mid2", "2", 49, "n"),
		pod("c", "c-low", "4", 0, "n"),
		pod("free", "free-low", "1", 0, "n"), pod("free", "free-high", "1", 1000, "n"),
		pod("b", "b-own-low", "1", 0, "n"),
	}
	var all []*preemption.DomainVictim
	for _, p := range onNode {
		m.observe(p)
		all = append(all, victim(p))
	}

	// b's pod is within min: it may take back what a borrowed (any priority,
	// lowest first, no more than 4 cpu), lower-priority pods of b and of
	// namespaces without a quota; never c's (at its min).
	p := pod("b", "p", "2", 10, "")
	s := m.snapshot(p, podRequest(p), 10)
	got := names(eligibleVictims(m, s, all, true))
	want := []string{"b-own-low", "a-mid2", "a-low", "free-low"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("within min: got %v, want %v (own namespace first, then by importance)", got, want)
	}

	// a's pod is beyond its min: only a's own lower-priority pods.
	p = pod("a", "p", "2", 60, "")
	s = m.snapshot(p, podRequest(p), 60)
	if got := names(eligibleVictims(m, s, all, true)); strings.Join(got, ",") != "a-mid,a-mid2,a-low" {
		t.Errorf("beyond min: got %v, want a's lower-priority pods", got)
	}

	// A pod without a quota: lower-priority pods without a quota only.
	p = pod("free", "p", "1", 10, "")
	s = m.snapshot(p, podRequest(p), 10)
	if got := names(eligibleVictims(m, s, all, true)); strings.Join(got, ",") != "free-low" {
		t.Errorf("no quota: got %v, want [free-low]", got)
	}
}
