package buildinfo

import (
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/component-base/version"
)

func TestRegisterExportsOneSeries(t *testing.T) {
	Register()
	Register() // a second call is harmless
	want := `
# HELP berth_build_info [ALPHA] Always 1: the Berth version (version) and the Kubernetes release its scheduler is built from (kubernetes) of this process.
# TYPE berth_build_info gauge
berth_build_info{kubernetes="` + version.Get().GitVersion + `",version="` + Version() + `"} 1
`
	if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "berth_build_info"); err != nil {
		t.Fatal(err)
	}
}
