// Package offline builds Berth's scheduler without a cluster: upstream's
// scheduler.New with Berth's registry and the options kube-scheduler's
// start-up (app.Setup) passes it, on client-go's in-memory clients instead
// of the API server. kubectl berth validate uses it to check a configuration
// as the scheduler's start-up does: decoding, upstream's validation, every
// plugin's factory (args validation, CEL compilation and cost), the checks
// across profiles; kubectl berth simulate runs the scheduler so built on a
// snapshot's objects (Simulate).
package offline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"k8s.io/kubernetes/pkg/scheduler"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	berthconfig "github.com/berth-scheduler/berth/apis/config"
	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's plugin args in the config scheme
	"github.com/berth-scheduler/berth/internal/crd"
	"github.com/berth-scheduler/berth/internal/fakeapi"
	"github.com/berth-scheduler/berth/internal/leadership"
	crdfake "github.com/berth-scheduler/berth/internal/spclient/clientset/versioned/fake"
	"github.com/berth-scheduler/berth/pkg/plugins/coscheduling"
	"github.com/berth-scheduler/berth/pkg/plugins/elasticquota"
	"github.com/berth-scheduler/berth/pkg/plugins/loadaware"
	"github.com/berth-scheduler/berth/pkg/registry"
)

// SetFeatureGates sets this process's feature gates from kube-scheduler's
// --feature-gates syntax ("A=true,B=false"); "" keeps the defaults. Gates
// decide which default plugins a profile gets and what validation allows.
func SetFeatureGates(gates string) error {
	if gates == "" {
		return nil
	}
	return utilfeature.DefaultMutableFeatureGate.Set(gates)
}

// LoadConfig reads a KubeSchedulerConfiguration file as kube-scheduler's
// --config does (options.Options.ApplyTo): strict decoding with Berth's
// args in the scheme and defaults applied, then upstream's validation (which
// also refuses every leader election lock but leases, so building the lock,
// as the scheduler's Config does next, cannot fail). Its errors are the
// scheduler's own. Not checked, because they describe the machine the
// scheduler runs on: clientConnection's kubeconfig file and the serving
// flags.
func LoadConfig(logger klog.Logger, path string) (*schedconfig.KubeSchedulerConfiguration, error) {
	cfg, err := options.LoadConfigFromFile(logger, path)
	if err != nil {
		return nil, err
	}
	if err := validation.ValidateKubeSchedulerConfiguration(cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Clients are the in-memory clients the offline scheduler reads: the
// Kubernetes API, scheduler-plugins' custom resources (whose discovery
// serves PodGroups and ElasticQuotas) and metrics.k8s.io.
type Clients struct {
	Kube    *kubefake.Clientset
	CRD     *crdfake.Clientset
	Metrics *metricsfake.Clientset
	Dynamic *dynamicfake.FakeDynamicClient

	// now is the API's clock: it stamps bindings and provisioned volumes.
	now func() time.Time
	// provisioned are the claims the API's stand-in provisioner bound.
	mu          sync.Mutex
	provisioned []Provisioned
	// bindings counts the pods bound.
	bindings atomic.Int64
}

// Provisioned is a claim waiting for its first consumer that the offline
// API provisioned (fakeapi.ProvisionThroughTracker): Claim
// ("namespace/name") on Node.
type Provisioned struct{ Claim, Node string }

// SetClock sets the API's clock (time.Now until then); call it before the
// scheduler is built.
func (c *Clients) SetClock(now func() time.Time) { c.now = now }

// Provisioned lists the claims provisioned so far.
func (c *Clients) Provisioned() []Provisioned {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.provisioned)
}

// NewClients returns empty clients.
func NewClients() *Clients { return NewClientsWith(nil, nil, nil, nil) }

// NewClientsWith returns clients holding these objects: kube's (typed, of
// client-go's scheme), scheduler-plugins' (typed), metrics.k8s.io's
// (typed), and scheduler-plugins' again as unstructured for the dynamic
// client. A binding sets the pod's nodeName, as kube-apiserver does.
func NewClientsWith(kube, crds, metrics, dyn []runtime.Object) *Clients {
	c := &Clients{
		// Not NewClientset: its field-managed tracker builds a REST mapper
		// of the whole scheme on every write (14 % of a replace run's CPU
		// at 1,000 nodes, and much of its garbage), for server-side apply,
		// which neither the scheduler nor Berth's plugins use.
		Kube:    kubefake.NewSimpleClientset(kube...),
		CRD:     crdfake.NewSimpleClientset(crds...),
		Metrics: metricsfake.NewSimpleClientset(),
		now:     time.Now,
	}
	clock := func() time.Time { return c.now() }
	// NodeMetrics are served as "nodes" of metrics.k8s.io; the fake's
	// constructor would guess "nodemetricses", which its own List never reads.
	for _, m := range metrics {
		_ = c.Metrics.Tracker().Create(metricsv1beta1.SchemeGroupVersion.WithResource("nodes"), m, "")
	}
	bind := fakeapi.BindThroughTracker(c.Kube.Tracker(), clock)
	c.Kube.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := bind(a)
		if handled && err == nil {
			c.bindings.Add(1)
		}
		return handled, obj, err
	})
	// No PV controller and no provisioner run offline: claims waiting for
	// their first consumer are provisioned and bound as VolumeBinding's
	// PreBind asks, at once (it would wait out its bindTimeout otherwise).
	c.Kube.PrependReactor("update", "persistentvolumeclaims", fakeapi.ProvisionThroughTracker(c.Kube.Tracker(), clock, func(claim, node string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.provisioned = append(c.provisioned, Provisioned{Claim: claim, Node: node})
	}))
	c.Kube.PrependReactor("update", "persistentvolumes", fakeapi.BindClaimsThroughTracker(c.Kube.Tracker()))
	// kube-apiserver filters pod lists and watches by field (the scheduler's
	// informer leaves ended pods out, AdmissionFeedback lists Failed ones);
	// the fake applies label selectors only.
	c.Kube.PrependReactor("list", "pods", listPodsByField(c))
	c.Kube.PrependWatchReactor("pods", watchPodsByField(c))
	// Discovery serves both CRDs (the plugins check it at start-up); the
	// dynamic client lists them (the scheduler's dynamic informers watch
	// them for the plugins' queueing hints).
	listKinds := map[schema.GroupVersionResource]string{}
	lists := map[string]*metav1.APIResourceList{} // one per group version, as discovery answers
	for _, r := range []struct {
		crd.Resource
		listKind string
	}{{coscheduling.CRD, "PodGroupList"}, {elasticquota.CRD, "ElasticQuotaList"}} {
		l := lists[r.GroupVersion]
		if l == nil {
			l = &metav1.APIResourceList{GroupVersion: r.GroupVersion}
			lists[r.GroupVersion] = l
			c.CRD.Resources = append(c.CRD.Resources, l)
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r.Name, Namespaced: true})
		listKinds[schema.FromAPIVersionAndKind(r.GroupVersion, "").GroupVersion().WithResource(r.Name)] = r.listKind
	}
	c.Dynamic = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, dyn...)
	return c
}

