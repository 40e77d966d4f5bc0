// Package analyze turns RetryPolicies and workloads into reports and renders them as a table,
// JSON, Graphviz DOT, Mermaid or an indented tree. It also reads manifests (multi-document YAML
// or JSON) into policies and workloads, remembering where each came from so errors can name the
// file and document. A kind that the version it names does not have is an error where the
// list of kinds is complete: the core versions the graph reads (from the types) and the mesh
// API groups it reads whose CRDs are vendored whole (meshkinds_gen.go, generated from them) and
// Linkerd's two (meshkinds_linkerd.go, written by hand from a release's CRDs).
//
// It is pure (no cluster access): `retrycap analyze` uses it on files, and `retrycap graph`
// reuses the renderers on what it reads from a live cluster.
package analyze
