// Package controller holds the two reconcilers, RetryPolicy and ClusterRetryPolicy: each keeps
// its policies' status (the computed amplification, worst path, chains, violations, the time
// along the chain and the conditions)
// current as workloads change, emits events when a policy crosses its cap, and exports the
// amplification as Prometheus gauges on the manager's /metrics.
//
// The graph comes from the shared builder (internal/workload) and the status from the pure
// setters in internal/status; this package only fetches, watches and writes.
package controller
