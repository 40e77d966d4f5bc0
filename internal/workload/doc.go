// Package workload reads Kubernetes objects (the workloads of Kinds: Deployments, StatefulSets,
// DaemonSets, CronJobs, Jobs and ReplicaSets no controller owns, bare Pods)
// and a policy into the graph of that policy: which workloads it selects, their service names,
// their upstreams (with the policy's default attempts and names normalised), and the
// entrypoints. The controller, the admission webhooks and the CLI all use this one builder, so
// they agree on every number and every error.
//
// A policy of either kind is one Policy (policy.go): ForRetryPolicy and ForClusterRetryPolicy
// adapt the two API types, and are the only place that tells them apart. A RetryPolicy is a
// policy over its own namespace with plain node names; a ClusterRetryPolicy a policy over the
// namespaces its namespaceSelector selects (ClusterScope) whose nodes are "name.ns"
// (cluster.go). The Policy carries its reference and the strictest-first order (PolicyRef,
// CompareRefs: strictest.go), spec, scope, selection (Selects) and naming (Node, UpstreamNode,
// Entrypoint), and every pure package reads a policy through it. Overridden says which of a
// policy's workloads a stricter selecting policy's settings are rendered for (overridden.go).
//
// The builders, one per question a caller asks, all over the one build: Build (workloads as
// read), BuildParsed (workloads parsed beforehand, the index's), BuildWith (an incoming workload
// in place of its stored version: the injector's entrypoint), BuildJudged (the same for the
// gate, the incoming workload's own edges only), Analyze (Build and the analysis), NewBase (a
// graph analysed once that the gate judges an incoming workload against) and NewIncremental (a
// graph the controller patches). Each takes the mesh layers (a *mesh.Set, nil: none).
//
// Fixes: Result.Analyze writes each violation's fix in the unit of what it changes (an
// annotation value, the mesh fields, as many of an edge's layers as it needs: mesh.Split;
// mesh_fix.go), and Result.PlanFix is the combined plan it reads when a gateway route on an
// entrypoint must be lowered or an edge's layers cannot all go to 1 try (fixplan.go): the route
// (to its field's fewest tries at most), and the edges planned for the client attempts it leaves
// with room kept below each edge for the fewest the edges under it carry
// (graph.PlanRewriteFloors). analyze -o patch applies the same plan, so a chain's fix is the
// patch's changes on it.
//
// A workload's labels and annotations are Pairs (sorted pairs in one slice, not Go maps: at tens
// of thousands of workloads the maps were most of the manager's heap). The controller keeps each
// policy's graph (RetryPolicy or ClusterRetryPolicy) as an Incremental, which patches a
// workload's upstream change, and without Services a workload added, removed, (de)selected or
// renamed, into it through the builder's own per-workload steps instead of building it again,
// with exactly the build's result (incremental.go).
//
// The checks of a workload's retrycap annotations themselves, apart from any graph, are shared by
// the admission gate and analyze so that both say the same of one object (placement.go, stray.go):
// ReadView (the annotations as read, the own metadata's filling in for the template's),
// AnnotationErrors, UpstreamsWarnings, StrayKeys, InjectError, JobTemplateWarnings.
//
// It is pure: it imports API types but no clients, and never talks to a cluster.
package workload
