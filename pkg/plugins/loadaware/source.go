package loadaware

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/berth-scheduler/berth/internal/slotmap"
)

// sample is a node's measured usage at a point in time.
type sample struct {
	cpuMilli  int64
	memBytes  int64
	timestamp time.Time
	// invalid: the source reported something impossible (negative usage, an
	// annotation that does not decode). Such a node never looks better than
	// one with a valid sample: Filter treats it as without metrics, and Score
	// gives it the lowest score instead of falling back to requests.
	invalid bool
}

var (
	maxMilli = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	maxUnits = resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
)

// newSample checks what a source reported, received at the time given:
// negative usage makes the sample invalid; a value beyond int64 is saturated
// (it is then clamped to allocatable where used); a timestamp after the
// sample was received is clamped to that time, so that a skewed or forged
// clock can neither keep a sample fresh for ever nor hide the pods placed
// since. Each case is counted in berth_loadaware_bad_samples_total.
func newSample(cpu, mem resource.Quantity, ts, received time.Time) sample {
	s := sample{timestamp: ts}
	if cpu.Sign() < 0 || mem.Sign() < 0 {
		badSamples.WithLabelValues(badNegative).Inc()
		s.invalid = true
		return s
	}
	s.cpuMilli, s.memBytes = math.MaxInt64, math.MaxInt64
	cpuFits, memFits := cpu.Cmp(*maxMilli) <= 0, mem.Cmp(*maxUnits) <= 0
	if cpuFits {
		s.cpuMilli = cpu.MilliValue()
	}
	if memFits {
		s.memBytes = mem.Value()
	}
	if !cpuFits || !memFits {
		badSamples.WithLabelValues(badOverflow).Inc()
	}
	if ts.After(received) {
		badSamples.WithLabelValues(badFuture).Inc()
		// Wall clock only, as every parsed timestamp: received is the
		// plugin's clock (time.Now()), whose monotonic reading a node's
		// line cannot hold.
		s.timestamp = received.Round(0)
	}
	return s
}

// usageSource gives the latest sample of a node. Implementations answer from
// memory: Filter and Score call them for every node of every pod.
type usageSource interface {
	sample(node *v1.Node) (sample, bool)
	// version moves whenever a sample may have changed other than with its
	// Node object (a MetricsAPI refresh); the node records compare it.
	version() uint64
}

// metricsAPISource lists metrics.k8s.io/v1beta1 NodeMetrics in the
// background and serves the last successful list.
type metricsAPISource struct {
	client   metricsclient.Interface
	interval time.Duration
	snapshot atomic.Pointer[map[string]sample]
	// onRefresh is called after each successful list with the new snapshot.
	onRefresh func(logger klog.Logger, snap map[string]sample)
	// onFailure is called after each failed list, with the time of the last good one.
	onFailure func(logger klog.Logger, lastSuccess time.Time)
	// generation counts the snapshots stored (version).
	generation atomic.Uint64
	// lastSuccess is when the last list succeeded (Unix nanoseconds; 0 never).
	lastSuccess atomic.Int64
	// done is closed when the refresh loop has returned.
	done chan struct{}
	// now is the plugin's clock: a list is received, and succeeds, at now().
	now func() time.Time
}

func newMetricsAPISource(client metricsclient.Interface, interval time.Duration, onRefresh func(klog.Logger, map[string]sample)) *metricsAPISource {
	s := &metricsAPISource{client: client, interval: interval, onRefresh: onRefresh, done: make(chan struct{}), now: time.Now}
	empty := map[string]sample{}
	s.snapshot.Store(&empty)
	return s
}

func (s *metricsAPISource) sample(node *v1.Node) (sample, bool) {
	u, ok := (*s.snapshot.Load())[node.Name]
	return u, ok
}

func (s *metricsAPISource) version() uint64 { return s.generation.Load() }

// run refreshes every interval until ctx is done. A failed list keeps the
// last snapshot (its samples age out through metricsExpiration) and is counted.
func (s *metricsAPISource) run(ctx context.Context) {
	defer close(s.done)
	logger := klog.FromContext(ctx).WithName(Name)
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := s.refresh(ctx); err != nil {
			refreshErrors.Inc()
			logger.Error(err, "Listing NodeMetrics failed; keeping the previous snapshot")
			if s.onFailure != nil {
				s.onFailure(logger, time.Unix(0, s.lastSuccess.Load()))
			}
		}
	}, s.interval)
}

