// Package loadaware implements LoadAware: it filters and scores nodes by
// measured utilisation (metrics.k8s.io, or an annotation an exporter writes)
// plus the estimates of pods placed since the sample was taken.
package loadaware

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/berth-scheduler/berth/apis/config"
	"github.com/berth-scheduler/berth/apis/config/validation"
	"github.com/berth-scheduler/berth/internal/cyclestate"
	"github.com/berth-scheduler/berth/internal/noderecord"
	"github.com/berth-scheduler/berth/internal/pluginclock"
)

const (
	// Name is the plugin's registry name; its args kind is Name+"Args".
	Name = "LoadAware"

	preFilterStateKey = "PreFilter" + Name
	preScoreStateKey  = "PreScore" + Name

	// ErrReasonCPU and ErrReasonMemory say which threshold a node's estimated usage would exceed.
	ErrReasonCPU    = "node(s) had CPU usage over the LoadAware threshold"
	ErrReasonMemory = "node(s) had memory usage over the LoadAware threshold"
	// ErrReasonNoMetrics is used with onMissingMetrics: Reject.
	ErrReasonNoMetrics = "node(s) had no recent usage metrics"

	signFragmentKey = Name + ".estimate"
)

// LoadAware filters out nodes whose estimated usage would exceed a threshold
// and prefers nodes with lower estimated usage.
type LoadAware struct {
	handle     fwk.Handle
	source     usageSource
	nodeLister corelisters.NodeLister // nil in unit tests
	tracker    *tracker
	// records holds, in the snapshot's list order, each node's sample and
	// the estimates of the pods placed on it since (Filter and Score's
	// path; a NodeInfo the records do not know reads the source and the
	// tracker by name).
	records noderecord.Table[nodeRecord]
	// preFilter, preScore: the states last written, read by Filter and
	// Score without the CycleState's map (cyclestate).
	preFilter, preScore cyclestate.Last[*podState]
	expiration          time.Duration
	now                 func() time.Time

	// thresholds and weights per resource (0 = off).
	cpuThreshold, memThreshold int64
	cpuWeight, memWeight       int64
	defaultEstimate            estimate
	rejectMissing              bool

	// rejected are pods Filter turned away for usage; they are activated
	// when a refresh shows a node cooled down.
	rejectedMu sync.Mutex
	rejected   map[types.UID]*v1.Pod

	filteredCPU, filteredMem, filteredMissing metrics.CounterMetric
	missingFilter, staleFilter, invalidFilter metrics.CounterMetric
	missingScore, staleScore, invalidScore    metrics.CounterMetric
	overAllocatable                           metrics.CounterMetric
}

var (
	_ fwk.PreFilterPlugin   = &LoadAware{}
	_ fwk.FilterPlugin      = &LoadAware{}
	_ fwk.PreScorePlugin    = &LoadAware{}
	_ fwk.ScorePlugin       = &LoadAware{}
	_ fwk.ReservePlugin     = &LoadAware{}
	_ fwk.EnqueueExtensions = &LoadAware{}
	_ fwk.SignPlugin        = &LoadAware{}
)

// Name returns the plugin's name.
func (pl *LoadAware) Name() string { return Name }

// metricsClientFunc builds the metrics.k8s.io client of the MetricsAPI source
// (unit tests may build a fake; the integration suites run New against the
// real metrics-server behind kube-apiserver's aggregation layer).
type metricsClientFunc func(*rest.Config) (metricsclient.Interface, error)

// New builds LoadAware with a metrics client from the scheduler's kubeconfig.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	return newWithMetricsClient(func(c *rest.Config) (metricsclient.Interface, error) {
		return metricsclient.NewForConfig(c)
	})(ctx, obj, h)
}

// NewWithMetricsClient returns a factory whose MetricsAPI source reads
// node metrics with c (kubectl berth's offline scheduler gives it an
// in-memory client).
func NewWithMetricsClient(c metricsclient.Interface) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return newWithMetricsClient(func(*rest.Config) (metricsclient.Interface, error) { return c, nil })
}

