// Package operator wires the retrycap manager: the scheme, the RetryPolicy and ClusterRetryPolicy
// controllers, the one shared workload index, the admission webhooks, metrics and health probes. cmd/manager, `retrycap demo` and the tests that
// run the manager against a real API server all build it here, so they cannot drift apart.
package operator
