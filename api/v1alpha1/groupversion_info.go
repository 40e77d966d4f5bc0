package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of the retrycap resources.
	GroupVersion = schema.GroupVersion{Group: "retrycap.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the retrycap types with a runtime.Scheme. It is apimachinery's,
	// so that importing the API pulls in no controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the retrycap types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &RetryPolicy{}, &RetryPolicyList{}, &ClusterRetryPolicy{}, &ClusterRetryPolicyList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
