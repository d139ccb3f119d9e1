package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/berth-scheduler/berth/internal/sandbox"
	"github.com/berth-scheduler/berth/internal/snapshot"
)

// BenchmarkSnapshot runs kubectl berth snapshot (the command, in process)
// against a real kube-apiserver and etcd (envtest's, from
// KUBEBUILDER_ASSETS) holding 5,000 nodes and 50,000 bound pods, writing a
// gzipped file, and reports the wall time per snapshot and the file's size.
// Filling the API server takes a few minutes and is not timed.
// Run: KUBEBUILDER_ASSETS=$PWD/bin/k8s/v1.37.2 go test -run '^$' -bench Snapshot -benchtime 1x -timeout 30m ./cmd/kubectl-berth
func BenchmarkSnapshot(b *testing.B) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		b.Skip("needs KUBEBUILDER_ASSETS (make envtest-bin)")
	}
	const nodes, pods = 5000, 50000
	cp, err := sandbox.StartControlPlane()
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			b.Error(err)
		}
	}()
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = -1, 0 // filling, not measured
	c, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	parallel(b, nodes, func(i int) error {
		_, err := sandbox.CreateNode(ctx, c, sandbox.NodeSpec{Name: fmt.Sprintf("node-%04d", i), CPU: "32", Memory: "128Gi",
			Labels: map[string]string{"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)}})
		return err
	})
	parallel(b, pods, func(i int) error {
		p := sandbox.MakePod(sandbox.PodSpec{Namespace: "bench", Name: fmt.Sprintf("pod-%05d", i), CPU: "100m", Memory: "128Mi",
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", i%500)}})
		p.Spec.NodeName = fmt.Sprintf("node-%04d", i%nodes)
		p.Spec.Containers[0].Resources.Requests[v1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		_, err := c.CoreV1().Pods("bench").Create(ctx, p, metav1.CreateOptions{})
		return err
	})
	b.Logf("filled with %d nodes and %d pods in %s", nodes, pods, time.Since(start).Round(time.Second))

	file := filepath.Join(b.TempDir(), "cluster.json.gz")
	for b.Loop() {
		var out, errOut bytes.Buffer
		cmd := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: &out, ErrOut: &errOut})
		cmd.SetArgs([]string{"snapshot", file, "--kubeconfig", cp.Kubeconfig})
		start := time.Now()
		if err := cmd.ExecuteContext(ctx); err != nil {
			b.Fatalf("kubectl berth snapshot: %v\n%s%s", err, out.String(), errOut.String())
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/snapshot")
	}
	st, err := os.Stat(file)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(st.Size())/(1<<20), "file-MiB")
	f, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	snap, err := snapshot.Open(f)
	if err != nil {
		b.Fatal(err)
	}
	if snap.Counts["nodes"] != nodes || snap.Counts["pods"] != pods {
		b.Fatalf("snapshot counts %v, want %d nodes and %d pods", snap.Counts, nodes, pods)
	}
}

// parallel runs create(0..n-1) on 16 goroutines.
func parallel(b *testing.B, n int, create func(int) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := create(int(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
