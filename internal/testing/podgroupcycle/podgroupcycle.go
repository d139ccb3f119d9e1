// Package podgroupcycle runs Kubernetes' own PodGroup scheduling cycle
// (GenericWorkload, pkg/scheduler/schedule_one_podgroup.go) in a plugin's
// unit test: a scheduler built by scheduler.New, as app.Setup builds it, on
// an in-memory clientset, with the plugins of the caller's registry, run as
// the kube-scheduler binary runs it (Scheduler.Run). A gang that fails goes
// to the backoff queue with a long backoff, and SchedulerPopFromBackoffQ
// (which pops backed-off entities early when nothing else is queued) is off,
// so once a gang's first attempt has ended the scheduler stays idle: a
// plugin's test captures its instance in the registry's factory and compares
// the plugin's state before the gang is created and after its first cycle.
package podgroupcycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"k8s.io/utils/ptr"

	"github.com/berth-scheduler/berth/internal/fakeapi"
)

// Cluster is the scheduler and its in-memory API.
type Cluster struct {
	Client *kubefake.Clientset
	Sched  *scheduler.Scheduler
	ctx    context.Context
}

// New builds the scheduler that config (a KubeSchedulerConfiguration, YAML,
// without clientConnection) describes, with the out-of-tree plugins of reg,
// on a clientset holding objs, and runs it until the test ends. A test whose
// profile enables Berth's plugins imports
// github.com/berth-scheduler/berth/apis/config/scheme, for their args and
// defaults; this package does not, as a plugin's other tests may build
// frameworks of their own without them.
func New(t *testing.T, config string, reg frameworkruntime.Registry, objs ...runtime.Object) *Cluster {
	t.Helper()
	return NewWithBackoff(t, idle, config, reg, objs...)
}

// NewWithBackoff is New with a backoff of seconds: a test that waits for a
// failed pod's retry (a refused binding) sets it short.
func NewWithBackoff(t *testing.T, seconds int64, config string, reg frameworkruntime.Registry, objs ...runtime.Object) *Cluster {
	t.Helper()
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.GenericWorkload, true)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.SchedulerPopFromBackoffQ, false)
	// The in-memory clientset never sends watch-list's initial-events
	// bookmark: informers would wait out their sync timeout.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)

	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := options.LoadConfigFromFile(logger, path)
	if err != nil {
		t.Fatal(err)
	}
	client := kubefake.NewClientset(objs...)
	client.PrependReactor("create", "pods", fakeapi.BindThroughTracker(client.Tracker(), nil))
	informerFactory := scheduler.NewInformerFactory(client, 0, nil)
	// The dynamic informers the scheduler starts for plugins' custom
	// resources (queueing hints) list these.
	listKinds := map[schema.GroupVersionResource]string{
		{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "elasticquotas"}: "ElasticQuotaList",
		{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}:     "PodGroupList",
	}
	dyn := dynamicinformer.NewDynamicSharedInformerFactory(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds), 0)
	broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, client)
	t.Cleanup(broadcaster.Shutdown)
	sched, err := scheduler.New(ctx, client, informerFactory, dyn,
		func(name string) events.EventRecorderLogger { return broadcaster.NewRecorder(name) },
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithFrameworkOutOfTreeRegistry(reg),
		scheduler.WithPodInitialBackoffSeconds(seconds),
		scheduler.WithPodMaxBackoffSeconds(seconds),
	)
	if err != nil {
		t.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	dyn.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	dyn.WaitForCacheSync(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &Cluster{Client: client, Sched: sched, ctx: ctx}
}

// idle is the backoff, in seconds, of an entity that failed: longer than a
// test waits, so nothing is retried.
const idle = 600

// Gang creates a native PodGroup of minCount and its pods (each made by
// pod(i), which must set the scheduler name and resources), as a Job
// controller creates them: the group, then its pods naming it in
// spec.schedulingGroup.
func (c *Cluster) Gang(t *testing.T, ns, name string, minCount int32, pods int, pod func(i int) *v1.Pod) []*v1.Pod {
	t.Helper()
	_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(c.ctx, &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*v1.Pod
	for i := range pods {
		p := pod(i)
		p.Namespace = ns
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
		if p.UID == "" {
			// The in-memory clientset assigns none, and the scheduler
			// counts a group's pods by UID.
			p.UID = types.UID(ns + "/" + p.Name)
		}
		created, err := c.Client.CoreV1().Pods(ns).Create(c.ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, created)
	}
	return out
}

// Attempted waits until the PodGroup cycle has written the group's
// PodGroupInitiallyScheduled condition and returns its status ("True" or
// "False"). For a group that failed, the condition comes after every
// Reserve and Unreserve of the cycle, and the group then waits out the long
// backoff: the scheduler is idle. For one that was placed, its members'
// binding cycles may still be running.
func (c *Cluster) Attempted(t *testing.T, ns, name string) string {
	t.Helper()
	var status string
	if err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		pg, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range pg.Status.Conditions {
			if cond.Type == schedulingv1beta1.PodGroupInitiallyScheduled {
				status = string(cond.Status)
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("PodGroup %s/%s was not attempted within 30s: %v", ns, name, err)
	}
	return status
}

// SchedulerName is the profile name the tests' configurations give the
// gang profile, and Member's pods name.
const SchedulerName = "gangs"

// Member returns Gang's pod maker for members m-0, m-1, ... of SchedulerName
// requesting cpu (a quantity) each.
func Member(cpu string) func(i int) *v1.Pod {
	return func(i int) *v1.Pod {
		return st.MakePod().Name(fmt.Sprintf("m-%d", i)).SchedulerName(SchedulerName).Req(map[v1.ResourceName]string{v1.ResourceCPU: cpu}).Obj()
	}
}

// Bound waits until every one of pods is bound and returns them as the API
// has them.
func (c *Cluster) Bound(t *testing.T, pods []*v1.Pod) []*v1.Pod {
	t.Helper()
	var out []*v1.Pod
	if err := wait.PollUntilContextTimeout(c.ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out = out[:0]
		for _, p := range pods {
			got, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil || got.Spec.NodeName == "" {
				return false, err
			}
			out = append(out, got)
		}
		return true, nil
	}); err != nil {
		t.Fatalf("%d pods were not all bound within 30s: %v", len(pods), err)
	}
	return out
}

// Unschedulable reports whether, within 10s, one of pods gets a
// PodScheduled=False condition whose message contains text (the scheduler
// writes it after the cycle).
func (c *Cluster) Unschedulable(t *testing.T, pods []*v1.Pod, text string) bool {
	t.Helper()
	err := wait.PollUntilContextTimeout(c.ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			got, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == v1.PodScheduled && cond.Status == v1.ConditionFalse && strings.Contains(cond.Message, text) {
					return true, nil
				}
			}
		}
		return false, nil
	})
	return err == nil
}

// Capture is a registry with factory under name that keeps the plugin it
// builds in *into, so that a test can look at the plugin's state after the
// cycle.
func Capture[T fwk.Plugin](name string, factory frameworkruntime.PluginFactory, into *T) frameworkruntime.Registry {
	return frameworkruntime.Registry{name: func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := factory(ctx, obj, h)
		if err == nil {
			*into = p.(T)
		}
		return p, err
	}}
}
