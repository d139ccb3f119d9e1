package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
)

const (
	// schedulerName is the every-plugin profile of all-plugins.yaml.
	schedulerName = "berth-all"
	// freeNamespace has no ElasticQuota (namespacesWithoutQuota:
	// Unlimited): the liveness oracle's namespace.
	freeNamespace = "soak-free"
	// misfitLabel marks the pods of a gang one of whose members fits no
	// node; misfitCPU is what that member asks for (more than any node).
	misfitLabel = "soak.berth.dev/misfit-gang"
	// fitsNoNodeLabel marks that member itself.
	fitsNoNodeLabel = "soak.berth.dev/fits-no-node"
	misfitCPU       = 10_000_000
	// nativeGangsGate turns Kubernetes' own gangs on (API server and
	// replicas).
	nativeGangsGate = "GenericWorkload=true"
	// nativeGangLabel names a native group's members (for their deletion).
	nativeGangLabel = "soak.berth.dev/native-gang"
	gpuLabel        = "nvidia.com/gpu.present"
	gpuResource     = v1.ResourceName("nvidia.com/gpu")
	// tierLabel=batch matches all-plugins.yaml's batch-prefers-spot rule.
	tierLabel = "tier"
	lowPrio   = "soak-low"
	highPrio  = "soak-high"
)

// The reserve and the claim: a tenant within its share, and a demand that
// may only be met by taking from it, which reclaim must refuse. Apart from
// the random workload, so that what they test happens in every run, not
// only when the workload happens to fill the cluster with borrowers.
const (
	// reserveNamespace's quota has min = max = reservePodCPU*reservePods,
	// never edited; that many bare pods, at a priority below the
	// workload's classes, fill the reserve nodes (tainted, labelled, left alone by the
	// faults) from the start. It never borrows: reclaim may never take its
	// pods.
	reserveNamespace = "soak-reserve"
	// claimNamespace's quota (min = max = claimPods*claimPodCPU, never
	// edited) is used only by the claim: claimPods high-priority pods that
	// fit only the reserve nodes. Within its min, the claim may reclaim
	// from borrowers; the only pods where it fits are soak-reserve's, so
	// it must stay pending. ElasticQuota taking a reserve pod for it (the
	// reclaim-ignores-min mutant) is an 8-eviction violation.
	claimNamespace = "soak-claim"
	// reservePool labels (and taints, NoSchedule) the reserve nodes.
	reservePool   = "soak.berth.dev/reserve"
	reserveNodes  = 2
	probeNodeCPU  = "4" // each probe node's CPU: the reserve pods fill the reserve's
	reservePodCPU = 1000
	reservePods   = 8
	claimPodCPU   = 500
	claimPods     = 4
	lowestPrio    = "soak-lowest"
	// The claim is made at claimEvery/2 operations (30 s at 2 a second)
	// and every claimEvery after, and deleted claimEvery/2 operations
	// after it is made.
	claimEvery = 120
)

// probeNode is a node of the reserve or the refuser: labelled key=value and
// tainted (key, NoSchedule) so that only the pods that tolerate key
// (probeToleration) go there.
func probeNode(name, key, value string) sandbox.NodeSpec {
	return sandbox.NodeSpec{
		Name: name, CPU: probeNodeCPU, Memory: "16Gi",
		Labels: map[string]string{key: value},
		Taints: []v1.Taint{{Key: key, Effect: v1.TaintEffectNoSchedule}},
	}
}

