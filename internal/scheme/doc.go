// Package scheme builds the runtime.Scheme every retrycap client uses: the built-in Kubernetes
// types and the retrycap API. It is a leaf package so that the manager, the CLI and the tests of
// the packages the manager imports (controllers, webhooks) share one definition without pulling
// the manager into the CLI or making an import cycle.
package scheme
