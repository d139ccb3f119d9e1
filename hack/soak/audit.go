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

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
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

// auditPolicy records the replicas' LISTs of pods (Metadata: the node is in
// the URI's field selector) and their bindings (Request: the node is in the
// Binding's target), and nothing else.
func auditPolicy(user string) string {
	return fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Request
  users: [%[1]q]
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/binding"]
- level: Metadata
  users: [%[1]q]
  verbs: ["list"]
  resources:
  - group: ""
    resources: ["pods"]
- level: None
`, user)
}

// auditSpan is one request: when the API server received it and when it
// answered, and who sent it (the client certificate's id: each replica has
// its own).
type auditSpan struct {
	received, completed time.Time
	client              string
}

// auditBind is one successful binding: the pod's UID and the node.
type auditBind struct {
	auditSpan
	uid  types.UID
	node string
}

// auditTrail reads the audit log as it grows.
type auditTrail struct {
	path string
	off  int64
	// lists: per client and node, that client's LISTs of the node's pods
	// (a field selector on spec.nodeName), in the order answered; bindsOn:
	// per client and node, that client's successful bindings onto the
	// node, in order; bindOf: each pod's last successful binding.
	lists   map[string][]auditSpan
	bindsOn map[string][]auditBind
	bindOf  map[types.UID]auditBind
	// fresh: bindings read and not yet taken by settled, in log order.
	fresh []auditBind
	// through: the newest answer read.
	through time.Time
	// lines, bad: lines read, and those that did not parse.
	lines, bad int
}

func newAuditTrail(path string) *auditTrail {
	return &auditTrail{path: path, lists: map[string][]auditSpan{}, bindsOn: map[string][]auditBind{}, bindOf: map[types.UID]auditBind{}}
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
	// A file shorter than what was read is a new one (the API server
	// started afresh on it): from its start.
	if st, err := f.Stat(); err == nil && st.Size() < a.off {
		a.off = 0
	}
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
	span := auditSpan{received: ev.RequestReceivedTimestamp.Time, completed: ev.StageTimestamp.Time, client: clientOf(&ev)}
	if span.completed.After(a.through) {
		a.through = span.completed
	}
	ok := ev.ResponseStatus != nil && ev.ResponseStatus.Code < 300
	switch {
	case ev.Verb == "list" && ok:
		if node := nodeOfList(ev.RequestURI); node != "" {
			key := span.client + "/" + node
			a.lists[key] = append(a.lists[key], span)
		}
	case ev.Verb == "create" && ev.ObjectRef.Subresource == "binding" && ok:
		var b v1.Binding
		if ev.RequestObject == nil || json.Unmarshal(ev.RequestObject.Raw, &b) != nil || b.Target.Name == "" {
			return false
		}
		bind := auditBind{auditSpan: span, uid: ev.ObjectRef.UID, node: b.Target.Name}
		a.bindOf[bind.uid] = bind
		a.bindsOn[span.client+"/"+bind.node] = append(a.bindsOn[span.client+"/"+bind.node], bind)
		a.fresh = append(a.fresh, bind)
	}
	return true
}

// clientOf names the request's client: its credential's id (a client
// certificate's hash), the user if it has none.
func clientOf(ev *auditv1.Event) string {
	if id := ev.User.Extra["authentication.kubernetes.io/credential-id"]; len(id) > 0 {
		return id[0]
	}
	return ev.User.Username
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

// auditVerdict judges a Berth pod (uid) bound onto node beside a foreign
// pod the soak created at foreignCreated (when its create returned: the pod
// was stored by then). decided is false while the log does not have the
// binding. The replica that bound it must have listed the node's pods
// since its previous binding onto that node (ConfirmBinder, confirm:
// Always, lists and binds under the node's lock): race when that LIST was
// received before the foreign pod was stored; a violation when it was
// received after (a consistent read includes the foreign pod) or there was
// none. why says what the log shows.
func (a *auditTrail) auditVerdict(uid types.UID, node string, foreignCreated time.Time) (race, decided bool, why string) {
	if a == nil || foreignCreated.IsZero() {
		return false, false, ""
	}
	bind, ok := a.bindOf[uid]
	if !ok || bind.node != node {
		return false, false, ""
	}
	list, unconfirmed := a.confirmation(bind)
	switch {
	case unconfirmed != "":
		return false, true, unconfirmed
	case list.received.After(foreignCreated):
		return false, true, fmt.Sprintf("its confirmation listed node %s's pods at %s, %s after the foreign pod was stored, and it was bound anyway",
			node, list.received.Format("15:04:05.000"), list.received.Sub(foreignCreated).Round(time.Millisecond))
	}
	return true, true, ""
}

// confirmation is the LIST of the node's pods that confirmed bind: the
// binding replica's last LIST of the node answered before the binding was
// received (its LISTs do not overlap: the node's lock). unconfirmed says why
// there is none ("" if there is): no such LIST, or none received after that
// replica's previous binding onto the node had completed (ConfirmBinder,
// confirm: Always, lists and binds under the node's lock, once per
// binding: its next LIST is sent after the binding's answer).
func (a *auditTrail) confirmation(bind auditBind) (list auditSpan, unconfirmed string) {
	key := bind.client + "/" + bind.node
	for _, l := range a.lists[key] {
		if !l.completed.After(bind.received) && l.received.After(list.received) {
			list = l
		}
	}
	var prev auditSpan
	for _, b := range a.bindsOn[key] {
		if b.uid != bind.uid && b.received.Before(bind.received) && b.received.After(prev.received) {
			prev = b.auditSpan
		}
	}
	if list.received.IsZero() || !prev.received.IsZero() && list.received.Before(prev.completed) {
		return list, fmt.Sprintf("bound at %s with no LIST of node %s's pods by its replica since that replica's previous binding there (ConfirmBinder confirm: Always lists the node first)",
			bind.received.Format("15:04:05.000"), bind.node)
	}
	return list, ""
}

// settled takes the bindings read that were received at least auditSettle
// before the newest answer read (the LISTs that came before them are in),
// or, with all (the run is over and the log read to its end), every one
// not yet taken.
func (a *auditTrail) settled(all bool) []auditBind {
	if a == nil {
		return nil
	}
	n := 0
	for n < len(a.fresh) && (all || !a.fresh[n].received.After(a.through.Add(-auditSettle))) {
		n++
	}
	out := a.fresh[:n:n]
	a.fresh = a.fresh[n:]
	return out
}

// auditSettle: how far the log must have been read past a binding before
// its confirmation is judged.
const auditSettle = 5 * time.Second

// lacks reports whether the log has been read past t plus slack without a
// binding of uid: it will not have one (an API server restart lost it).
func (a *auditTrail) lacks(uid types.UID, t time.Time, slack time.Duration) bool {
	if a == nil {
		return true
	}
	_, ok := a.bindOf[uid]
	return !ok && a.through.After(t.Add(slack))
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
	for _, b := range a.bindsOn {
		binds += len(b)
	}
	return strings.TrimSpace(fmt.Sprintf("%d audit events read (%d unparsed): %d LISTs of a node's pods and %d bindings by the replicas",
		a.lines, a.bad, lists, binds))
}