// probeToleration tolerates probeNode's taint of key.
func probeToleration(key string) []v1.Toleration {
	return []v1.Toleration{{Key: key, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
}

// The refuser: a node whose kubelet refuses every pod, for the whole run,
// beside one that admits them, and a Deployment of one pod that prefers the
// refusing node. AdmissionFeedback must turn the Deployment's next pod away
// from the node that refused it (to the other); forgetting the refusal (the
// admissionfeedback-forgets mutant), the scheduler sends every replacement
// back to be refused, and the second refusal decided after the first was
// seen is a 5-admission-feedback violation. Apart from the random workload
// and the faults' node-refuse, so that it happens in every run.
const (
	// refuserLabel labels (and taints, NoSchedule) the two nodes: "refuses"
	// on refuserNode, "admits" on the other.
	refuserLabel = "soak.berth.dev/refuser"
	refuserNode  = "soak-refuser-0"
)

// probeNodeSpecs are the nodes of the reserve and the refuser.
func probeNodeSpecs() []sandbox.NodeSpec {
	var out []sandbox.NodeSpec
	for i := range reserveNodes {
		out = append(out, probeNode(fmt.Sprintf("soak-reserve-%d", i), reservePool, "true"))
	}
	for i, role := range []string{"refuses", "admits"} {
		out = append(out, probeNode(fmt.Sprintf("soak-refuser-%d", i), refuserLabel, role))
	}
	return out
}

// refusalProbe is the refuser's Deployment (in freeNamespace): one pod of
// 100 m on either refuser node, preferring the refusing one.
func refusalProbe() *appsv1.Deployment {
	labels := map[string]string{"app": "refusal-probe"}
	req := requests(100)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "refusal-probe", Namespace: freeNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					SchedulerName:                 schedulerName,
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Tolerations:                   probeToleration(refuserLabel),
					Affinity: &v1.Affinity{NodeAffinity: &v1.NodeAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
							MatchExpressions: []v1.NodeSelectorRequirement{{Key: refuserLabel, Operator: v1.NodeSelectorOpExists}},
						}}},
						PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
							Weight:     100,
							Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: refuserLabel, Operator: v1.NodeSelectorOpIn, Values: []string{"refuses"}}}},
						}},
					}},
					Containers: []v1.Container{{
						Name: "app", Image: "registry.example/soak:1",
						Resources: v1.ResourceRequirements{Requests: req, Limits: req},
					}},
				},
			},
		},
	}
}

// teams are the namespaces with ElasticQuotas: min as a share of the
// cluster's CPU (memory in proportion), max as a multiple of min (0: no
// max beyond the cluster).
var teams = []struct {
	name     string
	minShare float64
	maxTimes float64
}{
	{"soak-team-a", 0.15, 2},   // borrows up to twice its min
	{"soak-team-b", 0.15, 1.5}, //
	{"soak-team-c", 0, 0},      // min 0: only borrows, the first reclaimed
	{"soak-team-d", 0.10, 1},   // max = min: never borrows
}

// generator is the seeded workload: every choice comes from rng, in the
// order of operations, so a seed replays the same sequence.
type generator struct {
	rng *rand.Rand
	c   kubernetes.Interface
	sp  versioned.Interface
	// clusterCPU is the initial allocatable CPU in millicores.
	clusterCPU int64
	seq        int
	// what exists, by kind (namespace/name), in creation order.
	deployments []string
	jobs        []string
	groups      []string
	// statefulSets; gated pods waiting for ungate; bare pods ungated.
	statefulSets []string
	gated, bare  []string
	// nativeGangs: Kubernetes' own PodGroups (their pods go with them).
	nativeGangs []string
	// gangsMade: scheduler-plugins gangs created; misfits: the
	// never-starting ones (namespace/name), whose spec is never edited.
	gangsMade   int
	misfits     map[string]bool
	ops         map[string]int
	explainAsks int
	// steps: operations so far; claimName: the claim's Deployment while
	// it is made.
	steps     int
	claimName string
}

func newGenerator(seed int64, c kubernetes.Interface, sp versioned.Interface, clusterCPU int64) *generator {
	return &generator{rng: rand.New(rand.NewPCG(uint64(seed), 0x5eed)), c: c, sp: sp, clusterCPU: clusterCPU, ops: map[string]int{}}
}

