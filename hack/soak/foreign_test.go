package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
	"sigs.k8s.io/yaml"
)

// An overcommitted node is the scheduler's doing when one of its bindings
// took the node over allocatable, and the kubelet's to refuse when the
// foreign binder's pod did.
func TestForeignOverrunBlamesThePodThatArrivedLast(t *testing.T) {
	start := time.Unix(1000, 0)
	pod := func(name string, cpu string, foreign bool, boundAfter time.Duration, w *watcher) *v1.Pod {
		p := st.MakePod().Namespace("ns").Name(name).UID(name).Node("n1").Container("c").Req(map[v1.ResourceName]string{"cpu": cpu}).Obj()
		if foreign {
			p.Labels = map[string]string{foreignLabel: "true"}
		}
		w.boundAt[types.UID(name)] = start.Add(boundAfter)
		return p
	}
	alloc := resource.MustParse("4")
	for _, tc := range []struct {
		name        string
		pods        func(w *watcher) []*v1.Pod
		wantForeign bool
		wantWho     string
	}{{
		name: "a member bound after the foreign pod took its room",
		pods: func(w *watcher) []*v1.Pod {
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("foreign-1", "3", true, time.Second, w), pod("member", "2", false, 11*time.Second, w)}
		},
		wantWho: "ns/member",
	}, {
		name: "a member bound within raceSlack of the foreign pod: confirmed before it existed",
		pods: func(w *watcher) []*v1.Pod {
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("foreign-1", "3", true, time.Second, w), pod("member", "2", false, time.Second+raceSlack/2, w)}
		},
		wantForeign: true, wantWho: "ns/member (a race)",
	}, {
		name: "a member bound 4s after the foreign pod while the API took 1.5s to read: a race",
		pods: func(w *watcher) []*v1.Pod {
			w.readLatencies = []latencySample{{at: start.Add(3 * time.Second), d: 1500 * time.Millisecond}}
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("foreign-1", "3", true, time.Second, w), pod("member", "2", false, 5*time.Second, w)}
		},
		wantForeign: true, wantWho: "ns/member (a race)",
	}, {
		name: "a member bound 4s after the foreign pod, the API slow only long before: judged",
		pods: func(w *watcher) []*v1.Pod {
			w.readLatencies = []latencySample{{at: start.Add(-latencyAround - 2*time.Second), d: 5 * time.Second}}
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("foreign-1", "3", true, time.Second, w), pod("member", "2", false, 5*time.Second, w)}
		},
		wantWho: "ns/member",
	}, {
		name: "bound 5s after the foreign pod while slow-api delayed the replicas' path 2s each way: a race",
		pods: func(w *watcher) []*v1.Pod {
			w.delays = []delaySpan{{from: start, to: start.Add(20 * time.Second), delay: 2 * time.Second}}
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("foreign-1", "3", true, time.Second, w), pod("member", "2", false, 6*time.Second, w)}
		},
		wantForeign: true, wantWho: "ns/member (a race)",
	}, {
		name: "bound 9s after the foreign pod while slow-api delayed the path 2s each way: judged (the foreign pod was there before the LIST)",
		pods: func(w *watcher) []*v1.Pod {
			w.delays = []delaySpan{{from: start, to: start.Add(20 * time.Second), delay: 2 * time.Second}}
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("foreign-1", "3", true, time.Second, w), pod("member", "2", false, 10*time.Second, w)}
		},
		wantWho: "ns/member",
	}, {
		name: "the foreign pod bound after a member took the room it read",
		pods: func(w *watcher) []*v1.Pod {
			return []*v1.Pod{pod("old", "1", false, 0, w), pod("member", "2", false, time.Second, w), pod("foreign-1", "3", true, 2*time.Second, w)}
		},
		wantForeign: true, wantWho: "ns/foreign-1",
	}, {
		name: "no foreign pod on the node: a violation that lists the node's pods",
		pods: func(w *watcher) []*v1.Pod {
			return []*v1.Pod{pod("a", "3", false, 0, w), pod("b", "2", false, time.Second, w)}
		},
		wantWho: "no foreign pod on the node: ns/a cpu 3 bound 00:16:40.000, ns/b cpu 2 bound 00:16:41.000",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &watcher{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), boundAt: map[types.UID]time.Time{}, raceVerdicts: map[types.UID]raceVerdict{}, foreignStored: map[types.UID]time.Time{}}
			for _, p := range tc.pods(w) {
				if err := w.pods.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			foreign, who, later := w.foreignOverrun("n1", v1.ResourceCPU, alloc)
			if !tc.wantForeign && who != "" && !strings.HasPrefix(who, "no foreign pod") {
				// A violation says why; judged by time, with no audit log.
				tc.wantWho += ": " + outsideWindow
			}
			if foreign != tc.wantForeign || who != tc.wantWho || later {
				t.Errorf("foreignOverrun = %v, %q, later %v; want %v, %q", foreign, who, later, tc.wantForeign, tc.wantWho)
			}
			// The verdict stands once taken: the reads that made it age
			// out while the foreign pod lives on.
			w.readLatencies, w.delays = nil, nil
			if again, whoAgain, _ := w.foreignOverrun("n1", v1.ResourceCPU, alloc); again != foreign || whoAgain != who {
				t.Errorf("judged again without its samples: %v, %q; first %v, %q", again, whoAgain, foreign, who)
			}
		})
	}
}

