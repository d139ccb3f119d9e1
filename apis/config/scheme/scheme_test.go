package scheme

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeschedulerconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/berth-scheduler/berth/apis/config"
)

// berthProfile starts a config whose profile "berth" has the pluginConfig that follows.
const berthProfile = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: berth
  pluginConfig:
`

// decode runs a KubeSchedulerConfiguration through kube-scheduler's own
// (strict) decoder, as `--config` does.
func decode(t *testing.T, data string) (*kubeschedulerconfig.KubeSchedulerConfiguration, error) {
	t.Helper()
	obj, _, err := kubeschedulerscheme.Codecs.UniversalDecoder().Decode([]byte(data), nil, nil)
	if err != nil {
		return nil, err
	}
	cfg, ok := obj.(*kubeschedulerconfig.KubeSchedulerConfiguration)
	if !ok {
		t.Fatalf("decoded %T, want KubeSchedulerConfiguration", obj)
	}
	return cfg, nil
}

// pluginArgs returns the args of plugin in the test profile "berth".
func pluginArgs(t *testing.T, cfg *kubeschedulerconfig.KubeSchedulerConfiguration, plugin string) any {
	const profile = "berth"
	t.Helper()
	for _, p := range cfg.Profiles {
		if p.SchedulerName != profile {
			continue
		}
		for _, pc := range p.PluginConfig {
			if pc.Name == plugin {
				return pc.Args
			}
		}
	}
	t.Fatalf("no args for %s in profile %s", plugin, profile)
	return nil
}

func TestDecodeCELPolicyArgs(t *testing.T) {
	cfg, err := decode(t, berthProfile+`  - name: CELPolicy
    args:
      rules:
      - name: gpu-only
        filter: "'gpu' in node.metadata.labels"
        message: GPU nodes only
      - name: prefer-spot
        match: "pod.metadata.?labels.?tier.orValue('') == 'batch'"
        score: "100"
        failurePolicy: Ignore
      - name: weighted
        score: "50"
        weight: 7
`)
	if err != nil {
		t.Fatal(err)
	}
	want := &config.CELPolicyArgs{Rules: []config.CELPolicyRule{
		// No score: no default weight.
		{Name: "gpu-only", Filter: "'gpu' in node.metadata.labels", Message: "GPU nodes only", FailurePolicy: config.CELFailurePolicyFail},
		{Name: "prefer-spot", Match: "pod.metadata.?labels.?tier.orValue('') == 'batch'", Score: "100", Weight: 1, FailurePolicy: config.CELFailurePolicyIgnore},
		{Name: "weighted", Score: "50", Weight: 7, FailurePolicy: config.CELFailurePolicyFail},
	}}
	got := pluginArgs(t, cfg, "CELPolicy")
	if diff := cmp.Diff(want, got, cmpIgnoreTypeMeta); diff != "" {
		t.Errorf("decoded args (-want,+got):\n%s", diff)
	}
}

func TestDecodeRejectsUnknownFields(t *testing.T) {
	_, err := decode(t, berthProfile+`  - name: CELPolicy
    args:
      rules:
      - name: r
        filter: "true"
        wieght: 3
`)
	if err == nil || !strings.Contains(err.Error(), `unknown field "rules[0].wieght"`) {
		t.Fatalf("want an unknown field error naming wieght, got %v", err)
	}
}

func TestRoundTripDefaults(t *testing.T) {
	// Weight 0 must survive conversion as an explicit value, so that validation sees it.
	cfg, err := decode(t, berthProfile+`  - name: CELPolicy
    args:
      rules:
      - {name: r, score: "1", weight: 0}
`)
	if err != nil {
		t.Fatal(err)
	}
	got := pluginArgs(t, cfg, "CELPolicy").(*config.CELPolicyArgs)
	if got.Rules[0].Weight != 0 {
		t.Errorf("weight = %d, want the explicit 0", got.Rules[0].Weight)
	}
}

var cmpIgnoreTypeMeta = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".TypeMeta" }, cmp.Ignore())

func TestDecodeLoadAwareAndConfirmBinderDefaults(t *testing.T) {
	cfg, err := decode(t, berthProfile+`  - name: LoadAware
    args:
      usageThresholds:
        cpu: 90
  - name: ConfirmBinder
    args:
      confirm: Always
