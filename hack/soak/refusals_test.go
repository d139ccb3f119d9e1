package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// refusalLine is the line Explain logs for a pod over its budget, with the
// keys before and after the pod's that the logger carries.
func refusalLine(before, pod, after string) string {
	return `I1207 15:20:01.000000   26801 explain.go:611] "Explain: over maxPerMinute, or over the namespace's share of its last half; not explaining this cycle" ` + before + `pod="` + pod + `"` + after + "\n"
}

// writeLog writes a replica's log file.
func writeLog(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A pod Explain logged over its budget is exempt from 6-explain for
// budgetExemption after the refusal was read, and only that pod; lines are
// read once, a partial line when it is whole, from every replica's log, with
// the keys a PodGroup cycle's logger carries before the pod's.
func TestARefusalExemptsItsPodOnly(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "berth-0-3.log")
	const start = "I1207 15:19:40.000000   26745 server.go:187] \"Starting Kubernetes Scheduler\"\n"
	line := refusalLine("", "soak-free/gang-940-c8rvp", "")
	writeLog(t, log, start+line[:40])
	r := newRefusals(dir)
	now := time.Now()
	r.read(now)
	if r.refused("soak-free/gang-940-c8rvp", now) {
		t.Fatal("a partial line was taken")
	}
	writeLog(t, log, start+line)
	r.read(now)
	if !r.refused("soak-free/gang-940-c8rvp", now) {
		t.Fatal("the refused pod is not exempt")
	}
	if r.refused("soak-free/gang-940-gpmrf", now) {
		t.Fatal("another pod is exempt")
	}
	if r.refused("soak-free/gang-940-c8rvp", now.Add(budgetExemption)) {
		t.Fatal("still exempt after budgetExemption")
	}
	// Another replica's start, in a PodGroup cycle.
	writeLog(t, filepath.Join(dir, "berth-1-2.log"), refusalLine(`podGroupType="Gang" podGroup="soak-free/pg-3" `, "soak-free/pg-3-x2x9q", ""))
	r.read(now)
	if !r.refused("soak-free/pg-3-x2x9q", now) {
		t.Fatal("a PodGroup cycle's refusal is not read")
	}
	if r.refused("soak-free/pg-3", now) {
		t.Fatal("the PodGroup's key was taken for a pod")
	}
	later := now.Add(time.Minute)
	r.read(later) // nothing new: the refusal keeps its time
	if r.refused("soak-free/gang-940-c8rvp", now.Add(budgetExemption).Add(time.Second)) {
		t.Fatal("a line read twice")
	}
	r.read(now.Add(budgetExemption))
	if len(r.at) != 0 {
		t.Errorf("refusals past budgetExemption kept: %v", r.at)
	}
}

// A pod refused over the budget is exempt for budgetExemption; a Kubernetes
// PodGroup member (explained when its condition's message changes, not at
// its next attempt) whose pending decision was refused stays exempt while
// the message it had at the first check after the refusal stands, and is
// judged once it changes (the change is explained, or refused and logged
// again). A placement refused at Reserve holds no message, and a message
// that changes within the window is not the one held.
func TestARefusedGroupMemberIsExemptWhileItsMessageStands(t *testing.T) {
	dir := t.TempDir()
	line := func(pod, what string) string { return refusalLine("", pod, ` explaining="`+what+`"`) }
	writeLog(t, filepath.Join(dir, "berth-0-1.log"), line("a/member", "pending")+line("a/solo", "pending")+line("a/tried", "placement")+line("a/moved", "pending"))
	r := newRefusals(dir)
	now := time.Now()
	r.read(now)
	const msg = "pod group is unschedulable, minCount 4"
	for _, p := range []struct {
		pod    string
		member bool
	}{{"a/member", true}, {"a/solo", false}, {"a/tried", true}, {"a/moved", true}} {
		if !r.exempt(p.pod, msg, p.member, now) {
			t.Fatalf("%s, refused, is not exempt", p.pod)
		}
	}
	// Within the window a/moved's message changes: still exempt (the
	// window), but the message held stays the refused one.
	if !r.exempt("a/moved", "0/4 nodes are available", true, now.Add(time.Minute)) {
		t.Fatal("a/moved is not exempt within its window")
	}
	later := now.Add(budgetExemption)
	r.read(later)
	if r.exempt("a/solo", msg, false, later) {
		t.Error("a pod that is no group's member is exempt past budgetExemption")
	}
	if r.exempt("a/tried", msg, true, later) {
		t.Error("a group member whose placement try was refused is exempt past budgetExemption")
	}
	if r.exempt("a/moved", "0/4 nodes are available", true, later) {
		t.Error("a group member is exempt for a message that came after its refusal")
	}
	if !r.exempt("a/member", msg, true, later) {
		t.Error("a group member refused with its message is judged while the message stands")
	}
	if r.exempt("a/member", "0/4 nodes are available", true, later) {
		t.Error("a group member whose message changed since its refusal is exempt")
	}
	if r.exempt("a/member", msg, true, later) {
		t.Error("the exemption came back with the old message")
	}
	r.sweep(func(pod string) bool { return pod == "a/member" })
	if len(r.heldMessage) != 0 || len(r.heldFor) != 1 {
		t.Errorf("sweep kept %v %v", r.heldMessage, r.heldFor)
	}
}
