//go:build !soakmutants

package mutant

import "testing"

// TestNothingIsPlantedOutsideTheMutantsBuild: in a build without the
// soakmutants tag (every release), no fault is on, whatever the
// environment says.
func TestNothingIsPlantedOutsideTheMutantsBuild(t *testing.T) {
	t.Setenv("BERTH_MUTANT", string(QuotaIgnoresMax))
	for _, n := range All {
		if On(n) {
			t.Errorf("On(%q) = true in a build without the soakmutants tag", n)
		}
	}
	if p := Planted(); p != "" {
		t.Errorf("Planted() = %q, want none", p)
	}
}
