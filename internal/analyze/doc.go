// Package analyze turns RetryPolicies and workloads into reports and renders them as a table,
// JSON, Graphviz DOT, Mermaid, an indented tree (render.go), SARIF (sarif.go) or the combined
// fix as merge patches (patch.go, mesh_patch.go: -o patch). It also reads manifests
// (multi-document YAML or JSON, manifests.go; a kustomization built by internal/analyze/kustomize,
// kustomize.go, local files only: kustomize_remote.go refuses a remote base) into policies, workloads, Services and the mesh Set, remembering where each
// came from so errors can name the file and document. The object reader is a table of kinds (kinds.go); an object it cannot
// model but that changes what the report means is warned about, not counted silently: an
// EnvoyFilter that patches Envoy's retry policy (envoyfilter.go), retrycap annotations on a
// foreign kind such as a Knative Service (kinds.go). A kind that the version it names does not
// have is an error where the list of kinds is complete: the core versions the graph reads (from
// the types) and the mesh API groups it reads whose CRDs are vendored whole (meshkinds_gen.go,
// generated from them) and Linkerd's two (meshkinds_linkerd.go, written by hand from a
// release's CRDs).
//
// It is pure (no cluster or network access): `retrycap analyze` uses it on files, and `retrycap graph`
// reuses the renderers on what it reads from a live cluster.
package analyze
