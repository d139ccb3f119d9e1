package leadership

import (
	"context"
	"runtime"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-scheduler/berth/internal/testing/leakcheck"
)

// A process that stood still longer than FenceGap is fenced from the moment
// it wakes (before its beat runs) until FenceHold after the beat that saw
// the gap; beats at their pace never fence.
func TestFenceHoldsAfterTheProcessStoodStill(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1000, 0))
	f := NewFence(c)
	for range 40 {
		c.Step(FenceBeat)
		f.Beat()
		if fenced, why := f.Fenced(); fenced {
			t.Fatalf("fenced while beating every %s: %s", FenceBeat, why)
		}
	}
	// SIGSTOP for 25 s: the binding goroutine wakes before the beat.
	c.Step(25 * time.Second)
	if fenced, _ := f.Fenced(); !fenced {
		t.Fatal("not fenced on waking, before the beat ran")
	}
	f.Beat()
	for elapsed := time.Duration(0); elapsed < FenceHold-time.Second; elapsed += FenceBeat {
		c.Step(FenceBeat)
		f.Beat()
	}
	if fenced, why := f.Fenced(); !fenced {
		t.Fatalf("not fenced %s after the beat that saw the gap", FenceHold-time.Second)
	} else {
		t.Log(why)
	}
	c.Step(2 * time.Second)
	f.Beat()
	if fenced, why := f.Fenced(); fenced {
		t.Fatalf("still fenced after FenceHold: %s", why)
	}
}

// The process fence beats while a scheduler that uses it runs and stops
// with the last one (scheduler_perf runs schedulers one after another in one
// process, under goleak); a fence started again does not count the time it
// was stopped as the process standing still.
func TestProcessFenceRunsWhileASchedulerUsesIt(t *testing.T) {
	c := clocktesting.NewFakeClock(time.Unix(1000, 0))
	defer func(old clock.WithTicker, oldFence *Fence) { fenceClock, processFence = old, oldFence }(fenceClock, processFence)
	fenceClock, processFence = c, nil

	first, stopFirst := context.WithCancel(context.Background())
	second, stopSecond := context.WithCancel(context.Background())
	tickers := c.Waiters()
	f := ProcessFence(first)
	if g := ProcessFence(second); g != f {
		t.Fatal("two schedulers in one process got two fences")
	}
	stopFirst()
	// The second scheduler still runs: the fence beats for it.
	waitForTicker(t, c, tickers+1)
	for range 40 {
		c.Step(FenceBeat)
		waitForBeat(t, f, c.Now())
	}
	stopSecond()
	if err := goleak.Find(leakcheck.Options()...); err != nil {
		t.Fatalf("the fence still runs after its last scheduler stopped: %v", err)
	}

	// A minute later a new scheduler starts in the same process.
	c.Step(time.Minute)
	third, stopThird := context.WithCancel(context.Background())
	defer stopThird()
	tickers = c.Waiters() // a fake ticker stays a waiter after Stop
	if g := ProcessFence(third); g != f {
		t.Fatal("a new scheduler got a new fence")
	}
	if fenced, why := f.Fenced(); fenced {
		t.Fatalf("fenced after a restart: %s", why)
	}
	waitForTicker(t, c, tickers+1)
	c.Step(FenceBeat)
	waitForBeat(t, f, c.Now())
	stopThird()
	if err := goleak.Find(leakcheck.Options()...); err != nil {
		t.Fatalf("the fence still runs after its last scheduler stopped: %v", err)
	}
}

// waitForBeat waits until the fence's goroutine has beaten at now.
func waitForBeat(t *testing.T, f *Fence, now time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		f.mu.Lock()
		last := f.last
		f.mu.Unlock()
		if !last.Before(now) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no beat at %s (last %s)", now, last)
		}
		runtime.Gosched()
	}
}

// waitForTicker waits until the fence's goroutine has made its ticker: the
// clock has n waiters.
func waitForTicker(t *testing.T, c *clocktesting.FakeClock, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Waiters() < n {
		if time.Now().After(deadline) {
			t.Fatal("the fence made no ticker")
		}
		runtime.Gosched()
	}
}
