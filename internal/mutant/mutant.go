//go:build !soakmutants

// Package mutant plants one known fault at a time into a scheduler built
// for `make soak-mutants` (build tag soakmutants): the proof that the soak's
// invariants can fail. In every other build (release, image, tests) On is
// the constant false, so the compiler drops every planted branch: nothing of
// a mutant is reachable where users run Berth.
package mutant

// On reports whether the planted fault name is active. Always false here.
func On(Name) bool { return false }

// Planted is the fault this process plants ("" in every build but the
// mutants' scheduler).
func Planted() Name { return "" }
