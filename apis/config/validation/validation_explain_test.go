package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestValidateExplainArgs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.ExplainArgs)
		wantErr []string
	}{
		{name: "valid"},
		{name: "sampling and namespaces", mutate: func(a *config.ExplainArgs) { a.SampleOneIn = 1000; a.Namespaces = []string{"team-a", "team-b"} }},
		{name: "negative sampling", mutate: func(a *config.ExplainArgs) { a.SampleOneIn = -1 },
			wantErr: []string{"args.sampleOneIn: Invalid value: -1: must be between 0 (only pods that ask) and 1000000"}},
		{name: "negative budget", mutate: func(a *config.ExplainArgs) { a.MaxPerMinute = -1 },
			wantErr: []string{"args.maxPerMinute: Invalid value: -1: must be between 0 (no bound) and 100000"}},
		{name: "top nodes out of range", mutate: func(a *config.ExplainArgs) { a.TopNodes = 50 },
			wantErr: []string{"args.topNodes: Invalid value: 50: must be between 1 and 20"}},
		{name: "bad namespaces", mutate: func(a *config.ExplainArgs) { a.Namespaces = []string{"Team_A", "b", "b"} },
			wantErr: []string{`args.namespaces[0]: Invalid value: "Team_A"`, `args.namespaces[2]: Duplicate value: "b"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &config.ExplainArgs{TopNodes: 5}
			if tc.mutate != nil {
				tc.mutate(a)
			}
			checkErrors(t, ValidateExplainArgs(field.NewPath("args"), a), tc.wantErr)
		})
	}
}
