package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A pod Explain logged over its budget is exempt from 6-explain for
// budgetExemption after the refusal was read, and only that pod; lines are
// read once, a partial line when it is whole, from every replica's log, with
// the keys a PodGroup cycle's logger carries before the pod's.
func TestARefusalExemptsItsPodOnly(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "berth-0-3.log")
	const line = `I1207 15:19:48.311551   26745 explain.go:611] "Explain: over maxPerMinute, or over the namespace's share of its last half; not explaining this cycle" pod="soak-free/gang-940-c8rvp"` + "\n"
	if err := os.WriteFile(log, []byte("I1207 15:19:40.000000   26745 server.go:187] \"Starting Kubernetes Scheduler\"\n"+line[:40]), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRefusals(dir)
	now := time.Now()
	r.read(now)
	if r.refused("soak-free/gang-940-c8rvp", now) {
		t.Fatal("a partial line was taken")
	}
	if err := os.WriteFile(log, []byte("I1207 15:19:40.000000   26745 server.go:187] \"Starting Kubernetes Scheduler\"\n"+line), 0o600); err != nil {
		t.Fatal(err)
	}
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
	const grouped = `I1207 15:20:01.000000   26801 explain.go:611] "Explain: over maxPerMinute, or over the namespace's share of its last half; not explaining this cycle" podGroupType="Gang" podGroup="soak-free/pg-3" pod="soak-free/pg-3-x2x9q"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "berth-1-2.log"), []byte(grouped), 0o600); err != nil {
		t.Fatal(err)
	}
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
// its next attempt) stays exempt while the message it was refused with
// stands, and is judged once it changes (the change is explained, or
// refused and logged again).
func TestARefusedGroupMemberIsExemptWhileItsMessageStands(t *testing.T) {
	dir := t.TempDir()
	line := func(pod string) string {
		return `I1207 15:20:01.000000   26801 explain.go:611] "Explain: over maxPerMinute, or over the namespace's share of its last half; not explaining this cycle" pod="` + pod + `"` + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "berth-0-1.log"), []byte(line("a/member")+line("a/solo")), 0o600); err != nil {
		t.Fatal(err)
	}
	r := newRefusals(dir)
	now := time.Now()
	r.read(now)
	const msg = "pod group is unschedulable, minCount 4"
	if !r.exempt("a/member", msg, true, now) || !r.exempt("a/solo", msg, false, now) {
		t.Fatal("a refused pod is not exempt")
	}
	later := now.Add(budgetExemption)
	r.read(later)
	if r.exempt("a/solo", msg, false, later) {
		t.Error("a pod that is no group's member is exempt past budgetExemption")
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
	r.forget("a/member")
	if len(r.heldMessage) != 0 {
		t.Errorf("forget kept %v", r.heldMessage)
	}
}
