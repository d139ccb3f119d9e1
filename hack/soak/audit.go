package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// The API server's own record of what the replicas read and wrote (its
// audit log, as Jepsen keeps a history): which LIST of a node's pods
// ConfirmBinder made before each binding, and when the API server received
// it. An overcommit beside a foreign pod is then judged exactly: the
// replica confirmed the node before the foreign pod existed (a race: the
// kubelet refuses one of them), or it listed the node after the foreign
// pod was there, or did not list it at all (the scheduler's overcommit).
// Without it only a time window can tell (raceWindow), and a binding
// within that window of a foreign pod, confirmed or not, is never judged.

// auditPolicy records, at Metadata level, the replicas' LISTs of pods and
// their bindings, and nothing else.
func auditPolicy(user string) string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: [%q]
  verbs: ["list", "create"]
  resources:
  - group: ""
    resources: ["pods", "pods/binding"]
- level: None
`, user)
}

// auditSpan is one request: when the API server received it and when it
// answered.
type auditSpan struct {
	received, completed time.Time
}

// auditTrail reads the audit log as it grows.
type auditTrail struct {
	path string
	off  int64
	// lists: per node, the replicas' LISTs of its pods (a field selector
	// on spec.nodeName), in the order answered; binds: per pod
	// (namespace/name), its successful bindings.
	lists map[string][]auditSpan
	binds map[string][]auditSpan
	// through: the newest answer read.
	through time.Time
	// lines, bad: lines read, and those that did not parse.
	lines, bad int
}

func newAuditTrail(path string) *auditTrail {
	return &auditTrail{path: path, lists: map[string][]auditSpan{}, binds: map[string][]auditSpan{}}
}

// read takes in the complete lines written since the last read.
func (a *auditTrail) read() error {
	f, err := os.Open(a.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(a.off, io.SeekStart); err != nil {
		return err
	}
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			// A partial line is read again, whole, next time.
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		a.off += int64(len(line))
		a.lines++
		if !a.add(line) {
			a.bad++
		}
	}
}

// add records one event; false if it does not parse.
func (a *auditTrail) add(line []byte) bool {
	var ev auditv1.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return false
	}
	if ev.Stage != auditv1.StageResponseComplete || ev.ObjectRef == nil || ev.ObjectRef.Resource != "pods" {
		return true
	}
	span := auditSpan{received: ev.RequestReceivedTimestamp.Time, completed: ev.StageTimestamp.Time}
	if span.completed.After(a.through) {
		a.through = span.completed
	}
	ok := ev.ResponseStatus != nil && ev.ResponseStatus.Code < 300
	switch {
	case ev.Verb == "list" && ok:
		if node := nodeOfList(ev.RequestURI); node != "" {
			a.lists[node] = append(a.lists[node], span)
		}
	case ev.Verb == "create" && ev.ObjectRef.Subresource == "binding" && ok:
		key := ev.ObjectRef.Namespace + "/" + ev.ObjectRef.Name
		a.binds[key] = append(a.binds[key], span)
	}
	return true
}

// nodeOfList is the node a LIST of pods selects by spec.nodeName, "" if none.
func nodeOfList(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	sel, err := fields.ParseSelector(u.Query().Get("fieldSelector"))
	if err != nil {
		return ""
	}
	node, _ := sel.RequiresExactMatch("spec.nodeName")
	return node
}

// lastBind is the pod's last successful binding.
func (a *auditTrail) lastBind(namespace, name string) (auditSpan, bool) {
	b := a.binds[namespace+"/"+name]
	if len(b) == 0 {
		return auditSpan{}, false
	}
	return b[len(b)-1], true
}

// confirmation is the last LIST of node's pods answered before the binding
// bind was received and received at most within before it (ConfirmBinder
// lists, then binds, within its confirmTimeout).
func (a *auditTrail) confirmation(node string, bind auditSpan, within time.Duration) (auditSpan, bool) {
	l := a.lists[node]
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].completed.After(bind.received) {
			continue
		}
		if l[i].received.Before(bind.received.Add(-within)) {
			return auditSpan{}, false
		}
		return l[i], true
	}
	return auditSpan{}, false
}

// auditVerdict judges a Berth pod bound onto node beside a foreign pod the
// soak created at foreignCreated (when its create returned: the pod was
// stored by then): decided false when the audit log does not have the
// binding yet or at all. race: the replica's confirmation LIST was
// received before the foreign pod was stored. why says what the log shows.
func (a *auditTrail) auditVerdict(namespace, name, node string, foreignCreated time.Time, within time.Duration) (race, decided bool, why string) {
	if a == nil || foreignCreated.IsZero() {
		return false, false, ""
	}
	bind, ok := a.lastBind(namespace, name)
	if !ok {
		return false, false, ""
	}
	l, ok := a.confirmation(node, bind, within)
	if !ok {
		return false, true, fmt.Sprintf("bound at %s with no LIST of node %s's pods in the %s before (ConfirmBinder confirm: Always lists the node first)",
			bind.received.Format("15:04:05.000"), node, within)
	}
	if l.received.After(foreignCreated) {
		return false, true, fmt.Sprintf("its confirmation listed node %s's pods at %s, %s after the foreign pod was stored, and it was bound anyway",
			node, l.received.Format("15:04:05.000"), l.received.Sub(foreignCreated).Round(time.Millisecond))
	}
	return true, true, ""
}

// auditSummary: what the trail read, for the report.
func (a *auditTrail) auditSummary() string {
	if a == nil {
		return "no audit log"
	}
	var lists, binds int
	for _, l := range a.lists {
		lists += len(l)
	}
	for _, b := range a.binds {
		binds += len(b)
	}
	return strings.TrimSpace(fmt.Sprintf("%d audit events read (%d unparsed): %d LISTs of a node's pods and %d bindings by the replicas",
		a.lines, a.bad, lists, binds))
}
