package config

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is kube-scheduler's config group: plugin args are decoded as kinds of it.
const GroupName = "kubescheduler.config.k8s.io"

// SchemeGroupVersion is the internal version of Berth's plugin args.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: runtime.APIVersionInternal}

var (
	localSchemeBuilder = &schemeBuilder
	schemeBuilder      = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the internal plugin args types to a scheme.
	AddToScheme = localSchemeBuilder.AddToScheme
)

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
