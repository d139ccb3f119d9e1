// Package crdcheck fails a plugin's start-up when the API server does not
// serve the custom resource the plugin reads: an informer for it would
// otherwise wait forever, and the scheduler would never say why.
package crdcheck

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// Resource names a custom resource a plugin needs.
type Resource struct {
	// Plugin prefixes every error ("ElasticQuota: ...").
	Plugin string
	// GroupVersion and Name are what discovery must list
	// ("scheduling.x-k8s.io/v1alpha1", "elasticquotas").
	GroupVersion, Name string
	// CRDFile is where the CRD ships in this repository, for the hint.
	CRDFile string
}

// Served checks by discovery that the API server serves r. An API server that
// does not answer yet (a control plane booting: the scheduler may start
// before the API server listens) is asked again with backoff until budget runs
// out; only an answer that the group or resource is absent is "install the CRD".
func Served(ctx context.Context, d discovery.DiscoveryInterface, r Resource, budget time.Duration) error {
	hint := "install the CRD from " + r.CRDFile
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	var lastErr error
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 10 * time.Second}
	var found bool
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(context.Context) (bool, error) {
		list, err := d.ServerResourcesForGroupVersion(r.GroupVersion)
		switch {
		case err == nil:
			for _, res := range list.APIResources {
				found = found || res.Name == r.Name
			}
			return true, nil
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("%s: the API server does not serve %s (%w); %s", r.Plugin, r.GroupVersion, err, hint)
		case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
			return false, fmt.Errorf("%s: the API server refused discovery of %s (%w); check the scheduler's credentials and RBAC", r.Plugin, r.GroupVersion, err)
		default:
			lastErr = err
			logger.Info(r.Plugin+": the API server is not reachable yet; retrying", "groupVersion", r.GroupVersion, "err", err)
			return false, nil
		}
	})
	switch {
	case err != nil && lastErr != nil && (errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err)):
		return fmt.Errorf("%s: the API server was not reachable within %s to check that it serves %s (last error: %w); the CRD may well be installed: check the API server and the scheduler's kubeconfig", r.Plugin, budget, r.GroupVersion, lastErr)
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%s: the API server does not serve %s.%s; %s", r.Plugin, r.Name, r.GroupVersion, hint)
	}
	return nil
}
