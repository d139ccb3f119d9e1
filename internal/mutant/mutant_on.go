//go:build soakmutants

package mutant

import (
	"fmt"
	"os"
	"slices"
)

// planted is $BERTH_MUTANT, read once at start-up; an unknown name stops
// the process (a typo in `make soak-mutants` must not run a clean soak).
var planted = func() Name {
	n := Name(os.Getenv("BERTH_MUTANT"))
	if n != "" && !slices.Contains(All, n) {
		fmt.Fprintf(os.Stderr, "BERTH_MUTANT=%q: not one of %v\n", n, All)
		os.Exit(2)
	}
	if n != "" {
		fmt.Fprintf(os.Stderr, "MUTANT: planted fault %q (a soakmutants build; never a release)\n", n)
	}
	return n
}()

// On reports whether the planted fault name is active.
func On(name Name) bool { return planted == name }

// Planted is the fault this process plants ("" if none).
func Planted() Name { return planted }