// newWithMetricsClient returns a plugin factory whose MetricsAPI source uses
// the client newClient builds.
func newWithMetricsClient(newClient metricsClientFunc) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, ok := obj.(*config.LoadAwareArgs)
		if !ok {
			return nil, fmt.Errorf("want args to be of type LoadAwareArgs, got %T", obj)
		}
		if err := validation.ValidateLoadAwareArgs(nil, args); err != nil {
			return nil, err
		}
		if h == nil || h.SharedInformerFactory() == nil {
			return nil, fmt.Errorf("LoadAware needs the scheduler's informers")
		}
		registerMetrics()
		pl := newPlugin(args, h)
		pl.now = pluginclock.From(ctx, time.Now)
		pl.nodeLister = h.SharedInformerFactory().Core().V1().Nodes().Lister()

		switch args.Source {
		case config.LoadAwareSourceMetricsAPI:
			client, err := newClient(h.KubeConfig())
			if err != nil {
				return nil, fmt.Errorf("building the metrics.k8s.io client: %w", err)
			}
			src := newMetricsAPISource(client, args.MetricsRefreshInterval.Duration, pl.onRefresh)
			src.now = pl.now
			src.onFailure = pl.onRefreshFailure
			pl.source = src
			go src.run(ctx)
		case config.LoadAwareSourceNodeAnnotations:
			src := newAnnotationSource(args.AnnotationKey)
			src.now = pl.now
			src.exists = func(name string) bool {
				_, err := pl.nodeLister.Get(name)
				return err == nil
			}
			pl.source = src
			if _, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
				DeleteFunc: func(obj any) {
					if n, _, err := schedutil.As[*v1.Node](obj, nil); err == nil {
						src.forget(n.Name)
					}
				},
			}); err != nil {
				return nil, fmt.Errorf("watching node deletions: %w", err)
			}
			// Pods assigned long ago are in the samples, or their node's
			// sample expired: forget them on the refresh interval's clock.
			go pl.pruneEvery(ctx, args.MetricsRefreshInterval.Duration)
		}
		if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(pl.podEventHandler()); err != nil {
			return nil, fmt.Errorf("watching pods: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("LoadAware started", "source", args.Source)
		return pl, nil
	}
}

func newPlugin(args *config.LoadAwareArgs, h fwk.Handle) *LoadAware {
	pl := &LoadAware{
		handle:          h,
		tracker:         newTracker(args.EstimateGracePeriod.Duration),
		expiration:      args.MetricsExpiration.Duration,
		now:             time.Now,
		cpuThreshold:    args.UsageThresholds[v1.ResourceCPU],
		memThreshold:    args.UsageThresholds[v1.ResourceMemory],
		cpuWeight:       args.ResourceWeights[v1.ResourceCPU],
		memWeight:       args.ResourceWeights[v1.ResourceMemory],
		rejectMissing:   args.OnMissingMetrics == config.LoadAwareMissingMetricsReject,
		rejected:        map[types.UID]*v1.Pod{},
		filteredCPU:     filteredNodes.WithLabelValues(string(v1.ResourceCPU)),
		filteredMem:     filteredNodes.WithLabelValues(string(v1.ResourceMemory)),
		filteredMissing: filteredNodes.WithLabelValues("metrics"),
		missingFilter:   missingMetrics.WithLabelValues("missing", "Filter"),
		staleFilter:     missingMetrics.WithLabelValues("stale", "Filter"),
		missingScore:    missingMetrics.WithLabelValues("missing", "Score"),
		staleScore:      missingMetrics.WithLabelValues("stale", "Score"),
		invalidFilter:   missingMetrics.WithLabelValues("invalid", "Filter"),
		invalidScore:    missingMetrics.WithLabelValues("invalid", "Score"),
		overAllocatable: badSamples.WithLabelValues(badOverAllocatable),
	}
	// The profile's tables share each node's block of lines (CELPolicy's
	// line beside this one).
	pl.records.Join(noderecord.GroupFor(h))
	pl.tracker.changed = func(node string) { pl.records.Invalidate(node) }
	if q, ok := args.DefaultPodEstimate[v1.ResourceCPU]; ok {
		pl.defaultEstimate.cpuMilli = q.MilliValue()
	}
	if q, ok := args.DefaultPodEstimate[v1.ResourceMemory]; ok {
		pl.defaultEstimate.memBytes = q.Value()
	}
	return pl
}

