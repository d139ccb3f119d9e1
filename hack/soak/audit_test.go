package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/tools/cache"
	st "k8s.io/kubernetes/pkg/scheduler/testing"
)

// auditLine is one ResponseComplete event as kube-apiserver's JSON log
// writes it, from client (a credential id); a binding carries its Binding.
func auditLine(t *testing.T, client, verb, uri, uid, node string, code int32, received, done time.Time) string {
	t.Helper()
	ev := auditv1.Event{
		Level: auditv1.LevelMetadata, Stage: auditv1.StageResponseComplete, Verb: verb, RequestURI: uri,
		User:                     authnv1.UserInfo{Username: "system:serviceaccount:berth-system:berth-scheduler", Extra: map[string]authnv1.ExtraValue{"authentication.kubernetes.io/credential-id": {client}}},
		ObjectRef:                &auditv1.ObjectReference{Resource: "pods", Namespace: "ns"},
		ResponseStatus:           &metav1.Status{Code: code},
		RequestReceivedTimestamp: metav1.NewMicroTime(received), StageTimestamp: metav1.NewMicroTime(done),
	}
	if verb == "create" {
		ev.ObjectRef.Subresource, ev.ObjectRef.UID, ev.ObjectRef.Name = "binding", types.UID(uid), uid
		raw, err := json.Marshal(v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns"}, Target: v1.ObjectReference{Kind: "Node", Name: node}})
		if err != nil {
			t.Fatal(err)
		}
		ev.Level, ev.RequestObject = auditv1.LevelRequest, &runtime.Unknown{Raw: raw}
	}
	ev.Kind, ev.APIVersion = "Event", "audit.k8s.io/v1"
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

func listOf(node string) string { return "/api/v1/pods?fieldSelector=spec.nodeName%3D" + node }

// The trail reads a growing log, a line cut mid-write included, and keeps
// each client's LISTs of a node and successful bindings (with their node).
func TestAuditTrailReadsTheReplicasListsAndBindings(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "audit.log")
	list := auditLine(t, "r1", "list", listOf("n1")+"&limit=500", "", "", 200, t0, t0.Add(10*time.Millisecond))
	bind := auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/p/binding", "p", "n1", 201, t0.Add(20*time.Millisecond), t0.Add(30*time.Millisecond))
	failed := auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/q/binding", "q", "n1", 409, t0, t0)
	if err := os.WriteFile(path, []byte(list+failed+bind[:len(bind)/2]), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuditTrail(path)
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	if len(a.lists["r1/n1"]) != 1 || len(a.bindOf) != 0 {
		t.Fatalf("after the first read: lists %v, binds %v; want one LIST of n1 by r1 and no binding (a failed one, half a line)", a.lists, a.bindOf)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(bind[len(bind)/2:]); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	if b, ok := a.bindOf["p"]; !ok || b.node != "n1" || b.client != "r1" || !b.received.Equal(t0.Add(20*time.Millisecond)) {
		t.Errorf("binding of p: %+v, %v; want r1's onto n1 received at +20ms", b, ok)
	}
	if a.bad != 0 || a.lines != 3 {
		t.Errorf("lines %d (bad %d), want 3 (0)", a.lines, a.bad)
	}
	// A new, shorter file (the API server started on a fresh one): read
	// from its start.
	if err := os.WriteFile(path, []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	if len(a.lists["r1/n1"]) != 2 {
		t.Errorf("after the file was replaced: %d LISTs of n1, want 2", len(a.lists["r1/n1"]))
	}
}

// An overcommit beside a foreign pod, judged from the log: a race only if
// the binding replica's own confirmation, since its previous binding onto
// the node, was received before the foreign pod was stored.
func TestAuditVerdict(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	trail := func(lines ...string) *auditTrail {
		a := newAuditTrail("")
		for _, l := range lines {
			if !a.add([]byte(l)) {
				t.Fatalf("unparsed: %s", l)
			}
		}
		return a
	}
	list := func(client string, ms int) string {
		return auditLine(t, client, "list", listOf("n1"), "", "", 200, at(ms), at(ms+10))
	}
	bind := func(client, uid string, ms int) string {
		return auditLine(t, client, "create", "/api/v1/namespaces/ns/pods/"+uid+"/binding", uid, "n1", 201, at(ms), at(ms+10))
	}
	for _, tc := range []struct {
		name        string
		a           *auditTrail
		stored      time.Time
		race, known bool
		why         string
	}{
		{"listed before the foreign pod was stored", trail(list("r1", 4000), bind("r1", "p", 5000)), at(4500), true, true, ""},
		{"listed after the foreign pod was stored", trail(list("r1", 4000), bind("r1", "p", 5000)), at(3000), false, true, "after the foreign pod was stored"},
		{"no LIST before the binding (confirmation skipped)", trail(bind("r1", "p", 5000)), at(3000), false, true, "no LIST"},
		{"the replica's last LIST was for its previous binding onto the node", trail(list("r1", 1000), bind("r1", "q", 2000), bind("r1", "p", 5000)), at(500), false, true, "no LIST"},
		{"only the other replica listed the node", trail(list("r2", 4000), bind("r1", "p", 5000)), at(4500), false, true, "no LIST"},
		{"a LIST answered after the binding was received is not its confirmation", trail(list("r1", 4995), bind("r1", "p", 5000)), at(3000), false, true, "no LIST"},
		{"no binding in the log yet", trail(list("r1", 4000)), at(3000), false, false, ""},
		{"no audit log", nil, at(3000), false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			race, known, why := tc.a.auditVerdict("p", "n1", tc.stored)
			if race != tc.race || known != tc.known || !strings.Contains(why, tc.why) {
				t.Errorf("auditVerdict = %v, %v, %q; want %v, %v, containing %q", race, known, why, tc.race, tc.known, tc.why)
			}
		})
	}
}

func TestNodeOfList(t *testing.T) {
	for uri, want := range map[string]string{
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dsoak-16":                           "soak-16",
		"/api/v1/pods?fieldSelector=spec.nodeName%3Dn1%2Cstatus.phase%21%3DFailed":     "n1",
		"/api/v1/pods?labelSelector=app%3Dx":                                           "",
		"/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp&resourceVersion=0": "",
	} {
		if got := nodeOfList(uri); got != want {
			t.Errorf("nodeOfList(%q) = %q, want %q", uri, got, want)
		}
	}
}

// The policy records the replicas' LISTs and bindings, nothing else.
func TestAuditPolicyNamesTheReplicasUser(t *testing.T) {
	p := auditPolicy("system:serviceaccount:berth-system:berth-scheduler")
	for _, want := range []string{`"system:serviceaccount:berth-system:berth-scheduler"`, `"pods/binding"`, "level: Request", "level: None"} {
		if !strings.Contains(p, want) {
			t.Errorf("policy lacks %s:\n%s", want, p)
		}
	}
}

// foreignOverrun takes the audit log's verdict when it has the binding,
// and the time window when the log was read well past the binding without
// it.
func TestForeignOverrunJudgesFromTheAuditLog(t *testing.T) {
	start := time.Now().Add(-time.Hour)
	setup := func(a *auditTrail) *watcher {
		w := &watcher{pods: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}), boundAt: map[types.UID]time.Time{},
			raceVerdicts: map[types.UID]raceVerdict{}, foreignStored: map[types.UID]time.Time{}, audit: a}
		for _, p := range []struct {
			name, cpu string
			foreign   bool
			after     time.Duration
		}{{"foreign-1", "3", true, 0}, {"p", "2", false, time.Second}} {
			pod := st.MakePod().Namespace("ns").Name(p.name).UID(p.name).Node("n1").Container("c").Req(map[v1.ResourceName]string{"cpu": p.cpu}).Obj()
			if p.foreign {
				pod.Labels = map[string]string{foreignLabel: "true"}
				w.foreignStored[pod.UID] = start
			}
			w.boundAt[pod.UID] = start.Add(p.after)
			if err := w.pods.Add(pod); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	// Bound 1s after the foreign pod (inside the time window), with no
	// LIST before it in the log: the log says it was never confirmed.
	a := newAuditTrail("")
	a.add([]byte(auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/p/binding", "p", "n1", 201, start.Add(900*time.Millisecond), start.Add(time.Second))))
	foreign, who, later := setup(a).foreignOverrun("n1", v1.ResourceCPU, resource.MustParse("4"))
	if foreign || later || !strings.Contains(who, "no LIST") {
		t.Errorf("with the binding in the log: %v, %q, later %v; want a violation, no LIST", foreign, who, later)
	}
	// The log read past the binding without it: the time window (1s
	// after the foreign pod: a race).
	a = newAuditTrail("")
	a.add([]byte(auditLine(t, "r1", "list", listOf("n2"), "", "", 200, start.Add(time.Minute), start.Add(time.Minute))))
	foreign, who, later = setup(a).foreignOverrun("n1", v1.ResourceCPU, resource.MustParse("4"))
	if !foreign || later || who != "ns/p (a race)" {
		t.Errorf("with the log past the binding and without it: %v, %q, later %v; want a race by the time window", foreign, who, later)
	}
}

// Every binding is judged for its confirmation once the log is read
// auditSettle past it: a LIST of the node by the same replica answered
// before the binding and after that replica's previous binding there.
func TestEveryBindingIsJudgedForItsConfirmation(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	lines := []string{
		// r1 lists n1, binds a there: confirmed.
		auditLine(t, "r1", "list", listOf("n1"), "", "", 200, at(0), at(10)),
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/a/binding", "a", "n1", 201, at(20), at(30)),
		// r1 binds b onto n1 with no LIST since a's binding: unconfirmed.
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/b/binding", "b", "n1", 201, at(40), at(50)),
		// r2 binds c onto n1: r1's LIST does not confirm r2's binding.
		auditLine(t, "r2", "create", "/api/v1/namespaces/ns/pods/c/binding", "c", "n1", 201, at(60), at(70)),
		// r1 lists n2 and binds d onto n1: a LIST of another node.
		auditLine(t, "r1", "list", listOf("n2"), "", "", 200, at(80), at(90)),
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/d/binding", "d", "n1", 201, at(100), at(110)),
		// r1 lists n1 again and binds e there: confirmed.
		auditLine(t, "r1", "list", listOf("n1"), "", "", 200, at(120), at(130)),
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/e/binding", "e", "n1", 201, at(140), at(150)),
		// r1 lists n4, binds g there (answered at 230); a LIST of n4
		// received at 200, while g's binding was under way, does not
		// confirm f: the lock would have held it until g's answer.
		auditLine(t, "r1", "list", listOf("n4"), "", "", 200, at(160), at(170)),
		auditLine(t, "r1", "list", listOf("n4"), "", "", 200, at(200), at(210)),
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/g/binding", "g", "n4", 201, at(180), at(230)),
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/f/binding", "f", "n4", 201, at(240), at(250)),
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuditTrail(path)
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	if got := a.settled(false); len(got) != 0 {
		t.Fatalf("settled %d bindings with the log read only 150 ms past them; want none before auditSettle", len(got))
	}
	// A later answer moves the log past auditSettle; a binding just
	// before it is not settled until the run is over (all).
	late := auditLine(t, "r1", "list", listOf("n3"), "", "", 200, at(6000), at(6003)) +
		auditLine(t, "r1", "create", "/api/v1/namespaces/ns/pods/h/binding", "h", "n3", 201, at(6005), at(6020))
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")+late), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, b := range a.settled(false) {
		_, why := a.confirmation(b)
		got[string(b.uid)] = why == ""
	}
	want := map[string]bool{"a": true, "b": false, "c": false, "d": false, "e": true, "g": true, "f": false}
	if len(got) != len(want) {
		t.Fatalf("settled %v; want every binding of %v once", got, want)
	}
	for uid, ok := range want {
		if got[uid] != ok {
			t.Errorf("binding %s confirmed = %v, want %v", uid, got[uid], ok)
		}
	}
	last := a.settled(true)
	if len(last) != 1 || last[0].uid != "h" {
		t.Fatalf("settled(all) gave %v; want the binding of h alone", last)
	}
	if _, why := a.confirmation(last[0]); why != "" {
		t.Errorf("binding h: %s; want it confirmed", why)
	}
	if again := a.settled(true); len(again) != 0 {
		t.Errorf("settled gave %d bindings a second time", len(again))
	}
}
