// Package status computes the status of a RetryPolicy or a ClusterRetryPolicy (one status type)
// from the graph the shared builder made: small pure setters (no clock, no client, no logging),
// one per part of the status, so the reconcilers stay short (fetch, compute, set, patch once)
// and every rule about what the user sees is covered by table tests. status.go: the summary,
// chains, violations, Ready (which also warns of a duration out of the CRD's bounds or a
// dedupUpstreams name the injector refuses: workload.DurationProblems, DedupProblems; and of
// workloads that run a stricter policy's proxy settings: workload.Overridden) and WithinCap, the event and the gauges; time.go: the time along
// the chain; graph.go: the declared against the observed edges (GraphComplete); bounds.go: the
// API's limits on what a status and an event may say (Clip). The layout follows Cluster API's cluster_controller_status.go.
package status
