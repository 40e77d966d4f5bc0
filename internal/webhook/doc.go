// Package webhook holds retrycap's admission webhooks: the workload gate (Deployments,
// StatefulSets, DaemonSets and bare Pods; Reject, Rewrite or Audit when a chain would exceed its
// RetryPolicy's cap), the RetryPolicy validator (what CEL in the CRD cannot check) and the pod
// injector (podinjector*.go).
//
// The gate is a thin admission.Handler over Decide, a pure function of the namespace's policies,
// its cached workloads and the incoming (and old) object. Everything it reads comes from the
// manager's informers, kept in a per-namespace index, so no admission request calls the API
// server. The webhook configurations are hand-written in config/webhook/manifests.yaml: envtest
// installs exactly that file, so the tests exercise the shipped configuration.
package webhook
