package validation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestValidateCoschedulingArgs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.CoschedulingArgs)
		wantErr []string
	}{
		{name: "valid"},
		{name: "the framework's cap is allowed", mutate: func(a *config.CoschedulingArgs) { a.ScheduleTimeout.Duration = 15 * time.Minute }},
		{name: "timeout above the framework's cap", mutate: func(a *config.CoschedulingArgs) { a.ScheduleTimeout.Duration = 20 * time.Minute },
			wantErr: []string{`args.scheduleTimeout: Invalid value: "20m0s": must be between 1s and 15m0s (the framework's cap on a Permit wait)`}},
		{name: "timeout too short", mutate: func(a *config.CoschedulingArgs) { a.ScheduleTimeout.Duration = 0 },
			wantErr: []string{`args.scheduleTimeout: Invalid value: "0s"`}},
		{name: "interval too short", mutate: func(a *config.CoschedulingArgs) { a.StatusUpdateInterval.Duration = time.Millisecond },
			wantErr: []string{`args.statusUpdateInterval: Invalid value: "1ms": must be between 100ms and 10m0s`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &config.CoschedulingArgs{
				ScheduleTimeout:      metav1.Duration{Duration: time.Minute},
				WriteStatus:          true,
				StatusUpdateInterval: metav1.Duration{Duration: time.Second},
			}
			if tc.mutate != nil {
				tc.mutate(a)
			}
			checkErrors(t, ValidateCoschedulingArgs(field.NewPath("args"), a), tc.wantErr)
		})
	}
}
