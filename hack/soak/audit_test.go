package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// auditLine is one ResponseComplete event as kube-apiserver's JSON log
// writes it.
func auditLine(t *testing.T, verb, uri, namespace, name, sub string, code int32, received, done time.Time) string {
	t.Helper()
	ev := auditv1.Event{
		Level: auditv1.LevelMetadata, Stage: auditv1.StageResponseComplete, Verb: verb, RequestURI: uri,
		ObjectRef:                &auditv1.ObjectReference{Resource: "pods", Namespace: namespace, Name: name, Subresource: sub},
		ResponseStatus:           &metav1.Status{Code: code},
		RequestReceivedTimestamp: metav1.NewMicroTime(received), StageTimestamp: metav1.NewMicroTime(done),
	}
	ev.Kind, ev.APIVersion = "Event", "audit.k8s.io/v1"
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// The trail reads a growing log, a line cut mid-write included, and keeps
// each node's LISTs and each pod's successful bindings.
func TestAuditTrailReadsTheReplicasListsAndBindings(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "audit.log")
	list := auditLine(t, "list", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&limit=500", "", "", "", 200, t0, t0.Add(10*time.Millisecond))
	bind := auditLine(t, "create", "/api/v1/namespaces/ns/pods/p/binding", "ns", "p", "binding", 201, t0.Add(20*time.Millisecond), t0.Add(30*time.Millisecond))
	failed := auditLine(t, "create", "/api/v1/namespaces/ns/pods/q/binding", "ns", "q", "binding", 409, t0, t0)
	if err := os.WriteFile(path, []byte(list+failed+bind[:len(bind)/2]), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newAuditTrail(path)
	if err := a.read(); err != nil {
		t.Fatal(err)
	}
	if len(a.lists["n1"]) != 1 || len(a.binds) != 0 {
		t.Fatalf("after the first read: lists %v, binds %v; want one LIST of n1 and no binding (a failed one, half a line)", a.lists, a.binds)
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
	if b, ok := a.lastBind("ns", "p"); !ok || !b.received.Equal(t0.Add(20*time.Millisecond)) {
		t.Errorf("binding of ns/p: %v, %v; want the one received at +20ms", b, ok)
	}
	if a.bad != 0 || a.lines != 3 {
		t.Errorf("lines %d (bad %d), want 3 (0)", a.lines, a.bad)
	}
}

// An overcommit beside a foreign pod, judged from the log: a race only if
// the replica's confirmation was received before the foreign pod was stored.
func TestAuditVerdict(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 16, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	trail := func(lists ...auditSpan) *auditTrail {
		a := newAuditTrail("")
		a.lists["n1"] = lists
		a.binds["ns/p"] = []auditSpan{{received: at(5000), completed: at(5010)}}
		return a
	}
	for _, tc := range []struct {
		name        string
		a           *auditTrail
		stored      time.Time
		race, known bool
		why         string
	}{
		{"listed before the foreign pod was stored", trail(auditSpan{at(4000), at(4010)}), at(4500), true, true, ""},
		{"listed after the foreign pod was stored", trail(auditSpan{at(4000), at(4010)}), at(3000), false, true, "after the foreign pod was stored"},
		{"no LIST before the binding (confirmation skipped)", trail(), at(3000), false, true, "with no LIST"},
		{"only a LIST answered after the binding was received", trail(auditSpan{at(5001), at(5020)}), at(3000), false, true, "with no LIST"},
		{"only a LIST older than the confirmation's time", trail(auditSpan{at(-5000), at(-4990)}), at(-6000), false, true, "with no LIST"},
		{"no binding in the log yet", newAuditTrail(""), at(3000), false, false, ""},
		{"no audit log", nil, at(3000), false, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			race, known, why := tc.a.auditVerdict("ns", "p", "n1", tc.stored, confirmWithin)
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
	for _, want := range []string{`"system:serviceaccount:berth-system:berth-scheduler"`, `"pods/binding"`, "level: None"} {
		if !strings.Contains(p, want) {
			t.Errorf("policy lacks %s:\n%s", want, p)
		}
	}
}
