// Package sidecar is the contract between the pod injector and the retrycap-proxy sidecar: Args,
// the proxy's command line as a typed value, with every flag's name, type, default and help
// written once. The injector fills an Args from the pod and the policy and renders it
// (Args.Render) into the container's args; the proxy binds the same flags (Args.Bind, NewFlagSet)
// and parses them back. Parse(Render(a)) == a for every a (a nil RetryMethods comes back
// empty: both render as "--retry-methods=").
//
// Pure: it imports pflag and the standard library (and the leaf api/v1alpha1/defaults), no
// client or apimachinery, so the proxy binary stays small.
package sidecar