// estimateOf is the pod's request per resource (init and sidecar containers
// and overhead counted as the kubelet does), or the default estimate for a
// resource it does not request.
func (pl *LoadAware) estimateOf(pod *v1.Pod) estimate {
	req := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	e := estimate{cpuMilli: req.Cpu().MilliValue(), memBytes: req.Memory().Value()}
	if e.cpuMilli == 0 {
		e.cpuMilli = pl.defaultEstimate.cpuMilli
	}
	if e.memBytes == 0 {
		e.memBytes = pl.defaultEstimate.memBytes
	}
	return e
}

func isDaemonSetPod(pod *v1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// podState is what PreFilter (or PreScore) learns once per cycle: the pod's
// estimate, and the cycle's clock for judging samples' age (read once, not
// per node: a clock read costs as much as the rest of a Filter call).
type podState struct {
	est estimate
	// staleBefore: a sample taken before it is stale (now less
	// metricsExpiration, once per pod).
	staleBefore time.Time
	// staleNs and staleAll are staleBefore for a node's line, whose
	// timestamp is Unix nanoseconds (unixNanoBound).
	staleNs  int64
	staleAll bool
}

// newPodState is the pod's estimate and the cycle's staleness bound.
func (pl *LoadAware) newPodState(pod *v1.Pod) *podState {
	s := &podState{est: pl.estimateOf(pod), staleBefore: pl.staleBefore(pl.now())}
	s.staleNs, s.staleAll = unixNanoBound(s.staleBefore)
	return s
}

// The times Unix nanoseconds can hold (an int64).
var (
	minUnixNano = time.Unix(0, math.MinInt64)
	maxUnixNano = time.Unix(0, math.MaxInt64)
)

// unixNanoBound is b for comparisons with Unix nanoseconds: for every int64
// t, time.Unix(0, t).Before(b) exactly when all or t < ns (b outside the
// range they hold is clamped: every t is after a b before it, and before a
// b after it).
func unixNanoBound(b time.Time) (ns int64, all bool) {
	switch {
	case b.Before(minUnixNano):
		return math.MinInt64, false
	case b.After(maxUnixNano):
		return 0, true
	}
	return b.UnixNano(), false
}

func (s *podState) Clone() fwk.StateData { return s }

// PreFilter computes the pod's estimate once. DaemonSet pods are exempt from
// the usage filter: they must run on every node, hot or not.
func (pl *LoadAware) PreFilter(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !state.IsPodGroupSchedulingCycle() {
		// A PodGroup cycle's snapshot is one it changes and puts back: the
		// table keeps following the scheduler's own list.
		pl.records.Sync(nodes)
	}
	if isDaemonSetPod(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	pl.preFilter.Write(state, preFilterStateKey, pl.newPodState(pod))
	return nil, nil
}

// PreFilterExtensions returns nil: usage does not change when preemption
// removes pods in a simulation.
func (pl *LoadAware) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// sampleState says what Filter and Score may do with a node's sample.
type sampleState int

const (
	sampleFresh   sampleState = iota
	sampleMissing             // none, or older than metricsExpiration
	sampleInvalid             // impossible values: never better than a valid sample
)

// nodeRecord is what Filter and Score read of a node, built from the
// source and the tracker when one of them changed and stored in the node's
// place in records, with its line (nodeline.go): the by-name path reads the
// source's cache entry and the tracker's entry, each behind a map of strings.
type nodeRecord struct {
	// node and version are what the record was built from: the Node object
	// (an annotation sample is the object's) and the source's version (a
	// MetricsAPI refresh).
	node    *v1.Node
	version uint64
	smp     sample
	ok      bool
	// pend is tracker.pending(node, smp.timestamp): the estimates of the
	// pods placed on the node that the sample does not include.
	pend estimate
}

// nodeData returns what the node's sample says, whether it is stale for
// the cycle s, and the estimates pending on top of it: from the node's
// line, or its record when the line cannot hold the sample, when nodeInfo
// is one of the snapshot's (rebuilding both if stale); else from the source
// and the tracker by name (pend is then computed only for a fresh sample,
// when asked: hasPend false). A sample from the line has no timestamp: its
// age is judged in Unix nanoseconds, without making a time.Time per node.
func (pl *LoadAware) nodeData(nodeInfo fwk.NodeInfo, node *v1.Node, s *podState) (smp sample, ok, stale bool, pend estimate, hasPend bool) {
	ref, found := pl.records.Find(nodeInfo)
	if !found {
		smp, ok = pl.source.sample(node)
		return smp, ok, staleAt(smp, ok, s.staleBefore), estimate{}, false
	}
	version := pl.source.version()
	l, seq, _ := ref.Read()
	if line := nodeLine(l); line.valid(node, version) {
		smp, ok, pend = line.data()
		return smp, ok, ok && !smp.invalid && line.stale(s.staleNs, s.staleAll), pend, true
	}
	if old := ref.Record(); old != nil && old.node == node && old.version == version {
		// A sample the line cannot hold (see nodeLine).
		return old.smp, old.ok, staleAt(old.smp, old.ok, s.staleBefore), old.pend, true
	}
	r := &nodeRecord{node: node, version: version}
	r.smp, r.ok = pl.source.sample(node)
	if r.ok && !r.smp.invalid {
		r.pend = pl.tracker.pending(node.Name, r.smp.timestamp)
	}
	// Kept unless the tracker invalidated the node meanwhile: then this
	// record may predate the change, and the next read builds another.
	ref.Store(seq, r, lineOf(r))
	return r.smp, r.ok, staleAt(r.smp, r.ok, s.staleBefore), r.pend, true
}

// staleAt reports whether the source's sample (ok: there is one) is valid
// and was taken before staleBefore.
func staleAt(s sample, ok bool, staleBefore time.Time) bool {
	return ok && !s.invalid && s.timestamp.Before(staleBefore)
}

// classify says whether a sample (ok: there is one; invalid; stale, from
// staleAt or a line's stale) is fresh, counting why not.
func classify(ok, invalid, isStale bool, missing, stale, invalidC metrics.CounterMetric) sampleState {
	switch {
	case !ok:
		missing.Inc()
		return sampleMissing
	case invalid:
		invalidC.Inc()
		return sampleInvalid
	case isStale:
		stale.Inc()
		return sampleMissing
	}
	return sampleFresh
}

// staleBefore is the time before which a sample is stale at now: older
// than metricsExpiration. (A comparison with it, per node, is the same as
// now.Sub(timestamp) > expiration, monotonic readings included, without
// Sub's overflow check, which was a tenth of a Filter call.)
func (pl *LoadAware) staleBefore(now time.Time) time.Time { return now.Add(-pl.expiration) }

// usage is the node's estimated usage of one resource: the sample, clamped
// to allocatable (a larger value is either an overload the threshold rejects
// anyway or a broken sample), plus the pending and incoming estimates,
// saturating instead of overflowing.
func (pl *LoadAware) usage(measured, alloc int64, add ...int64) int64 {
	if alloc > 0 && measured > alloc {
		pl.overAllocatable.Inc()
		measured = alloc
	}
	for _, a := range add {
		if measured > math.MaxInt64-a {
			return math.MaxInt64
		}
		measured += a
	}
	return measured
}

// overReason is why est does not fit the node under a threshold, given its
// sample and the pods placed on it since (ErrReasonCPU, ErrReasonMemory), or
// "" when it fits.
func (pl *LoadAware) overReason(smp sample, pend, est estimate, cpuAlloc, memAlloc int64) string {
	switch {
	case overThreshold(pl.usage(smp.cpuMilli, cpuAlloc, pend.cpuMilli, est.cpuMilli), cpuAlloc, pl.cpuThreshold):
		return ErrReasonCPU
	case overThreshold(pl.usage(smp.memBytes, memAlloc, pend.memBytes, est.memBytes), memAlloc, pl.memThreshold):
		return ErrReasonMemory
	}
	return ""
}

// usable reports whether a sample the source returned may be trusted: there
// is one, it is valid, and it is not older than metricsExpiration (the
// queueing hints' check; Filter and Score also count why not, in classify).
func (pl *LoadAware) usable(s sample, ok bool) bool {
	return ok && !s.invalid && !s.timestamp.Before(pl.staleBefore(pl.now()))
}

// overThreshold reports whether used (milli or bytes) exceeds percent of
// alloc, in floating point so that no product overflows.
func overThreshold(used, alloc, percent int64) bool {
	return percent > 0 && alloc > 0 && float64(used)*100 > float64(percent)*float64(alloc)
}

// Filter rejects a node whose measured usage, plus the pods placed on it
// since the sample, plus this pod, would exceed a threshold.
func (pl *LoadAware) Filter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) *fwk.Status {
	s, err := pl.preFilter.Read(state, preFilterStateKey)
	if err != nil {
		return fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	smp, ok, stale, pend, hasPend := pl.nodeData(nodeInfo, node, s)
	if classify(ok, smp.invalid, stale, pl.missingFilter, pl.staleFilter, pl.invalidFilter) != sampleFresh {
		if pl.rejectMissing {
			pl.filteredMissing.Inc()
			// Retried on the refresh (or annotation) that brings a sample.
			pl.rememberRejected(pod)
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, ErrReasonNoMetrics)
		}
		return nil
	}
	if !hasPend {
		pend = pl.tracker.pending(node.Name, smp.timestamp)
	}
	alloc := nodeInfo.GetAllocatable()
	reason := pl.overReason(smp, pend, s.est, alloc.GetMilliCPU(), alloc.GetMemory())
	switch reason {
	case "":
		return nil
	case ErrReasonCPU:
		pl.filteredCPU.Inc()
	default:
		pl.filteredMem.Inc()
	}
	pl.rememberRejected(pod)
	if logger := klog.FromContext(ctx); logger.V(5).Enabled() {
		logger.V(5).Info("Node over LoadAware threshold", "pod", klog.KObj(pod), "node", klog.KObj(node), "reason", reason)
	}
	// Usage is not something preemption can be shown to lower.
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, reason)
}

