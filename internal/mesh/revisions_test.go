package mesh

import "testing"

func meshCM(name, rev, mesh string) string {
	return "\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + ", namespace: istio-system, labels: {istio.io/rev: " + rev + "}}\ndata:\n  mesh: |-\n" + mesh
}

// TestRevisionMeshConfigs: a revision's MeshConfig (istio-<rev>, labelled istio.io/rev: <rev>)
// is read beside the default one, and the default retries counted are the most of them, the
// note naming each; other istio-* ConfigMaps are not MeshConfigs. Before, istio-canary was
// ignored: 3 where its sidecars make 6.
func TestRevisionMeshConfigs(t *testing.T) {
	const five = "    defaultHttpRetryPolicy:\n      attempts: 5\n"
	const one = "    defaultHttpRetryPolicy:\n      attempts: 1\n"
	const none = "    trustDomain: cluster.local\n"
	cases := []struct {
		name   string
		docs   string
		tries  int64
		object string
		note   string
	}{
		{"the default revision's alone", meshCM("istio", `"default"`, one), 2, "ConfigMap istio-system/istio",
			"Istio default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 1, no VirtualService binds reviews"},
		{"a canary's alone (before: not read, 3)", meshCM("istio-canary", "canary", five), 6, "ConfigMap istio-system/istio-canary",
			"Istio default from ConfigMap istio-system/istio-canary data.mesh defaultHttpRetryPolicy.attempts: 5, no VirtualService binds reviews"},
		{"default unset, canary 5: the most", meshCM("istio", `"default"`, none) + "\n---\n" + meshCM("istio-canary", "canary", five), 6, "ConfigMap istio-system/istio-canary",
			"Istio default from ConfigMap istio-system/istio-canary data.mesh defaultHttpRetryPolicy.attempts: 5 (the most of 2 Istio revisions' MeshConfigs: istio 2, istio-canary 5), no VirtualService binds reviews"},
		{"default 1, canary unset: Istio's 2, named", meshCM("istio", `"default"`, one) + "\n---\n" + meshCM("istio-canary", "canary", none), 3, "ConfigMap istio-system/istio-canary",
			"Istio default from ConfigMap istio-system/istio-canary sets no defaultHttpRetryPolicy: 2 (the most of 2 Istio revisions' MeshConfigs: istio 1, istio-canary 2), no VirtualService binds reviews"},
		{"a tie: the default revision's", meshCM("istio", `"default"`, five) + "\n---\n" + meshCM("istio-canary", "canary", five), 6, "ConfigMap istio-system/istio",
			"Istio default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 5 (the most of 2 Istio revisions' MeshConfigs: istio 5, istio-canary 5), no VirtualService binds reviews"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, nsIstio+"\n---\n"+tc.docs)
			e := s.Edge(caller("bookinfo"), "reviews")
			if len(e.Layers) != 1 || e.Tries() != tc.tries || e.Layers[0].Object != tc.object || e.Layers[0].Note != tc.note {
				t.Fatalf("layers %+v, want %d tries from %s, note %q", e.Layers, tc.tries, tc.object, tc.note)
			}
		})
	}

	t.Run("removing the canary's", func(t *testing.T) {
		s := set(t, Options{}, nsIstio+"\n---\n"+meshCM("istio", `"default"`, none)+"\n---\n"+meshCM("istio-canary", "canary", five))
		if !s.Remove("", "ConfigMap", "istio-system", "istio-canary") {
			t.Fatal("Remove: not held")
		}
		if e := s.Edge(caller("bookinfo"), "reviews"); e.Tries() != 3 || e.Layers[0].Note != istioNoVS+"reviews" {
			t.Fatalf("after Remove: %+v", e.Layers)
		}
		if got := s.Counts()["ConfigMap"]; got != 1 {
			t.Fatalf("Counts ConfigMap %d, want 1", got)
		}
	})

	for _, tc := range []struct {
		ns, name string
		labels   map[string]string
		want     bool
	}{
		{"istio-system", "istio", nil, true},
		{"istio-system", "istio-canary", map[string]string{IstioRevLabel: "canary"}, true},
		{"istio-system", "istio-canary", nil, false},
		{"istio-system", "istio-sidecar-injector-canary", map[string]string{IstioRevLabel: "canary"}, false},
		{"istio-system", "istio-default", map[string]string{IstioRevLabel: "default"}, false},
		{"other", "istio-canary", map[string]string{IstioRevLabel: "canary"}, false},
	} {
		if got := IsMeshConfig(tc.ns, tc.name, tc.labels); got != tc.want {
			t.Errorf("IsMeshConfig(%s, %s, %v) = %v, want %v", tc.ns, tc.name, tc.labels, got, tc.want)
		}
	}
}

// TestRemoveMeshConfigs: the manager's watch removes MeshConfigs as they are deleted; the last
// one removed leaves Istio's own default (3 tries). Before, removing the last one panicked in
// pickMeshConfig (a nil default dereferenced), in the informer's handler: the manager crashed
// when istio-system/istio was deleted.
func TestRemoveMeshConfigs(t *testing.T) {
	const five = "    defaultHttpRetryPolicy:\n      attempts: 5\n"
	const one = "    defaultHttpRetryPolicy:\n      attempts: 1\n"
	s := set(t, Options{}, nsIstio+"\n---\n"+meshCM("istio", `"default"`, one)+"\n---\n"+meshCM("istio-canary", "canary", five))
	for _, step := range []struct {
		remove string
		tries  int64
	}{{"", 6}, {"istio-canary", 2}, {"istio", 3}} {
		if step.remove != "" && !s.Remove("", "ConfigMap", "istio-system", step.remove) {
			t.Fatalf("Remove(ConfigMap istio-system/%s) = false, want true", step.remove)
		}
		if got := s.Edge(caller("bookinfo"), "reviews").Tries(); got != step.tries {
			t.Fatalf("after removing %q: %d tries, want %d", step.remove, got, step.tries)
		}
	}
}
