package coscheduling

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/informers"
	clientsetfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	fwk "k8s.io/kube-scheduler/framework"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/internal/leadership"
	pgfake "github.com/berth-scheduler/berth/internal/spclient/clientset/versioned/fake"
	"github.com/berth-scheduler/berth/internal/testing/handletest"
)

func init() {
	schedmetrics.Register()      // the scheduling queue records metrics
	leadership.ElectionGrace = 0 // no leader election in these tests: write at once
}

const testNS = "jobs"

// fakePGClient serves the given PodGroups and advertises the CRD in discovery.
func fakePGClient(pgs ...*schedv1alpha1.PodGroup) *pgfake.Clientset {
	objs := make([]runtime.Object, len(pgs))
	for i, p := range pgs {
		objs[i] = p
	}
	c := pgfake.NewSimpleClientset(objs...) // NewClientset needs a schema this fake lacks to create objects
	c.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: schedv1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true, Kind: "PodGroup"}},
	}}
	return c
}

func defaultArgs() *config.CoschedulingArgs {
	return &config.CoschedulingArgs{
		ScheduleTimeout:      metav1.Duration{Duration: time.Minute},
		WriteStatus:          false,
		StatusUpdateInterval: metav1.Duration{Duration: time.Second},
	}
}

// podGroup makes a PodGroup created at the given second.
func podGroup(name string, minMember int32, createdSec int) *schedv1alpha1.PodGroup {
	return &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("pg-" + name),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(1_700_000_000+createdSec), 0))},
		Spec: schedv1alpha1.PodGroupSpec{MinMember: minMember},
	}
}

// memberPod makes pod i of group g asking for one CPU.
func memberPod(g string, i int) *v1.Pod {
	name := fmt.Sprintf("%s-%d", g, i)
	return st.MakePod().Namespace(testNS).Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, g).
		Req(map[v1.ResourceName]string{v1.ResourceCPU: "1"}).Obj()
}

func node(name, cpu string) *v1.Node {
	return st.MakeNode().Name(name).Capacity(map[v1.ResourceName]string{v1.ResourceCPU: cpu, v1.ResourcePods: "110"}).Obj()
}

// recorder remembers activations and events.
// sim is a small scheduler around a real framework: Coscheduling at every
// point it implements, NodeResourcesFit as the filter, and a binding step
// that waits on Permit like the scheduler's binding cycle.
type sim struct {
	t        testing.TB
	ctx      context.Context
	pl       *Coscheduling
	f        framework.Framework
	snapshot *internalcache.Snapshot
	cs       *clientsetfake.Clientset
	pgc      *pgfake.Clientset
	rec      *handletest.Recorder

	// cycle is held by a scheduling cycle from PreFilter to Permit, and by
	// a binding goroutine to forget its pod: the scheduler's binding
	// goroutine forgets an assumed pod in its cache, which a running cycle
	// does not see (it reads the snapshot taken when it began); the harness
	// has one snapshot, so a forget waits for the cycle to end.
	cycle  sync.Mutex
	mu     sync.Mutex
	bound  map[string]string // pod -> node, bound
	failed map[string]string // pod -> last failure
	done   map[string]chan struct{}
	// holdUnreserve: a pod's binding goroutine waits on its channel between
	// a rejection at Permit and Unreserve; holdForget between Unreserve and
	// the cache forgetting the assumed pod.
	holdUnreserve, holdForget map[string]chan struct{}
	wg                        sync.WaitGroup
}

func newSim(t testing.TB, nodes []*v1.Node, pgs []*schedv1alpha1.PodGroup, pods []*v1.Pod, opts ...frameworkruntime.Option) *sim {
	t.Helper()
	return newSimWith(t, extraPlugins{}, nodes, pgs, pods, opts...)
}

// extraPlugins are registered before Coscheduling (they run first at each
// extension point they implement) and after it.
type extraPlugins struct{ before, after []tf.RegisterPluginFunc }

