package main

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// A reclaim is judged against the victim namespace's use when the
// preemption decided, which came before its event by up to evictionWindow:
// a pod of that namespace that ended between the decision and the judgement
// (a Job's pod completing) counted then.
func TestEvictionJudgesTheUseBeforeTheEvent(t *testing.T) {
	at := time.Unix(1000, 0)
	cpu := func(c string) v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse(c)} }
	for _, tc := range []struct {
		name    string
		history []usedSample
		want    bool // a violation
	}{{
		name: "nothing more was there before the event: a reclaim below min",
		want: true,
	}, {
		name:    "a pod that ended 3s before the event took the namespace above its min then",
		history: []usedSample{{at: at.Add(-3 * time.Second), used: cpu("4500m"), all: cpu("4500m")}, {at: at.Add(-time.Second), used: cpu("3500m"), all: cpu("3500m")}},
	}, {
		name:    "above its min only longer than evictionWindow before the event",
		history: []usedSample{{at: at.Add(-evictionWindow - time.Second), used: cpu("4500m"), all: cpu("4500m")}, {at: at.Add(-time.Second), used: cpu("3500m"), all: cpu("3500m")}},
		want:    true,
	}, {
		name:    "above its min only after the event",
		history: []usedSample{{at: at.Add(time.Second), used: cpu("4500m"), all: cpu("4500m")}},
		want:    true,
	}, {
		name:    "above its min only with a pod being deleted all along (the plugin counts it as leaving)",
		history: []usedSample{{at: at.Add(-10 * time.Second), used: cpu("3500m"), all: cpu("4500m")}, {at: at.Add(-time.Second), used: cpu("3500m"), all: cpu("4500m")}},
		want:    true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{
				pods:         cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				quotas:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				pdbs:         cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				quotaChanged: map[string]time.Time{}, nominationEnded: map[types.UID]time.Time{}, gone: map[types.UID]gonePod{},
				usedHistory: map[string][]usedSample{"team-a": tc.history},
				meters:      map[string]*meter{}, reported: map[string]bool{}, first: make(chan struct{}), start: at,
			}
			for _, ns := range []string{"team-a", "team-b"} {
				q := &schedv1alpha1.ElasticQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quota"}, Spec: schedv1alpha1.ElasticQuotaSpec{Min: cpu("4")}}
				if err := w.quotas.Add(q); err != nil {
					t.Fatal(err)
				}
			}
			victim := st.MakePod().Namespace("team-a").Name("victim").UID("victim").Node("n1").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			victim.DeletionTimestamp = &metav1.Time{Time: at}
			other := st.MakePod().Namespace("team-a").Name("other").UID("other").Node("n1").Req(map[v1.ResourceName]string{"cpu": "2500m"}).Obj()
			preemptor := st.MakePod().Namespace("team-b").Name("preemptor").UID("preemptor").Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			for _, p := range []*v1.Pod{victim, other, preemptor} {
				if err := w.pods.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			w.victims = []victimRecord{{victim: "victim", preemptor: "preemptor", at: at}}
			w.judgeEviction(evictionEvent{victim: "victim", preemptor: "preemptor", ns: "team-a", name: "victim", at: at, victimPod: victim, preemptorPod: preemptor})
			if got := len(w.violations) > 0; got != tc.want {
				t.Fatalf("violation %v, want %v: %v", got, tc.want, w.violations)
			}
			if byHistory := !tc.want; w.reclaims != 1 || (w.reclaimsByHistory == 1) != byHistory {
				t.Errorf("reclaims %d, of them by history %d; want 1, and by history %v", w.reclaims, w.reclaimsByHistory, byHistory)
			}
			if tc.want && !strings.Contains(w.violations[0].Message, "team-a used cpu=3500m") {
				t.Errorf("message %q does not give the use judged", w.violations[0].Message)
			}
		})
	}
}

// An eviction a Kubernetes PodGroup's preemption made ("Preempted by
// podgroup <uid>", the event's related object the group) is judged against
// the group's priority and its members' requests: before, the preemptor was
// looked up as a pod, never found, and the eviction counted unjudged (the
// 1,000-node soaks judged about 11 % of their evictions). Each eviction not
// judged is counted by why.
func TestAPodGroupsEvictionIsJudged(t *testing.T) {
	at := time.Unix(1000, 0)
	for _, tc := range []struct {
		name           string
		victimPriority int32
		want           bool // a violation
	}{
		{name: "a victim below the group's priority", victimPriority: 10},
		{name: "a victim above the group's priority", victimPriority: 200, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{
				pods:         cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				quotas:       cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				pdbs:         cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				nativeGroups: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
				quotaChanged: map[string]time.Time{}, nominationEnded: map[types.UID]time.Time{}, gone: map[types.UID]gonePod{},
				usedHistory: map[string][]usedSample{},
				meters:      map[string]*meter{}, reported: map[string]bool{}, first: make(chan struct{}), start: at,
				unjudgedEvictions: map[string]int{},
			}
			pg := &schedulingv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "soak-free", Name: "train", UID: "11111111-2222-3333-4444-555555555555"},
				Spec: schedulingv1beta1.PodGroupSpec{Priority: ptr.To[int32](100)}}
			if err := w.nativeGroups.Add(pg); err != nil {
				t.Fatal(err)
			}
			member := st.MakePod().Namespace("soak-free").Name("train-0").UID("member").Priority(100).Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			member.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("train")}
			victim := st.MakePod().Namespace("soak-free").Name("victim").UID("victim").Node("n1").Priority(tc.victimPriority).Req(map[v1.ResourceName]string{"cpu": "1"}).Obj()
			for _, p := range []*v1.Pod{member, victim} {
				if err := w.pods.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			w.preempted(&v1.Event{Reason: "Preempted", Message: "Preempted by podgroup " + string(pg.UID) + " on node n1",
				InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "soak-free", Name: "victim", UID: "victim"},
				Related:        &v1.ObjectReference{Kind: "PodGroup", APIVersion: "scheduling.k8s.io/v1beta1", Namespace: "soak-free", Name: "train", UID: pg.UID}})
			// An eviction whose preemptor the watcher never saw: counted,
			// and by why.
			w.preempted(&v1.Event{Reason: "Preempted", Message: "Preempted by pod 99999999-2222-3333-4444-555555555555 on node n1",
				InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "soak-free", Name: "victim", UID: "victim"}})
			w.judgeEvictions(time.Now().Add(time.Hour)) // the events are stamped when seen
			if got := len(w.violations) > 0; got != tc.want {
				t.Fatalf("violation %v, want %v: %v", got, tc.want, w.violations)
			}
			if tc.want && !strings.Contains(w.violations[0].Message, "PodGroup soak-free/train (priority 100)") {
				t.Errorf("message %q does not name the group and its priority", w.violations[0].Message)
			}
			if m := w.meters["8-eviction"]; m == nil || m.events != 2 || m.eventsJ != 1 {
				t.Errorf("8-eviction meter %+v: want 2 events, 1 judged", m)
			}
			if n := w.unjudgedEvictions["preemptor not seen (pod)"]; n != 1 {
				t.Errorf("unjudged by why %v: want the unknown pod preemptor counted", w.unjudgedEvictions)
			}
		})
	}
}