func (s *metricsAPISource) refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.interval)
	defer cancel()
	list, err := s.client.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing NodeMetrics: %w", err)
	}
	snap := make(map[string]sample, len(list.Items))
	received := s.now()
	for _, m := range list.Items {
		// A sample describes the window that ends at its timestamp.
		snap[m.Name] = newSample(*m.Usage.Cpu(), *m.Usage.Memory(), m.Timestamp.Time, received)
	}
	s.snapshot.Store(&snap)
	// After the store: a reader that sees the new version reads the new snapshot.
	s.generation.Add(1)
	s.lastSuccess.Store(s.now().UnixNano())
	lastRefresh.SetToCurrentTime()
	if s.onRefresh != nil {
		s.onRefresh(klog.FromContext(ctx), snap)
	}
	return nil
}

// AnnotationUsage is the value of the NodeAnnotations source's annotation,
// written by an exporter, for example:
//
//	berth.io/node-usage: '{"cpu":"1500m","memory":"3Gi","timestamp":"2026-11-29T10:00:00Z"}'
type AnnotationUsage struct {
	CPU       resource.Quantity `json:"cpu"`
	Memory    resource.Quantity `json:"memory"`
	Timestamp metav1.Time       `json:"timestamp"`
}

// parseAnnotation decodes the annotation, received at the time given; a
// value without a timestamp is an error.
func parseAnnotation(value string, received time.Time) (sample, error) {
	var a AnnotationUsage
	if err := json.Unmarshal([]byte(value), &a); err != nil {
		return sample{}, fmt.Errorf("decoding usage annotation: %w", err)
	}
	if a.Timestamp.IsZero() {
		return sample{}, fmt.Errorf("decoding usage annotation: timestamp is required")
	}
	return newSample(a.CPU, a.Memory, a.Timestamp.Time, received), nil
}

// annotationSource reads usage from a node annotation. Parsed values are
// kept per node and resourceVersion, so a steady node is parsed once.
type annotationSource struct {
	key string
	now func() time.Time
	// exists reports whether a node is still in the scheduler's informer (nil:
	// always): a Filter on a snapshot older than a node's deletion must not
	// cache the node again after the deletion handler forgot it.
	exists func(nodeName string) bool
	// cache is read by Filter and Score for every node: a slotmap, no lock.
	cache *slotmap.Map[parsedAnnotation]
}

type parsedAnnotation struct {
	// node is the object parsed: the same object is the same annotation
	// (compared first: no string to read), else an equal resourceVersion.
	node            *v1.Node
	resourceVersion string
	sample          sample
	ok              bool
}

func newAnnotationSource(key string) *annotationSource {
	return &annotationSource{key: key, now: time.Now, cache: slotmap.New[parsedAnnotation]()}
}

func (s *annotationSource) sample(node *v1.Node) (sample, bool) {
	if p := s.cache.Load(node.Name); p != nil && (p.node == node || p.resourceVersion == node.ResourceVersion) {
		return p.sample, p.ok
	}
	p := parsedAnnotation{node: node, resourceVersion: node.ResourceVersion}
	if v, ok := node.Annotations[s.key]; ok {
		u, err := parseAnnotation(v, s.now())
		if err != nil {
			// An annotation that is there but does not decode is a broken
			// exporter: the node must not look idle (as one without an
			// annotation would, scored by its requests).
			annotationErrors.Inc()
			u = sample{invalid: true}
		}
		p.sample, p.ok = u, true
	}
	if s.exists == nil || s.exists(node.Name) {
		s.cache.Store(node.Name, &p)
	}
	return p.sample, p.ok
}

// version is constant: an annotation's sample changes only with its Node object.
func (s *annotationSource) version() uint64 { return 0 }

func (s *annotationSource) forget(nodeName string) { s.cache.Delete(nodeName) }

func (s *annotationSource) len() int { return s.cache.Len() }
