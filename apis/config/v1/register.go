package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is kube-scheduler's config group.
const GroupName = "kubescheduler.config.k8s.io"

// SchemeGroupVersion is the version users write plugin args in.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1"}

var (
	localSchemeBuilder = &schemeBuilder
	schemeBuilder      = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the v1 plugin args types, their defaults and conversions to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

func init() {
	// Generated code registers conversions and defaults here, so the
	// scheme builder only has to know the types.
	localSchemeBuilder.Register(RegisterDefaults)
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&CELPolicyArgs{},
		&LoadAwareArgs{},
		&ConfirmBinderArgs{},
		&ElasticQuotaArgs{},
		&CoschedulingArgs{},
		&AdmissionFeedbackArgs{},
		&ExplainArgs{},
	)
	return nil
}
