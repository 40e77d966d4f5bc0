// Package controller holds the two reconcilers, RetryPolicy and ClusterRetryPolicy: each keeps
// its policies' status (the computed amplification, worst path, chains, violations, the time
// along the chain and the conditions)
// current as workloads change, emits events when a policy crosses its cap, and exports the
// amplification as Prometheus gauges on the manager's /metrics.
//
// The graph comes from the shared builder (internal/workload) over the shared index
// (workloads.go), with the mesh watcher's layers (mesh_source.go) and, with Prometheus, the
// observed edges and tries (observed.go, graph.go: internal/observed, internal/telemetry); the
// status comes from the pure setters in internal/status, written as one merge patch
// (statuspatch.go: the first write whole, then differences). Which other policies select a
// policy's workloads, and so whose proxy settings they run, is read from the cache and watched
// (overridden.go). This package only fetches, watches and writes.
package controller
