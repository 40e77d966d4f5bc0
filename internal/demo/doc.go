// Package demo runs retrycap's story end to end on an embedded control plane (a real
// kube-apiserver and etcd): the sample policies and their computed status, a refused deploy, a
// rewritten one, an injected pod, a chain across three teams' namespaces refused by a
// ClusterRetryPolicy and the storm lab, printing what a user would see with kubectl.
// `make demo` runs it through `retrycap demo`; a test runs it in its short mode.
package demo