// rememberRejected keeps the pod for activateRejected, which the MetricsAPI
// source's refreshes drive. Under NodeAnnotations a node's new sample is a
// node event, and its queueing hint requeues the pod: nothing to remember.
func (pl *LoadAware) rememberRejected(pod *v1.Pod) {
	if _, ok := pl.source.(*annotationSource); ok {
		return
	}
	pl.rejectedMu.Lock()
	pl.rejected[pod.UID] = pod
	pl.rejectedMu.Unlock()
}

// PreScore computes the estimate when PreFilter did not (DaemonSet pods, or
// LoadAware enabled for scoring only).
func (pl *LoadAware) PreScore(_ context.Context, state fwk.CycleState, pod *v1.Pod, _ []fwk.NodeInfo) *fwk.Status {
	s, err := pl.preFilter.Read(state, preFilterStateKey)
	if err != nil {
		s = pl.newPodState(pod)
	}
	pl.preScore.Write(state, preScoreStateKey, s)
	return nil
}

// Score is the weight-averaged free share per resource,
// (1 - estimated/allocatable) * 100. Without a fresh sample it falls back to
// the scheduler's requested resources, as NodeResourcesFit sees them.
func (pl *LoadAware) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	s, err := pl.preScore.Read(state, preScoreStateKey)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	node := nodeInfo.Node()
	alloc := nodeInfo.GetAllocatable()
	var cpu, mem int64
	smp, ok, stale, pend, hasPend := pl.nodeData(nodeInfo, node, s)
	switch classify(ok, smp.invalid, stale, pl.missingScore, pl.staleScore, pl.invalidScore) {
	case sampleFresh:
		if !hasPend {
			pend = pl.tracker.pending(node.Name, smp.timestamp)
		}
		cpu = pl.usage(smp.cpuMilli, alloc.GetMilliCPU(), pend.cpuMilli)
		mem = pl.usage(smp.memBytes, alloc.GetMemory(), pend.memBytes)
	case sampleInvalid:
		return fwk.MinScore, nil
	default:
		req := nodeInfo.GetRequested()
		cpu, mem = req.GetMilliCPU(), req.GetMemory()
	}
	score := pl.cpuWeight*freeShare(pl.usage(cpu, 0, s.est.cpuMilli), alloc.GetMilliCPU()) +
		pl.memWeight*freeShare(pl.usage(mem, 0, s.est.memBytes), alloc.GetMemory())
	if w := pl.cpuWeight + pl.memWeight; w > 0 {
		score /= w
	}
	return score, nil
}

