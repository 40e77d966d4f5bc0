// Package gate is the workload gate's admission decision, as pure functions and data structures:
// Decide judges a create or update of a workload against the RetryPolicies of its namespace and
// the ClusterRetryPolicies whose namespaceSelector selects it (Reject, Rewrite or Audit when a
// chain through the workload's own edges would exceed a cap; the strictest of either kind named
// first), reading the namespace through a Source, and the namespaces of a cluster policy through a
// ClusterSource. Index is the handler's Source: every workload by
// namespace with the service-level call graph of all of them, so that a request reads only the
// part of a namespace that can change its verdict, and each policy's prepared graph of the
// namespace (bases.go), refreshed in the background, so that a request whose chains reach much of
// a large namespace costs the length of its paths. The Index also keeps the Namespaces' labels
// (namespaces.go), a cluster policy's scope and prepared graph (cluster.go), and walks the
// relevant workloads across a cluster policy's namespaces (cluster_reach.go).
//
// The package imports no client: internal/webhook feeds the Index from the manager's informers
// (Put, Remove, PutNamespace, PolicyChanged, ClusterPolicyChanged, Refresh) and serves Decide as an admission.Handler. Tests give
// Decide a slice of workloads as its Source.
package gate
