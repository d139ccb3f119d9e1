package crd

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

var quotas = Resource{Plugin: "ElasticQuota", GroupVersion: "scheduling.x-k8s.io/v1alpha1", Name: "elasticquotas", CRDFile: "manifests/crds/"}

const servedList = `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"scheduling.x-k8s.io/v1alpha1","resources":[{"name":"elasticquotas","namespaced":true,"kind":"ElasticQuota","verbs":["get","list","watch"]}]}`

// apiServer answers discovery of the group with status until ready is
// set, and serves the group after; /readyz says whether it is ready.
func apiServer(t *testing.T, status int, ready *atomic.Bool, readyAfter int32) (discovery.DiscoveryInterface, *atomic.Int32) {
	t.Helper()
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
			if status == http.StatusUnauthorized {
				w.WriteHeader(status)
				return
			}
			if !ready.Load() {
				http.Error(w, "[-]poststarthook/rbac/bootstrap-roles failed: not finished", http.StatusInternalServerError)
				return
			}
			_, _ = w.Write([]byte("ok"))
		case "/apis/scheduling.x-k8s.io/v1alpha1":
			if n := asked.Add(1); readyAfter > 0 && n >= readyAfter {
				ready.Store(true)
			}
			if !ready.Load() || readyAfter == 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"` + reason(status) + `","code":` + strconv.Itoa(status) + `}`))
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(servedList))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return discovery.NewDiscoveryClientForConfigOrDie(&rest.Config{Host: srv.URL}), &asked
}

func reason(status int) string {
	return map[int]string{http.StatusForbidden: "Forbidden", http.StatusUnauthorized: "Unauthorized", http.StatusNotFound: "NotFound"}[status]
}

// An API server that has just restarted refuses (its RBAC not yet loaded)
// or does not list (its CRDs not yet loaded) while /readyz says it is not
// ready: the check waits, as it waits for one that does not answer; a
// scheduler (re)started then must not exit.
func TestServedWaitsForAnAPIServerThatIsStarting(t *testing.T) {
	for _, status := range []int{http.StatusForbidden, http.StatusNotFound} {
		t.Run(reason(status), func(t *testing.T) {
			var ready atomic.Bool
			d, asked := apiServer(t, status, &ready, 3)
			if err := Served(context.Background(), d, quotas, 30*time.Second); err != nil {
				t.Fatalf("Served: %v (asked %d times)", err, asked.Load())
			}
		})
	}
}

// A ready API server's refusal or absence is the operator's to fix: the
// check fails at once, naming what to do.
func TestServedFailsAtOnceWhenAReadyAPIServerSaysNo(t *testing.T) {
	for status, want := range map[int]string{
		http.StatusForbidden:    "check the scheduler's credentials and RBAC",
		http.StatusNotFound:     "install the CRD from manifests/crds/",
		http.StatusUnauthorized: "check the scheduler's credentials and RBAC",
	} {
		t.Run(reason(status), func(t *testing.T) {
			var ready atomic.Bool
			ready.Store(status != http.StatusUnauthorized) // bad credentials: /readyz says 401 too
			d, asked := apiServer(t, status, &ready, 0)
			start := time.Now()
			err := Served(context.Background(), d, quotas, 30*time.Second)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Served = %v, want an error saying %q", err, want)
			}
			if asked.Load() != 1 || time.Since(start) > 10*time.Second {
				t.Errorf("asked %d times over %s, want one answer", asked.Load(), time.Since(start))
			}
		})
	}
}

// An API server that never says it is ready and keeps refusing: at the end
// of the budget the error names what it refused, not an unreachable server.
func TestServedNamesARefusalThatOutlastsTheBudget(t *testing.T) {
	var ready atomic.Bool
	d, _ := apiServer(t, http.StatusForbidden, &ready, 0)
	err := Served(context.Background(), d, quotas, 2*time.Second)
	if err == nil || !strings.Contains(err.Error(), "check the scheduler's credentials and RBAC") || strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("Served = %v, want the RBAC refusal", err)
	}
}
