package mesh

import (
	"fmt"
	"strings"
	"testing"
)

// kumaValues are the values of kuma.io/sidecar-injection the table tries ("" is absent):
// Kuma's six (metadata/annotations.go GetEnabled) and a garbage one.
var kumaValues = []string{"", "enabled", "disabled", "true", "false", "yes", "no", "on"}

// kumaExpected is what Kuma 348b6528 does with a pod labelled column (kumaValues) in a Namespace
// labelled row: I injects, - does not, E refuses the pod. Worked from its webhooks'
// selectors (cp-webhooks-and-secrets.yaml: namespace-kuma-injector for a Namespace "enabled" or
// "true"; pods-kuma-injector for a pod "enabled" in a Namespace with the label at all) and
// precheck.go needToInject (the pod's label, else the Namespace's); three rows are Kuma's own
// cases (injector_test.go "10. Namespace - disabled, Pod - enabled": injected; skip_inject.1, a
// pod disabled in a Namespace enabled: skipped; skip_inject.3, a Namespace with the annotation
// only: skipped).
var kumaExpected = map[string]string{
	"":         "--------",
	"enabled":  "II-I-I-E",
	"disabled": "-I------",
	"true":     "II-I-I-E",
	"false":    "-I------",
	"yes":      "-I------", // "yes" on a Namespace selects no webhook
	"no":       "-I------",
	"on":       "-I------", // never parsed: only the pod's "enabled" gets the pod seen
}

func kumaOutcome(why string, err error) string {
	switch {
	case err != nil:
		return "E"
	case why != "":
		return "I"
	}
	return "-"
}

// TestKumaWillInjectAsKuma: KumaWillInject over the table, with every annotation of
// kuma.io/sidecar-injection on the Namespace and the pod (enabled, disabled, absent) changing
// nothing (Kuma reads none since 2.2.0), and kube-system and kuma-system never injected.
func TestKumaWillInjectAsKuma(t *testing.T) {
	anns := []string{"", "enabled", "disabled"}
	for _, nsV := range kumaValues {
		for j, podV := range kumaValues {
			want := string(kumaExpected[nsV][j])
			nsLabels, labels := map[string]string{}, map[string]string{}
			if nsV != "" {
				nsLabels[KumaSidecarInjection] = nsV
			}
			if podV != "" {
				labels[KumaSidecarInjection] = podV
			}
			// The annotations are not an argument: KumaWillInject cannot read them. The
			// Set's InKuma, which has them, is checked against the same table below.
			why, err := KumaWillInject("shop", labels, nsLabels)
			if got := kumaOutcome(why, err); got != want {
				t.Errorf("namespace %q, pod %q: %s (%q, %v), want %s", nsV, podV, got, why, err, want)
			}
			for _, sys := range []string{"kube-system", "kuma-system"} {
				if why, err := KumaWillInject(sys, labels, nsLabels); why != "" || err != nil {
					t.Errorf("namespace %s %q, pod %q: %q, %v, want nothing", sys, nsV, podV, why, err)
				}
			}
			for _, nsAnn := range anns {
				for _, podAnn := range anns {
					s := NewSet(Options{})
					ns := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","labels":%s,"annotations":%s}}`,
						jsonMap(KumaSidecarInjection, nsV), jsonMap(KumaSidecarInjection, nsAnn))
					if _, err := s.AddJSON([]byte(ns)); err != nil {
						t.Fatal(err)
					}
					c := Caller{Name: "Deployment shop/web", Namespace: "shop", Labels: labels, Annotations: map[string]string{}}
					if podAnn != "" {
						c.Annotations[KumaSidecarInjection] = podAnn
					}
					if got := map[bool]string{true: "I", false: "-"}[s.InKuma(c)]; got != strings.ReplaceAll(want, "E", "-") {
						t.Errorf("InKuma: namespace label %q annotation %q, pod label %q annotation %q: %s, want %s", nsV, nsAnn, podV, podAnn, got, want)
					}
				}
			}
		}
	}
}

func jsonMap(k, v string) string {
	if v == "" {
		return "{}"
	}
	return fmt.Sprintf("{%q:%q}", k, v)
}

