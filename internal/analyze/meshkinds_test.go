package analyze

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/mesh/crds"
)

var updateMeshKinds = flag.Bool("update-meshkinds", false, "rewrite meshkinds_gen.go from the vendored mesh CRDs")

// crdSource is a set of vendored CRD files: a module of the module cache (internal/mesh/crds),
// a file or directory in it.
type crdSource struct {
	module string
	path   func() (string, error)
	// types, when set, is the directory of the group's Go API of one version: its root types
	// (+kubebuilder:object:root=true) are kinds of the group too, a CRD or not.
	types func() (string, error)
}

// meshCRDSources are the vendored CRDs that hold whole mesh API groups. Kuma's and Consul's
// (internal/mesh/crds/thirdparty, written by retrycap) and Dapr's (one file of the dapr module)
// are one or two CRDs of their groups: not listed, their groups are not checked. Linkerd's are
// not vendored (its module is not fetchable through the module proxy): its groups' kinds are
// written by hand (linkerdAPIKinds, TestLinkerdAPIKinds).
var meshCRDSources = []crdSource{
	{crds.IstioAPIModule, crds.Istio, nil},
	{crds.GatewayAPIModule, func() (string, error) { return crds.GatewayAPI(crds.Standard) }, nil},
	{crds.GatewayAPIModule, func() (string, error) { return crds.GatewayAPI(crds.Experimental) }, nil},
	{crds.EnvoyGatewayModule, crds.EnvoyGateway, crds.EnvoyGatewayAPITypes},
}

// crd is what meshAPIKinds takes of a CustomResourceDefinition.
type crd struct {
	Kind string `json:"kind"`
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Served bool   `json:"served"`
		} `json:"versions"`
	} `json:"spec"`
}

// readCRDs reads the CustomResourceDefinitions of a file or of a directory's *.yaml files.
func readCRDs(path string) ([]crd, error) {
	files := []string{path}
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.yaml")); err != nil {
			return nil, err
		}
	}
	var out []crd
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var c crd
			if err := dec.Decode(&c); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if c.Kind == "CustomResourceDefinition" {
				out = append(out, c)
			}
		}
	}
	return out, nil
}

// rootTypes reads the kinds of a kubebuilder Go API directory: its group (+groupName= in a
// comment), its version (the directory's name) and the types marked
// +kubebuilder:object:root=true (their Lists left out).
func rootTypes(dir string) (gv string, kinds []string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", nil, err
	}
	group := ""
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", nil, err
		}
		root := false
		for _, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if g, ok := strings.CutPrefix(line, "// +groupName="); ok {
				group = g
			}
			if strings.HasPrefix(line, "// +kubebuilder:object:root=true") {
				root = true
			}
			if rest, ok := strings.CutPrefix(line, "type "); ok && root {
				if name, _, _ := strings.Cut(rest, " "); !strings.HasSuffix(name, "List") {
					kinds = append(kinds, name)
				}
				root = false
			}
		}
	}
	if group == "" || len(kinds) == 0 {
		return "", nil, fmt.Errorf("%s: no +groupName or no root type: nothing to derive the kinds from", dir)
	}
	return group + "/" + filepath.Base(dir), kinds, nil
}

