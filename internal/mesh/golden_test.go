package mesh

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGolden reads the manifests of an example (the mesh objects it holds; Deployments for the
// callers), computes the layers of the edges listed in edges.txt and the north-south entries,
// and compares the rendering with layers.golden (go test -run Golden -update rewrites it).
func TestGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "*", "manifests.yaml"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, m := range dirs {
		dir := filepath.Dir(m)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := renderExample(t, dir)
			golden := filepath.Join(dir, "layers.golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s differs (go test ./internal/mesh -run Golden -update):\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

func renderExample(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(Options{})
	callers := map[string]Caller{}
	for i, doc := range splitYAML(t, data) {
		if _, err := s.AddManifest(doc); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
		var d struct {
			Kind     string     `json:"kind"`
			Metadata objectMeta `json:"metadata"`
			Spec     struct {
				Template struct {
					Metadata objectMeta `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		if d.Kind == "Deployment" {
			callers[d.Metadata.Name] = Caller{Name: "Deployment " + d.Metadata.Namespace + "/" + d.Metadata.Name, Namespace: d.Metadata.Namespace,
				Labels: d.Spec.Template.Metadata.Labels, Annotations: d.Spec.Template.Metadata.Annotations}
		}
	}
	var b strings.Builder
	if f, err := os.Open(filepath.Join(dir, "edges.txt")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			from, to, _ := strings.Cut(line, " ")
			c, ok := callers[from]
			if !ok {
				t.Fatalf("edges.txt: no Deployment %s", from)
			}
			writeEdge(&b, c.Name+" -> "+to, s.Edge(c, to))
		}
		_ = f.Close()
	}
	for _, v := range s.Backends() {
		writeEdge(&b, "gateway -> "+v.String(), s.Entry(v))
	}
	return b.String()
}

func writeEdge(b *strings.Builder, what string, e Edge) {
	parts := make([]string, len(e.Layers))
	for i, l := range e.Layers {
		parts[i] = l.String()
	}
	layers := "no layer"
	if len(parts) > 0 {
		layers = strings.Join(parts, " x ")
	}
	fmt.Fprintf(b, "%s: x%d = %s\n", what, e.Tries(), layers)
	for _, l := range e.Layers {
		if l.Object != "" {
			fmt.Fprintf(b, "  %s %s %s default=%v\n", l.Kind, l.Object, l.FieldPath, l.Default)
		}
	}
	for _, w := range e.Warnings {
		fmt.Fprintf(b, "  warning: %s\n", w)
	}
}

func splitYAML(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, d := range bytes.Split(data, []byte("\n---\n")) {
		if len(bytes.TrimSpace(stripComments(d))) > 0 {
			out = append(out, d)
		}
	}
	return out
}

func stripComments(d []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(d, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l...)
			out = append(out, '\n')
		}
	}
	return out
}

// TestBookinfoChain: with the apps making 1 attempt, productpage -x3-> reviews -x4-> ratings is
// 12 tries of ratings per productpage request under Istio's defaults and the ratings retry.
func TestBookinfoChain(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "bookinfo", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := NewSet(Options{})
	for _, d := range splitYAML(t, data) {
		if _, err := s.AddManifest(d); err != nil {
			t.Fatal(err)
		}
	}
	productpage := Caller{Name: "Deployment bookinfo/productpage-v1", Namespace: "bookinfo"}
	reviews := Caller{Name: "Deployment bookinfo/reviews-v2", Namespace: "bookinfo"}
	if got := s.Edge(productpage, "reviews").Tries() * s.Edge(reviews, "ratings").Tries(); got != 12 {
		t.Errorf("productpage -> reviews -> ratings: %d tries, want 12", got)
	}
}
