// Package workload reads Kubernetes objects (Deployments, StatefulSets, DaemonSets, bare Pods)
// and a RetryPolicy or a ClusterRetryPolicy into the graph of that policy: which workloads it
// selects, their service names, their upstreams (with the policy's default attempts and names
// normalised), and the entrypoints. A cluster policy's graph spans the namespaces it selects and
// names every node "name.ns" (cluster.go); it is the same builder. The controller, the admission webhooks and the CLI all use this one builder, so
// they agree on every number and every error.
//
// A workload's labels and annotations are Pairs (sorted pairs in one slice, not Go maps: at tens
// of thousands of workloads the maps were most of the manager's heap). The controller keeps each
// policy's graph (RetryPolicy or ClusterRetryPolicy) as an Incremental, which patches a
// workload's upstream change, and without Services a workload added, removed, (de)selected or
// renamed, into it through the builder's own per-workload steps instead of building it again,
// with exactly the build's result (incremental.go).
//
// It is pure: it imports API types but no clients, and never talks to a cluster.
package workload
