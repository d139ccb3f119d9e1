// Package registry lists Berth's plugins. The binary and the integration
// tests build the scheduler from the same list.
package registry

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
	"github.com/berth-scheduler/berth/pkg/plugins/admissionfeedback"
	"github.com/berth-scheduler/berth/pkg/plugins/celpolicy"
	"github.com/berth-scheduler/berth/pkg/plugins/confirmbinder"
	"github.com/berth-scheduler/berth/pkg/plugins/coscheduling"
	"github.com/berth-scheduler/berth/pkg/plugins/elasticquota"
	"github.com/berth-scheduler/berth/pkg/plugins/explain"
	"github.com/berth-scheduler/berth/pkg/plugins/loadaware"
)

// Plugins maps each Berth plugin's registry name to its factory.
func Plugins() runtime.Registry {
	return runtime.Registry{
		admissionfeedback.Name: admissionfeedback.New,
		celpolicy.Name:         celpolicy.New,
		confirmbinder.Name:     confirmbinder.New,
		coscheduling.Name:      coscheduling.New,
		elasticquota.Name:      elasticquota.New,
		explain.Name:           explain.New,
		loadaware.Name:         loadaware.New,
	}
}

// PluginsWithClients is Plugins with the clients the plugins would build
// from the scheduler's kubeconfig given instead: crd for PodGroups and
// ElasticQuotas, metrics for LoadAware's MetricsAPI source. kubectl berth's
// offline scheduler runs on in-memory clients this way.
func PluginsWithClients(crd versioned.Interface, metrics metricsclient.Interface) runtime.Registry {
	plugins := Plugins()
	plugins[coscheduling.Name] = coscheduling.NewWithClient(crd)
	plugins[elasticquota.Name] = elasticquota.NewWithClient(crd)
	plugins[loadaware.Name] = loadaware.NewWithMetricsClient(metrics)
	return plugins
}

// Options turns Plugins into app.WithPlugin options for app.NewSchedulerCommand and app.Setup.
func Options() []app.Option {
	return OptionsWith(nil)
}

// OptionsWith is Options with some factories replaced (tests give LoadAware
// a metrics client for a local server this way).
func OptionsWith(overrides runtime.Registry) []app.Option {
	plugins := Plugins()
	for name, factory := range overrides {
		plugins[name] = factory
	}
	opts := make([]app.Option, 0, len(plugins))
	for name, factory := range plugins {
		opts = append(opts, app.WithPlugin(name, factory))
	}
	return opts
}
