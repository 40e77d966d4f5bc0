package cli

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/analyze/kustomize"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// The whole combined fix (-o patch), applied to the objects it names and analysed again, brings
// every chain within its cap; before it, each input is over.
func TestAnalyzePatchAppliedIsWithinCap(t *testing.T) {
	inputs := []struct {
		name  string
		read  func(analyze.Reader, *analyze.Manifests) []error
		count int // patches
	}{
		{"many (20 of 27 shown)", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadPathsInto(m, []string{"testdata/honest/many.yaml"})
		}, 25},
		{"kustomize", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadKustomization(m, "testdata/honest/kust/overlay", kustomize.Build)
		}, 1},
		{"boutique", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadPathsInto(m, []string{"testdata/honest/boutique"})
		}, 1},
		{"ties", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadPathsInto(m, []string{"testdata/honest/ties.yaml"})
		}, 3},
		// Through Services: the edges out of a Service's node are the selected workloads' own.
		{"bookinfo (Services)", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadPathsInto(m, []string{"testdata/services/bookinfo.yaml"})
		}, 2},
		{"emojivoto (Services)", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadPathsInto(m, []string{"testdata/services/emojivoto.yaml"})
		}, 1},
		{"storm27 and incident18", func(r analyze.Reader, m *analyze.Manifests) []error {
			return r.ReadPathsInto(m, []string{"testdata/storm27.yaml", "testdata/incident18.yaml"})
		}, 4},
	}
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			m := analyze.NewManifests()
			if errs := in.read(analyze.Reader{}, m); len(errs) > 0 {
				t.Fatal(errs)
			}
			if m.Analyze().WithinCap {
				t.Fatal("within cap before the patch")
			}
			patches, notes := m.Plan()
			if len(notes) > 0 || len(patches) != in.count {
				t.Fatalf("%d patches (want %d), notes %v", len(patches), in.count, notes)
			}
			var out bytes.Buffer
			if err := analyze.RenderPatch(&out, patches, notes); err != nil {
				t.Fatal(err)
			}
			// Apply what was printed, not the structs: parse each document back.
			for _, doc := range strings.Split(out.String(), "\n---\n") {
				var p struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Name, Namespace string
						Annotations     map[string]string
					} `json:"metadata"`
					Spec struct {
						Template struct {
							Metadata struct {
								Annotations map[string]string
							} `json:"metadata"`
						} `json:"template"`
					} `json:"spec"`
				}
				if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
					t.Fatalf("%v in\n%s", err, doc)
				}
				v := p.Spec.Template.Metadata.Annotations[annotations.Upstreams]
				applied := false
				for i, w := range m.Workloads {
					if w.Kind == p.Kind && w.Namespace == p.Metadata.Namespace && w.Name == p.Metadata.Name {
						m.Workloads[i].Annotations = workload.PairsOf(map[string]string{annotations.Upstreams: v})
						applied = true
					}
				}
				if !applied || v == "" {
					t.Fatalf("patch names no object read, or no value:\n%s", doc)
				}
			}
			rep := m.Analyze()
			if !rep.WithinCap {
				var b bytes.Buffer
				_ = analyze.RenderTable(&b, rep)
				t.Fatalf("over the cap after the patch:\n%s\npatch:\n%s", b.String(), out.String())
			}
		})
	}
}

