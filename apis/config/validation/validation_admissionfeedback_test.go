package validation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-scheduler/berth/apis/config"
)

func TestValidateAdmissionFeedbackArgs(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*config.AdmissionFeedbackArgs)
		wantErr []string
	}{
		{name: "valid"},
		{name: "threshold 0 turns the score off", mutate: func(a *config.AdmissionFeedbackArgs) { a.BlackHoleThreshold = 0 }},
		{name: "no reasons", mutate: func(a *config.AdmissionFeedbackArgs) { a.Reasons = []string{} },
			wantErr: []string{"args.reasons: Required value: at least one reason"}},
		{name: "bad reasons", mutate: func(a *config.AdmissionFeedbackArgs) {
			a.Reasons = []string{"*", "Out*Of", "Out Of", "NodePorts", "NodePorts", ""}
		},
			wantErr: []string{
				`args.reasons[0]: Invalid value: "*": must be a reason or a prefix followed by "*"`,
				`args.reasons[1]: Invalid value: "Out*Of": "*" may only end a prefix`,
				`args.reasons[2]: Invalid value: "Out Of": must not contain whitespace`,
				`args.reasons[4]: Duplicate value: "NodePorts"`,
				`args.reasons[5]: Invalid value: ""`,
			}},
		{name: "ttl too short", mutate: func(a *config.AdmissionFeedbackArgs) { a.RefusalTTL.Duration = time.Millisecond },
			wantErr: []string{`args.refusalTTL: Invalid value: "1ms": must be at least 1s`}},
		{name: "max below ttl", mutate: func(a *config.AdmissionFeedbackArgs) { a.MaxRefusalTTL.Duration = time.Minute },
			wantErr: []string{`args.maxRefusalTTL: Invalid value: "1m0s": must not be shorter than refusalTTL (5m0s)`}},
		{name: "max too long", mutate: func(a *config.AdmissionFeedbackArgs) { a.MaxRefusalTTL.Duration = 48 * time.Hour },
			wantErr: []string{`args.maxRefusalTTL: Invalid value: "48h0m0s": must be at most 24h0m0s`}},
		{name: "negative threshold", mutate: func(a *config.AdmissionFeedbackArgs) { a.BlackHoleThreshold = -1 },
			wantErr: []string{"args.blackHoleThreshold: Invalid value: -1: must not be negative"}},
		{name: "window zero", mutate: func(a *config.AdmissionFeedbackArgs) { a.BlackHoleWindow.Duration = 0 },
			wantErr: []string{`args.blackHoleWindow: Invalid value: "0s": must be between 1s and 24h0m0s`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &config.AdmissionFeedbackArgs{
				Reasons:            []string{"OutOf*", "UnexpectedAdmissionError"},
				RefusalTTL:         metav1.Duration{Duration: 5 * time.Minute},
				MaxRefusalTTL:      metav1.Duration{Duration: time.Hour},
				BlackHoleThreshold: 3,
				BlackHoleWindow:    metav1.Duration{Duration: 10 * time.Minute},
			}
			if tc.mutate != nil {
				tc.mutate(a)
			}
			checkErrors(t, ValidateAdmissionFeedbackArgs(field.NewPath("args"), a), tc.wantErr)
		})
	}
}
