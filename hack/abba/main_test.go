package main

import (
	"strings"
	"testing"
	"time"
)

// The report gives each pair's ratio, the paired differences' mean and
// standard error, and the pairs a 2 % resolution needs at that spread.
func TestReportStatistics(t *testing.T) {
	var results []result
	// Four pairs: Berth's CPU 0.1, 0.3, 0.1, 0.3 s over upstream's 4 s.
	for i, d := range []float64{0.1, 0.3, 0.1, 0.3} {
		b := result{binary: "berth", startup: time.Second, schedule: 2 * time.Second, cpu: 4 + d}
		u := result{binary: "upstream", startup: time.Second, schedule: 2 * time.Second, cpu: 4}
		if i%2 == 1 {
			b, u = u, b
		}
		results = append(results, b, u)
	}
	got := report(results, "make bench-abba PAIRS=4", 10, 20, 0, false)
	for _, want := range []string{
		"scheduling time **1.00× (1.00–1.00)**",
		// mean 0.2 s, sd 0.1155 s, SE 0.0577 s; 5 % ± 1.4 % of 4 s.
		"CPU +0.200 s ± 0.058 s (+5.0 % ± 1.4 % of upstream's mean 4.00 s)",
		"start-up +0.000 s ± 0.000 s",
		// (0.1155 / 0.04)² = 8.3: 9 pairs.
		"needs 9 pairs",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// The section says how the runs' pods were created: all before the binary
// starts, or paced from its first binding.
func TestReportSaysHowPodsWereCreated(t *testing.T) {
	results := []result{
		{binary: "berth", startup: time.Second, schedule: 2 * time.Second, cpu: 4},
		{binary: "upstream", startup: time.Second, schedule: 2 * time.Second, cpu: 4},
	}
	for _, c := range []struct {
		rate float64
		want string
	}{
		{0, "before each run 20 pods are created, then the binary is started."},
		{50, "each run schedules 20 pods: one created before the binary starts, the other 19 at 50 a second from its first binding on"},
	} {
		if got := report(results, "make bench-abba", 10, 20, c.rate, false); !strings.Contains(got, c.want) {
			t.Errorf("rate %g: the section lacks %q:\n%s", c.rate, c.want, got)
		}
	}
}