// The exact messages: why, and Kuma's refusal naming the label and the value.
func TestKumaWillInjectMessages(t *testing.T) {
	for _, c := range []struct {
		labels, nsLabels map[string]string
		want             string
	}{
		{nil, map[string]string{KumaSidecarInjection: "true"}, `namespace shop is labelled kuma.io/sidecar-injection=true`},
		{map[string]string{KumaSidecarInjection: "yes"}, map[string]string{KumaSidecarInjection: "enabled"}, `label kuma.io/sidecar-injection is "yes"`},
		{map[string]string{KumaSidecarInjection: "Enabled"}, map[string]string{KumaSidecarInjection: "enabled"},
			`error: label kuma.io/sidecar-injection is "Enabled": Kuma's injector refuses the pod (annotation "kuma.io/sidecar-injection" has wrong value "Enabled"; it takes enabled, disabled, true, false, yes or no)`},
	} {
		why, err := KumaWillInject("shop", c.labels, c.nsLabels)
		got := why
		if err != nil {
			got = "error: " + err.Error()
		}
		if got != c.want {
			t.Errorf("%v in %v: %q\nwant %q", c.labels, c.nsLabels, got, c.want)
		}
	}
}

// Kuma's zone proxies run in its own namespace (mesh-zoneproxy-kuma-injector): label enabled,
// kuma.io/mesh and k8s.kuma.io/zone-proxy-type, all three.
func TestKumaWillInjectZoneProxy(t *testing.T) {
	zone := map[string]string{KumaSidecarInjection: "enabled", KumaMeshLabel: "default", KumaZoneProxyTypeLabel: "ingress"}
	if why, err := KumaWillInject(KumaSystemNamespace, zone, nil); why != `label kuma.io/sidecar-injection is "enabled"` || err != nil {
		t.Errorf("zone proxy: %q, %v", why, err)
	}
	for k := range zone {
		less := map[string]string{}
		for kk, v := range zone {
			if kk != k {
				less[kk] = v
			}
		}
		if why, err := KumaWillInject(KumaSystemNamespace, less, map[string]string{KumaSidecarInjection: "enabled"}); why != "" || err != nil {
			t.Errorf("without %s: %q, %v", k, why, err)
		}
	}
}

// The mesh: the pod's kuma.io/mesh label, else the Namespace's, else default; annotations not read.
func TestKumaMeshOf(t *testing.T) {
	for _, c := range []struct {
		labels, nsLabels map[string]string
		want             string
	}{
		{nil, nil, "default"},
		{nil, map[string]string{KumaMeshLabel: "ns"}, "ns"},
		{map[string]string{KumaMeshLabel: "pod"}, map[string]string{KumaMeshLabel: "ns"}, "pod"},
		{map[string]string{KumaMeshLabel: ""}, map[string]string{KumaMeshLabel: "ns"}, "ns"},
	} {
		if got := KumaMeshOf(c.labels, c.nsLabels); got != c.want {
			t.Errorf("%v in %v: %q, want %q", c.labels, c.nsLabels, got, c.want)
		}
	}
}

// A pod label Kuma cannot parse: Kuma's injector refuses the pod; the edge has no Kuma layer
// and says why, naming the workload, the label and the value.
func TestKumaRefusedWarned(t *testing.T) {
	s := set(t, Options{}, nsKuma+"\n---\n"+kumaMeshDefault)
	e := s.Edge(labelled(caller("kuma-demo"), KumaSidecarInjection, "Enabled"), "redis")
	want := `Deployment kuma-demo/productpage: label kuma.io/sidecar-injection is "Enabled": Kuma's injector refuses the pod (annotation "kuma.io/sidecar-injection" has wrong value "Enabled"; it takes enabled, disabled, true, false, yes or no): no Kuma layer counted`
	if len(e.Layers) != 0 || strings.Join(e.Warnings, "|") != want {
		t.Fatalf("layers %v, warnings %q\nwant none, %q", e.Layers, e.Warnings, want)
	}
}

// kuma19: a Pod Kuma's injector injected, as the API server stores it (`kubectl get pod -o
// yaml`): the annotation kuma.io/sidecar-injected and the label kuma.io/mesh it writes
// (kumahq/kuma injector testdata inject.04.golden.yaml, mesh demo), in a Namespace not
// labelled. Before, not in Kuma (its pod has no injection label): 1 try where its sidecar makes 6.
func TestKumaInjectedPodCounted(t *testing.T) {
	s := set(t, Options{}, nsPlain+"\n---\napiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: demo}")
	c := labelled(caller("plain", KumaSidecarInjected, "true"), KumaMeshLabel, "demo")
	var got []string
	for _, l := range s.Edge(c, "redis").Layers {
		got = append(got, string(l.Kind)+" "+l.String())
	}
	want := "Kuma 6 (Kuma default MeshRetry mesh-retry-all-demo (5 retries), assumed: Mesh demo is in the input and no MeshRetry of it is)"
	if strings.Join(got, "; ") != want || !s.InKuma(c) {
		t.Fatalf("layers %q, InKuma %v\nwant %q, true", strings.Join(got, "; "), s.InKuma(c), want)
	}
}