// freeShare is the unused share of alloc in [0, MaxScore].
func freeShare(used, alloc int64) int64 {
	if alloc <= 0 || used >= alloc {
		return fwk.MinScore
	}
	if used <= 0 {
		return fwk.MaxScore
	}
	return int64(math.Round(float64(alloc-used) * float64(fwk.MaxScore) / float64(alloc)))
}

// ScoreExtensions returns nil: scores are already in [0, MaxScore].
func (pl *LoadAware) ScoreExtensions() fwk.ScoreExtensions { return nil }

// Reserve counts the pod's estimate on the node until a newer sample includes it.
func (pl *LoadAware) Reserve(_ context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	est := pl.estimateOf(pod)
	if s, err := pl.preFilter.Read(state, preFilterStateKey); err == nil {
		est = s.est
	}
	pl.tracker.add(pod.UID, assignedPod{node: nodeName, est: est, at: pl.now()})
	return nil
}

// Unreserve forgets the estimate of a pod whose binding failed.
func (pl *LoadAware) Unreserve(_ context.Context, _ fwk.CycleState, pod *v1.Pod, _ string) {
	pl.tracker.remove(pod.UID)
}

// podEventHandler keeps the tracker right for pods bound by anyone (other
// schedulers included) and forgets deleted or finished pods.
func (pl *LoadAware) podEventHandler() cache.ResourceEventHandler {
	observe := func(pod *v1.Pod) {
		if pod.Spec.NodeName == "" {
			return
		}
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			pl.tracker.remove(pod.UID)
			return
		}
		pl.tracker.add(pod.UID, assignedPod{node: pod.Spec.NodeName, est: pl.estimateOf(pod), at: assignedAt(pod, pl.now()), startedAt: runningSince(pod)})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*v1.Pod); ok {
				observe(pod)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*v1.Pod)
			newPod, ok2 := newObj.(*v1.Pod)
			if ok1 && ok2 && (oldPod.Spec.NodeName != newPod.Spec.NodeName || oldPod.Status.Phase != newPod.Status.Phase ||
				!runningSince(oldPod).Equal(runningSince(newPod))) {
				observe(newPod)
			}
		},
		DeleteFunc: func(obj any) {
			if pod, _, err := schedutil.As[*v1.Pod](obj, nil); err == nil {
				pl.tracker.remove(pod.UID)
				pl.rejectedMu.Lock()
				delete(pl.rejected, pod.UID)
				pl.rejectedMu.Unlock()
			}
		},
	}
}

