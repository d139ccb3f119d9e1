// Package onceper lets a thing keyed by a string happen at most once per
// interval: the rate limit of the events plugins record for users
// (Coscheduling's on PodGroups, AdmissionFeedback's on pods and nodes).
package onceper

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// Limiter remembers, for an interval, each key that happened, in
// apimachinery's expiring cache (which drops expired keys as it is
// written, so it stays bounded).
type Limiter struct {
	interval time.Duration
	// mu makes Allow's look-then-record one step.
	mu   sync.Mutex
	seen *cache.Expiring
}

// New returns a Limiter of interval on the wall clock.
func New(interval time.Duration) *Limiter { return newWithClock(interval, clock.RealClock{}) }

func newWithClock(interval time.Duration, c clock.Clock) *Limiter {
	return &Limiter{interval: interval, seen: cache.NewExpiringWithClock(c)}
}

// Allow reports whether key may happen now, and if so records that it did.
func (l *Limiter) Allow(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen.Get(key); ok {
		return false
	}
	l.seen.Set(key, struct{}{}, l.interval)
	return true
}

// Len is how many keys are remembered (expired ones until the next Allow
// that records).
func (l *Limiter) Len() int { return l.seen.Len() }
