// Package workload reads Kubernetes objects (Deployments, StatefulSets, DaemonSets, bare Pods)
// and a RetryPolicy or a ClusterRetryPolicy into the graph of that policy: which workloads it
// selects, their service names, their upstreams (with the policy's default attempts and names
// normalised), and the entrypoints. A cluster policy's graph spans the namespaces it selects and
// names every node "name.ns" (cluster.go); it is the same builder. The controller, the admission webhooks and the CLI all use this one builder, so
// they agree on every number and every error.
//
// It is pure: it imports API types but no clients, and never talks to a cluster.
package workload
