package mesh

import (
	"fmt"
	"strings"
	"testing"
)

const (
	nsKuma = `
apiVersion: v1
kind: Namespace
metadata: {name: kuma-demo, labels: {kuma.io/sidecar-injection: enabled}}`
	kumaMeshDefault = `
apiVersion: kuma.io/v1alpha1
kind: Mesh
metadata: {name: default}`
)

func meshRetryDoc(name, mesh, to, dflt string) string {
	labels := ""
	if mesh != "" {
		labels = ", labels: {kuma.io/mesh: " + mesh + "}"
	}
	return "\napiVersion: kuma.io/v1alpha1\nkind: MeshRetry\nmetadata: {name: " + name + ", namespace: kuma-system" + labels + "}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: " + to + "\n    default: " + dflt
}

func TestKumaEdge(t *testing.T) {
	cases := []struct {
		name   string
		docs   []string
		caller Caller
		callee string
		want   string // the layers, "" for none
	}{
		{name: "default mesh-retry-all assumed", docs: []string{nsKuma, kumaMeshDefault}, caller: caller("kuma-demo"), callee: "redis",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "no Mesh object, no MeshRetry: nothing known", docs: []string{nsKuma}, caller: caller("kuma-demo"), callee: "redis"},
		{name: "initial policies skipped", docs: []string{nsKuma, "\napiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {skipCreatingInitialPolicies: [MeshRetry]}"},
			caller: caller("kuma-demo"), callee: "redis"},
		{name: "MeshRetry to Mesh", docs: []string{nsKuma, kumaMeshDefault, meshRetryDoc("all", "default", "{kind: Mesh}", "{http: {numRetries: 3}, grpc: {numRetries: 3}}")},
			caller: caller("kuma-demo"), callee: "redis", want: "Kuma 4 (Kuma MeshRetry kuma-system/all numRetries 3) at MeshRetry kuma-system/all spec.to[0].default.http.numRetries"},
		{name: "MeshService by name, grpc larger", docs: []string{nsKuma, meshRetryDoc("r", "", "{kind: MeshService, name: redis, namespace: kuma-demo}", "{http: {numRetries: 1}, grpc: {numRetries: 7}}")},
			caller: caller("kuma-demo"), callee: "redis", want: "Kuma 8 (Kuma MeshRetry kuma-system/r numRetries 7) at MeshRetry kuma-system/r spec.to[0].default.grpc.numRetries"},
		{name: "MeshService legacy name", docs: []string{nsKuma, meshRetryDoc("r", "", "{kind: MeshService, name: redis_kuma-demo_svc_6379}", "{http: {}}")},
			caller: caller("kuma-demo"), callee: "redis", want: "Kuma 2 (Kuma MeshRetry kuma-system/r no numRetries: Envoy's 1 retry) at MeshRetry kuma-system/r spec.to[0].default.http.numRetries"},
		// Kuma creates mesh-retry-all-default whatever other MeshRetries exist (kumahq/kuma
		// pkg/defaults/mesh/mesh.go EnsureDefaultMeshResources); before, none was counted.
		{name: "another Service's MeshRetry", docs: []string{nsKuma, kumaMeshDefault, meshRetryDoc("r", "", "{kind: MeshService, name: web, namespace: kuma-demo}", "{http: {numRetries: 9}}")},
			caller: caller("kuma-demo"), callee: "redis",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "another mesh's MeshRetry: its own mesh's default", docs: []string{nsKuma, kumaMeshDefault, meshRetryDoc("r", "other", "{kind: Mesh}", "{http: {numRetries: 9}}")},
			caller: caller("kuma-demo"), callee: "redis",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "pod label opts out", docs: []string{nsKuma, kumaMeshDefault}, caller: labelled(caller("kuma-demo"), "kuma.io/sidecar-injection", "disabled"), callee: "redis"},
		// kuma19: Kuma reads no kuma.io/sidecar-injection annotation since 2.2.0 (kumahq/kuma
		// ac1dbfbd73; precheck.go needToInject reads labels): the pod is injected. Before, no
		// layer (a false green: 6 tries not counted).
		{name: "pod annotation disabled: not read", docs: []string{nsKuma, kumaMeshDefault}, caller: caller("kuma-demo", "kuma.io/sidecar-injection", "disabled"), callee: "redis",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		// Before, 6 (a false red): an annotation enables nothing, and Kuma's pods webhook needs
		// the Namespace to carry the label at all.
		{name: "pod annotation enabled: not read", docs: []string{nsPlain, kumaMeshDefault}, caller: caller("plain", "kuma.io/sidecar-injection", "enabled"), callee: "redis"},
		{name: "pod label enabled, namespace without the label", docs: []string{nsPlain, kumaMeshDefault}, caller: labelled(caller("plain"), "kuma.io/sidecar-injection", "enabled"), callee: "redis"},
		{name: "pod label enabled, namespace disabled", docs: []string{"\napiVersion: v1\nkind: Namespace\nmetadata: {name: plain, labels: {kuma.io/sidecar-injection: disabled}}", kumaMeshDefault},
			caller: labelled(caller("plain"), "kuma.io/sidecar-injection", "enabled"), callee: "redis",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		// The Namespace not in the input: the pod's label decides (an upper bound).
		{name: "pod label true, namespace not in the input", docs: []string{kumaMeshDefault}, caller: labelled(caller("elsewhere"), "kuma.io/sidecar-injection", "true"), callee: "redis.kuma-demo",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "no label, namespace not in the input", docs: []string{kumaMeshDefault}, caller: caller("elsewhere"), callee: "redis.kuma-demo"},
		{name: "external host", docs: []string{nsKuma, kumaMeshDefault}, caller: caller("kuma-demo"), callee: "api.example.com"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(c.docs, "\n---\n"))
			e := s.Edge(c.caller, c.callee)
			var got []string
			for _, l := range e.Layers {
				g := string(l.Kind) + " " + l.String()
				if l.Object != "" {
					g += " at " + l.Object + " " + l.FieldPath
				}
				got = append(got, g)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q, want %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}

func TestKumaNegativeRetries(t *testing.T) {
	s := NewSet(Options{})
	_, err := s.AddManifest([]byte(meshRetryDoc("r", "", "{kind: Mesh}", "{grpc: {numRetries: -1}}")))
	want := "MeshRetry kuma-system/r spec.to[0].default.grpc.numRetries: -1 is negative"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	if s.Remove(GroupKuma, "MeshRetry", "kuma-system", "r") {
		t.Fatal("a MeshRetry with a negative numRetries was added")
	}
}

// Removing the Mesh object removes the default it implied.
func TestKumaRemoveMesh(t *testing.T) {
	s := set(t, Options{}, nsKuma+"\n---\n"+kumaMeshDefault)
	if n := s.Edge(caller("kuma-demo"), "redis").Tries(); n != 6 {
		t.Fatalf("tries %d, want 6", n)
	}
	if !s.Remove(GroupKuma, "Mesh", "", "default") {
		t.Fatal("Mesh default not removed")
	}
	if n := s.Edge(caller("kuma-demo"), "redis").Tries(); n != 1 {
		t.Fatalf("tries %d after removing the Mesh, want 1", n)
	}
}

// TestLayerTimeKuma: a MeshRetry's perTryTimeout and backOff go into the Envoy retry policy with
// its numRetries (kumahq/kuma 348b6528 pkg/plugins/policies/meshretry/plugin/xds/
// configurer.go:121-143 genHttpRetryPolicy, :75-103 genGrpcRetryPolicy; the API's doc, api/
// v1alpha1/meshretry.go:136-141, 224-231: "Setting this timeout to 0 will disable it",
// baseInterval "If not specified then the default value is 25ms", maxInterval "Default is 10
// times the BaseInterval"); Kuma's own default MeshRetry sets 16s per try and 25ms..250ms
// (pkg/defaults/mesh/meshretry.go:33-52). Before, a Kuma layer was timed with Envoy's 25ms..250ms
// and no per-try timeout whatever it said: a backOff of 1s..5s over 3 retries (up to 1+2+4 =
// 7s of waiting) was counted as 75ms, a false pass of any maximum between.
func TestLayerTimeKuma(t *testing.T) {
	const s = 1000 * ms
	for _, tc := range []struct {
		name string
		docs []string
		want LayerTime
	}{
		{"perTryTimeout and backOff of the http block",
			[]string{nsKuma, meshRetryDoc("r", "", "{kind: Mesh}", "{http: {numRetries: 3, perTryTimeout: 2s, backOff: {baseInterval: 1s, maxInterval: 5s}}}")},
			LayerTime{PerTry: 2 * s, BackoffBase: s, BackoffMax: 5 * s, Source: "MeshRetry kuma-system/r spec.to[0].default.http"}},
		{"a baseInterval alone: ten times it the cap",
			[]string{nsKuma, meshRetryDoc("r", "", "{kind: Mesh}", "{http: {numRetries: 3, backOff: {baseInterval: 100ms}}}")},
			LayerTime{BackoffBase: 100 * ms, BackoffMax: s, Source: "MeshRetry kuma-system/r spec.to[0].default.http"}},
		{"perTryTimeout 0s: none",
			[]string{nsKuma, meshRetryDoc("r", "", "{kind: Mesh}", "{http: {numRetries: 3, perTryTimeout: 0s}}")},
			LayerTime{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}},
		{"the grpc block, when it counts",
			[]string{nsKuma, meshRetryDoc("r", "", "{kind: Mesh}", "{http: {numRetries: 1}, grpc: {numRetries: 4, perTryTimeout: 1500ms}}")},
			LayerTime{PerTry: 1500 * ms, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Source: "MeshRetry kuma-system/r spec.to[0].default.grpc"}},
		{"Kuma's default MeshRetry, assumed: 16s per try",
			[]string{nsKuma, kumaMeshDefault},
			LayerTime{PerTry: 16 * s, BackoffBase: 25 * ms, BackoffMax: 250 * ms, Source: "MeshRetry kuma-system/mesh-retry-all-default (Kuma's default, assumed)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := set(t, Options{}, strings.Join(tc.docs, "\n---\n"))
			e := set.Edge(caller("kuma-demo"), "redis")
			if len(e.Layers) != 1 || e.Layers[0].Kind != Kuma {
				t.Fatalf("layers %+v", e.Layers)
			}
			if got := set.LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("LayerTime(%+v)\n got %+v\nwant %+v", e.Layers[0], got, tc.want)
			}
		})
	}
	_, err := NewSet(Options{}).AddManifest([]byte(meshRetryDoc("r", "", "{kind: Mesh}", "{http: {numRetries: 3, perTryTimeout: soon}}")))
	if want := `MeshRetry kuma-system/r spec.to[0].default.http.perTryTimeout: "soon" is not a duration ("500ms", "1m30s")`; err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}
}

// With Options.KumaDefaultMesh (retrycap analyze), a caller in the mesh "default" whose Mesh
// object is not in the input gets the mesh Kuma's control plane creates at start and its initial
// MeshRetry (6 tries), said so; without it (the manager, reading the cluster's Meshes), none.
// Before, analyze counted 1 try: a false green. Another mesh that no Mesh object names is not
// created by anyone: no layer either way.
func TestKumaDefaultMeshAssumed(t *testing.T) {
	const assumed = "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Kuma's control plane creates Mesh default at start " +
		"(pkg/defaults/mesh.go EnsureDefaultMeshExists, unless KUMA_DEFAULTS_SKIP_MESH_CREATION is true), which is not in the input, and %s) " +
		"at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"
	nsOther := "\napiVersion: v1\nkind: Namespace\nmetadata: {name: kuma-demo, labels: {kuma.io/sidecar-injection: enabled, kuma.io/mesh: other}}"
	for _, c := range []struct {
		name string
		opts Options
		docs []string
		want string
	}{
		{"analyze: no Mesh, no MeshRetry", Options{KumaDefaultMesh: true}, []string{nsKuma}, fmt.Sprintf(assumed, "no MeshRetry of it is")},
		{"manager: no Mesh, no MeshRetry", Options{}, []string{nsKuma}, ""},
		{"analyze: another Service's MeshRetry, no Mesh", Options{KumaDefaultMesh: true},
			[]string{nsKuma, meshRetryDoc("r", "", "{kind: MeshService, name: web, namespace: kuma-demo}", "{http: {numRetries: 9}}")},
			fmt.Sprintf(assumed, "no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)")},
		{"analyze: the mesh's own MeshRetry decides", Options{KumaDefaultMesh: true},
			[]string{nsKuma, meshRetryDoc("mesh-retry-all-default", "", "{kind: Mesh}", "{http: {numRetries: 1}, grpc: {numRetries: 1}}")},
			"Kuma 2 (Kuma MeshRetry kuma-system/mesh-retry-all-default numRetries 1) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{"analyze: a Mesh default that skips the initial policies", Options{KumaDefaultMesh: true},
			[]string{nsKuma, "\napiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {skipCreatingInitialPolicies: ['*']}"}, ""},
		{"analyze: mesh other, no Mesh other", Options{KumaDefaultMesh: true}, []string{nsOther}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, c.opts, strings.Join(c.docs, "\n---\n"))
			var got []string
			for _, l := range s.Edge(caller("kuma-demo"), "redis").Layers {
				got = append(got, string(l.Kind)+" "+l.String()+" at "+l.Object+" "+l.FieldPath)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}

// kuma19: a MeshRetry to[] item whose targetRef is a MeshHTTPRoute (or a MeshMultiZoneService),
// which Kuma's validator takes (meshretry/api/v1alpha1/validator.go validateTo) and applies to
// the route's requests over the service's conf (meshretry/plugin/v1alpha1/plugin.go
// applyToRealResource). The MeshRetry is a Kubernetes model of kumahq/kuma 348b6528
// test/e2e_env/universal/envoyconfig/testdata/sidecars/meshretry/outbound-route.input.yaml
// (hand-written, not copied: its two to[] items and their numRetries): the service's 2 retries,
// the route's 6. Before, the route's item was dropped without a word: 3 tries where Kuma makes 7
// on the route's requests.
func TestKumaRouteItemCounted(t *testing.T) {
	const mr = `
apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: mr-1, namespace: kuma-demo}
spec:
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: redis}}
    default: {http: {numRetries: 2, retryOn: [5xx]}}
  - targetRef: {kind: MeshHTTPRoute, labels: {kuma.io/display-name: test-route}}
    default: {http: {numRetries: 6, retryOn: [5xx]}}
  - targetRef: {kind: MeshMultiZoneService, labels: {kuma.io/display-name: redis-mz}}
    default: {http: {numRetries: 4}}`
	for _, c := range []struct {
		name, doc, want string
	}{
		{"route", mr, "Kuma 7 (Kuma MeshRetry kuma-demo/mr-1 numRetries 6 for MeshHTTPRoute test-route, which is not in the input: counted as if it covers this call, an upper bound) at MeshRetry kuma-demo/mr-1 spec.to[1].default.http.numRetries"},
		{"multi-zone service", strings.Replace(mr, "numRetries: 6", "numRetries: 1", 1),
			"Kuma 5 (Kuma MeshRetry kuma-demo/mr-1 numRetries 4 for MeshMultiZoneService redis-mz, which retrycap does not read: counted as if it covers this call, an upper bound) at MeshRetry kuma-demo/mr-1 spec.to[2].default.http.numRetries"},
		// Below the service's, the route's item decides nothing larger: the service's 2 retries.
		{"route lower", strings.Replace(strings.Replace(mr, "numRetries: 6", "numRetries: 1", 1), "numRetries: 4", "numRetries: 0", 1),
			"Kuma 3 (Kuma MeshRetry kuma-demo/mr-1 numRetries 2) at MeshRetry kuma-demo/mr-1 spec.to[0].default.http.numRetries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, nsKuma+"\n---\n"+c.doc)
			var got []string
			for _, l := range s.Edge(caller("kuma-demo"), "redis").Layers {
				got = append(got, string(l.Kind)+" "+l.String()+" at "+l.Object+" "+l.FieldPath)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}

// kuma19: a consumer MeshRetry (in an application namespace, naming another namespace's
// MeshService) selects only the proxies of its own namespace (kumahq/kuma 348b6528
// pkg/plugins/policies/core/matchers/dataplane.go dppSelectedByNamespace); a producer one (in
// the callee's namespace) and a system one (kuma-system) every caller. Before, team-a's
// numRetries 0 decided team-b's caller too: 1 try where Kuma makes 6.
func TestKumaConsumerPolicyOwnNamespace(t *testing.T) {
	const consumer = `
apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: no-retry, namespace: team-a}
spec:
  to:
  - targetRef: {kind: MeshService, name: redis, namespace: kuma-demo}
    default: {http: {numRetries: 0}}`
	ns := func(name string) string {
		return "\napiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + ", labels: {kuma.io/sidecar-injection: enabled}}"
	}
	const dflt = "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"
	for _, c := range []struct {
		name, caller, doc, want string
	}{
		{"consumer, caller elsewhere", "team-b", consumer, dflt},
		{"consumer, caller in its namespace", "team-a", consumer, "Kuma 1 (Kuma MeshRetry team-a/no-retry numRetries 0) at MeshRetry team-a/no-retry spec.to[0].default.http.numRetries"},
		{"producer, any caller", "team-b", strings.Replace(strings.Replace(consumer, "name: redis, namespace: kuma-demo", "name: redis", 1), "team-a", "kuma-demo", 1),
			"Kuma 1 (Kuma MeshRetry kuma-demo/no-retry numRetries 0) at MeshRetry kuma-demo/no-retry spec.to[0].default.http.numRetries"},
	} {
		t.Run(c.name, func(t *testing.T) {
			redis := "\napiVersion: v1\nkind: Service\nmetadata: {name: redis, namespace: kuma-demo}\nspec: {ports: [{port: 6379, appProtocol: http}]}"
			s := set(t, Options{}, strings.Join([]string{nsKuma, ns("team-a"), ns("team-b"), kumaMeshDefault, redis, c.doc}, "\n---\n"))
			var got []string
			for _, l := range s.Edge(caller(c.caller), "redis.kuma-demo").Layers {
				got = append(got, string(l.Kind)+" "+l.String()+" at "+l.Object+" "+l.FieldPath)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}
