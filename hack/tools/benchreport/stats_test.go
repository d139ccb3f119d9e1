package main

import (
	"math"
	"testing"
)

// quartiles are go-moremath's (R8): the median of two values is their
// mean, and the quartiles interpolate between order statistics.
func TestQuartilesAreMedianUnbiased(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if _, m, _ := quartiles([]float64{3, 1}); !near(m, 2) {
		t.Errorf("median of {1, 3} = %v, want 2", m)
	}
	q1, m, q3 := quartiles([]float64{4, 1, 3, 2})
	if !near(q1, 1+5.0/12) || !near(m, 2.5) || !near(q3, 3+7.0/12) {
		t.Errorf("quartiles of 1..4 = %v %v %v, want 1.4167 2.5 3.5833", q1, m, q3)
	}
	if _, m, _ := quartiles(nil); !math.IsNaN(m) {
		t.Errorf("median of nothing = %v, want NaN", m)
	}
	xs := []float64{3, 1, 2}
	quartiles(xs)
	if xs[0] != 3 {
		t.Error("quartiles sorted its argument")
	}
}