// The replicas run the chart's ConfirmBinder default beside the foreign
// binder, whatever the example profile says.
// The store moved between the check's usage and foreignOverrun's own read:
// a pod ended, the node is within its room, nothing is judged now.
func TestForeignOverrunJudgesAgainANodeNoLongerOverrun(t *testing.T) {
	w := &watcher{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), boundAt: map[types.UID]time.Time{}, raceVerdicts: map[types.UID]raceVerdict{}, foreignStored: map[types.UID]time.Time{}}
	for i, cpu := range []string{"1", "3"} {
		p := st.MakePod().Namespace("ns").Name(fmt.Sprintf("p%d", i)).UID(fmt.Sprintf("p%d", i)).Node("n1").Container("c").Req(map[v1.ResourceName]string{"cpu": cpu}).Obj()
		if i == 1 {
			p.Labels = map[string]string{foreignLabel: "true"}
		}
		if err := w.pods.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	ended := st.MakePod().Namespace("ns").Name("ended").UID("ended").Node("n1").Container("c").Req(map[v1.ResourceName]string{"cpu": "1"}).Phase(v1.PodSucceeded).Obj()
	if err := w.pods.Add(ended); err != nil {
		t.Fatal(err)
	}
	if foreign, who, later := w.foreignOverrun("n1", v1.ResourceCPU, resource.MustParse("4")); foreign || who != "" || !later {
		t.Errorf("foreignOverrun = %v, %q, later %v; want judged again (later)", foreign, who, later)
	}
}