// Profile is what a built profile runs.
type Profile struct {
	SchedulerName string
	// Plugins are the plugins the built profile runs (defaults and
	// multiPoint expanded, as its framework lists them), each once, in the
	// order of the extension points.
	Plugins []string
}

// Scheduler is a scheduler built offline.
type Scheduler struct {
	*scheduler.Scheduler
	// Profiles are what each profile runs (Scheduler.Profiles are the
	// frameworks).
	Profiles []Profile
	// Informers and DynInformers are the scheduler's informer factories,
	// not started.
	Informers    informers.SharedInformerFactory
	DynInformers dynamicinformer.DynamicSharedInformerFactory
}

// Build constructs the scheduler cfg describes exactly as app.Setup does —
// the same scheduler.New options, every plugin's factory run — on c instead
// of the API server. The plugins' informers and goroutines live until ctx
// is done. Its errors are those the scheduler stops with at start-up.
//
// It turns client-go's WatchListClient off for the process: the in-memory
// clients never send watch-list's initial-events bookmark, so the plugins'
// informers would wait out their sync timeout and fail. It turns the
// leadership fence off too: an offline scheduler leads nothing, and a
// terminal suspended mid-run (Ctrl-Z) must not make its bindings fail.
func Build(ctx context.Context, cfg *schedconfig.KubeSchedulerConfiguration, c *Clients) (*Scheduler, error) {
	if err := utilfeature.DefaultMutableFeatureGate.Set("WatchListClient=false"); err != nil {
		return nil, err
	}
	leadership.DisableFence()
	informerFactory := scheduler.NewInformerFactory(c.Kube, 0, nil)
	dynInformerFactory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(c.Dynamic, 0, corev1.NamespaceAll, nil)
	broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, c.Kube)
	go func() { <-ctx.Done(); broadcaster.Shutdown() }()
	outOfTree := registry.PluginsWithClients(c.CRD, c.Metrics)
	sched, err := scheduler.New(ctx, c.Kube, informerFactory, dynInformerFactory,
		func(name string) events.EventRecorderLogger { return broadcaster.NewRecorder(name) },
		scheduler.WithComponentConfigVersion(cfg.APIVersion),
		scheduler.WithProfiles(cfg.Profiles...),
		scheduler.WithPercentageOfNodesToScore(cfg.PercentageOfNodesToScore),
		scheduler.WithFrameworkOutOfTreeRegistry(outOfTree),
		scheduler.WithPodMaxBackoffSeconds(cfg.PodMaxBackoffSeconds),
		scheduler.WithPodInitialBackoffSeconds(cfg.PodInitialBackoffSeconds),
		scheduler.WithExtenders(cfg.Extenders...),
		scheduler.WithParallelism(cfg.Parallelism),
	)
	if err != nil {
		return nil, err
	}
	s := &Scheduler{Scheduler: sched, Informers: informerFactory, DynInformers: dynInformerFactory}
	for _, p := range cfg.Profiles {
		if fw, ok := sched.Profiles[p.SchedulerName]; ok {
			s.Profiles = append(s.Profiles, Profile{SchedulerName: p.SchedulerName, Plugins: pluginNames(fw.ListPlugins())})
		}
	}
	return s, nil
}

