package coscheduling

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	fwk "k8s.io/kube-scheduler/framework"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/testing/podgroupcycle"
)

// Coscheduling beside Kubernetes' own gangs: a native gang that does not
// fit goes through the PodGroup cycle (each member reserved, then all
// reverted) with Coscheduling as the queue sort and at every extension
// point, and leaves Coscheduling's view of a scheduler-plugins gang bound on
// the same node as it was (its Reserve and Unreserve act on labelled pods
// only). Run through the real cycle (scheduler.New with the GenericWorkload
// gate).
func TestARevertedNativeGangLeavesCoschedulingsGroupsAsTheyWere(t *testing.T) {
	const config = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: gangs
  plugins:
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
    multiPoint:
      enabled:
      - name: GangScheduling
      - name: Coscheduling
`
	var pl *Coscheduling
	// Its default args, given here: this package's tests build frameworks
	// without Berth's config scheme (whose defaulting would add them again).
	reg := podgroupcycle.Capture(Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return NewWithClient(fakePGClient(podGroup("sp", 2, 0)))(ctx, defaultArgs(), h)
	}, &pl)
	n1 := st.MakeNode().Name("n1").Capacity(map[v1.ResourceName]string{v1.ResourceCPU: "4", v1.ResourceMemory: "8Gi", v1.ResourcePods: "110"}).Obj()
	var objs []runtime.Object
	objs = append(objs, n1)
	for _, name := range []string{"sp-0", "sp-1"} {
		objs = append(objs, st.MakePod().Namespace(testNS).Name(name).UID(name).Node("n1").Label(schedv1alpha1.PodGroupLabel, "sp").
			Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj())
	}
	c := podgroupcycle.New(t, config, reg, objs...)
	key := testNS + "/sp"
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		cnt, _, _, _ := pl.shared.mgr.snapshot(key)
		return cnt.bound == 2, nil
	}); err != nil {
		t.Fatal("Coscheduling never saw the SP gang's two members bound")
	}
	before, _, _, _ := pl.shared.mgr.snapshot(key)
	// Room for two of the native gang's three 1-CPU members.
	members := c.Gang(t, testNS, "native", 3, 3, podgroupcycle.Member("1"))
	if got := c.Attempted(t, testNS, "native"); got != "False" {
		t.Fatalf("the native group's PodGroupInitiallyScheduled is %s, want False", got)
	}
	if !c.Unschedulable(t, members, "2 scheduled") {
		t.Error("no member's status says the cycle placed 2 members before it reverted them")
	}
	after, _, _, _ := pl.shared.mgr.snapshot(key)
	if diff := cmp.Diff(before, after, cmp.AllowUnexported(counts{})); diff != "" {
		t.Errorf("the SP gang's counts after the native gang's reverted cycle (-before +after):\n%s", diff)
	}
	pl.shared.mgr.mu.RLock()
	_, tracked := pl.shared.mgr.groups[testNS+"/native"]
	pl.shared.mgr.mu.RUnlock()
	if tracked {
		t.Error("Coscheduling tracks the native gang as one of its own")
	}
}

// The members toPlace names beside the pod are those a preemption nominated
// first: ElasticQuota sums them as the gang's and leaves them out of the
// nominated pods, so a nominated member left out would count twice (issue
// 51, item 1, with more replicas than minMember).
func TestToPlaceNamesNominatedMembersFirst(t *testing.T) {
	mgr := newManager()
	mgr.setSpec("jobs/g", &spec{name: "g", namespace: testNS, minMember: 4})
	var pods []*v1.Pod
	for i := range 6 {
		p := memberPod("g", i)
		if i >= 4 {
			p.Status.NominatedNodeName = "n1"
		}
		mgr.observe("jobs/g", p)
		pods = append(pods, p)
	}
	var names []string
	for _, p := range mgr.toPlace("jobs/g", pods[0]) {
		names = append(names, p.Name)
	}
	if want := []string{"g-0", "g-4", "g-5", "g-1"}; !slices.Equal(names, want) {
		t.Errorf("toPlace = %v, want %v: the nominated members first", names, want)
	}
}