func TestUseChartConfigConfirmsEveryBinding(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	raw, err := os.ReadFile(filepath.Join("..", "..", "manifests", "examples", "all-plugins.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	// The chart's client rate, not upstream's 50/100 (the example sets none).
	rate, err := readChartClient(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if err := useChartConfig(path, rate); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rate.QPS <= 50 || rate.Burst <= 100 {
		t.Errorf("the chart's client rate %+v is not above upstream's 50/100", rate)
	}
	var got struct {
		ClientConnection chartClient `json:"clientConnection"`
	}
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.ClientConnection != rate {
		t.Errorf("config's client rate %+v, want the chart's %+v:\n%s", got.ClientConnection, rate, out)
	}
	// The client's kubeconfig survives the rate's merge.
	for _, want := range []string{"confirm: Always", "resourceName: " + chartLease, "resourceNamespace: " + chartNamespace, "kubeconfig: /etc/kubernetes/scheduler.conf"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "WhenTight") {
		t.Errorf("config still says WhenTight:\n%s", out)
	}
}

// A backlog is measured from its first long reading until the queue stays
// short for backlogShort: a short reading inside it, an unread queue (the
// leader too busy to answer its scrape) or a leaderless spell does not end
// it.
func TestBacklogEndsOnlyWhenTheQueueStaysShort(t *testing.T) {
	w := &watcher{}
	attempts := counter()
	step := 3 * time.Second
	for range 20 {
		w.noteQueue(true, step, 500, "berth-0#1", attempts())
	}
	w.noteQueue(true, step, 10, "berth-0#1", attempts()) // one short reading
	w.noteQueue(true, step, -1, "", -1)                  // the scrape failed
	w.noteQueue(false, step, -1, "", -1)                 // no leader
	w.noteQueue(true, step, 400, "berth-0#1", attempts())
	if want := 23 * step; w.backlogFor != want || !w.backlogged {
		t.Fatalf("backlogFor %s, backlogged %v; want %s, true", w.backlogFor, w.backlogged, want)
	}
	for elapsed := time.Duration(0); elapsed < backlogShort-step; elapsed += step {
		w.noteQueue(true, step, 10, "berth-0#1", attempts())
	}
	if w.backlogFor == 0 || w.backlogged {
		t.Fatalf("backlog ended after %s short (backlogFor %s)", backlogShort-step, w.backlogFor)
	}
	w.noteQueue(true, step, 10, "berth-0#1", attempts())
	if w.backlogFor != 0 {
		t.Fatalf("backlog still counted (%s) after the queue stayed short for %s", w.backlogFor, backlogShort)
	}
}

// A new leader's backlog is its own: it tries every pending pod once after
// its takeover, so the count starts anew; one leader that stays backlogged
// past backlogBound is counted whole.
func TestANewLeaderStartsItsOwnBacklog(t *testing.T) {
	w := &watcher{}
	attempts := counter()
	step := 3 * time.Second
	for elapsed := time.Duration(0); elapsed < 4*time.Minute; elapsed += step {
		w.noteQueue(true, step, 500, "berth-0#1", attempts())
	}
	w.noteQueue(true, step, 500, "berth-1#1", attempts())
	if w.backlogFor != step {
		t.Fatalf("backlogFor %s after a takeover, want the new leader's %s", w.backlogFor, step)
	}
	for range 100 {
		w.noteQueue(true, step, 500, "berth-1#1", attempts())
		w.noteQueue(true, step, -1, "", -1) // an unanswered scrape keeps the term
	}
	if want := 201 * step; w.backlogFor != want {
		t.Fatalf("backlogFor %s, want %s: one leader's backlog is counted whole", w.backlogFor, want)
	}
	// The first leader, paused and resumed, says it leads until its
	// renewal fails: its term does not come back.
	w.noteQueue(true, step, 500, "berth-0#1", attempts())
	if w.term != "berth-1#1" || w.backlogFor != 202*step {
		t.Fatalf("term %s, backlogFor %s after the old leader's late scrape: want berth-1#1's count to go on", w.term, w.backlogFor)
	}
}

// Overlapping faults make one span, which ends linger after the last.
func TestSpansMergeOverlappingFaults(t *testing.T) {
	var s spans
	t0 := time.Unix(1000, 0)
	s.mark(true, t0, 0)
	s.mark(true, t0.Add(5*time.Second), 0)
	s.mark(false, t0.Add(8*time.Second), 10*time.Second)
	if !s.at(t0.Add(9*time.Second), 0) {
		t.Error("not within a span while the second fault is under way")
	}
	s.mark(false, t0.Add(12*time.Second), 10*time.Second)
	for at, want := range map[time.Duration]bool{-2 * time.Second: false, -500 * time.Millisecond: true, 15 * time.Second: true, 23 * time.Second: false} {
		if got := s.at(t0.Add(at), time.Second); got != want {
			t.Errorf("at(t0%+v) = %v, want %v", at, got, want)
		}
	}
}

func TestDelayAtEndsAfterTheSpanAndItsLinger(t *testing.T) {
	w := &watcher{}
	w.slowPath("slow-api", true, 3*time.Second)
	begun := time.Now()
	if got := w.delayAt(begun.Add(time.Millisecond)); got != 3*time.Second {
		t.Errorf("during the span: %s, want 3s", got)
	}
	w.slowPath("slow-api", false, 3*time.Second)
	if got := w.delayAt(time.Now().Add(12 * time.Second)); got != 3*time.Second {
		t.Errorf("within its linger (the delay plus 10s): %s, want 3s", got)
	}
	if got := w.delayAt(time.Now().Add(14 * time.Second)); got != 0 {
		t.Errorf("after it: %s, want 0", got)
	}
	// A fault of the same key begun again replaces the one before, whose
	// undo never runs: one end closes both.
	w.slowPath("slow-api", true, 2*time.Second)
	w.slowPath("slow-api", true, 4*time.Second)
	w.slowPath("slow-api", false, 4*time.Second)
	if got := w.delayAt(time.Now().Add(15 * time.Second)); got != 0 {
		t.Errorf("after a replaced fault's end: %s, want 0 (a span left open)", got)
	}
}

// A binding beside a foreign pod is judged once the reads around it are
// timed (latencyAround later), not before.
func TestForeignOverrunWaitsForTheReadsAroundTheBinding(t *testing.T) {
	w := &watcher{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), boundAt: map[types.UID]time.Time{}, raceVerdicts: map[types.UID]raceVerdict{}, foreignStored: map[types.UID]time.Time{}}
	now := time.Now()
	for _, p := range []struct {
		name, cpu string
		foreign   bool
		at        time.Time
	}{{"foreign-1", "3", true, now.Add(-10 * time.Second)}, {"member", "2", false, now.Add(-time.Second)}} {
		pod := st.MakePod().Namespace("ns").Name(p.name).UID(p.name).Node("n1").Container("c").Req(map[v1.ResourceName]string{"cpu": p.cpu}).Obj()
		if p.foreign {
			pod.Labels = map[string]string{foreignLabel: "true"}
		}
		w.boundAt[pod.UID] = p.at
		if err := w.pods.Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, later := w.foreignOverrun("n1", v1.ResourceCPU, resource.MustParse("4")); !later {
		t.Error("judged 1s after its binding; want it judged once latencyAround has passed")
	}
	if _, ok := w.raceVerdicts["member"]; ok {
		t.Error("a verdict was kept before it was taken")
	}
}

// counter returns a growing count of scheduling attempts.
func counter() func() float64 {
	n := 0.0
	return func() float64 { n++; return n }
}

// However often the leader changes, a backlog that no leader ends is
// counted across them (the liveness clocks pause all the while), and a
// backlogged leader whose attempts do not grow is stalling.
func TestABacklogNoLeaderEndsAndAStallAreCounted(t *testing.T) {
	w := &watcher{}
	attempts := counter()
	step := 3 * time.Second
	for m := range 16 { // a new leader every minute for 16 minutes
		for range 20 {
			w.noteQueue(true, step, 500, fmt.Sprintf("berth-%d#%d", m%2, m), attempts())
		}
	}
	if w.backlogFor > backlogBound || w.backlogAcross <= backlogAcrossBound {
		t.Fatalf("backlogFor %s, backlogAcross %s: want each leader's under %s and the whole over %s", w.backlogFor, w.backlogAcross, backlogBound, backlogAcrossBound)
	}
	w = &watcher{}
	w.noteQueue(true, step, 500, "berth-0#1", 7)
	for range 21 {
		w.noteQueue(true, step, 500, "berth-0#1", 7)
	}
	if w.stalledFor <= stallBound {
		t.Fatalf("stalledFor %s after %s backlogged with no attempt: want over %s", w.stalledFor, 21*step, stallBound)
	}
	w.noteQueue(true, step, 500, "berth-0#1", 8)
	if w.stalledFor != 0 {
		t.Fatalf("stalledFor %s after an attempt, want 0", w.stalledFor)
	}
}

// The leader's term is the process start its scrape read: a replica that
// restarts while it is scraped gives no reading (its answer may be the old
// process's).
func TestALeadersTermIsTheProcessStartItsScrapeRead(t *testing.T) {
	r := &replica{name: "berth-0", starts: 3}
	restart := false
	srv := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		if restart {
			r.mu.Lock()
			r.starts++
			r.mu.Unlock()
		}
		_, _ = io.WriteString(rw, "leader_election_master_status{name=\"kube-scheduler\"} 1\n"+
			"scheduler_schedule_attempts_total{profile=\"berth-all\",result=\"scheduled\"} 5\n"+
			"scheduler_schedule_attempts_total{profile=\"berth-all\",result=\"unschedulable\"} 7\n")
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if r.port, err = strconv.Atoi(u.Port()); err != nil {
		t.Fatal(err)
	}
	cl := &cluster{scrape: srv.Client()}
	s, err := cl.scrapeMetrics(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	if term, attempts := leaderOf(r, s); term != "berth-0#3" || attempts != 12 || !s.Leader {
		t.Fatalf("term %q, attempts %v, leader %v: want berth-0#3, 12, true", term, attempts, s.Leader)
	}
	restart = true
	if _, err := cl.scrapeMetrics(t.Context(), r); err == nil {
		t.Fatal("a scrape across a restart gave a reading")
	}
}
