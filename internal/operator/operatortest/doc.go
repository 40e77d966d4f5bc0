// Package operatortest starts the whole operator (operator.NewManager, webhooks on) against a
// real API server from internal/controlplane, for the tests that play the cluster end to end:
// one place for the control plane, the webhook serving address and the manager's lifecycle.
package operatortest