// setup creates the priority classes, namespaces and quotas.
func (g *generator) setup(ctx context.Context) error {
	for name, value := range map[string]int32{lowestPrio: 10, lowPrio: 100, highPrio: 1000} {
		_, err := g.c.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, ns := range append([]string{freeNamespace, reserveNamespace, claimNamespace}, teamNames()...) {
		if _, err := g.c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	for _, t := range teams {
		if err := g.createQuota(ctx, t.name, g.quotaSpec(t.minShare, t.maxTimes)); err != nil {
			return err
		}
	}
	for ns, cpu := range map[string]int64{reserveNamespace: reservePods * reservePodCPU, claimNamespace: claimPods * claimPodCPU} {
		if err := g.createQuota(ctx, ns, fixedQuotaSpec(cpu)); err != nil {
			return err
		}
	}
	if err := g.createReserve(ctx); err != nil {
		return err
	}
	if _, err := g.c.AppsV1().Deployments(freeNamespace).Create(ctx, refusalProbe(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// A DaemonSet on the spot nodes (a node agent): its pods name their
	// node by affinity, and follow nodes added, relabelled and deleted.
	small := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "soak-agent", Namespace: freeNamespace},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "soak-agent"}},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "soak-agent"}},
				Spec: v1.PodSpec{
					SchedulerName: schedulerName, NodeSelector: map[string]string{"lifecycle": "spot"},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers:                    []v1.Container{{Name: "agent", Image: "registry.example/soak:1", Resources: v1.ResourceRequirements{Requests: small, Limits: small}}},
				},
			},
		},
	}
	if _, err := g.c.AppsV1().DaemonSets(freeNamespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func teamNames() []string {
	var out []string
	for _, t := range teams {
		out = append(out, t.name)
	}
	return out
}

// quotaResources is a quota's CPU (millicores) and memory (4 Mi a
// millicore).
func quotaResources(cpu int64) v1.ResourceList {
	return v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), v1.ResourceMemory: *resource.NewQuantity(cpu*4<<20, resource.BinarySI)}
}

// requests is a pod's requests of cpu millicores and 2 Mi of memory a
// millicore.
func requests(cpu int64) v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(cpu, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(cpu*2<<20, resource.BinarySI),
	}
}

func (g *generator) quotaSpec(minShare, maxTimes float64) schedv1alpha1.ElasticQuotaSpec {
	minCPU := int64(float64(g.clusterCPU) * minShare)
	maxCPU := g.clusterCPU
	if maxTimes > 0 {
		maxCPU = int64(float64(minCPU) * maxTimes)
	}
	return schedv1alpha1.ElasticQuotaSpec{Min: quotaResources(minCPU), Max: quotaResources(maxCPU)}
}

// fixedQuotaSpec is a quota of min = max = cpu millicores, which the
// generator never edits.
func fixedQuotaSpec(cpu int64) schedv1alpha1.ElasticQuotaSpec {
	return schedv1alpha1.ElasticQuotaSpec{Min: quotaResources(cpu), Max: quotaResources(cpu)}
}

func (g *generator) createQuota(ctx context.Context, ns string, spec schedv1alpha1.ElasticQuotaSpec) error {
	_, err := g.sp.SchedulingV1alpha1().ElasticQuotas(ns).Create(ctx, &schedv1alpha1.ElasticQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: ns},
		Spec:       spec,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// pinnedTemplate is the reserve's and the claim's pod: cpu millicores (2 Mi
// of memory a millicore) at priority class prio, tolerating the reserve
// nodes' taint and requiring their label.
func pinnedTemplate(labels map[string]string, cpu int64, prio string) v1.PodTemplateSpec {
	req := requests(cpu)
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: v1.PodSpec{
			SchedulerName:                 schedulerName,
			PriorityClassName:             prio,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			NodeSelector:                  map[string]string{reservePool: "true"},
			Tolerations:                   probeToleration(reservePool),
			Containers: []v1.Container{{
				Name: "app", Image: "registry.example/soak:1",
				Resources: v1.ResourceRequirements{Requests: req, Limits: req},
			}},
		},
	}
}