// runningSince is when the last of the pod's containers started running, or
// zero while one of them is not running (its image still pulling, say).
func runningSince(pod *v1.Pod) time.Time {
	if pod.Status.Phase != v1.PodRunning || len(pod.Status.ContainerStatuses) < len(pod.Spec.Containers) {
		return time.Time{}
	}
	var since time.Time
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return time.Time{}
		}
		if t := cs.State.Running.StartedAt.Time; t.After(since) {
			since = t
		}
	}
	return since
}

// assignedAt is when the pod was bound: its PodScheduled condition, or its
// creation when the condition is missing, or now for a pod seen being bound.
func assignedAt(pod *v1.Pod, now time.Time) time.Time {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionTrue && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time
		}
	}
	if !pod.CreationTimestamp.IsZero() && now.Sub(pod.CreationTimestamp.Time) > time.Minute {
		return pod.CreationTimestamp.Time
	}
	return now
}

// onRefresh runs after each MetricsAPI list: forget estimates the new samples
// include, and give the pods Filter rejected another chance if a node now
// has room under every threshold.
func (pl *LoadAware) onRefresh(logger klog.Logger, snap map[string]sample) {
	pl.tracker.prune(func(node string) (time.Time, bool) {
		s, ok := snap[node]
		return s.timestamp, ok
	}, pl.now().Add(-pl.expiration))
	pl.activateRejected(logger)
}

// onRefreshFailure: once the last good snapshot has expired, every node is
// "missing metrics", which onMissingMetrics: Allow lets pass; the pods Filter
// rejected for usage get another chance then, not at the periodic flush.
func (pl *LoadAware) onRefreshFailure(logger klog.Logger, lastSuccess time.Time) {
	if !pl.rejectMissing && pl.now().Sub(lastSuccess) > pl.expiration {
		pl.activateRejected(logger)
	}
}

func (pl *LoadAware) pruneEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pl.prune()
		}
	}
}

// prune forgets the estimates of running pods whose nodes' samples have
// caught up or expired.
func (pl *LoadAware) prune() {
	pl.tracker.prune(func(string) (time.Time, bool) { return time.Time{}, false }, pl.now().Add(-pl.expiration))
}

