package elasticquota

import (
	"context"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/apis/config"
	eqfake "github.com/berth-scheduler/berth/internal/spclient/clientset/versioned/fake"
)

func init() {
	schedmetrics.Register() // the scheduling queue records metrics
}

// fakeEQClient serves the given quotas and advertises the CRD in discovery.
func fakeEQClient(eqs ...*schedv1alpha1.ElasticQuota) *eqfake.Clientset {
	objs := make([]runtime.Object, len(eqs))
	for i, e := range eqs {
		objs[i] = e
	}
	c := eqfake.NewClientset(objs...)
	c.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: schedv1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "elasticquotas", Namespaced: true, Kind: "ElasticQuota"}},
	}}
	return c
}

func defaultArgs() *config.ElasticQuotaArgs {
	return &config.ElasticQuotaArgs{
		NamespacesWithoutQuota: config.NamespacesWithoutQuotaUnlimited,
		StatusUpdateInterval:   metav1.Duration{Duration: time.Second},
	}
}

// newTestPlugin builds ElasticQuota inside a framework with NodeResourcesFit,
// over a fake cluster of nodes, pods and quotas, its informers synced.
func newTestPlugin(t *testing.T, nodes []*v1.Node, pods []*v1.Pod, eqs ...*schedv1alpha1.ElasticQuota) (*ElasticQuota, framework.Framework, []fwk.NodeInfo) {
	t.Helper()
	// scheduler-plugins' generated fake (client-go 0.34) cannot stream the
	// initial list of a watch.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	for _, n := range nodes {
		objs = append(objs, n)
	}
	cs := clientsetfake.NewClientset(objs...)
	informerFactory := informers.NewSharedInformerFactory(cs, 0)
	snapshot := internalcache.NewSnapshot(pods, nodes)
	var pl *ElasticQuota
	factory := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := NewWithClient(fakeEQClient(eqs...))(ctx, defaultArgs(), h)
		if err == nil {
			pl = p.(*ElasticQuota)
		}
		return p, err
	}
	f, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return noderesources.NewFit(ctx, &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
				Type: schedconfig.LeastAllocated, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}},
			}}, h, plfeature.Features{})
		}, "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(Name, factory, "PreFilter", "PostFilter", "Reserve"),
	}, "",
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
	)
	if err != nil {
		t.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pl.shared.podsSynced) {
		t.Fatal("pod informer did not sync")
	}
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		t.Fatal(err)
	}
	return pl, f, infos
}

func node(name, cpu string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourcePods: "110"}).Obj()
}

// dryRun runs PreFilter, then upstream's dry run of preemption with
// ElasticQuota's victim selection on every node, and picks the candidate as
// the evaluator does. It returns the chosen node and its victims' names.
func dryRun(t *testing.T, pl *ElasticQuota, f framework.Framework, infos []fwk.NodeInfo, preemptor *v1.Pod, pdbs []*policy.PodDisruptionBudget) (string, []string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	state := framework.NewCycleState()
	if _, status, _ := f.RunPreFilterPlugins(ctx, state, preemptor); !status.IsSuccess() && status.Code() != fwk.Unschedulable {
		t.Fatalf("PreFilter: %v", status)
	}
	candidates, _, err := pl.evaluator.DryRunPreemption(ctx, state, preemptor, infos, pdbs, 0, int32(len(infos)))
	if err != nil {
		t.Fatal(err)
	}
	if len(candidates) == 0 {
		return "", nil
	}
	c := pl.evaluator.SelectCandidate(ctx, candidates)
	var victims []string
	for _, p := range c.Victims().Pods {
		victims = append(victims, p.Name)
	}
	return c.Name(), victims
}