// createReserve creates the reserve's pods: bare pods, not replaced if
// taken (a replacement, within its namespace's min, would reclaim in turn,
// and the judge, which counts every pod that may have been there when a
// preemption decided, could then find the reserve above its min).
func (g *generator) createReserve(ctx context.Context) error {
	for i := range reservePods {
		t := pinnedTemplate(map[string]string{"app": "reserve"}, reservePodCPU, lowestPrio)
		pod := &v1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
		pod.Name, pod.Namespace = fmt.Sprintf("reserve-%d", i), reserveNamespace
		if _, err := g.c.CoreV1().Pods(reserveNamespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// claim makes the claim (a Deployment in claimNamespace) or, if it is
// made, deletes it.
func (g *generator) claim(ctx context.Context) (string, error) {
	d := g.c.AppsV1().Deployments(claimNamespace)
	if g.claimName != "" {
		// Kept until deleted: a failed delete (an API server restart) is
		// retried at the next claim step instead of a new claim.
		g.ops["release-claim"]++
		if err := ignoreNotFound(d.Delete(ctx, g.claimName, metav1.DeleteOptions{})); err != nil {
			return "release-claim", err
		}
		g.claimName = ""
		return "release-claim", nil
	}
	g.claimName = g.name("claim")
	g.ops["claim"]++
	labels := map[string]string{"app": g.claimName}
	_, err := d.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: g.claimName, Namespace: claimNamespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](claimPods),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: pinnedTemplate(labels, claimPodCPU, highPrio),
		},
	}, metav1.CreateOptions{})
	return "claim", err
}

func (g *generator) pick(n int) int { return g.rng.IntN(n) }

func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

func (g *generator) name(prefix string) string {
	g.seq++
	return fmt.Sprintf("%s-%d", prefix, g.seq)
}

func (g *generator) namespace() string {
	all := append([]string{freeNamespace, freeNamespace}, teamNames()...)
	return all[g.pick(len(all))]
}

// podTemplate is one container with requests (= limits) of a random size,
// a priority, a grace period, and sometimes a rule label, a GPU, an
// explanation request.
func (g *generator) podTemplate(labels map[string]string, restart v1.RestartPolicy) v1.PodTemplateSpec {
	cpus := []int64{100, 250, 500, 1000, 2000}
	cpu := cpus[g.pick(len(cpus))]
	req := requests(cpu)
	if g.chance(0.05) {
		req[gpuResource] = resource.MustParse("1")
	}
	annotations := map[string]string{}
	if g.chance(0.05) {
		// It burns twice what it requests (KWOK's kubelet reports the
		// annotation as its usage): LoadAware's filter turns nodes it
		// heats away.
		annotations[sandbox.UsageCPUAnnotation] = resource.NewMilliQuantity(2*cpu, resource.DecimalSI).String()
	}
	if g.chance(0.05) && g.explainAsks < 1<<30 {
		annotations[explain.AnnotationRequest] = "true"
		g.explainAsks++
	}
	if g.chance(0.3) {
		labels[tierLabel] = "batch"
	}
	prio := lowPrio
	if g.chance(0.3) {
		prio = highPrio
	}
	grace := []int64{0, 1, 5, 30}[g.pick(4)]
	var inits []v1.Container
	if g.chance(0.1) {
		// An init container and a sidecar (a restartable init container):
		// the pod's requests are upstream's rule over both.
		small := v1.ResourceList{v1.ResourceCPU: resource.MustParse("50m"), v1.ResourceMemory: resource.MustParse("32Mi")}
		inits = []v1.Container{
			{Name: "init", Image: "registry.example/soak:1", Resources: v1.ResourceRequirements{Requests: small, Limits: small}},
			{Name: "sidecar", Image: "registry.example/soak:1", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways), Resources: v1.ResourceRequirements{Requests: small, Limits: small}},
		}
	}
	var spread []v1.TopologySpreadConstraint
	if app := labels["app"]; app != "" && g.chance(0.2) {
		spread = []v1.TopologySpreadConstraint{{
			MaxSkew: 1, TopologyKey: v1.LabelHostname, WhenUnsatisfiable: v1.ScheduleAnyway,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		}}
	}
	return v1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: v1.PodSpec{
			SchedulerName:                 schedulerName,
			PriorityClassName:             prio,
			RestartPolicy:                 restart,
			TerminationGracePeriodSeconds: ptr.To(grace),
			InitContainers:                inits,
			TopologySpreadConstraints:     spread,
			Containers: []v1.Container{{
				Name: "app", Image: "registry.example/soak:1",
				Resources: v1.ResourceRequirements{Requests: req, Limits: req},
			}},
		},
	}
}

