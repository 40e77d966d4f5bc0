package mesh

import (
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
		{name: "pod opts out", docs: []string{nsKuma, kumaMeshDefault}, caller: caller("kuma-demo", "kuma.io/sidecar-injection", "disabled"), callee: "redis"},
		{name: "pod opts in", docs: []string{nsPlain, kumaMeshDefault}, caller: caller("plain", "kuma.io/sidecar-injection", "enabled"), callee: "redis",
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry of it is) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
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
