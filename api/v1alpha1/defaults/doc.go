// Package defaults holds the RetryPolicy defaults, written once: the CRD declares the same values
// as +kubebuilder:default markers (which cannot name Go constants; a test checks that the
// generated CRD agrees), the injector applies them to a policy built in code, analyze applies
// them to manifests read offline, and the proxy uses them as its flag defaults.
//
// It is a package of its own, importing nothing but the standard library, so that the proxy
// binary can read it without linking apimachinery (importing api/v1alpha1 adds about 3 MB to
// retrycap-proxy).
package defaults
