// Package v1alpha1 holds the retrycap.dev/v1alpha1 API: the RetryPolicy resource, which declares
// a cap on retry multiplication along every call chain of the workloads it selects, and the
// retry, budget and circuit-breaker settings the injected proxies enforce; and the
// ClusterRetryPolicy, the same over the namespaces its namespaceSelector selects.
//
// +kubebuilder:object:generate=true
// +groupName=retrycap.dev
package v1alpha1
