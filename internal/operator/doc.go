// Package operator wires the retrycap manager (NewManager, operator.go): the scheme, the
// RetryPolicy and ClusterRetryPolicy controllers, the one shared workload index and its feeder,
// the mesh watcher, the admission webhooks (components.go), the Prometheus reader of observed
// amplification (observed.go), the webhook server's drain on shutdown (drain.go), metrics and
// health probes. cmd/manager, `retrycap demo` and the tests that run the manager against a real
// API server all build it here, so they cannot drift apart.
package operator