// step performs one random operation. What it chooses depends only on the
// seed and its own record of what it created (never on the cluster's
// state), so a seed replays the same operations: the record's size keeps
// the workload near a target (about 80 % of the cluster's CPU requested).
func (g *generator) step(ctx context.Context) (string, error) {
	// The claim, at set operations: it draws nothing from rng, so the
	// random operations are the same with or without it.
	g.steps++
	if g.steps%(claimEvery/2) == 0 {
		return g.claim(ctx)
	}
	type op struct {
		name   string
		weight int
		do     func(context.Context) error
	}
	// A Deployment requests about 5 CPUs on average (6.8 replicas of
	// 0.77 CPU), a Job or gang about 3.
	target := int(g.clusterCPU / 1000 * 8 / 10 / 5)
	grow, shrink := 1, 1
	switch n := len(g.deployments) + (len(g.jobs)+len(g.nativeGangs))/2; {
	case n < target*3/4:
		grow = 6
	case n > target:
		grow, shrink = 0, 4
	}
	ops := []op{
		{"create-deployment", 3 * grow, g.createDeployment},
		{"create-job", 2 * grow, g.createJob},
		{"create-gang", 1 * grow, g.createGang},
		{"scale-deployment", 3, g.scaleDeployment},
		{"restart-deployment", 1, g.restartDeployment},
		{"delete-deployment", 2 * shrink, g.deleteDeployment},
		{"delete-job", 1 * shrink, g.deleteJob},
		{"edit-quota", 1, g.editQuota},
		{"edit-podgroup", 1, g.editPodGroup},
		{"create-statefulset", 1 * grow, g.createStatefulSet},
		{"delete-statefulset", 1 * shrink, g.deleteStatefulSet},
		{"create-gated", 1 * grow, g.createGated},
		{"ungate", 1, g.ungate},
		{"delete-bare", 1 * shrink, g.deleteBare},
		{"delete-podgroup", 1, g.deletePodGroup},
		{"create-native-gang", 1 * grow, g.createNativeGang},
		{"delete-native-gang", 1 * shrink, g.deleteNativeGang},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	r := g.pick(total)
	for _, o := range ops {
		if r < o.weight {
			g.ops[o.name]++
			return o.name, o.do(ctx)
		}
		r -= o.weight
	}
	return "", nil
}

func (g *generator) createDeployment(ctx context.Context) error {
	ns, name := g.namespace(), g.name("deploy")
	replicas := int32([]int{1, 2, 3, 5, 10, 20}[g.pick(6)])
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: g.podTemplate(labels, v1.RestartPolicyAlways),
		},
	}
	spec := &d.Spec.Template.Spec
	switch r := g.rng.Float64(); {
	case r < 0.05:
		// A host port: one replica per node at most.
		spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 8080, HostPort: int32(8000 + g.pick(4)), Protocol: v1.ProtocolTCP}}
	case r < 0.10:
		// Required anti-affinity with its own replicas.
		spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}, TopologyKey: v1.LabelHostname,
		}}}}
	case r < 0.20:
		// Preferred affinity to spot nodes.
		spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.PreferredSchedulingTerm{{
			Weight: 50, Preference: v1.NodeSelectorTerm{MatchExpressions: []v1.NodeSelectorRequirement{{Key: "lifecycle", Operator: v1.NodeSelectorOpIn, Values: []string{"spot"}}}},
		}}}}
	}
	pdb := g.chance(0.15)
	if _, err := g.c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	g.deployments = append(g.deployments, ns+"/"+name)
	if pdb {
		_, err := g.c.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromString("80%")),
				Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			},
		}, metav1.CreateOptions{})
		return err
	}
	return nil
}

