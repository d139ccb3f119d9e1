package leadership

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
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
