package coscheduling

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-scheduler/berth/internal/testing/leakcheck"
)

// TestMain fails the package's tests if a goroutine they started outlives
// them (the plugin's informers, loops and writers end with its context).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, leakcheck.Options()...) }
