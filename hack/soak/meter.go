package main

import (
	"sort"
	"time"
)

// meter measures how much an invariant was evaluated: every check, each
// object in its scope (a pod pending, a node with pods, a quota, a gang
// partly bound) adds the seconds since the previous check to inScope, and
// to evaluated if the invariant judged it then (not within the object's own
// grace, and not while no replica led for a bound that counts leader time).
// Events (a bind, an eviction, a refusal) count once each.
type meter struct {
	inScope, evaluated float64
	judged             map[string]bool
	events, eventsJ    int
	// on and run: seconds of the run the invariant was on (judging any
	// object in scope) and seconds of the run.
	on, run float64
}

// invariantReport is one invariant's line in the report.
type invariantReport struct {
	Invariant string `json:"invariant"`
	// ObjectSeconds in scope and evaluated, and the share evaluated.
	InScopeSeconds   float64 `json:"inScopeObjectSeconds"`
	EvaluatedSeconds float64 `json:"evaluatedObjectSeconds"`
	// Events seen and judged (invariants checked at an event).
	Events       int `json:"events,omitempty"`
	EventsJudged int `json:"eventsJudged,omitempty"`
	// Share evaluated: of the object-seconds, or of the events.
	Share float64 `json:"share"`
	// RunShare: the share of the run's seconds the invariant was on.
	RunShare float64 `json:"runShare"`
	// Judged is how many distinct objects it judged at least once.
	Judged int `json:"objectsJudged"`
}

func (w *watcher) meterOf(inv string) *meter {
	m := w.meters[inv]
	if m == nil {
		m = &meter{judged: map[string]bool{}}
		w.meters[inv] = m
	}
	return m
}

// tick counts this check's seconds for inv, on or not (a bound that counts
// leader time is off while no replica leads).
func (w *watcher) tick(inv string, on bool) {
	m := w.meterOf(inv)
	m.run += w.dt
	if on {
		m.on += w.dt
	}
}

// observe counts key in scope of inv for this check, evaluated or not.
func (w *watcher) observe(inv, key string, evaluated bool) {
	m := w.meterOf(inv)
	m.inScope += w.dt
	if evaluated {
		m.evaluated += w.dt
		m.judged[key] = true
	}
}

// event counts one event of inv, judged or not.
func (w *watcher) event(inv, key string, judged bool) {
	m := w.meterOf(inv)
	m.events++
	if judged {
		m.eventsJ++
		m.judged[key] = true
	}
}

func (w *watcher) invariantReports() []invariantReport {
	var out []invariantReport
	for inv, m := range w.meters {
		r := invariantReport{Invariant: inv, InScopeSeconds: m.inScope, EvaluatedSeconds: m.evaluated, Events: m.events, EventsJudged: m.eventsJ, Judged: len(m.judged)}
		r.RunShare = 1
		if m.run > 0 {
			r.RunShare = m.on / m.run
		}
		switch {
		case m.inScope > 0:
			r.Share = m.evaluated / m.inScope
		case m.events > 0:
			r.Share = float64(m.eventsJ) / float64(m.events)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Invariant < out[j].Invariant })
	return out
}

// timers hold, per state key, how long the state has held, counting only
// the time the clock counts (leader time for the bounds that need a
// scheduler running). A state that no longer holds is forgotten, and so is
// one no check looked at in the last check (its object is gone: a pod
// deleted while pending, a PodGroup deleted).
type timers struct {
	m     map[string]*timer
	check int
}

type timer struct {
	d    time.Duration
	seen int
}

func newTimers() *timers { return &timers{m: map[string]*timer{}} }

func (t *timers) add(key string, holds, counting bool, dt float64) time.Duration {
	if !holds {
		delete(t.m, key)
		return 0
	}
	x, ok := t.m[key]
	if !ok {
		t.m[key] = &timer{seen: t.check}
		return 0
	}
	x.seen = t.check
	if counting {
		x.d += time.Duration(dt * float64(time.Second))
	}
	return x.d
}

// next starts a check: the timers the previous check did not look at are
// dropped.
func (t *timers) next() {
	for k, x := range t.m {
		if x.seen < t.check {
			delete(t.m, k)
		}
	}
	t.check++
}