// Exit codes and the exact messages of the reader's warnings and errors.
func TestAnalyzeWarningsAndExitCodes(t *testing.T) {
	dep := func(meta, tmpl string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: gw, namespace: shop" + meta + "}\nspec:\n  selector: {matchLabels: {app: gw}}\n  template:\n    metadata: {labels: {app: gw}" + tmpl + "}\n    spec: {containers: [{name: a, image: a}]}\n"
	}
	const policy = "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 4}\n"
	tests := []struct {
		name, stdin string
		code        int
		warnings    []string // "warning: " lines of stdout, exactly, in order
		stderr      string   // exactly
	}{
		{name: "within cap, no warning", stdin: policy + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: order=2}"), code: 0},
		{name: "metadata annotation is read", stdin: policy + "---\n" + dep(", annotations: {retrycap.dev/upstreams: order=5}", ""), code: 1,
			warnings: []string{`-: document 2: Deployment shop/gw: annotation retrycap.dev/upstreams is on the Deployment's own metadata: read, but it belongs on the pod template (spec.template.metadata.annotations)`}},
		{name: "pod template wins", stdin: policy + "---\n" + dep(", annotations: {retrycap.dev/upstreams: order=5}", ", annotations: {retrycap.dev/upstreams: order=2}"), code: 0,
			warnings: []string{`-: document 2: Deployment shop/gw: annotation retrycap.dev/upstreams is on both the Deployment's metadata ("order=5") and its pod template ("order=2"): the pod template's wins`}},
		{name: "same object twice", stdin: policy + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: order=5}") + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: order=2}"), code: 0,
			warnings: []string{`-: document 3: Deployment shop/gw is also at -: document 2: the later wins`}},
		{name: "host:port", stdin: policy + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: \"order:8080=2\"}"), code: 0,
			warnings: []string{`-: document 2: Deployment shop/gw: annotation retrycap.dev/upstreams: token "order:8080=2" at column 1: read as upstream "order": the graph names services, not ports; port 8080 only picks the Service port whose protocol decides whether a mesh retries the call`}},
		{name: "typed list items without kind", stdin: policy + "---\napiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {name: gw, namespace: shop}\n  spec:\n    selector: {matchLabels: {app: gw}}\n    template:\n      metadata: {labels: {app: gw}, annotations: {retrycap.dev/upstreams: order=5}}\n      spec: {containers: [{name: a, image: a}]}\n", code: 1},
		{name: "mesh objects the mesh set does not read are counted, not modelled", stdin: policy + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: order=2}") + "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: order, namespace: shop}\nspec: {host: order}\n", code: 0,
			warnings: []string{`(input): 1 DestinationRule(s) read, not counted: a DestinationRule sets no tries per request (its connectionPool.http.maxRetries and retryBudget cap the retries in flight to a host, which can only lower what a chain sees)`}},
		{name: "a VirtualService is read by the mesh set: no warning", stdin: policy + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: order=2}") + "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: order, namespace: shop}\nspec: {hosts: [order]}\n", code: 0},
		{name: "no upstreams anywhere", stdin: policy + "---\n" + dep("", ""), code: 2,
			stderr: "retrycap: analyze: nothing checked for 1 of 1 RetryPolicy(ies) (see \"not checked\" above)\n"},
		{name: "no policy", stdin: dep("", ""), code: 2,
			stderr: "retrycap: analyze: nothing checked: no RetryPolicy (retrycap.dev/v1alpha1) in the input: nothing to check against\n"},
		{name: "kind without apiVersion", stdin: "kind: Deployment\nmetadata: {name: gw}\n", code: 2,
			stderr: "error: -: document 1: Deployment default/gw: apiVersion is missing\nretrycap: analyze: 1 error(s) in the input\n"},
		{name: "bad port", stdin: policy + "---\n" + dep("", ", annotations: {retrycap.dev/upstreams: \"order:http\"}"), code: 2,
			stderr: "error: -: document 2: Deployment shop/gw: annotation retrycap.dev/upstreams: token \"order:http\" at column 1: port must be an integer 1..65535\nretrycap: analyze: 1 error(s) in the input\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, tt.stdin, "analyze", "-f", "-")
			var warnings []string
			for _, l := range strings.Split(stdout, "\n") {
				if w, ok := strings.CutPrefix(l, "warning: "); ok {
					warnings = append(warnings, w)
				}
			}
			if code != tt.code || strings.Join(warnings, "\n") != strings.Join(tt.warnings, "\n") || stderr != tt.stderr {
				t.Fatalf("exit %d (want %d)\nwarnings %q\nwant     %q\nstderr %q\nwant   %q\nstdout:\n%s", code, tt.code, warnings, tt.warnings, stderr, tt.stderr, stdout)
			}
		})
	}
}

// The plugin's -k (kubectl kustomize) reads the same objects as the in-process build.
func TestKubectlKustomizeMatchesInProcess(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Skip("kubectl is not on PATH")
	}
	var reports []string
	for _, build := range []func(string) ([]byte, error){kustomize.Build, KubectlKustomize} {
		m := analyze.NewManifests()
		if errs := (analyze.Reader{}).ReadKustomization(m, "testdata/honest/kust/overlay", build); len(errs) > 0 {
			t.Fatal(errs)
		}
		var b bytes.Buffer
		if err := analyze.RenderJSON(&b, m.Analyze()); err != nil {
			t.Fatal(err)
		}
		reports = append(reports, b.String())
	}
	if reports[0] != reports[1] {
		t.Fatalf("in process:\n%s\nkubectl kustomize:\n%s", reports[0], reports[1])
	}
}
