// Package gate is the workload gate's admission decision, as pure functions and data structures:
// Decide judges a create or update of a workload against the RetryPolicies of its namespace
// (Reject, Rewrite or Audit when a chain through the workload's own edges would exceed a cap),
// reading the namespace through a Source. Index is the handler's Source: every workload by
// namespace with the service-level call graph of all of them, so that a request reads only the
// part of a namespace that can change its verdict, and each policy's prepared graph of the
// namespace (bases.go), refreshed in the background, so that a request whose chains reach much of
// a large namespace costs the length of its paths.
//
// The package imports no client: internal/webhook feeds the Index from the manager's informers
// (Put, Remove, PolicyChanged, Refresh) and serves Decide as an admission.Handler. Tests give
// Decide a slice of workloads as its Source.
package gate
