// Package webhook holds retrycap's admission webhooks as thin admission.Handlers and their setup
// on the manager: the workload gate (the decision is internal/gate's Decide, over the gate's
// index, which informers.go feeds from the manager's cache), the RetryPolicy validator (what CEL
// in the CRD cannot check) and the pod injector (the decision is internal/inject's Decide).
//
// A handler decodes the request, reads what the decision needs from the manager's informers
// (workloads through internal/cluster), calls the pure decision and writes the response; no
// admission request calls the API server. The webhook configurations are hand-written in
// config/webhook/manifests.yaml: envtest installs exactly that file, so the tests exercise the
// shipped configuration.
package webhook
