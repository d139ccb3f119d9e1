// Package crd holds what plugins that read scheduler-plugins' custom
// resources (ElasticQuota, PodGroup) share: the start-up check that the API
// server serves them (an informer would otherwise wait forever, and the
// scheduler would never say why), a client for them, and their objects as
// the scheduler's dynamic informer hands them to queueing hints.
package crd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/berth-scheduler/berth/internal/spclient/clientset/versioned"
)

// Client builds a scheduler-plugins client from the scheduler's kubeconfig.
// kube-scheduler's client speaks protobuf; custom resources are JSON only.
func Client(kubeconfig *rest.Config) (versioned.Interface, error) {
	cfg := rest.CopyConfig(kubeconfig)
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	return versioned.NewForConfig(cfg)
}

// As reads obj as a *T: typed (from a plugin's own informer) or
// unstructured (the scheduler's dynamic informer hands hints those).
func As[T any](obj any) (*T, error) {
	if t, ok := obj.(*T); ok {
		return t, nil
	}
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return nil, fmt.Errorf("want a %T, got %T", new(T), obj)
	}
	t := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), t); err != nil {
		return nil, fmt.Errorf("converting to %T: %w", t, err)
	}
	return t, nil
}

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
// before the API server listens), or answers while its /readyz says it is not
// ready (just restarted: it refuses before its authorizer has loaded RBAC and
// lists no custom resource before it has loaded the CRDs), is asked again with
// backoff until budget runs out; only a ready API server's answer that the
// group or resource is absent is "install the CRD", and its refusal is
// "check the RBAC".
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
		case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) && !ready(ctx, d):
			// Just (re)started: its authorizer or its CRDs are not loaded
			// yet, and it says so (a scheduler restarted with it must not
			// exit for that).
			lastErr = err
			logger.Info(r.Plugin+": the API server is starting (not ready); retrying", "groupVersion", r.GroupVersion, "err", err)
			return false, nil
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
	timedOut := err != nil && lastErr != nil && (errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err))
	switch {
	case timedOut && (apierrors.IsForbidden(lastErr) || apierrors.IsUnauthorized(lastErr)):
		return fmt.Errorf("%s: the API server refused discovery of %s for %s (%w) and its /readyz never said it was ready; check the scheduler's credentials and RBAC", r.Plugin, r.GroupVersion, budget, lastErr)
	case timedOut && apierrors.IsNotFound(lastErr):
		return fmt.Errorf("%s: the API server did not serve %s for %s (%w) and its /readyz never said it was ready; %s", r.Plugin, r.GroupVersion, budget, lastErr, hint)
	case timedOut:
		return fmt.Errorf("%s: the API server was not reachable within %s to check that it serves %s (last error: %w); the CRD may well be installed: check the API server and the scheduler's kubeconfig", r.Plugin, budget, r.GroupVersion, lastErr)
	case err != nil:
		return err
	case !found:
		return fmt.Errorf("%s: the API server does not serve %s.%s; %s", r.Plugin, r.Name, r.GroupVersion, hint)
	}
	return nil
}

// ready reports whether the API server says it is ready (/readyz, which
// every client may read; a booting one may refuse even that: 403, until its
// authorizer has loaded RBAC). A server without /readyz, one that does not
// accept the credentials, or a discovery client without a REST client (a
// fake), counts as ready.
func ready(ctx context.Context, d discovery.DiscoveryInterface) bool {
	rc := d.RESTClient()
	if v := reflect.ValueOf(rc); rc == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return true
	}
	err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
	// No /readyz at all (not a kube-apiserver): nothing says it is
	// starting. Credentials it does not accept (401: authentication comes
	// before any path) are the operator's to fix, starting or not.
	return err == nil || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err)
}
