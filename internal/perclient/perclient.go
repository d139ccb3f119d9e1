// Package perclient keeps state that every profile of a scheduler process
// shares: one value per cluster client (kube-scheduler gives all its profiles
// one client), built on first use and dropped when the scheduler's context
// ends, so that a scheduler started again in the same process (a test, a
// benchmark run) starts afresh.
package perclient

import (
	"context"
	"sync"

	"k8s.io/client-go/kubernetes"
)

// Registry holds one T per client. The zero value is ready to use.
type Registry[T comparable] struct {
	mu     sync.Mutex
	values map[kubernetes.Interface]T
}

// Get returns client's value. An existing one is returned if reuse (when not
// nil) accepts it; otherwise build makes one, which is kept until ctx ends.
// Build runs under the registry's lock: profiles set up one after another.
func (r *Registry[T]) Get(ctx context.Context, client kubernetes.Interface, reuse func(T) error, build func() (T, error)) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v, ok := r.values[client]; ok {
		if reuse != nil {
			if err := reuse(v); err != nil {
				var zero T
				return zero, err
			}
		}
		return v, nil
	}
	v, err := build()
	if err != nil {
		return v, err
	}
	if r.values == nil {
		r.values = map[kubernetes.Interface]T{}
	}
	r.values[client] = v
	// AfterFunc: no goroutine waits on a context that never ends.
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.values[client] == v {
			delete(r.values, client)
		}
	})
	return v, nil
}

// All returns the values held now.
func (r *Registry[T]) All() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]T, 0, len(r.values))
	for _, v := range r.values {
		out = append(out, v)
	}
	return out
}

// Lookup returns client's value if one was built.
func (r *Registry[T]) Lookup(client kubernetes.Interface) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.values[client]
	return v, ok
}