// createStatefulSet is a StatefulSet of 1-5 replicas, pods created in
// parallel (no volumes: the soak's KWOK nodes have no storage).
func (g *generator) createStatefulSet(ctx context.Context) error {
	ns, name := g.namespace(), g.name("sts")
	replicas := int32(1 + g.pick(5))
	st := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			ServiceName:         name,
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template:            g.podTemplate(map[string]string{"app": name}, v1.RestartPolicyAlways),
		},
	}
	if _, err := g.c.AppsV1().StatefulSets(ns).Create(ctx, st, metav1.CreateOptions{}); err != nil {
		return err
	}
	g.statefulSets = append(g.statefulSets, ns+"/"+name)
	return nil
}

func (g *generator) deleteStatefulSet(ctx context.Context) error {
	return g.deleteOne(ctx, &g.statefulSets, func(ns string) deleter { return g.c.AppsV1().StatefulSets(ns) })
}

// deleter is a typed client's Delete.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// deleteOne deletes a random object of list (its owned pods in the
// background) and forgets it.
func (g *generator) deleteOne(ctx context.Context, list *[]string, client func(ns string) deleter) error {
	ns, name, i := g.choose(*list)
	if name == "" {
		return nil
	}
	*list = remove(*list, i)
	return ignoreNotFound(client(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}))
}

// createGated is a bare pod with a scheduling gate, which ungate lifts a
// while later (as a queueing controller would).
func (g *generator) createGated(ctx context.Context) error {
	ns, name := g.namespace(), g.name("gated")
	t := g.podTemplate(map[string]string{"soak.berth.dev/gated": "true"}, v1.RestartPolicyAlways)
	t.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "soak.berth.dev/hold"}}
	if _, err := g.c.CoreV1().Pods(ns).Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: t.Labels, Annotations: t.Annotations}, Spec: t.Spec}, metav1.CreateOptions{}); err != nil {
		return err
	}
	g.gated = append(g.gated, ns+"/"+name)
	return nil
}

// ungate lifts the gate of the oldest gated pod.
func (g *generator) ungate(ctx context.Context) error {
	if len(g.gated) == 0 {
		return nil
	}
	ns, name := splitKey(g.gated[0])
	g.gated = g.gated[1:]
	g.bare = append(g.bare, ns+"/"+name)
	_, err := g.c.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	return ignoreNotFound(err)
}

// deleteBare deletes an ungated pod.
func (g *generator) deleteBare(ctx context.Context) error {
	return g.deleteOne(ctx, &g.bare, func(ns string) deleter { return g.c.CoreV1().Pods(ns) })
}

func (g *generator) jobFor(ns, name string, parallelism int32, labels map[string]string) *batchv1.Job {
	t := g.podTemplate(labels, v1.RestartPolicyNever)
	t.Annotations[sandbox.RunForAnnotation] = strconv.Itoa(10+g.pick(50)) + "s"
	if g.chance(0.1) {
		t.Labels[sandbox.CrashLabel] = "true"
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{
			Parallelism:  ptr.To(parallelism),
			Completions:  ptr.To(parallelism),
			BackoffLimit: ptr.To[int32](2),
			Template:     t,
		},
	}
}

func (g *generator) createJob(ctx context.Context) error {
	ns, name := g.namespace(), g.name("job")
	j := g.jobFor(ns, name, int32([]int{1, 2, 4, 8}[g.pick(4)]), map[string]string{})
	if _, err := g.c.BatchV1().Jobs(ns).Create(ctx, j, metav1.CreateOptions{}); err != nil {
		return err
	}
	g.jobs = append(g.jobs, ns+"/"+name)
	return nil
}

