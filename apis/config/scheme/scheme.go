// Package scheme adds Berth's plugin args to kube-scheduler's config scheme, so
// that a KubeSchedulerConfiguration's pluginConfig[].args decode (strictly:
// an unknown field is an error) into Berth's typed args. Import it for its
// side effect wherever a scheduler with Berth's plugins is built.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kubeschedulerscheme "k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	kubeschedulerconfigv1 "k8s.io/kubernetes/pkg/scheduler/apis/config/v1"

	"github.com/berth-scheduler/berth/apis/config"
	configv1 "github.com/berth-scheduler/berth/apis/config/v1"
)

func init() {
	AddToScheme(kubeschedulerscheme.Scheme)
	// kube-scheduler converts pluginConfig[].args with a scheme of its own.
	AddToScheme(kubeschedulerconfigv1.GetPluginArgConversionScheme())
}

// AddToScheme registers Berth's internal and v1 plugin args in scheme.
func AddToScheme(scheme *runtime.Scheme) {
	utilruntime.Must(config.AddToScheme(scheme))
	utilruntime.Must(configv1.AddToScheme(scheme))
}
