package crds_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/retrycap/retrycap/internal/mesh/crds"
)

// TestSchemaHasTheFieldsRead checks, in the real CRDs' schemas, every field internal/mesh reads
// with local structs: if a project renames or retypes one, this fails before the reader goes
// blind. It needs no API server.
func TestSchemaHasTheFieldsRead(t *testing.T) {
	sc := loadSchemas(t)
	exp, std, istio, eg, kuma, dapr, consul := sc.exp, sc.std, sc.istio, sc.eg, sc.kuma, sc.dapr, sc.consul
	ref := func(prefix string) []string {
		return []string{prefix + ".group:string", prefix + ".kind:string", prefix + ".namespace:string", prefix + ".name:string"}
	}
	routeFields := append(ref("spec.parentRefs[]"), ref("spec.rules[].backendRefs[]")...)
	cases := []struct {
		path, group, kind, version string
		fields                     []string // "a.b[].c:type"; type "absent" for a field that must not exist
	}{
		{istio, "networking.istio.io", "VirtualService", "v1", []string{
			"spec.hosts:array", "spec.gateways:array", "spec.exportTo:array", "spec.http[].match[].gateways:array",
			"spec.http[].retries:object", "spec.http[].retries.attempts:integer"}},
		{istio, "networking.istio.io", "VirtualService", "v1alpha3", []string{"spec.http[].retries.attempts:integer"}},
		{exp, "gateway.networking.k8s.io", "HTTPRoute", "v1", slices.Concat(routeFields, []string{"spec.rules[].retry:object", "spec.rules[].retry.attempts:integer"})},
		{std, "gateway.networking.k8s.io", "HTTPRoute", "v1", slices.Concat(routeFields, []string{"spec.rules[].retry:absent"})},
		// An Istio ambient waypoint (mesh/waypoint.go): its class, HBONE listener and which
		// namespaces may attach to it.
		{std, "gateway.networking.k8s.io", "Gateway", "v1", []string{"spec.gatewayClassName:string", "spec.listeners[].port:integer",
			"spec.listeners[].protocol:string", "spec.listeners[].allowedRoutes.namespaces.from:string", "spec.listeners[].allowedRoutes.namespaces.selector:object"}},
		{exp, "gateway.networking.k8s.io", "GRPCRoute", "v1", slices.Concat(routeFields, []string{"spec.rules[].retry:absent"})},
		{eg, "gateway.envoyproxy.io", "BackendTrafficPolicy", "v1alpha1", append(append([]string{"spec.retry:object", "spec.retry.numRetries:integer",
			"spec.mergeType:string", "spec.timeout.http.requestTimeout:string", "spec.retry.perRetry.timeout:string"},
			"spec.targetRef.group:string", "spec.targetRef.kind:string", "spec.targetRef.name:string"),
			"spec.targetRefs[].group:string", "spec.targetRefs[].kind:string", "spec.targetRefs[].name:string",
			// mesh/targetselectors.go
			"spec.targetSelectors[].group:string", "spec.targetSelectors[].kind:string", "spec.targetSelectors[].matchLabels:object",
			"spec.targetSelectors[].matchExpressions:array", "spec.targetSelectors[].namespaces.from:string", "spec.targetSelectors[].namespaces.selector:object")},
		// Kuma's v3 API: a to[].targetRef selects MeshServices by labels and has no name (the
		// API server prunes one: mesh/kuma.go reads both forms).
		{kuma[0], "kuma.io", "Mesh", "v1alpha1", []string{"spec:"}}, // x-kubernetes-preserve-unknown-fields, no type
		{kuma[1], "kuma.io", "MeshRetry", "v1alpha1", []string{"spec.to[].targetRef.kind:string", "spec.to[].targetRef.labels:object",
			"spec.to[].targetRef.name:absent", "spec.to[].targetRef.sectionName:string", "spec.targetRef.kind:string", "spec.to[].default.http.numRetries:integer", "spec.to[].default.grpc.numRetries:integer",
			"spec.to[].default.http.perTryTimeout:string", "spec.to[].default.http.backOff.baseInterval:string", "spec.to[].default.http.backOff.maxInterval:string",
			"spec.to[].default.grpc.perTryTimeout:string", "spec.to[].default.grpc.backOff.baseInterval:string", "spec.to[].default.grpc.backOff.maxInterval:string"}},
		// mesh/kuma.go kumaExtEdge: which conf a MeshExternalService's host takes.
		{kuma[2], "kuma.io", "MeshExternalService", "v1alpha1", []string{"spec.match.port:integer", "spec.match.protocol:string"}},
		// mesh/kuma.go kumaRouteCovers: the callees of a MeshHTTPRoute.
		{kuma[3], "kuma.io", "MeshHTTPRoute", "v1alpha1", []string{"spec.to[].targetRef.kind:string", "spec.to[].targetRef.labels:object",
			"spec.to[].targetRef.sectionName:string", "spec.to[].targetRef.name:absent"}},
		{dapr, "dapr.io", "Resiliency", "v1alpha1", []string{"scopes:array", "spec.policies.retries:object", "spec.targets.apps:object"}},
		{consul, "consul.hashicorp.com", "ServiceRouter", "v1alpha1", []string{"spec.routes[].destination.numRetries:integer",
			"spec.routes[].destination.retryOn:array", "spec.routes[].destination.retryOnConnectFailure:boolean", "spec.routes[].destination.retryOnStatusCodes:array"}},
	}
	for _, tc := range cases {
		schema := findSchema(t, tc.path, tc.group, tc.kind, tc.version)
		for _, f := range tc.fields {
			path, typ, _ := strings.Cut(f, ":")
			got := walk(schema, path)
			switch {
			case typ == "absent" && got != nil:
				t.Errorf("%s %s %s: %s exists (%s)", tc.group, tc.kind, tc.version, path, got.Type)
			case typ != "absent" && got == nil:
				t.Errorf("%s %s %s: no field %s", tc.group, tc.kind, tc.version, path)
			case typ != "absent" && got.Type != typ:
				t.Errorf("%s %s %s: %s is %s, not %s", tc.group, tc.kind, tc.version, path, got.Type, typ)
			}
		}
	}
}