// activateRejected moves the pods Filter rejected back to the active queue.
// A refresh is at most every 5s, and a rejected pod is retried at most once
// per refresh: cheaper than telling which node cooled for which pod.
func (pl *LoadAware) activateRejected(logger klog.Logger) {
	pl.rejectedMu.Lock()
	if len(pl.rejected) == 0 {
		pl.rejectedMu.Unlock()
		return
	}
	pods := make(map[string]*v1.Pod, len(pl.rejected))
	for _, p := range pl.rejected {
		pods[p.Namespace+"/"+p.Name] = p
	}
	pl.rejected = map[types.UID]*v1.Pod{}
	pl.rejectedMu.Unlock()
	logger.V(4).Info("Activating pods LoadAware rejected, after a metrics refresh", "pods", len(pods))
	pl.handle.Activate(logger, pods)
}

// SignPod: LoadAware's result depends on the pod only through its estimate
// and whether it is a DaemonSet pod (KEP-5598).
func (pl *LoadAware) SignPod(_ context.Context, pod *v1.Pod) ([]fwk.SignFragment, *fwk.Status) {
	e := pl.estimateOf(pod)
	return []fwk.SignFragment{{Key: signFragmentKey, Value: [3]int64{e.cpuMilli, e.memBytes, boolInt(isDaemonSetPod(pod))}}}, nil
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// EventsToRegister: a node added or with more allocatable, a new usage
// annotation, or an assigned pod deleted can make a rejected pod fit.
func (pl *LoadAware) EventsToRegister(_ context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable}},
		{Event: fwk.ClusterEvent{Resource: fwk.AssignedPod, ActionType: fwk.Delete}, QueueingHintFn: pl.isSchedulableAfterPodDeleted},
	}
	if _, ok := pl.source.(*annotationSource); ok {
		events = append(events, fwk.ClusterEventWithHint{
			Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.UpdateNodeAnnotation}, QueueingHintFn: pl.isSchedulableAfterAnnotation,
		})
	}
	return events, nil
}

// isSchedulableAfterPodDeleted requeues only when the deleted pod was counted
// as an estimate on top of its node's sample (the sample does not include it:
// assigned after it, or not running for the grace period before it), or its node
// has no sample (Score then uses requests, which the deletion lowers); a pod
// the sample includes keeps counting until the next sample anyway. It judges
// from the pod and the node, not from the tracker, which this same deletion
// updates in another handler, in no set order.
func (pl *LoadAware) isSchedulableAfterPodDeleted(_ klog.Logger, _ *v1.Pod, oldObj, _ any) (fwk.QueueingHint, error) {
	deleted, _, err := schedutil.As[*v1.Pod](oldObj, nil)
	if err != nil {
		return fwk.Queue, err
	}
	if pl.nodeLister == nil {
		return fwk.Queue, nil
	}
	node, err := pl.nodeLister.Get(deleted.Spec.NodeName)
	if err != nil {
		return fwk.Queue, nil // node gone or unknown: let the scheduler look again
	}
	smp, ok := pl.source.sample(node)
	gone := assignedPod{at: assignedAt(deleted, pl.now()), startedAt: runningSince(deleted)}
	if !pl.usable(smp, ok) || !gone.includedBy(smp.timestamp, pl.tracker.grace) {
		return fwk.Queue, nil
	}
	return fwk.QueueSkip, nil
}

// isSchedulableAfterAnnotation requeues when the node's new usage leaves room
// for the pod under every threshold.
func (pl *LoadAware) isSchedulableAfterAnnotation(logger klog.Logger, pod *v1.Pod, _, newObj any) (fwk.QueueingHint, error) {
	_, node, err := schedutil.As[*v1.Node](nil, newObj)
	if err != nil {
		return fwk.Queue, err
	}
	smp, ok := pl.source.sample(node)
	if !pl.usable(smp, ok) {
		if pl.rejectMissing {
			return fwk.QueueSkip, nil
		}
		return fwk.Queue, nil
	}
	if pl.overReason(smp, pl.tracker.pending(node.Name, smp.timestamp), pl.estimateOf(pod), node.Status.Allocatable.Cpu().MilliValue(), node.Status.Allocatable.Memory().Value()) != "" {
		logger.V(5).Info("Node still over the LoadAware threshold", "pod", klog.KObj(pod), "node", klog.KObj(node))
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
