package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// ReadObjects reads every YAML document of a file as unstructured objects.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := DecodeObjects(raw)
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", path, err)
	}
	return objs, nil
}

// DecodeObjects decodes every YAML document of raw as unstructured objects.
func DecodeObjects(raw []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// Apply creates (or, with dryRun, validates server-side without storing)
// objects on the API server, strictly: an unknown field is an error.
// Existing objects are updated (dryRun: left alone).
func (e *ControlPlane) Apply(ctx context.Context, objs []*unstructured.Unstructured, dryRun bool) error {
	resourceOf, err := e.resources()
	if err != nil {
		return err
	}
	create := metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict}
	update := metav1.UpdateOptions{FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		create.DryRun, update.DryRun = []string{metav1.DryRunAll}, []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		ri, err := resourceOf(o)
		if err != nil {
			return err
		}
		gvk := o.GroupVersionKind()
		_, err = ri.Create(ctx, o, create)
		if apierrors.IsAlreadyExists(err) && dryRun {
			// The API server decodes, defaults, validates and admits an
			// object before storage finds that it exists: it passed.
			continue
		}
		if apierrors.IsAlreadyExists(err) {
			var cur *unstructured.Unstructured
			if cur, err = ri.Get(ctx, o.GetName(), metav1.GetOptions{}); err == nil {
				o.SetResourceVersion(cur.GetResourceVersion())
				_, err = ri.Update(ctx, o, update)
			}
		}
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// Delete deletes an object (found by its kind, namespace and name).
func (e *ControlPlane) Delete(ctx context.Context, o *unstructured.Unstructured) error {
	resourceOf, err := e.resources()
	if err != nil {
		return err
	}
	ri, err := resourceOf(o)
	if err != nil {
		return err
	}
	return ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{})
}

// resources returns a function giving an object's dynamic resource client,
// with the API server's discovery cached for the function's lifetime.
func (e *ControlPlane) resources() (func(*unstructured.Unstructured) (dynamic.ResourceInterface, error), error) {
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	return func(o *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
		}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			return dyn.Resource(m.Resource).Namespace(o.GetNamespace()), nil
		}
		return dyn.Resource(m.Resource), nil
	}, nil
}

// KubeconfigAs writes a kubeconfig that authenticates as the suite's admin
// and impersonates user (for example system:serviceaccount:ns:name), so a
// component run with it has exactly that user's permissions.
func (e *ControlPlane) KubeconfigAs(user, name string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		return "", err
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
	}
	path := e.Dir + "/" + name
	return path, clientcmd.WriteToFile(*cfg, path)
}
