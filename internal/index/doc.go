// Package index is the shared workload index: every workload, Service and Namespace label set the
// manager's informers hold, parsed once (workload.Parsed) and kept by namespace with the
// service-level call graph of all of them. The controller (both reconcilers), the workload gate,
// the mesh gate, the policy validators and the pod injector all read the one Index the operator
// makes (New) and internal/kubeobj feeds (kubeobj.FeedIndex, the only feeder); a component set up
// without it fails rather than build a second copy.
//
// What it answers: a namespace's parsed workloads and Services (Parsed, Services); the part of a
// namespace (RelevantParsed, source.go) or of a cluster policy's namespaces (cluster_reach.go)
// that can change an admission verdict; the Namespaces' labels and a ClusterRetryPolicy's scope
// (namespaces.go, cluster.go); each policy's prepared graph (workload.Base) of a namespace or of
// a cluster policy's scope, rebuilt in the background after a change (bases.go, Refresh); the
// mesh layers the prepared graphs count (mesh.go); the CronJob a Job's pods belong to
// (CronJobOf, for the injector); and a change feed (OnChange) the reconcilers
// map to policies. For turns a request into the gate's Source (a *Request).
//
// The package imports no client; it is pure data structures over internal/workload.
package index
