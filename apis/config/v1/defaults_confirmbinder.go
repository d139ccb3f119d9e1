package v1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Defaults of ConfirmBinderArgs.
const (
	DefaultConfirmTightHeadroomPercent int32 = 10
	DefaultConfirmTimeout                    = 5 * time.Second
)

// SetDefaults_ConfirmBinderArgs fills what is unset.
func SetDefaults_ConfirmBinderArgs(obj *ConfirmBinderArgs) { //nolint:revive // name required by defaulter-gen
	if obj.Confirm == "" {
		obj.Confirm = ConfirmWhenTight
	}
	if obj.TightHeadroomPercent == nil {
		obj.TightHeadroomPercent = ptr.To(DefaultConfirmTightHeadroomPercent)
	}
	if obj.ConfirmTimeout == nil {
		obj.ConfirmTimeout = &metav1.Duration{Duration: DefaultConfirmTimeout}
	}
	if obj.OnConfirmError == "" {
		obj.OnConfirmError = ConfirmErrorRequeue
	}
}
