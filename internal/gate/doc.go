// Package gate is the workload gate's admission decision, as pure functions: Decide judges a
// create or update of a workload against the RetryPolicies of its namespace and the
// ClusterRetryPolicies whose namespaceSelector selects it (Reject, Rewrite or Audit when a chain
// through the workload's own edges would exceed a cap; the strictest of either kind named
// first). Decide adapts each API object once (workload.ForRetryPolicy, ForClusterRetryPolicy)
// and judges every selecting policy as one workload.Policy, reading the stored workloads of its
// namespaces through a Source (and a cluster policy's namespaces through a ClusterSource's
// Scope). The handler's Source is a request on the shared workload index
// (internal/index: index.Index.For), which reads only the part of a namespace that can change
// the verdict and answers from a policy's prepared graph when the request's chains reach much of
// a large namespace. The order of the policies and Reject, Rewrite, Audit are one skeleton,
// Enforce (enforce.go), that the mesh gate (webhook.DecideMesh) shares. mesh.go puts a
// verdict's plan in the application's terms when mesh layers multiply its edges; time.go
// judges the same chains against a policy's spec.maxTimeToAnswer.
// The workload's annotations are checked where they sit with analyze's checks
// (workload.ReadView, AnnotationErrors, JobTemplateWarnings), so the gate refuses what analyze
// calls an error and warns of what it warns of; the graph is judged on the pod template's alone.
//
// The package imports no client: internal/webhook serves Decide as an admission.Handler over the
// index that internal/kubeobj feeds. Tests give Decide a slice of workloads as its Source, and
// compare that with the index's answer both ways (index.Index.ForMode).
package gate
