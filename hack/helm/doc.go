// Package helm pins the Helm CLI (helm.sh/helm/v3) that renders and checks charts/retrycap.
// It is a module of its own: Helm's module graph would move the product's Kubernetes versions.
// hack/helm-bin.sh builds the binary into the cache; `go tool -modfile=hack/helm/go.mod helm`
// runs it without the cache.
package helm
