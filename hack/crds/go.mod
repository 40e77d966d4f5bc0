// The module of the mesh CRDs that cannot be required by the product's go.mod without moving its
// versions: Envoy Gateway (github.com/envoyproxy/gateway v1.9.1 requires newer k8s.io/utils,
// gomodules.xyz/jsonpatch, zap, ... and go 1.26.7). Nothing imports it: the requirement and
// go.sum only pin what `go mod download -json` fetches for internal/mesh/crds (its CRDs, from
// charts/gateway-helm/charts/crds/crds/generated). Do not run `go mod tidy` here: it would
// drop the requirement.
module github.com/retrycap/retrycap/hack/crds

go 1.26.7

require github.com/envoyproxy/gateway v1.9.1 // indirect
