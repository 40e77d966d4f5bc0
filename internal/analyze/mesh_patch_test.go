package analyze

import (
	"bytes"
	"github.com/retrycap/retrycap/internal/workload"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/annotations"
)

// TestMeshPatchGolden renders -o table and -o patch for each input of testdata/mesh (manifests in the shape
// of bookinfo, the Gateway API conformance route, ...) against NAME.table.golden and NAME.patch.golden (go test
// ./internal/analyze -run MeshPatchGolden -update rewrites them), then applies what it printed
// (the mesh objects as printed, read after the input so that they replace theirs; the workloads'
// new upstreams) and analyses again: within every cap, unless a note says what no patch of the
// input can lower.
func TestMeshPatchGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "mesh", "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata/mesh/*.yaml: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			m := NewManifests()
			if errs := (Reader{}).ReadPathsInto(m, []string{in}); len(errs) > 0 {
				t.Fatal(errs)
			}
			rep := m.Analyze()
			if rep.WithinCap {
				t.Fatal("within cap before the patch")
			}
			var table bytes.Buffer
			if err := RenderTable(&table, rep); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata", "mesh", name+".table.golden"), table.Bytes())
			patches, notes := m.Plan()
			var b bytes.Buffer
			if err := RenderPatch(&b, patches, notes); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata", "mesh", name+".patch.golden"), b.Bytes())

			// Applied: the printed mesh objects after the input, the workloads' new values.
			after := NewManifests()
			var meshDocs []string
			for _, doc := range strings.Split(b.String(), "\n---\n") {
				if !strings.Contains(doc, "\nkind: Deployment") {
					meshDocs = append(meshDocs, doc)
				}
			}
			if errs := (Reader{}).ReadPathsInto(after, []string{in}); len(errs) > 0 {
				t.Fatal(errs)
			}
			if errs := (Reader{}).Read(after, "patch.yaml", strings.NewReader(strings.Join(meshDocs, "\n---\n"))); len(errs) > 0 {
				t.Fatal(errs)
			}
			for _, pt := range patches {
				if pt.Mesh != nil {
					continue
				}
				for i, w := range after.Workloads {
					if w.Key() == pt.Workload.Key() {
						ann := w.Annotations.Map()
						ann[annotations.Upstreams] = pt.New
						after.Workloads[i].Annotations = workload.PairsOf(ann)
					}
				}
			}
			rep = after.Analyze()
			if rep.WithinCap != (len(notes) == 0) {
				t.Errorf("after the patch: within cap %v, with notes %q", rep.WithinCap, notes)
			}
			// The notes name exactly the chains still over the cap once the patch is applied
			// (up to MaxRemainingListed per policy), each with its fix text: a policy without a
			// note is within its cap.
			var want []string
			for _, p := range rep.Policies {
				if p.WithinCap {
					continue
				}
				name := "RetryPolicy " + p.Namespace + "/" + p.Name
				for i, v := range p.Violations {
					if i == MaxRemainingListed {
						break
					}
					msg, _, _ := strings.Cut(v.Message, "; ")
					want = append(want, name+":   "+msg+"; fix: "+v.Suggestion)
				}
			}
			var got []string
			for _, n := range notes {
				if strings.Contains(n, ":   ") && !strings.Contains(n, ":   ... and ") {
					got = append(got, n)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("notes on the chains left over the cap:\n%s\nwant (the patched input's violations):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// compareGolden compares got with the golden file (rewritten with -update).
func compareGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", golden, got, want)
	}
}
