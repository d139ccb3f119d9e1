package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// Explain's budget, judged per pod. Explain explains at most maxPerMinute
// pods a minute and leaves the rest unexplained (documented), logging each
// at V(2) with its pod; the replicas run at --v=2. A pending pod whose
// refusal was read within budgetExemption is not judged by 6-explain: its
// next attempt (within the unschedulable pool's 5 minutes) either explains
// it or is refused again, logged again. Every other pod is judged at 30 s,
// whatever other pods spend. The refusal is Explain's own word: a budget
// that refused wrongly (one that never refills) is Explain's unit tests'
// to catch, not this oracle's.

// budgetRefusal is the line Explain logs for a pod over its budget (the
// pod's key may follow others the logger carries).
var budgetRefusal = regexp.MustCompile(`not explaining this cycle".* pod="([^"]+)"`)

// refusedPending: the refusal was of a pending pod's decision (its
// "explaining" value), not of a placement tried at Reserve.
var refusedPending = regexp.MustCompile(`not explaining this cycle".* explaining="pending"`)

// budgetExemption: upstream's podMaxInUnschedulablePodsDuration and the
// queue's 30 s flush of the unschedulable pool.
const budgetExemption = 5*time.Minute + 30*time.Second

// refusals reads the replicas' logs as they grow.
type refusals struct {
	glob    string
	offsets map[string]int64
	// at: when a refusal of each pod ("namespace/name") was last read.
	at map[string]time.Time
	// pendingAt: when a refusal of each pod's pending decision was last
	// read.
	pendingAt map[string]time.Time
	// heldMessage: a Kubernetes PodGroup member's PodScheduled message at
	// the first check after the refusal of its pending decision read at
	// heldFor (exempt while it stands).
	heldMessage map[string]string
	heldFor     map[string]time.Time
}

func newRefusals(dir string) *refusals {
	return &refusals{glob: filepath.Join(dir, "berth-*-*.log"), offsets: map[string]int64{}, at: map[string]time.Time{},
		pendingAt: map[string]time.Time{}, heldMessage: map[string]string{}, heldFor: map[string]time.Time{}}
}

// read takes in what the logs gained since the last read (whole lines),
// and forgets refusals past budgetExemption.
func (r *refusals) read(now time.Time) {
	files, _ := filepath.Glob(r.glob)
	for _, f := range files {
		r.readFile(f, now)
	}
	for pod, at := range r.at {
		if now.Sub(at) >= budgetExemption {
			delete(r.at, pod)
			delete(r.pendingAt, pod)
		}
	}
}

func (r *refusals) readFile(path string, now time.Time) {
	fh, err := os.Open(path)
	if err != nil {
		return
	}
	defer func() { _ = fh.Close() }()
	off := r.offsets[path]
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return
	}
	br := bufio.NewReaderSize(fh, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return // a partial line is read again next time
		}
		off += int64(len(line))
		r.offsets[path] = off
		if m := budgetRefusal.FindStringSubmatch(line); m != nil {
			r.at[m[1]] = now
			if refusedPending.MatchString(line) {
				r.pendingAt[m[1]] = now
			}
		}
	}
}

// refused: a refusal of the pod was read within budgetExemption of now.
func (r *refusals) refused(pod string, now time.Time) bool {
	at, ok := r.at[pod]
	return ok && now.Sub(at) < budgetExemption
}

// exempt: 6-explain does not judge the pending pod now. A pod refused within
// budgetExemption is exempt: its next attempt explains it or is refused
// again, logged again. A Kubernetes PodGroup member (member) is not explained
// at its next attempt, whose group cycle runs no PostFilter, but when its
// condition's message changes (or at a takeover; Explain's README): after a
// refusal of its pending decision, it stays exempt while the message it had
// at the first check after that refusal stands (a placement tried at Reserve
// and refused holds no message).
func (r *refusals) exempt(pod, message string, member bool, now time.Time) bool {
	if at, ok := r.pendingAt[pod]; ok && member && !r.heldFor[pod].Equal(at) {
		r.heldMessage[pod], r.heldFor[pod] = message, at
	}
	if r.refused(pod, now) {
		return true
	}
	if m, ok := r.heldMessage[pod]; ok {
		if m == message {
			return true
		}
		delete(r.heldMessage, pod)
	}
	return false
}

// sweep forgets the pods live no longer holds (gone; an unbound pod is
// deleted at once, never seen terminating).
func (r *refusals) sweep(live func(pod string) bool) {
	for pod := range r.heldFor {
		if !live(pod) {
			delete(r.heldMessage, pod)
			delete(r.heldFor, pod)
		}
	}
}