`)
	if err != nil {
		t.Fatal(err)
	}
	la := pluginArgs(t, cfg, "LoadAware").(*config.LoadAwareArgs)
	// An unlisted resource keeps its default; the listed one is the user's.
	if la.UsageThresholds["cpu"] != 90 || la.UsageThresholds["memory"] != 85 {
		t.Errorf("thresholds = %v, want cpu 90 (set) and memory 85 (default)", la.UsageThresholds)
	}
	if la.Source != config.LoadAwareSourceMetricsAPI || la.MetricsRefreshInterval.Duration.String() != "30s" ||
		la.MetricsExpiration.Duration.String() != "3m0s" || la.OnMissingMetrics != config.LoadAwareMissingMetricsAllow ||
		la.AnnotationKey != "berth.io/node-usage" || la.DefaultPodEstimate.Cpu().String() != "250m" {
		t.Errorf("LoadAware defaults not applied: %+v", la)
	}
	cb := pluginArgs(t, cfg, "ConfirmBinder").(*config.ConfirmBinderArgs)
	want := &config.ConfirmBinderArgs{Confirm: config.ConfirmAlways, TightHeadroomPercent: 10, ConfirmTimeout: cb.ConfirmTimeout, OnConfirmError: config.ConfirmErrorRequeue}
	if diff := cmp.Diff(want, cb, cmpIgnoreTypeMeta); diff != "" || cb.ConfirmTimeout.Duration.String() != "5s" {
		t.Errorf("ConfirmBinder args (-want,+got):\n%s (timeout %s)", diff, cb.ConfirmTimeout.Duration)
	}
}

func TestDecodeCoschedulingArgs(t *testing.T) {
	cfg, err := decode(t, berthProfile+`  - name: Coscheduling
    args:
      writeStatus: false
`)
	if err != nil {
		t.Fatal(err)
	}
	got := pluginArgs(t, cfg, "Coscheduling").(*config.CoschedulingArgs)
	want := &config.CoschedulingArgs{
		ScheduleTimeout:      metav1.Duration{Duration: time.Minute},
		WriteStatus:          false, // the user's
		StatusUpdateInterval: metav1.Duration{Duration: time.Second},
	}
	if diff := cmp.Diff(want, got, cmpIgnoreTypeMeta); diff != "" {
		t.Errorf("Coscheduling args (-want,+got):\n%s", diff)
	}
	if _, err := decode(t, berthProfile+`  - name: Coscheduling
    args:
      scheduleTimeoutSeconds: 10
`); err == nil || !strings.Contains(err.Error(), `unknown field "scheduleTimeoutSeconds"`) {
		t.Errorf("want an unknown field error for scheduleTimeoutSeconds, got %v", err)
	}
}

func TestDecodeAdmissionFeedbackArgs(t *testing.T) {
	cfg, err := decode(t, berthProfile+`  - name: AdmissionFeedback
    args:
      refusalTTL: 2m
`)
	if err != nil {
		t.Fatal(err)
	}
	got := pluginArgs(t, cfg, "AdmissionFeedback").(*config.AdmissionFeedbackArgs)
	want := &config.AdmissionFeedbackArgs{
		Reasons:            []string{"OutOf*", "UnexpectedAdmissionError", "TopologyAffinityError", "SMTAlignmentError", "NodeAffinity", "NodePorts"},
		RefusalTTL:         metav1.Duration{Duration: 2 * time.Minute}, // the user's
		MaxRefusalTTL:      metav1.Duration{Duration: time.Hour},
		BlackHoleThreshold: 3,
		BlackHoleWindow:    metav1.Duration{Duration: 10 * time.Minute},
	}
	if diff := cmp.Diff(want, got, cmpIgnoreTypeMeta); diff != "" {
		t.Errorf("AdmissionFeedback args (-want,+got):\n%s", diff)
	}
	if _, err := decode(t, berthProfile+`  - name: AdmissionFeedback
    args:
      ttl: 2m
`); err == nil || !strings.Contains(err.Error(), `unknown field "ttl"`) {
		t.Errorf("want an unknown field error for ttl, got %v", err)
	}
}

func TestDecodeExplainArgs(t *testing.T) {
	cfg, err := decode(t, berthProfile+`  - name: Explain
    args:
      namespaces: [team-a]
`)
	if err != nil {
		t.Fatal(err)
	}
	got := pluginArgs(t, cfg, "Explain").(*config.ExplainArgs)
	want := &config.ExplainArgs{SampleOneIn: 0, Namespaces: []string{"team-a"}, TopNodes: 5, RedactNodes: false, MaxPerMinute: 60}
	if diff := cmp.Diff(want, got, cmpIgnoreTypeMeta); diff != "" {
		t.Errorf("Explain args (-want,+got):\n%s", diff)
	}
	if _, err := decode(t, berthProfile+`  - name: Explain
    args:
      sampleRate: 0.1
`); err == nil || !strings.Contains(err.Error(), `unknown field "sampleRate"`) {
		t.Errorf("want an unknown field error for sampleRate, got %v", err)
	}
}