// newSimWith is newSim with more plugins.
func newSimWith(t testing.TB, extra extraPlugins, nodes []*v1.Node, pgs []*schedv1alpha1.PodGroup, pods []*v1.Pod, opts ...frameworkruntime.Option) *sim {
	t.Helper()
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	var objs []runtime.Object
	for _, p := range pods {
		objs = append(objs, p)
	}
	cs := clientsetfake.NewClientset(objs...)
	informerFactory := informers.NewSharedInformerFactory(cs, 0)
	snapshot := internalcache.NewSnapshot(nil, nodes)
	s := &sim{t: t, ctx: ctx, snapshot: snapshot, cs: cs, pgc: fakePGClient(pgs...), rec: &handletest.Recorder{},
		bound: map[string]string{}, failed: map[string]string{}, done: map[string]chan struct{}{},
		holdUnreserve: map[string]chan struct{}{}, holdForget: map[string]chan struct{}{}}
	factory := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := NewWithClient(s.pgc)(ctx, defaultArgs(), h)
		if err == nil {
			s.pl = p.(*Coscheduling)
		}
		return p, err
	}
	registrations := []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(Name, factory),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(noderesources.Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return noderesources.NewFit(ctx, &schedconfig.NodeResourcesFitArgs{ScoringStrategy: &schedconfig.ScoringStrategy{
				Type: schedconfig.LeastAllocated, Resources: []schedconfig.ResourceSpec{{Name: "cpu", Weight: 1}},
			}}, h, plfeature.Features{})
		}, "PreFilter", "Filter"),
	}
	registrations = append(registrations, extra.before...)
	registrations = append(registrations, tf.RegisterPluginAsExtensions(Name, factory, "PreEnqueue", "PreFilter", "PostFilter", "Reserve", "Permit"))
	registrations = append(registrations, extra.after...)
	base := []frameworkruntime.Option{
		frameworkruntime.WithClientSet(cs),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, informerFactory)),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithMutableSnapshotLister(snapshot),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithPodActivator(s.rec),
		frameworkruntime.WithEventRecorder(s.rec),
	}
	f, err := tf.NewFramework(ctx, registrations, "", append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s.f = f
	informerFactory.Start(ctx.Done()) // the scheduler's: its pod informer syncing lets the plugin write
	s.waitFor("the plugin to write", s.pl.shared.mayWrite)
	s.watchesUp()
	s.waitFor("the member informer to see every pod", func() bool {
		for _, p := range pods {
			if key, ok := groupKeyOf(p); ok {
				found := false
				s.pl.shared.mgr.mu.RLock()
				if g := s.pl.shared.mgr.groups[key]; g != nil {
					_, found = g.members[p.UID]
				}
				s.pl.shared.mgr.mu.RUnlock()
				if !found {
					return false
				}
			}
		}
		return true
	})
	// Members a test left waiting at Permit are rejected when it ends,
	// so their goroutines end with it (TestMain checks for leaks).
	t.Cleanup(func() {
		s.f.IterateOverWaitingPods(func(wp fwk.WaitingPod) { wp.Reject("test", "the test ended") })
		s.wg.Wait()
	})
	return s
}

// watchesUp waits until both informers of the plugin watch: the fake
// clientsets do not replay what happened between an informer's list and its
// watch, so an object created before the watch is up would be lost. A
// sentinel (in a namespace of its own) seen through each informer proves it;
// one created too early is lost too, so another follows.
func (s *sim) watchesUp() {
	s.t.Helper()
	mgr := s.pl.shared.mgr
	for i := 0; ; i++ {
		if i == 30 {
			s.t.Fatal("the plugin's informers never saw a sentinel")
		}
		name := fmt.Sprintf("sentinel-%d", i)
		pod := st.MakePod().Namespace("sentinel").Name(name).UID(name).Label(schedv1alpha1.PodGroupLabel, name).Obj()
		if _, err := s.cs.CoreV1().Pods("sentinel").Create(s.ctx, pod, metav1.CreateOptions{}); err != nil {
			s.t.Fatal(err)
		}
		pg := &schedv1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "sentinel", Name: name}, Spec: schedv1alpha1.PodGroupSpec{MinMember: 1}}
		if _, err := s.pgc.SchedulingV1alpha1().PodGroups("sentinel").Create(s.ctx, pg, metav1.CreateOptions{}); err != nil {
			s.t.Fatal(err)
		}
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			c, spec, _, _ := mgr.snapshot("sentinel/" + name)
			if spec != nil && c.ready == 1 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// waitFor polls cond (the informers and the binding goroutines run apart).
