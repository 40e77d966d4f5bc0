package analyze

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/graph"
)

// A type error in an object's spec names the object (kind, namespace/name) and the document, so
// a user can find it in a large kustomize build.
func TestReadTypeErrorNamesObject(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"policy", "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: checkout, namespace: shop}\nspec: {maxAmplification: \"4\"}\n",
			`test.yaml: document 1: RetryPolicy shop/checkout: spec.maxAmplification: "4" is a string, want an integer`},
		{"policy without namespace", "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: checkout}\nspec: {maxAmplification: 2.5}\n",
			`test.yaml: document 1: RetryPolicy default/checkout: spec.maxAmplification: 2.5 is a number, want an integer`},
		{"deployment", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gateway, namespace: shop}\nspec: {replicas: two}\n",
			`test.yaml: document 1: Deployment shop/gateway: spec.replicas: "two" is a string, want an integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Manifests{Sources: map[string]Source{}}
			errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(tt.doc))
			if len(errs) != 1 || errs[0].Error() != tt.want {
				t.Fatalf("errors %v, want %q", errs, tt.want)
			}
		})
	}
}

// Documents keep the line of their first content (SARIF points there); a separator may carry a
// comment, and "--- x" is content, not a separator.
func TestSplitDocumentsLines(t *testing.T) {
	docs := splitDocuments([]byte("# head\na: 1\n--- # two\n\nb: 2\n---\nc: 3\n--- x\n---\n\n \n\nd: 4\n"))
	var got []string
	for _, d := range docs {
		got = append(got, fmt.Sprintf("%d:%q", d.line, d.raw))
	}
	want := []string{`1:"# head\na: 1\n"`, `5:"\nb: 2\n"`, `7:"c: 3\n--- x\n"`, `13:"\n \n\nd: 4\n"`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// A load too costly to take per entrypoint is labelled as the bound it is.
func TestRenderLoadBound(t *testing.T) {
	rep := NewReport([]PolicyReport{{Namespace: "ns", Name: "p", Cap: 4, Bounded: true, WithinCap: true,
		WorstCaseLoad: graph.ServiceLoad{Service: "db", Requests: graph.Saturated}, LoadIsBound: true}})
	var b bytes.Buffer
	if err := RenderTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	const want = "  worst-case load:  unbounded requests at db, at most, per request at every entrypoint at once (too many entrypoints to take each; fan-out included)\n"
	if !strings.Contains(b.String(), want) {
		t.Fatalf("table lacks %q:\n%s", want, b.String())
	}
}

// What is read is not counted as ignored: a Namespace (its labels put workloads in a mesh and
// select them for cluster policies) and Istio's MeshConfig ConfigMap (its default retries).
// Before, both were "ignored: ConfigMap 1, Namespace 1" while they decided the layers.
func TestSummaryCountsWhatIsRead(t *testing.T) {
	in := "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata: {mesh: \"defaultHttpRetryPolicy: {attempts: 1}\"}\n---\n" +
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config, namespace: shop}\n"
	m := NewManifests()
	if errs := (Reader{}).Read(m, "in.yaml", strings.NewReader(in)); len(errs) > 0 {
		t.Fatal(errs)
	}
	s := m.Summary
	if s.Namespaces != 1 || s.Mesh[meshConfigKind] != 1 || len(s.Mesh) != 1 || s.Ignored["ConfigMap"] != 1 || len(s.Ignored) != 1 {
		t.Fatalf("namespaces %d, mesh %v, ignored %v; want 1, {%s: 1}, {ConfigMap: 1}", s.Namespaces, s.Mesh, s.Ignored, meshConfigKind)
	}
	rep := m.Analyze()
	var b strings.Builder
	if err := RenderSummary(&b, rep); err != nil {
		t.Fatal(err)
	}
	want := "read: 1 file(s), 3 object(s): 0 workload(s) (0 declare retrycap.dev/upstreams), 0 Service(s), 1 Namespace(s), 0 RetryPolicy(ies); mesh objects: ConfigMap istio-system/istio (MeshConfig) 1; ignored: ConfigMap 1\n"
	if got, _, _ := strings.Cut(b.String(), "not checked"); got != want {
		t.Fatalf("summary\n%q\nwant\n%q", got, want)
	}
}
