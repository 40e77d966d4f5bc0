// Package crds finds the CustomResourceDefinitions of the mesh APIs that internal/mesh reads, for
// tests that install them into a real API server (internal/controlplane, Options.CRDPaths). All
// but Kuma's and Consul's are the projects' own, from their Go modules in the module cache,
// pinned in a go.mod and go.sum or by version and hash (a fresh machine downloads them):
//
//   - Gateway API: sigs.k8s.io/gateway-api (the product's go.mod; its tests import the typed API),
//     config/crd/experimental (HTTPRoute's rules[].retry is experimental through v1.6) or
//     config/crd/standard;
//   - Istio: istio.io/api (the product's go.mod, through istio.io/client-go in the tests),
//     kubernetes/customresourcedefinitions.gen.yaml;
//   - Envoy Gateway: github.com/envoyproxy/gateway, in the module hack/crds of its own (requiring
//     it in the product's go.mod would move k8s.io/utils and others),
//     charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backendtrafficpolicies.yaml
//     (the whole directory, and the Go API's api/v1alpha1, for internal/analyze's list of the
//     group's kinds);
//   - Dapr (Resiliency): github.com/dapr/dapr at DaprVersion, charts/dapr/crds/resiliency.yaml,
//     downloaded by internal/publicdatatest at that version and hash (requiring it in a go.mod
//     would move the product's k8s.io versions);
//   - Kuma (Mesh, MeshRetry, MeshExternalService, MeshHTTPRoute) and Consul (ServiceRouter): no module the module proxy serves
//     carries them, so internal/mesh/crds/thirdparty holds minimal structural CRDs written by
//     retrycap (its README), with the projects' names, scopes and versions and the fields
//     internal/mesh reads: not the projects' files.
package crds

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/publicdatatest"
)

// Modules and paths.
const (
	GatewayAPIModule   = "sigs.k8s.io/gateway-api"
	IstioAPIModule     = "istio.io/api"
	EnvoyGatewayModule = "github.com/envoyproxy/gateway"
)

// Channel is a Gateway API release channel.
type Channel string

// Channels.
const (
	Standard     Channel = "standard"
	Experimental Channel = "experimental"
)

// GatewayAPI is the directory of the Gateway API CRDs of a channel.
func GatewayAPI(ch Channel) (string, error) {
	return inModule("", GatewayAPIModule, filepath.Join("config", "crd", string(ch)))
}

// Istio is Istio's CRD file (VirtualService and the rest of networking.istio.io and friends).
func Istio() (string, error) {
	return inModule("", IstioAPIModule, filepath.Join("kubernetes", "customresourcedefinitions.gen.yaml"))
}

// EnvoyGatewayBackendTrafficPolicy is Envoy Gateway's BackendTrafficPolicy CRD file.
func EnvoyGatewayBackendTrafficPolicy() (string, error) {
	return inModule(filepath.Join("hack", "crds"), EnvoyGatewayModule,
		filepath.Join("charts", "gateway-helm", "charts", "crds", "crds", "generated", "gateway.envoyproxy.io_backendtrafficpolicies.yaml"))
}

// EnvoyGateway is the directory of all of Envoy Gateway's CRDs (gateway.envoyproxy.io; its
// BackendTrafficPolicy's file is EnvoyGatewayBackendTrafficPolicy): the whole group, for the
// list of its kinds (internal/analyze, meshAPIKinds).
func EnvoyGateway() (string, error) {
	return inModule(filepath.Join("hack", "crds"), EnvoyGatewayModule,
		filepath.Join("charts", "gateway-helm", "charts", "crds", "crds", "generated"))
}

// EnvoyGatewayAPITypes is the directory of Envoy Gateway's Go API (gateway.envoyproxy.io/v1alpha1),
// whose root types are its CRDs' kinds and EnvoyGateway, the kind of its own configuration file
// (envoy-gateway --config-path; no CRD): a real document of the group all the same.
func EnvoyGatewayAPITypes() (string, error) {
	return inModule(filepath.Join("hack", "crds"), EnvoyGatewayModule, filepath.Join("api", "v1alpha1"))
}

// Kuma is the list of the Mesh, MeshRetry, MeshExternalService and MeshHTTPRoute CRD files
// (hand-written, thirdparty/README.md).
func Kuma() ([]string, error) {
	return thirdParty("kuma.io_meshes.yaml", "kuma.io_meshretries.yaml", "kuma.io_meshexternalservices.yaml", "kuma.io_meshhttproutes.yaml")
}

// Dapr's module: its version and zip hash (the schema's fields checked by schema_test.go).
const (
	DaprModule  = "github.com/dapr/dapr"
	DaprVersion = "v1.14.0"
	DaprSum     = "h1:SIQsNX1kH31JRDIS4k8IZ6eomM/BAcOP844PhQIT+BQ="
)

// Dapr is Dapr's Resiliency CRD file, from Dapr's module.
func Dapr() (string, error) {
	return publicdatatest.File(DaprModule, DaprVersion, DaprSum, "charts/dapr/crds/resiliency.yaml")
}

// Consul is the ServiceRouter CRD file (hand-written, thirdparty/README.md).
func Consul() (string, error) {
	p, err := thirdParty("consul.hashicorp.com_servicerouters.yaml")
	if err != nil {
		return "", err
	}
	return p[0], nil
}

// thirdParty are files of internal/mesh/crds/thirdparty (retrycap's own CRDs of other projects'
// kinds).
func thirdParty(names ...string) ([]string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(root, "internal", "mesh", "crds", "thirdparty", n)
		if _, err := os.Stat(out[i]); err != nil {
			return nil, fmt.Errorf("the CRD %s: %w", n, err)
		}
	}
	return out, nil
}

// All is every mesh CRD path above, Gateway API's experimental channel.
func All() ([]string, error) {
	out, err := Kuma()
	if err != nil {
		return nil, err
	}
	for _, f := range []func() (string, error){
		func() (string, error) { return GatewayAPI(Experimental) }, Istio, EnvoyGatewayBackendTrafficPolicy, Dapr, Consul,
	} {
		p, err := f()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// inModule downloads (or finds) module at the version the go.mod in dir (relative to the
// repository root) requires, and returns path inside it.
func inModule(dir, module, path string) (string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Dir = filepath.Join(root, dir)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var info struct{ Version, Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil || info.Error != "" || err != nil {
		return "", fmt.Errorf("go mod download -json %s in %s: %v %s (%v)", module, cmd.Dir, err, info.Error, jerr)
	}
	p := filepath.Join(info.Dir, path)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s %s has no %s: %w", module, info.Version, path, err)
	}
	return p, nil
}
