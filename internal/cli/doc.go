// Package cli holds the retrycap commands that both binaries share: `analyze` (manifests
// offline, in CI), `graph` (the live graph of a cluster), `observe` (per request, from access
// logs) and `discover` (the upstreams telemetry observed), the root command and the exit
// codes. cmd/retrycap (the full CLI: also the storm lab and the demo) and cmd/kubectl-retrycap
// (the kubectl plugin: only what runs against a cluster or in CI) list their commands
// explicitly from these constructors, so there is one piece of code per command.
//
// Nothing here may import the storm lab, the demo or the embedded control plane: the plugin
// binary links this package and must stay small (no envtest, no gonum/plot).
package cli
