// Package annotations defines the retrycap.dev annotation and label keys and
// the grammar of retrycap.dev/upstreams: a comma-separated list of
// NAME[:PORT][=ATTEMPTS][/PER-TRY-TIMEOUT][*CALLS].
//
// It is pure (no Kubernetes imports) so that the controller, the webhooks, the
// CLI and the proxy's flag parsing all accept exactly the same values and
// report the same errors, naming the token and its column.
package annotations