func walk(s *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	for _, p := range strings.Split(path, ".") {
		name, array := strings.CutSuffix(p, "[]")
		next, ok := s.Properties[name]
		if !ok {
			return nil
		}
		s = &next
		if array {
			if s.Items == nil || s.Items.Schema == nil {
				return nil
			}
			s = s.Items.Schema
		}
	}
	return s
}

func findSchema(t *testing.T, path, group, kind, version string) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	files := []string{path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.yaml"))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := r.Decode(&crd); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if crd.Kind != "CustomResourceDefinition" || crd.Spec.Group != group || crd.Spec.Names.Kind != kind {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if v.Name == version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
					return v.Schema.OpenAPIV3Schema
				}
			}
		}
	}
	t.Fatalf("no CRD %s/%s %s in %s", group, kind, version, path)
	return nil
}

// TestSchemaBoundsOfCounts checks the bounds internal/mesh/bounds.go reads the retry counts
// with against the schemas: a format or minimum a project adds or drops fails here first.
func TestSchemaBoundsOfCounts(t *testing.T) {
	sc := loadSchemas(t)
	exp, istio, eg, kuma, dapr, consul := sc.exp, sc.istio, sc.eg, sc.kuma, sc.dapr, sc.consul
	cases := []struct {
		path, group, kind, version, field string
		format                            string
		minimum                           *float64
	}{
		{istio, "networking.istio.io", "VirtualService", "v1", "spec.http[].retries.attempts", "int32", nil},
		{exp, "gateway.networking.k8s.io", "HTTPRoute", "v1", "spec.rules[].retry.attempts", "", new(1.0)},
		{eg, "gateway.envoyproxy.io", "BackendTrafficPolicy", "v1alpha1", "spec.retry.numRetries", "int32", new(0.0)},
		{kuma[1], "kuma.io", "MeshRetry", "v1alpha1", "spec.to[].default.http.numRetries", "int32", nil},
		{kuma[1], "kuma.io", "MeshRetry", "v1alpha1", "spec.to[].default.grpc.numRetries", "int32", nil},
		{consul, "consul.hashicorp.com", "ServiceRouter", "v1alpha1", "spec.routes[].destination.numRetries", "int32", nil},
		{dapr, "dapr.io", "Resiliency", "v1alpha1", "spec.policies.retries", "", nil}, // a map: maxRetries is an integer without format (see below)
	}
	for _, tc := range cases {
		got := walk(findSchema(t, tc.path, tc.group, tc.kind, tc.version), tc.field)
		if got == nil {
			t.Errorf("%s %s: no field %s", tc.group, tc.kind, tc.field)
			continue
		}
		if got.Format != tc.format {
			t.Errorf("%s %s %s: format %q, bounds.go reads %q", tc.group, tc.kind, tc.field, got.Format, tc.format)
		}
		if (got.Minimum == nil) != (tc.minimum == nil) || got.Minimum != nil && *got.Minimum != *tc.minimum {
			t.Errorf("%s %s %s: minimum %v, bounds.go reads %v", tc.group, tc.kind, tc.field, got.Minimum, tc.minimum)
		}
		if got.Maximum != nil {
			t.Errorf("%s %s %s: maximum %v, bounds.go reads none", tc.group, tc.kind, tc.field, *got.Maximum)
		}
	}
	retry := walk(findSchema(t, dapr, "dapr.io", "Resiliency", "v1alpha1"), "spec.policies.retries")
	if retry.AdditionalProperties == nil || retry.AdditionalProperties.Schema == nil {
		t.Fatal("dapr.io Resiliency spec.policies.retries: not a map of schemas")
	}
	if m := retry.AdditionalProperties.Schema.Properties["maxRetries"]; m.Type != "integer" || m.Format != "" || m.Minimum != nil || m.Maximum != nil {
		t.Errorf("dapr.io Resiliency maxRetries: type %q format %q minimum %v maximum %v, bounds.go reads an integer without bounds", m.Type, m.Format, m.Minimum, m.Maximum)
	}
}

// schemas are the CRD paths both schema tests read (a directory or a file,
// as the crds package resolves them; Kuma's are several files).
type schemas struct {
	exp, std, istio, eg, dapr, consul string
	kuma                              []string
}

func loadSchemas(t *testing.T) schemas {
	t.Helper()
	var sc schemas
	var err error
	must := func(e error) {
		if e != nil {
			t.Fatal(e)
		}
	}
	sc.exp, err = crds.GatewayAPI(crds.Experimental)
	must(err)
	sc.std, err = crds.GatewayAPI(crds.Standard)
	must(err)
	sc.istio, err = crds.Istio()
	must(err)
	sc.eg, err = crds.EnvoyGatewayBackendTrafficPolicy()
	must(err)
	sc.kuma, err = crds.Kuma()
	must(err)
	sc.dapr, err = crds.Dapr()
	must(err)
	sc.consul, err = crds.Consul()
	must(err)
	return sc
}