func (s *sim) waitFor(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// schedule runs one scheduling cycle for pod, as the scheduler does from
// PreEnqueue to Permit; a pod told to wait binds (or is unreserved) in a
// goroutine, as in the binding cycle. It returns the cycle's status.
func (s *sim) schedule(pod *v1.Pod) *fwk.Status {
	s.t.Helper()
	ctx := s.ctx
	if st := s.pl.PreEnqueue(ctx, pod); !st.IsSuccess() {
		return st
	}
	s.cycle.Lock()
	defer s.cycle.Unlock()
	state := framework.NewCycleState()
	state.Write(framework.PodsToActivateKey, &framework.PodsToActivate{Map: map[string]*v1.Pod{}})
	nodes, err := s.snapshot.NodeInfos().List()
	if err != nil {
		s.t.Fatal(err)
	}
	if _, st, _ := s.f.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() && !st.IsSkip() {
		s.fail(pod, st)
		return st
	}
	var chosen fwk.NodeInfo
	statuses := framework.NewDefaultNodeToStatus()
	for _, ni := range nodes {
		if st := s.f.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni); st.IsSuccess() {
			chosen = ni
			break
		} else {
			statuses.Set(ni.Node().Name, st)
		}
	}
	if chosen == nil {
		_, st := s.f.RunPostFilterPlugins(ctx, state, pod, statuses)
		s.fail(pod, st)
		return st
	}
	nodeName := chosen.Node().Name
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = nodeName
	s.assume(assumed, chosen)
	if st := s.f.RunReservePluginsReserve(ctx, state, assumed, nodeName); !st.IsSuccess() {
		s.f.RunReservePluginsUnreserve(ctx, state, assumed, nodeName) // then the cache forgets it, as upstream
		s.forget(assumed, chosen)
		return st
	}
	waits, st := s.f.RunPermitPlugins(ctx, state, assumed, nodeName)
	if !st.IsSuccess() && !st.IsWait() {
		s.f.RunReservePluginsUnreserve(ctx, state, assumed, nodeName) // then the cache forgets it, as upstream
		s.forget(assumed, chosen)
		s.fail(pod, st)
		return st
	}
	if st.IsWait() {
		s.f.AddWaitingPod(assumed, waits)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.done[pod.Name] = done
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		if st := s.f.WaitOnPermit(ctx, assumed); !st.IsSuccess() {
			// The scheduler's binding goroutine reaches Unreserve some time
			// after the rejection, and only then forgets the assumed pod in
			// its cache (handleBindingCycleError); a test can hold it before
			// either.
			s.mu.Lock()
			holdU, holdF := s.holdUnreserve[pod.Name], s.holdForget[pod.Name]
			s.mu.Unlock()
			if holdU != nil {
				<-holdU
			}
			s.f.RunReservePluginsUnreserve(ctx, state, assumed, nodeName)
			if holdF != nil {
				<-holdF
			}
			s.cycle.Lock()
			s.forget(assumed, chosen)
			s.cycle.Unlock()
			s.fail(pod, st)
			return
		}
		s.bind(assumed)
	}()
	return st
}

func (s *sim) fail(pod *v1.Pod, st *fwk.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed[pod.Name] = st.Message()
}

func (s *sim) assume(pod *v1.Pod, ni fwk.NodeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, _ := framework.NewPodInfo(pod)
	ni.AddPodInfo(pi)
}

func (s *sim) forget(pod *v1.Pod, ni fwk.NodeInfo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ni.RemovePod(klog.Background(), pod); err != nil {
		s.t.Errorf("removing %s: %v", pod.Name, err)
	}
}

// bind writes spec.nodeName, as the Binding does, so the informer sees it.
func (s *sim) bind(pod *v1.Pod) {
	s.mu.Lock()
	s.bound[pod.Name] = pod.Spec.NodeName
	delete(s.failed, pod.Name)
	s.mu.Unlock()
	if _, err := s.cs.CoreV1().Pods(pod.Namespace).Update(s.ctx, pod, metav1.UpdateOptions{}); err != nil {
		s.t.Errorf("binding %s: %v", pod.Name, err)
	}
}

// settle waits until no member waits at Permit and every binding goroutine
// finished.
func (s *sim) settle() {
	s.t.Helper()
	s.waitFor("the binding goroutines", func() bool {
		n := 0
		s.f.IterateOverWaitingPods(func(fwk.WaitingPod) { n++ })
		return n == 0
	})
	s.wg.Wait()
}

// waitDone waits until the binding cycles of the named pods ended (bound or
// unreserved).
func (s *sim) waitDone(names ...string) {
	s.t.Helper()
	for _, n := range names {
		s.mu.Lock()
		d := s.done[n]
		s.mu.Unlock()
		if d == nil {
			s.t.Fatalf("%s has no binding cycle", n)
		}
		select {
		case <-d:
		case <-time.After(10 * time.Second):
			s.t.Fatalf("binding cycle of %s did not end", n)
		}
	}
}

func (s *sim) boundPods() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k, v := range s.bound {
		out[k] = v
	}
	return out
}

func (s *sim) waiting() []string {
	var out []string
	s.f.IterateOverWaitingPods(func(wp fwk.WaitingPod) { out = append(out, wp.GetPod().Name) })
	return out
}

// createPod adds a pod to the cluster (the member informer sees it).
func (s *sim) createPod(p *v1.Pod) {
	s.t.Helper()
	if _, err := s.cs.CoreV1().Pods(p.Namespace).Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
		s.t.Fatal(err)
	}
}

// withDefaultPreemption registers upstream's DefaultPreemption after
// Coscheduling at PostFilter, as the documented profile has it.
func withDefaultPreemption() extraPlugins {
	return extraPlugins{after: []tf.RegisterPluginFunc{tf.RegisterPluginAsExtensions(defaultpreemption.Name, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return defaultpreemption.New(ctx, &schedconfig.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}, h, plfeature.Features{})
	}, "PostFilter")}}
}
