package perclient

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
)

type state struct{ n int }

func TestRegistry(t *testing.T) {
	var r Registry[*state]
	ctx, cancel := context.WithCancel(context.Background())
	a, b := fake.NewClientset(), fake.NewClientset()
	builds := 0
	build := func() (*state, error) { builds++; return &state{n: builds}, nil }

	s1, err := r.Get(ctx, a, nil, build)
	if err != nil {
		t.Fatal(err)
	}
	if s2, _ := r.Get(ctx, a, nil, build); s2 != s1 {
		t.Error("a second profile of the same client got a state of its own")
	}
	if s3, _ := r.Get(ctx, b, nil, build); s3 == s1 {
		t.Error("another client shares the first one's state")
	}
	if builds != 2 {
		t.Errorf("%d builds, want 2 (one per client)", builds)
	}
	refuse := errors.New("args differ")
	if _, err := r.Get(ctx, a, func(*state) error { return refuse }, build); !errors.Is(err, refuse) {
		t.Errorf("reuse refused: got %v, want %v", err, refuse)
	}
	if _, err := r.Get(context.Background(), fake.NewClientset(), nil, func() (*state, error) { return nil, refuse }); !errors.Is(err, refuse) {
		t.Errorf("build failed: got %v", err)
	}
	if n := len(r.All()); n != 2 {
		t.Errorf("All: %d values, want 2 (a failed build keeps nothing)", n)
	}
	if v, ok := r.Lookup(a); !ok || v != s1 {
		t.Errorf("Lookup(a) = %v, %v; want a's state", v, ok)
	}
	if _, ok := r.Lookup(fake.NewClientset()); ok {
		t.Error("Lookup of a client never built for found a value")
	}

	cancel() // the scheduler stops: its states go
	deadline := time.Now().Add(10 * time.Second)
	for len(r.All()) != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polls the cleanup goroutines
	}
	if n := len(r.All()); n != 0 {
		t.Errorf("%d values left after the scheduler's context ended, want 0", n)
	}
}
