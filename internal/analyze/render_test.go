package analyze

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// deployment is a Deployment whose pod template carries the retrycap annotations.
func deployment(ns, name, partOf, upstreams string) string {
	ann := ""
	if upstreams != "" {
		ann = fmt.Sprintf("\n      annotations: {retrycap.dev/upstreams: %q}", upstreams)
	}
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: %[2]s}}
  template:
    metadata:
      labels: {app.kubernetes.io/name: %[2]s, app.kubernetes.io/part-of: %[3]s}%[4]s
    spec: {containers: [{name: app, image: app:v1}]}
`, ns, name, partOf, ann)
}

func policy(ns, name, partOf string, cap int, entrypoints string) string {
	return fmt.Sprintf(`apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: %s, namespace: %s}
spec:
  selector: {matchLabels: {app.kubernetes.io/part-of: %s}}
  maxAmplification: %d%s
`, name, ns, partOf, cap, entrypoints)
}

// report reads the manifests (documents joined with "---") and analyses them, as
// `retrycap analyze` does.
func report(t *testing.T, docs ...string) *Report {
	t.Helper()
	m := &Manifests{Sources: map[string]Source{}}
	if errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(strings.Join(docs, "---\n"))); len(errs) > 0 {
		t.Fatalf("reading manifests: %v", errs)
	}
	return m.Analyze()
}

// chainAndDiamond is the design's chain (client 2 x gateway 3 x order 3 x payment 3 = 54, cap 4)
// and a diamond whose two branches tie at 6 (cap 4), with fan-out on one branch.
func chainAndDiamond(t *testing.T) *Report {
	return report(t,
		deployment("shop", "gateway", "shop", "order=3"),
		deployment("shop", "order", "shop", "payment=3"),
		deployment("shop", "payment", "shop", "db=3"),
		deployment("shop", "db", "shop", ""),
		policy("shop", "checkout", "shop", 4, "\n  entrypoints: [{service: gateway, clientAttempts: 2}]"),
		deployment("lab", "edge", "lab", "left=3, right=2"),
		deployment("lab", "left", "lab", "store=2"),
		deployment("lab", "right", "lab", "store=3*2"),
		policy("lab", "diamond", "lab", 4, ""),
	)
}

// retryCycle is a loop with a retry in it (worker -x2-> queue -x1-> worker): amplification
// unbounded.
func retryCycle(t *testing.T) *Report {
	return report(t,
		deployment("loop", "api", "loop", "worker=2"),
		deployment("loop", "worker", "loop", "queue=2"),
		deployment("loop", "queue", "loop", "worker=1"),
		policy("loop", "spin", "loop", 3, ""),
	)
}

// cycleWithoutRetry is a loop with no retry in it: amplification bounded (2, on the way in),
// but the load in and below the loop saturates (a request can go round without end).
func cycleWithoutRetry(t *testing.T) *Report {
	return report(t,
		deployment("loop", "api", "loop", "worker=2"),
		deployment("loop", "worker", "loop", "queue=1"),
		deployment("loop", "queue", "loop", "worker=1"),
		policy("loop", "idle", "loop", 3, ""),
	)
}

func TestRender(t *testing.T) {
	renderers := []struct {
		name   string
		render func(*bytes.Buffer, *Report) error
	}{
		{"table", func(b *bytes.Buffer, r *Report) error { return RenderTable(b, r) }},
		{"json", func(b *bytes.Buffer, r *Report) error { return RenderJSON(b, r) }},
		{"dot", func(b *bytes.Buffer, r *Report) error { return RenderDOT(b, r) }},
		{"mermaid", func(b *bytes.Buffer, r *Report) error { return RenderMermaid(b, r) }},
		{"tree", func(b *bytes.Buffer, r *Report) error { return RenderTree(b, r) }},
	}
	reports := []struct {
		name   string
		report func(*testing.T) *Report
	}{
		{"chain-and-diamond", chainAndDiamond},
		{"retry-cycle", retryCycle},
		{"cycle-without-retry", cycleWithoutRetry},
		{"empty", func(*testing.T) *Report { return NewReport(nil) }},
	}
	for _, rp := range reports {
		for _, r := range renderers {
			t.Run(rp.name+"/"+r.name, func(t *testing.T) {
				var b bytes.Buffer
				if err := r.render(&b, rp.report(t)); err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("testdata", rp.name+"."+r.name+".golden")
				if *update {
					if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got := b.String(); got != string(want) {
					t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", r.name, golden, got, want)
				}
			})
		}
	}
}

// Several policies render as ONE document: `-o dot | dot -Tsvg > graph.svg` must make one valid
// SVG, and a Markdown mermaid block holds one diagram. Node IDs are per policy, so a service two
// policies share is drawn once in each cluster.
func TestRenderSeveralPoliciesOneDocument(t *testing.T) {
	rep := chainAndDiamond(t)
	if len(rep.Policies) != 2 {
		t.Fatalf("%d policies, want 2", len(rep.Policies))
	}
	var dot, mermaid bytes.Buffer
	if err := RenderDOT(&dot, rep); err != nil {
		t.Fatal(err)
	}
	if err := RenderMermaid(&mermaid, rep); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(dot.String(), "digraph "); n != 1 {
		t.Errorf("DOT output has %d digraphs, want 1:\n%s", n, dot.String())
	}
	if n := strings.Count(dot.String(), "subgraph \"cluster_"); n != 2 {
		t.Errorf("DOT output has %d clusters, want 2", n)
	}
	if n := strings.Count(mermaid.String(), "flowchart "); n != 1 {
		t.Errorf("Mermaid output has %d flowcharts, want 1:\n%s", n, mermaid.String())
	}
	if !strings.Contains(mermaid.String(), "  linkStyle 0,2,4,5,6 stroke") {
		t.Errorf("Mermaid link indexes are not counted across the diagram:\n%s", mermaid.String())
	}
}
