package admissionfeedback

import (
	"strings"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

const metricsSubsystem = "berth_admissionfeedback"

var (
	refusalsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "refusals_total",
		Help: "Pods refused by a kubelet's admission, seen Failed by this scheduler, by reason (the kubelet's reasons in the default list; " +
			"OutOfExtendedResource for other OutOf<resource> reasons; Other for reasons added in args).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
	nodesSkipped = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "nodes_skipped_total",
		Help:           "Nodes Filter turned away because they refused a pod of the same controller (one per node and scheduling attempt or preemption simulation).",
		StabilityLevel: metrics.ALPHA,
	})
	blackHoleNodes = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "black_hole_nodes",
		Help:           "Nodes that refused pods of blackHoleThreshold controllers within blackHoleWindow (they score lowest for every pod).",
		StabilityLevel: metrics.ALPHA,
	})
	rememberedRefusals = metrics.NewGauge(&metrics.GaugeOpts{
		Subsystem:      metricsSubsystem,
		Name:           "remembered_refusals",
		Help:           "Controller-and-node refusals held in memory (bounded; each is forgotten maxRefusalTTL after its avoidance ends).",
		StabilityLevel: metrics.ALPHA,
	})
	refusalsNotScheduled = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem: metricsSubsystem,
		Name:      "refusals_not_scheduled_total",
		Help: "Refusals not counted because no scheduler bound the pod (its author set spec.nodeName, " +
			"as its managedFields say), so one namespace cannot make a node avoided by all.",
		StabilityLevel: metrics.ALPHA,
	})
	refusalsEvicted = metrics.NewCounter(&metrics.CounterOpts{
		Subsystem:      metricsSubsystem,
		Name:           "refusals_evicted_total",
		Help:           "Refusals dropped, oldest first, because 10000 were held.",
		StabilityLevel: metrics.ALPHA,
	})

	registerOnce sync.Once
)

func registerMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(refusalsTotal, refusalsNotScheduled, nodesSkipped, blackHoleNodes, rememberedRefusals, refusalsEvicted)
		// Every reason label reasonLabel gives, at 0, for the dashboard.
		for r := range knownReasons {
			refusalsTotal.WithLabelValues(r)
		}
		refusalsTotal.WithLabelValues("OutOfExtendedResource")
		refusalsTotal.WithLabelValues("Other")
	})
}

// knownReasons are the kubelet's own reasons, kept as labels; any other
// reason is folded so the label set stays small.
var knownReasons = map[string]bool{
	"OutOfcpu": true, "OutOfmemory": true, "OutOfpods": true, "OutOfephemeral-storage": true,
	"UnexpectedAdmissionError": true, "TopologyAffinityError": true, "SMTAlignmentError": true,
	"NodeAffinity": true, "NodePorts": true,
}

func reasonLabel(reason string) string {
	switch {
	case knownReasons[reason]:
		return reason
	case strings.HasPrefix(reason, "OutOf"):
		return "OutOfExtendedResource"
	default:
		return "Other"
	}
}