func TestSelectVictims(t *testing.T) {
	quotas := func() []*schedv1alpha1.ElasticQuota {
		return []*schedv1alpha1.ElasticQuota{
			eq("a", rl("cpu", "2"), rl("cpu", "8")),
			eq("b", rl("cpu", "4"), rl("cpu", "8")),
		}
	}
	t.Run("borrowers first, lowest priority first, only what was borrowed", func(t *testing.T) {
		// a (min 2) uses 6: it borrows 4. b (min 4) uses 2 and needs 2 more.
		nodes := []*v1.Node{node("n1", "4"), node("n2", "4")}
		pods := []*v1.Pod{
			pod("a", "a-high", "2", 100, "n1"), pod("a", "a-low", "2", 0, "n1"),
			pod("a", "a-mid", "2", 50, "n2"), pod("b", "b-low", "2", -10, "n2"),
		}
		pl, f, infos := newTestPlugin(t, nodes, pods, quotas()...)
		// On n1 a's lowest-priority pod goes; on n2 the preemptor would
		// rather keep its own namespace's pod and take a's. Upstream's
		// choice between the two candidates: the one whose most important
		// victim is the least important, n1.
		if n, v := dryRun(t, pl, f, infos, pod("b", "p", "2", 0, ""), nil); n != "n1" || !slices.Equal(v, []string{"a-low"}) {
			t.Errorf("got victims %v on %q, want [a-low] on n1", v, n)
		}
		// The snapshot lists nodes in no set order: n2 by name.
		n2 := slices.DeleteFunc(slices.Clone(infos), func(ni fwk.NodeInfo) bool { return ni.Node().Name != "n2" })
		if n, v := dryRun(t, pl, f, n2, pod("b", "p2", "2", 0, ""), nil); n != "n2" || !slices.Equal(v, []string{"a-mid"}) {
			t.Errorf("on n2 alone: got victims %v on %q, want [a-mid]: a's borrowed pod, not b's own", v, n)
		}
	})
	t.Run("a namespace at its min is not preempted, whatever the priority", func(t *testing.T) {
		nodes := []*v1.Node{node("n1", "2")}
		pods := []*v1.Pod{pod("a", "a-only", "2", -100, "n1")} // a uses 2 = its min
		pl, f, infos := newTestPlugin(t, nodes, pods, quotas()...)
		if n, v := dryRun(t, pl, f, infos, pod("b", "p", "2", 1000, ""), nil); n != "" {
			t.Errorf("got victims %v on %s, want none", v, n)
		}
	})
	t.Run("beyond its min a pod preempts only its own namespace's lower-priority pods", func(t *testing.T) {
		nodes := []*v1.Node{node("n1", "4")}
		pods := []*v1.Pod{pod("b", "b-low", "2", 0, "n1"), pod("a", "a-x", "2", -100, "n1")}
		// a uses 2 (its min); a's new pod of priority 10 would borrow.
		pl, f, infos := newTestPlugin(t, nodes, pods, quotas()...)
		if n, v := dryRun(t, pl, f, infos, pod("a", "p", "2", 10, ""), nil); n != "n1" || len(v) != 1 || v[0] != "a-x" {
			t.Errorf("got victims %v on %q, want [a-x] on n1", v, n)
		}
	})
	t.Run("PodDisruptionBudgets are honoured: the node whose victim violates none wins", func(t *testing.T) {
		nodes := []*v1.Node{node("n1", "2"), node("n2", "2")}
		protected := pod("a", "a-protected", "2", 0, "n1")
		protected.Labels = map[string]string{"app": "db"}
		// a (min 2) uses 4: either pod may go, and only one must.
		pods := []*v1.Pod{protected, pod("a", "a-free", "2", 0, "n2")}
		pdb := &policy.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "db"},
			Spec: policy.PodDisruptionBudgetSpec{
				MinAvailable: ptrIntOrString(1),
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			},
			Status: policy.PodDisruptionBudgetStatus{DisruptionsAllowed: 0},
		}
		pl, f, infos := newTestPlugin(t, nodes, pods, quotas()...)
		if n, v := dryRun(t, pl, f, infos, pod("b", "p", "2", 0, ""), []*policy.PodDisruptionBudget{pdb}); n != "n2" || len(v) != 1 || v[0] != "a-free" {
			t.Errorf("got victims %v on %q, want [a-free] on n2", v, n)
		}
	})
}

func ptrIntOrString(i int) *intstr.IntOrString {
	v := intstr.FromInt(i)
	return &v
}