// pluginNames lists the enabled plugins of every extension point, each once.
func pluginNames(p *schedconfig.Plugins) []string {
	if p == nil {
		return nil
	}
	var names []string
	for _, set := range []schedconfig.PluginSet{p.PreEnqueue, p.QueueSort, p.PreFilter, p.Filter, p.PostFilter,
		p.PreScore, p.Score, p.Reserve, p.Permit, p.PreBind, p.Bind, p.PostBind,
		p.PlacementGenerate, p.PlacementScore, p.PodGroupPostFilter} {
		for _, pl := range set.Enabled {
			if !slices.Contains(names, pl.Name) {
				names = append(names, pl.Name)
			}
		}
	}
	return names
}

// Requirement is something a configuration needs from the cluster that an
// offline check cannot see: the scheduler's start-up fails without it (a
// CRD), or a plugin degrades without it (the metrics API).
type Requirement struct {
	// Plugin needs it; Profiles name the profiles that run the plugin.
	Plugin   string
	Profiles []string
	// What is needed, and Hint where it comes from.
	What, Hint string
}

// Requirements lists what the configuration's plugins need from the cluster:
// Coscheduling's CRD, ElasticQuota's, then the metrics API.
func Requirements(cfg *schedconfig.KubeSchedulerConfiguration, profiles []Profile) []Requirement {
	byPlugin := map[string][]string{}
	for _, p := range profiles {
		for _, name := range p.Plugins {
			byPlugin[name] = append(byPlugin[name], p.SchedulerName)
		}
	}
	var out []Requirement
	for _, r := range []crd.Resource{coscheduling.CRD, elasticquota.CRD} {
		if ps := byPlugin[r.Plugin]; len(ps) > 0 {
			out = append(out, Requirement{Plugin: r.Plugin, Profiles: ps,
				What: fmt.Sprintf("the API server serving %s.%s (start-up fails without it)", r.Name, r.GroupVersion),
				Hint: "install " + r.CRDFile})
		}
	}
	var metricsProfiles []string
	for _, p := range cfg.Profiles {
		if !slices.Contains(byPlugin[loadaware.Name], p.SchedulerName) {
			continue
		}
		for _, pc := range p.PluginConfig {
			if a, ok := pc.Args.(*berthconfig.LoadAwareArgs); ok && pc.Name == loadaware.Name && a.Source == berthconfig.LoadAwareSourceMetricsAPI {
				metricsProfiles = append(metricsProfiles, p.SchedulerName)
			}
		}
	}
	if len(metricsProfiles) > 0 {
		out = append(out, Requirement{Plugin: loadaware.Name, Profiles: metricsProfiles,
			What: "metrics.k8s.io served (LoadAware's MetricsAPI source: without samples Filter does what onMissingMetrics says and Score falls back to requests, counted in berth_loadaware_missing_metrics_total)",
			Hint: "install metrics-server"})
	}
	return out
}
