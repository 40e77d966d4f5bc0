package mesh

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// istioInjectorSet is a Set holding the MutatingWebhookConfigurations of
// testdata/istio-injector/NAME.yaml (their sources are named in each file).
func istioInjectorSet(t *testing.T, names ...string) *Set {
	t.Helper()
	s := NewSet(Options{})
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("testdata", "istio-injector", n+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		kept, err := s.AddManifest(data)
		if err != nil || !kept {
			t.Fatalf("adding %s: kept %v, %v", n, kept, err)
		}
	}
	return s
}

const (
	autoWhy = "webhook auto.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector selects it " +
		"(namespaceSelector !istio-injection,!istio.io/rev,kubernetes.io/metadata.name notin (kube-node-lease,kube-public,kube-system,local-path-storage); " +
		"objectSelector !istio.io/rev,!sidecar.istio.io/inject)"
	nsWhy = "webhook namespace.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector selects it " +
		"(namespaceSelector istio-injection in (enabled); objectSelector sidecar.istio.io/inject notin (false))"
	objWhy = "webhook object.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector selects it " +
		"(namespaceSelector !istio-injection,!istio.io/rev; objectSelector !istio.io/rev,sidecar.istio.io/inject in (true))"
	rev16NsWhy = "webhook rev.namespace.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector-1-16 selects it " +
		"(namespaceSelector !istio-injection,istio.io/rev in (1-16); objectSelector sidecar.istio.io/inject notin (false))"
)

// TestIstioWillInjectWebhooks: with Istio's injector configurations in the Set, injection is
// decided by their selectors as the API server matches them (Istio's own TestWebhookSelector
// does the same with labels.Selector), not by the chart's default selectors. Before, the auto
// webhook of enableNamespacesByDefault was not followed: an unlabelled pod of an unlabelled
// namespace was counted unmeshed (a false green).
func TestIstioWillInjectWebhooks(t *testing.T) {
	type m = map[string]string
	cases := []struct {
		name         string
		configs      []string
		ns           string
		nsLabels     m
		pod, podAnns m
		want         string
	}{
		{"no configurations: the default rule, unlabelled", nil, "shop", nil, nil, nil, ""},
		{"no configurations: the default rule, labelled", nil, "shop", m{"istio-injection": "enabled"}, nil, nil,
			"namespace shop is labelled istio-injection=enabled"},
		{"defaults: unlabelled namespace and pod", []string{"default"}, "shop", nil, nil, nil, ""},
		{"defaults: istio-injection=enabled", []string{"default"}, "shop", m{"istio-injection": "enabled"}, nil, nil, nsWhy},
		{"defaults: pod label inject true", []string{"default"}, "shop", nil, m{"sidecar.istio.io/inject": "true"}, nil, objWhy},
		{"defaults: pod annotation inject true alone", []string{"default"}, "shop", nil, nil, m{"sidecar.istio.io/inject": "true"}, ""},
		{"auto: unlabelled namespace and pod", []string{"auto"}, "shop", nil, nil, nil, autoWhy},
		{"auto: the namespace's other labels do not matter", []string{"auto"}, "shop", m{"team": "a"}, m{"app": "cart"}, nil, autoWhy},
		{"auto: annotation false opts out (injectRequired)", []string{"auto"}, "shop", nil, nil, m{"sidecar.istio.io/inject": "false"}, ""},
		{"auto: label false is not selected", []string{"auto"}, "shop", nil, m{"sidecar.istio.io/inject": "false"}, nil, ""},
		{"auto: istio-injection=disabled", []string{"auto"}, "shop", m{"istio-injection": "disabled"}, nil, nil, ""},
		{"auto: kube-system", []string{"auto"}, "kube-system", nil, nil, nil, ""},
		{"auto: local-path-storage", []string{"auto"}, "local-path-storage", nil, nil, nil, ""},
		{"auto: istio-injection=enabled", []string{"auto"}, "shop", m{"istio-injection": "enabled"}, nil, nil, nsWhy},
		{"revision only: its namespace label", []string{"rev-1-16"}, "shop", m{"istio.io/rev": "1-16"}, nil, nil, rev16NsWhy},
		{"revision only: unlabelled", []string{"rev-1-16"}, "shop", nil, nil, nil, ""},
		{"revision only: another revision, not in the input, assumed", []string{"rev-1-16"}, "shop", m{"istio.io/rev": "canary"}, nil, nil,
			"namespace shop is labelled istio.io/rev=canary (no MutatingWebhookConfiguration of Istio's in the input serves revision canary: assumed installed)"},
		{"revision only: istio-injection=enabled, the default revision not in the input, assumed", []string{"rev-1-16"}, "shop", m{"istio-injection": "enabled"}, nil, nil,
			"namespace shop is labelled istio-injection=enabled (no MutatingWebhookConfiguration of Istio's in the input serves revision default: assumed installed)"},
		{"defaults: a revision label no webhook of the served default selects", []string{"default"}, "shop", m{"istio.io/rev": "default", "istio-injection": "disabled"}, nil, nil, ""},
		{"defaults and revision: the pod's revision label", []string{"default", "rev-1-16"}, "shop", nil, m{"istio.io/rev": "1-16"}, nil,
			"webhook rev.object.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector-1-16 selects it " +
				"(namespaceSelector !istio-injection,!istio.io/rev; objectSelector istio.io/rev in (1-16),sidecar.istio.io/inject notin (false))"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSet(Options{})
			if len(c.configs) > 0 {
				s = istioInjectorSet(t, c.configs...)
			}
			if got := s.IstioWillInject(c.ns, c.pod, c.podAnns, c.nsLabels); got != c.want {
				t.Errorf("IstioWillInject = %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestIstioAutoInjectEdge: under enableNamespacesByDefault, a call between two unlabelled pods of
// an unlabelled namespace carries Istio's sidecar layer (its default 2 retries: 3 tries). Before,
// the Set did not read the webhook configuration and the edge was 1 try.
func TestIstioAutoInjectEdge(t *testing.T) {
	for _, c := range []struct {
		configs []string
		want    string
	}{
		{nil, "[]"},
		{[]string{"default"}, "[]"},
		{[]string{"auto"}, "[3 (Istio default, no VirtualService binds ratings)]"},
	} {
		s := NewSet(Options{})
		if len(c.configs) > 0 {
			s = istioInjectorSet(t, c.configs...)
		}
		for _, doc := range []string{
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}`,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"ratings","namespace":"shop"},"spec":{"ports":[{"name":"http","port":9080}]}}`,
		} {
			if _, err := s.AddJSON([]byte(doc)); err != nil {
				t.Fatal(err)
			}
		}
		caller := Caller{Name: "Deployment shop/reviews", Namespace: "shop", Labels: map[string]string{"app": "reviews"}}
		if got := fmt.Sprint(s.Edge(caller, "ratings").Layers); got != c.want {
			t.Errorf("%v: layers %s, want %s", c.configs, got, c.want)
		}
		if got, want := s.InIstio(caller), c.want != "[]"; got != want {
			t.Errorf("%v: InIstio %v, want %v", c.configs, got, want)
		}
	}
}
