package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of the retrycap resources.
	GroupVersion = schema.GroupVersion{Group: "retrycap.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the retrycap types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the retrycap types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