// createGang is a PodGroup and a Job whose pods are its members: random
// minMember and timeout, sometimes minResources, sometimes a gang bigger
// than the cluster (minResources twice its CPU), and every fourth a gang one
// of whose members fits no node (a second Job of one pod asking for more
// CPU than any node has): it must never start, so none of its members may
// be bound (a gang released one short binds all but that one).
func (g *generator) createGang(ctx context.Context) error {
	ns, name := g.namespace(), g.name("gang")
	members := int32([]int{2, 3, 4, 8, 16}[g.pick(5)])
	labels := map[string]string{schedv1alpha1.PodGroupLabel: name}
	// Every fourth gang (the second, the sixth, ...): a short soak has some.
	g.gangsMade++
	misfit := g.gangsMade%4 == 2
	if misfit {
		labels[misfitLabel] = "true"
	}
	j := g.jobFor(ns, name, members, labels)
	if misfit {
		// Its members do not crash: a gang with fewer live members than
		// its min is not judged, and this one must be, all along. They
		// are small, so that they fit even a full cluster: only the gang
		// rule keeps them unbound (a gang released one short binds them).
		delete(j.Spec.Template.Labels, sandbox.CrashLabel)
		small := v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("200Mi")}
		j.Spec.Template.Spec.Containers[0].Resources = v1.ResourceRequirements{Requests: small, Limits: small}
	}
	pg := &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: members, ScheduleTimeoutSeconds: ptr.To(int32(30 + g.pick(90)))},
	}
	var misfitJob *batchv1.Job
	switch {
	case misfit:
		pg.Spec.MinMember++
		misfitJob = g.jobFor(ns, name+"-misfit", 1, map[string]string{schedv1alpha1.PodGroupLabel: name, misfitLabel: "true", fitsNoNodeLabel: "true"})
		misfitJob.Spec.Template.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(misfitCPU, resource.DecimalSI)
		// The gang's priority: it leaves the queue with the others.
		misfitJob.Spec.Template.Spec.PriorityClassName = j.Spec.Template.Spec.PriorityClassName
	case g.chance(0.05):
		pg.Spec.MinResources = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(2*g.clusterCPU, resource.DecimalSI)}
	case g.chance(0.3):
		req := j.Spec.Template.Spec.Containers[0].Resources.Requests
		minRes := v1.ResourceList{}
		for r, q := range req {
			q.Mul(int64(members))
			minRes[r] = q
		}
		pg.Spec.MinResources = minRes
	}
	if _, err := g.sp.SchedulingV1alpha1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{}); err != nil {
		return err
	}
	g.groups = append(g.groups, ns+"/"+name)
	if misfit {
		if g.misfits == nil {
			g.misfits = map[string]bool{}
		}
		g.misfits[ns+"/"+name] = true
	}
	for _, job := range []*batchv1.Job{j, misfitJob} {
		if job == nil {
			continue
		}
		if _, err := g.c.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
			return err
		}
		g.jobs = append(g.jobs, ns+"/"+job.Name)
	}
	return nil
}