// meshKindsFromCRDs derives meshAPIKinds from meshCRDSources: every served version of every
// group of which the graph reads a kind (mesh.Reads), with the kinds it serves; and the modules
// read, with their versions ("istio.io/api@v1.32.0").
func meshKindsFromCRDs(t *testing.T) (map[string][]string, []string) {
	t.Helper()
	var all []crd
	var modules []string
	for _, s := range meshCRDSources {
		p, err := s.path()
		if err != nil {
			t.Fatal(err)
		}
		cs, err := readCRDs(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 {
			t.Fatalf("%s: no CustomResourceDefinition in it: nothing to derive the kinds from", p)
		}
		all = append(all, cs...)
		if i := strings.Index(p, s.module+"@"); i >= 0 {
			version, _, _ := strings.Cut(p[i+len(s.module):], string(filepath.Separator))
			if mv := s.module + version; !slices.Contains(modules, mv) {
				modules = append(modules, mv)
			}
		}
	}
	read := map[string]bool{}
	for _, c := range all {
		for _, v := range c.Spec.Versions {
			if mesh.Reads(c.Spec.Group+"/"+v.Name, c.Spec.Names.Kind) {
				read[c.Spec.Group] = true
			}
		}
	}
	kinds := map[string][]string{}
	for _, c := range all {
		if !read[c.Spec.Group] {
			continue
		}
		for _, v := range c.Spec.Versions {
			gv := c.Spec.Group + "/" + v.Name
			if v.Served && !slices.Contains(kinds[gv], c.Spec.Names.Kind) {
				kinds[gv] = append(kinds[gv], c.Spec.Names.Kind)
			}
		}
	}
	for _, s := range meshCRDSources {
		if s.types == nil {
			continue
		}
		dir, err := s.types()
		if err != nil {
			t.Fatal(err)
		}
		gv, ks, err := rootTypes(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if !slices.Contains(kinds[gv], k) {
				kinds[gv] = append(kinds[gv], k)
			}
		}
	}
	for _, ks := range kinds {
		slices.Sort(ks)
	}
	return kinds, modules
}

// renderMeshKinds is meshkinds_gen.go for kinds, derived from modules.
func renderMeshKinds(t *testing.T, kinds map[string][]string, modules []string) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("// Code generated by `go test ./internal/analyze -run TestMeshAPIKindsFromCRDs -update-meshkinds`; DO NOT EDIT.\n\npackage analyze\n\n")
	fmt.Fprintf(&b, "// meshAPIKinds are the kinds each served version of the mesh API groups the graph reads serves,\n// from the CRDs (and a Go API's root types: Envoy Gateway's EnvoyGateway, its configuration file)\n// of %s (internal/mesh/crds).\n", strings.Join(modules, ", "))
	b.WriteString("var meshAPIKinds = map[string][]string{\n")
	for _, gv := range slices.Sorted(maps.Keys(kinds)) {
		fmt.Fprintf(&b, "\t%q: {", gv)
		for i, k := range kinds[gv] {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", k)
		}
		b.WriteString("},\n")
	}
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMeshAPIKindsFromCRDs: meshkinds_gen.go is what the vendored CRDs give, byte for byte, so a
// CRD added to (or a version served by) a vendored release is in the list or this test fails;
// -update-meshkinds rewrites it.
func TestMeshAPIKindsFromCRDs(t *testing.T) {
	kinds, modules := meshKindsFromCRDs(t)
	// The groups the graph reads and these CRDs hold whole: not one may go missing unnoticed.
	for gv, kind := range map[string]string{"networking.istio.io/v1": "VirtualService", "gateway.networking.k8s.io/v1": "HTTPRoute", "gateway.envoyproxy.io/v1alpha1": "BackendTrafficPolicy"} {
		if !slices.Contains(kinds[gv], kind) {
			t.Fatalf("the CRDs give %s %v, without %s", gv, kinds[gv], kind)
		}
	}
	want := renderMeshKinds(t, kinds, modules)
	if *updateMeshKinds {
		if err := os.WriteFile("meshkinds_gen.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("meshkinds_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("meshkinds_gen.go is not what the vendored CRDs give: run go test ./internal/analyze -run TestMeshAPIKindsFromCRDs -update-meshkinds\ngot:\n%s\nwant:\n%s", got, want)
	}
	if !*updateMeshKinds && !maps.EqualFunc(meshAPIKinds, kinds, slices.Equal) { // updated: compiled before
		t.Fatalf("meshAPIKinds %v, the CRDs give %v", meshAPIKinds, kinds)
	}
}

// TestLinkerdAPIKinds: the hand-written Linkerd list (meshkinds_linkerd.go) is of Linkerd's
// groups the graph reads, holds the kinds the graph reads of them, repeats no version of the
// generated list, and is sorted without repeats (as the generated one). Its completeness is the
// release's CRDs, read by hand: no vendored copy to check it against.
func TestLinkerdAPIKinds(t *testing.T) {
	groups := map[string]bool{}
	for gv, ks := range linkerdAPIKinds {
		group, _, _ := strings.Cut(gv, "/")
		if group != mesh.GroupLinkerd && group != mesh.GroupLinkerdPol {
			t.Errorf("%s: not a Linkerd group the graph reads", gv)
		}
		if meshAPIKinds[gv] != nil {
			t.Errorf("%s: in meshAPIKinds too", gv)
		}
		if !slices.IsSorted(ks) || len(slices.Compact(slices.Clone(ks))) != len(ks) {
			t.Errorf("%s: %v not sorted or with repeats", gv, ks)
		}
		for _, k := range ks {
			if mesh.Reads(gv, k) {
				groups[gv+" "+k] = true
			}
		}
	}
	for _, read := range []string{"linkerd.io/v1alpha2 ServiceProfile", "policy.linkerd.io/v1beta3 HTTPRoute", "policy.linkerd.io/v1alpha1 HTTPRoute"} {
		if !groups[read] {
			t.Errorf("%s: read by the graph, not in linkerdAPIKinds", read)
		}
	}
	for gv, ks := range linkerdAPIKinds {
		if !slices.Equal(checkedMeshKinds[gv], ks) {
			t.Errorf("%s: checkedMeshKinds %v, want %v", gv, checkedMeshKinds[gv], ks)
		}
	}
	if len(checkedMeshKinds) != len(meshAPIKinds)+len(linkerdAPIKinds) {
		t.Errorf("checkedMeshKinds has %d versions, want %d + %d", len(checkedMeshKinds), len(meshAPIKinds), len(linkerdAPIKinds))
	}
}

// A kind that a mesh API group the graph reads does not define is an error naming the object,
// the apiVersion and the kind, with the kinds it misspells (before: counted as ignored, its
// retries not counted, a pass); the group's other kinds, and other groups' kinds, are counted
// as before.
func TestUnknownMeshKind(t *testing.T) {
	obj := func(apiVersion, kind string) string {
		return fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata: {name: r, namespace: shop}\n", apiVersion, kind)
	}
	named := func(doc, name string) string { return strings.Replace(doc, "{name: r,", "{name: "+name+",", 1) }
	refused := func(doc int, apiVersion, kind, near string) string {
		s := fmt.Sprintf(`test.yaml: document %d: %s shop/r: kind %q: %s has no such kind (the API server refuses it: no matches for kind %q in version %q)`, doc, kind, kind, apiVersion, kind, apiVersion)
		if near != "" {
			s += "; did you mean " + near + "?"
		}
		return s
	}
	cases := []struct {
		name     string
		docs     []string
		errs     []string
		warnings []string
		mesh     map[string]int
		ignored  map[string]int
	}{
		{name: "misspelt Istio, Gateway API and Envoy Gateway kinds",
			docs: []string{obj("networking.istio.io/v1", "VirtualServic"), obj("gateway.networking.k8s.io/v1", "HTTPRout"),
				obj("gateway.networking.k8s.io/v1beta1", "httproute"), obj("networking.istio.io/v1alpha3", "DestinationRules"),
				obj("gateway.envoyproxy.io/v1alpha1", "BackendTraficPolicy"), obj("networking.istio.io/v1", "Route")},
			errs: []string{refused(1, "networking.istio.io/v1", "VirtualServic", "VirtualService"),
				refused(2, "gateway.networking.k8s.io/v1", "HTTPRout", "HTTPRoute"),
				refused(3, "gateway.networking.k8s.io/v1beta1", "httproute", "HTTPRoute"),
				refused(4, "networking.istio.io/v1alpha3", "DestinationRules", "DestinationRule"),
				refused(5, "gateway.envoyproxy.io/v1alpha1", "BackendTraficPolicy", "BackendTrafficPolicy"),
				refused(6, "networking.istio.io/v1", "Route", "")}},
		{name: "near kinds are the group's: GRPCRoutes in v1beta1 (which serves no GRPCRoute)",
			docs: []string{obj("gateway.networking.k8s.io/v1beta1", "GRPCRoutes")},
			errs: []string{refused(1, "gateway.networking.k8s.io/v1beta1", "GRPCRoutes", "GRPCRoute")}},
		{name: "two near kinds", docs: []string{obj("gateway.networking.k8s.io/v1", "TPCRoute")},
			errs: []string{refused(1, "gateway.networking.k8s.io/v1", "TPCRoute", "GRPCRoute or TCPRoute or TLSRoute")}},
		{name: "the groups' kinds the graph does not read are counted as ignored; read kinds as mesh objects",
			docs: []string{obj("networking.istio.io/v1", "ServiceEntry"), obj("networking.istio.io/v1alpha3", "EnvoyFilter"),
				obj("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"), obj("gateway.networking.k8s.io/v1alpha2", "TCPRoute"),
				obj("gateway.envoyproxy.io/v1alpha1", "SecurityPolicy"), "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: EnvoyGateway\ngateway: {controllerName: gateway.envoyproxy.io/gatewayclass-controller}\n",
				obj("networking.istio.io/v1", "DestinationRule"),
				obj("networking.istio.io/v1", "VirtualService"), obj("gateway.networking.k8s.io/v1", "HTTPRoute")},
			// A ServiceEntry is read since the fifteenth session (internal/mesh/serviceentry.go).
			mesh:    map[string]int{"DestinationRule": 1, "VirtualService": 1, "HTTPRoute": 1, "ServiceEntry": 1},
			ignored: map[string]int{"EnvoyFilter": 1, "ReferenceGrant": 1, "TCPRoute": 1, "SecurityPolicy": 1, "EnvoyGateway": 1}},
		{name: "a kind of the group in a version that does not serve it, or a version no CRD serves: read, with a warning",
			docs: []string{obj("gateway.networking.k8s.io/v1alpha2", "HTTPRoute"), obj("networking.istio.io/v1", "EnvoyFilter"),
				obj("networking.istio.io/v2", "VirtualService")},
			warnings: []string{
				"test.yaml: document 1: HTTPRoute shop/r: the gateway.networking.k8s.io CRDs retrycap knows serve HTTPRoute as gateway.networking.k8s.io/v1, gateway.networking.k8s.io/v1beta1, not gateway.networking.k8s.io/v1alpha2: read all the same (an older install may serve it; a current one refuses it)",
				"test.yaml: document 2: EnvoyFilter shop/r: the networking.istio.io CRDs retrycap knows serve EnvoyFilter as networking.istio.io/v1alpha3, not networking.istio.io/v1: read all the same (an older install may serve it; a current one refuses it)",
				"test.yaml: document 3: VirtualService shop/r: the networking.istio.io CRDs retrycap knows serve VirtualService as networking.istio.io/v1, networking.istio.io/v1alpha3, networking.istio.io/v1beta1, not networking.istio.io/v2: read all the same (an older install may serve it; a current one refuses it)"},
			mesh: map[string]int{"HTTPRoute": 1, "VirtualService": 1}, ignored: map[string]int{"EnvoyFilter": 1}},
		{name: "a misspelt kind in a version no CRD serves: near the group's kinds",
			docs: []string{obj("networking.istio.io/v2", "VirtualServic")},
			errs: []string{refused(1, "networking.istio.io/v2", "VirtualServic", "VirtualService")}},
		{name: "misspelt Linkerd kinds (linkerd.io, policy.linkerd.io: linkerdAPIKinds)",
			docs: []string{obj("linkerd.io/v1alpha2", "ServiceProfil"), obj("policy.linkerd.io/v1beta3", "HTTPRout"),
				obj("policy.linkerd.io/v1alpha1", "AuthorisationPolicy"), obj("policy.linkerd.io/v1beta1", "ServerAuthorisation"),
				obj("policy.linkerd.io/v1alpha1", "MeshTlsAuthentication"), obj("linkerd.io/v1alpha2", "HTTPRoute"), obj("policy.linkerd.io/v1beta3", "Servers")},
			errs: []string{refused(1, "linkerd.io/v1alpha2", "ServiceProfil", "ServiceProfile"),
				refused(2, "policy.linkerd.io/v1beta3", "HTTPRout", "HTTPRoute"),
				refused(3, "policy.linkerd.io/v1alpha1", "AuthorisationPolicy", "AuthorizationPolicy"),
				refused(4, "policy.linkerd.io/v1beta1", "ServerAuthorisation", "ServerAuthorization"),
				refused(5, "policy.linkerd.io/v1alpha1", "MeshTlsAuthentication", "MeshTLSAuthentication"),
				refused(6, "linkerd.io/v1alpha2", "HTTPRoute", ""),
				refused(7, "policy.linkerd.io/v1beta3", "Servers", "Server")}},
		// One object in two versions is read twice (kubectl apply -f DIR replaces it): the later
		// wins, said, and counted once; an Istio Gateway and a Gateway API Gateway of one name
		// are two objects. Before: "VirtualService 2", no warning.
		{name: "a mesh object read twice: the later wins, counted once",
			docs: []string{obj("networking.istio.io/v1beta1", "VirtualService"), obj("networking.istio.io/v1", "VirtualService"),
				obj("networking.istio.io/v1", "Gateway"), obj("gateway.networking.k8s.io/v1", "Gateway")},
			warnings: []string{"test.yaml: document 2: VirtualService shop/r is also at test.yaml: document 1: the later wins"},
			mesh:     map[string]int{"VirtualService": 1, "Gateway": 1},
			ignored:  map[string]int{"Gateway (networking.istio.io)": 1}},
		{name: "Linkerd's kinds the graph does not read are counted as ignored, its read kinds as mesh objects; an old version with a warning",
			docs: []string{obj("policy.linkerd.io/v1beta3", "Server"), obj("policy.linkerd.io/v1alpha1", "Server"), obj("policy.linkerd.io/v1beta1", "ServerAuthorization"),
				obj("policy.linkerd.io/v1alpha1", "AuthorizationPolicy"), obj("policy.linkerd.io/v1alpha1", "MeshTLSAuthentication"),
				obj("policy.linkerd.io/v1alpha1", "NetworkAuthentication"), obj("policy.linkerd.io/v1alpha1", "EgressNetwork"),
				obj("policy.linkerd.io/v1alpha1", "HTTPLocalRateLimitPolicy"), named(obj("policy.linkerd.io/v1beta3", "HTTPRoute"), "r9"),
				// Distinct names: one name in two versions is one object, read twice (the later wins).
				named(obj("policy.linkerd.io/v1alpha1", "HTTPRoute"), "r10"), named(obj("linkerd.io/v1alpha2", "ServiceProfile"), "r11"), obj("linkerd.io/v1alpha1", "ServiceProfile"),
				obj("policy.linkerd.io/v1beta4", "HTTPRoute")},
			warnings: []string{
				"test.yaml: document 13: HTTPRoute shop/r: the policy.linkerd.io CRDs retrycap knows serve HTTPRoute as policy.linkerd.io/v1alpha1, policy.linkerd.io/v1beta1, policy.linkerd.io/v1beta2, policy.linkerd.io/v1beta3, not policy.linkerd.io/v1beta4: read all the same (an older install may serve it; a current one refuses it)"},
			mesh: map[string]int{"HTTPRoute": 3, "ServiceProfile": 2},
			ignored: map[string]int{"Server": 2, "ServerAuthorization": 1, "AuthorizationPolicy": 1, "MeshTLSAuthentication": 1, "NetworkAuthentication": 1,
				"EgressNetwork": 1, "HTTPLocalRateLimitPolicy": 1}},
		{name: "groups not checked: not read by the graph, or not vendored whole (Kuma, Dapr, Consul), or another group of the same projects",
			docs: []string{obj("security.istio.io/v1", "AuthorizationPolicy"), obj("gateway.networking.x-k8s.io/v1alpha1", "XMesh"),
				obj("workload.linkerd.io/v1beta1", "ExternalWorkloads"), obj("multicluster.linkerd.io/v1alpha3", "Links"), obj("kuma.io/v1alpha1", "MeshTrafficPermission"),
				obj("dapr.io/v1alpha1", "Component"), obj("consul.hashicorp.com/v1alpha1", "ServiceDefaults"), obj("example.com/v1", "VirtualServic")},
			ignored: map[string]int{"AuthorizationPolicy": 1, "XMesh": 1, "ExternalWorkloads": 1, "Links": 1, "MeshTrafficPermission": 1, "Component": 1, "ServiceDefaults": 1, "VirtualServic": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewManifests()
			errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(strings.Join(tc.docs, "---\n")))
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if !slices.Equal(got, tc.errs) {
				t.Fatalf("errors\n got %q\nwant %q", got, tc.errs)
			}
			var warnings []string
			for _, w := range m.Warnings {
				warnings = append(warnings, w.String())
			}
			if !slices.Equal(warnings, tc.warnings) {
				t.Fatalf("warnings\n got %q\nwant %q", warnings, tc.warnings)
			}
			if tc.errs != nil {
				return
			}
			if !maps.Equal(m.Summary.Mesh, tc.mesh) || !maps.Equal(m.Summary.Ignored, tc.ignored) {
				t.Fatalf("mesh %v ignored %v, want %v and %v", m.Summary.Mesh, m.Summary.Ignored, tc.mesh, tc.ignored)
			}
		})
	}
}
