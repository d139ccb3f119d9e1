// Package onceper lets a thing keyed by a string happen at most once per
// interval: the rate limit of the events plugins record for users
// (Coscheduling's on PodGroups, AdmissionFeedback's on pods and nodes).
package onceper

import (
	"sync"
	"time"
)

// Limiter remembers when each key last happened; keys older than the
// interval are dropped (at most once an interval), so it stays bounded.
type Limiter struct {
	interval time.Duration
	now      func() time.Time

	mu        sync.Mutex
	last      map[string]time.Time
	lastSweep time.Time
}

// New returns a Limiter of interval on the wall clock.
func New(interval time.Duration) *Limiter {
	return &Limiter{interval: interval, now: time.Now, last: map[string]time.Time{}}
}

// Allow reports whether key may happen now, and if so records that it did.
func (l *Limiter) Allow(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if t, ok := l.last[key]; ok && now.Sub(t) < l.interval {
		return false
	}
	l.last[key] = now
	if now.Sub(l.lastSweep) >= l.interval {
		l.lastSweep = now
		for k, t := range l.last {
			if now.Sub(t) >= l.interval {
				delete(l.last, k)
			}
		}
	}
	return true
}

// Len is how many keys are remembered.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.last)
}