// createNativeGang is one of Kubernetes' own gangs (GangScheduling, the
// GenericWorkload gate): a scheduling.k8s.io/v1beta1 PodGroup with a gang
// policy, then its members naming it in spec.schedulingGroup and owned by
// it, as a workload controller creates them. They run a while and succeed.
func (g *generator) createNativeGang(ctx context.Context) error {
	ns, name := g.namespace(), g.name("native")
	members := []int{2, 3, 4, 8}[g.pick(4)]
	t := g.podTemplate(map[string]string{nativeGangLabel: name}, v1.RestartPolicyNever)
	t.Annotations[sandbox.RunForAnnotation] = strconv.Itoa(10+g.pick(50)) + "s"
	t.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(name)}
	// The group's priority is its members' (upstream's PodGroup cycle
	// refuses a group whose pods' priority differs from its own).
	pg, err := g.c.SchedulingV1beta1().PodGroups(ns).Create(ctx, &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: schedulingv1beta1.PodGroupSpec{
			PriorityClassName: t.Spec.PriorityClassName,
			SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{
				Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: int32(members)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	g.nativeGangs = append(g.nativeGangs, ns+"/"+name)
	owner := metav1.OwnerReference{APIVersion: schedulingv1beta1.SchemeGroupVersion.String(), Kind: "PodGroup", Name: name, UID: pg.UID}
	for i := range members {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + strconv.Itoa(i), Namespace: ns, Labels: t.Labels, Annotations: t.Annotations,
				OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: t.Spec,
		}
		if _, err := g.c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func (g *generator) deleteNativeGang(ctx context.Context) error {
	ns, name, i := g.choose(g.nativeGangs)
	if name == "" {
		return nil
	}
	g.nativeGangs = remove(g.nativeGangs, i)
	if err := g.c.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: nativeGangLabel + "=" + name}); err != nil {
		return err
	}
	return ignoreNotFound(g.c.SchedulingV1beta1().PodGroups(ns).Delete(ctx, name, metav1.DeleteOptions{}))
}

// choose picks an existing object of a kind (namespace, name), or "".
func (g *generator) choose(list []string) (string, string, int) {
	if len(list) == 0 {
		return "", "", -1
	}
	i := g.pick(len(list))
	ns, name := splitKey(list[i])
	return ns, name, i
}

func splitKey(k string) (string, string) {
	for i := range k {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}

func remove(list []string, i int) []string {
	return append(list[:i:i], list[i+1:]...)
}

func (g *generator) scaleDeployment(ctx context.Context) error {
	ns, name, _ := g.choose(g.deployments)
	if name == "" {
		return nil
	}
	replicas := []int{0, 1, 2, 5, 10, 20, 30}[g.pick(7)]
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	_, err := g.c.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return ignoreNotFound(err)
}

// restartDeployment is kubectl rollout restart: a new ReplicaSet, a new
// controller for AdmissionFeedback.
func (g *generator) restartDeployment(ctx context.Context) error {
	ns, name, _ := g.choose(g.deployments)
	if name == "" {
		return nil
	}
	g.seq++
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"soak.berth.dev/restart":"%d"}}}}}`, g.seq)
	_, err := g.c.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return ignoreNotFound(err)
}

func (g *generator) deleteDeployment(ctx context.Context) error {
	return g.deleteOne(ctx, &g.deployments, func(ns string) deleter { return g.c.AppsV1().Deployments(ns) })
}

func (g *generator) deleteJob(ctx context.Context) error {
	return g.deleteOne(ctx, &g.jobs, func(ns string) deleter { return g.c.BatchV1().Jobs(ns) })
}

// editQuota changes a team's min and max (or deletes its quota, which is
// recreated by a later edit).
func (g *generator) editQuota(ctx context.Context) error {
	t := teams[g.pick(len(teams))]
	q := g.sp.SchedulingV1alpha1().ElasticQuotas(t.name)
	if g.chance(0.2) {
		err := q.Delete(ctx, "quota", metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return g.createQuota(ctx, t.name, g.quotaSpec(t.minShare, t.maxTimes))
		}
		return err
	}
	factor := []float64{0.5, 1, 1.5}[g.pick(3)]
	spec := g.quotaSpec(t.minShare*factor, t.maxTimes)
	cur, err := q.Get(ctx, "quota", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return g.createQuota(ctx, t.name, spec)
	}
	if err != nil {
		return err
	}
	cur.Spec = spec
	_, err = q.Update(ctx, cur, metav1.UpdateOptions{})
	return ignoreConflict(err)
}

func (g *generator) editPodGroup(ctx context.Context) error {
	ns, name, _ := g.choose(g.groups)
	if name == "" || g.misfits[ns+"/"+name] {
		// A never-starting gang keeps its spec: only a spec change spares
		// it when partial (2-gang), so an edit would leave a gang released
		// one short unjudged for the bound after it.
		return nil
	}
	pg, err := g.sp.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ignoreNotFound(err)
	}
	pg.Spec.MinMember = max(1, pg.Spec.MinMember+int32(g.pick(3))-1)
	pg.Spec.ScheduleTimeoutSeconds = ptr.To(int32(30 + g.pick(90)))
	_, err = g.sp.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
	return ignoreConflict(err)
}

func (g *generator) deletePodGroup(ctx context.Context) error {
	ns, name, i := g.choose(g.groups)
	if name == "" {
		return nil
	}
	g.groups = remove(g.groups, i)
	delete(g.misfits, ns+"/"+name)
	return ignoreNotFound(g.sp.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, name, metav1.DeleteOptions{}))
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// opCounts lists the operations by kind, sorted.
func opCounts(m map[string]int) []kindCount {
	var out []kindCount
	for k, n := range m {
		out = append(out, kindCount{Kind: k, Count: n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind < out[j].Kind })
	return out
}

type kindCount struct {
	Kind  string `json:"kind"`
	Count int    `json:"count"`
}
