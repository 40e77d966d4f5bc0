// Package defaults holds the RetryPolicy defaults and bounds, each written once: the CRD declares
// the same values as +kubebuilder:default and +kubebuilder:validation markers (which cannot name
// Go constants; tests check that the generated CRDs agree, value by value, with none left
// unlisted), the injector applies them to a policy built in code, analyze applies them to
// manifests read offline, the annotation grammar bounds an upstream's attempts and timeout by
// them, workload.DurationProblems checks a policy's durations against them (the injector skips
// such a policy's pods, the status warns of it), and the proxy uses them as its flag defaults
// and bounds (defaults.go: the values; bounds.go: the bounds and CheckDuration).
//
// It is a package of its own, importing nothing but the standard library, so that the proxy
// binary can read it without linking apimachinery (importing api/v1alpha1 adds about 3 MB to
// retrycap-proxy).
package defaults
