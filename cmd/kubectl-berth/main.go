// Command kubectl-berth is kubectl's plugin for Berth (on the PATH as
// kubectl-berth, it runs as `kubectl berth`): `kubectl berth explain POD`
// prints why the pod landed on its node, or why it fits nowhere, from the
// explanation Berth's Explain plugin wrote on it; `kubectl berth validate
// CONFIG` checks a scheduler configuration offline, as the scheduler's
// start-up does.
package main

import (
	"errors"
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

func main() {
	cmd := newRootCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	if err := cmd.Execute(); err != nil {
		// The commands silence cobra's own printing (and its usage dump):
		// the error is printed here, once, as kubectl prints its own.
		fmt.Fprintln(os.Stderr, "error:", err)
		var ec exitCode
		if errors.As(err, &ec) {
			os.Exit(ec.code)
		}
		os.Exit(1)
	}
}

// exitCode is an error with its own exit status (simulate's --fail-on: 3,
// so that a pipeline tells a gate from bad input, 1).
type exitCode struct {
	code int
	err  error
}

func (e exitCode) Error() string { return e.err.Error() }
func (e exitCode) Unwrap() error { return e.err }
