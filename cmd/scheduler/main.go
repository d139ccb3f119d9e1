// Command scheduler is Berth: the upstream kube-scheduler with Berth's plugins
// in its registry. Flags, config loading, logging, leader election, /metrics
// and /healthz are upstream's.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register" // JSON log format, as in kube-scheduler
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	_ "github.com/berth-scheduler/berth/apis/config/scheme" // Berth's plugin args in the config scheme
	"github.com/berth-scheduler/berth/internal/buildinfo"
	"github.com/berth-scheduler/berth/internal/mutant"
	"github.com/berth-scheduler/berth/pkg/registry"
)

func main() {
	if mutant.On(mutant.SchedulesWithoutLease) {
		os.Args = append(os.Args, "--leader-elect=false")
	}
	buildinfo.Register() // berth_build_info on /metrics, whatever the profiles
	os.Exit(cli.Run(app.NewSchedulerCommand(registry.Options()...)))
}
