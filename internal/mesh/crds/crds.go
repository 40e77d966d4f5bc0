// Package crds finds the real CustomResourceDefinitions of the mesh APIs that internal/mesh reads,
// in the Go module cache, for tests that install them into a real API server
// (internal/controlplane, Options.CRDPaths). They come from the projects' own modules, pinned in
// go.mod and go.sum (so a fresh machine downloads them with `go mod download`):
//
//   - Gateway API: sigs.k8s.io/gateway-api (the product's go.mod; its tests import the typed API),
//     config/crd/experimental (HTTPRoute's rules[].retry is experimental through v1.6) or
//     config/crd/standard;
//   - Istio: istio.io/api (the product's go.mod, through istio.io/client-go in the tests),
//     kubernetes/customresourcedefinitions.gen.yaml;
//   - Envoy Gateway: github.com/envoyproxy/gateway, in the module hack/crds of its own (requiring
//     it in the product's go.mod would move k8s.io/utils and others),
//     charts/gateway-helm/charts/crds/crds/generated/gateway.envoyproxy.io_backendtrafficpolicies.yaml.
package crds

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/retrycap/retrycap/internal/controlplane"
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

// All is every mesh CRD path above, Gateway API's experimental channel.
func All() ([]string, error) {
	var out []string
	for _, f := range []func() (string, error){
		func() (string, error) { return GatewayAPI(Experimental) }, Istio, EnvoyGatewayBackendTrafficPolicy,
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
