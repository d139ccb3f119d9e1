// Package pluginclock carries, in the context the scheduler gives plugin
// factories, the clock Berth's plugins read the time from. The scheduler
// gives none and the plugins read the wall clock; kubectl berth simulate
// gives the clock of the snapshot it replays (At), so that a sample, a
// refusal or a grace period is as old in the simulation as it was when the
// snapshot was taken, however long ago that was.
package pluginclock

import (
	"context"
	"time"
)

type key struct{}

// With returns ctx carrying now: the plugins built with it (the
// scheduler's scheduler.New context) read the time from now.
func With(ctx context.Context, now func() time.Time) context.Context {
	return context.WithValue(ctx, key{}, now)
}

// From returns the clock ctx carries, or otherwise when it carries none
// (time.Now, or a test's variable).
func From(ctx context.Context, otherwise func() time.Time) func() time.Time {
	if now, ok := ctx.Value(key{}).(func() time.Time); ok && now != nil {
		return now
	}
	return otherwise
}

// At returns a clock that reads at when it is made and then runs at the
// wall clock's rate: durations measured on it (a gang's wait, a backoff)
// are real ones, times compared with objects' timestamps are the
// snapshot's. Its readings carry no monotonic reading (as times parsed
// from objects carry none).
func At(at time.Time) func() time.Time {
	offset := time.Until(at)
	return func() time.Time { return time.Now().Add(offset).Round(0) }
}
