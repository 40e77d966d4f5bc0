package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/analyze"
)

func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestAnalyzeStorm27Table(t *testing.T) {
	code, out, stderr := run(t, "", "analyze", "-f", "testdata/storm27.yaml")
	const want = `read: 1 file(s), 6 object(s): 4 workload(s) (3 declare retrycap.dev/upstreams), 0 Service(s), 1 Namespace(s), 1 RetryPolicy(ies)

RetryPolicy payments/storm  cap 4  amplification 27  WITHIN CAP: no
  enforcement:      Reject
  services, edges:  4, 3
  entrypoints:      frontend (client x1)
  worst path:       client -x1-> frontend -x3-> checkout -x3-> billing -x3-> payment = 27 > cap 4
  worst-case load:  27 requests at payment per entry request at frontend (fan-out included)
  violations:
    - client -x1-> frontend -x3-> checkout -x3-> billing -x3-> payment = 27 > cap 4
      fix: checkout: billing=1; billing: payment=1
  worst time to answer:  6.3s (frontend -> checkout -> billing -> payment)
  timeout inversions:
    - checkout -> billing: Deployment payments/checkout per-try timeout 2s < billing's worst time 6.3s: checkout retries while billing still works on the abandoned try
      fix: Deployment payments/checkout per-try timeout for billing >= 6.3s, or a timeout of at most 2s on billing's own calls
    - frontend -> checkout: Deployment payments/frontend per-try timeout 2s < checkout's worst time 6.3s: frontend retries while checkout still works on the abandoned try
      fix: Deployment payments/frontend per-try timeout for checkout >= 6.3s, or a timeout of at most 2s on checkout's own calls

` + analyze.BudgetNote + "\n"
	if code != ExitOverCap || out != want || stderr != "" {
		t.Fatalf("exit %d stderr %q\n%s\nwant\n%s", code, stderr, out, want)
	}
}

func TestAnalyzeExitCodesAndOutputs(t *testing.T) {
	storm, _ := os.ReadFile("testdata/storm27.yaml")
	tests := []struct {
		name     string
		stdin    string
		args     []string
		code     int
		out      []string // substrings of stdout
		stderr   []string // substrings of stderr
		jsonAmps map[string]int64
	}{
		{name: "incident18", args: []string{"-f", "testdata/incident18.yaml"}, code: 1,
			out: []string{"RetryPolicy shop/checkout  cap 3  amplification 18  WITHIN CAP: no", "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3", "fix: gateway: catalog=1; catalog: db=1", "Retrycap-Budget"}},
		{name: "both as json", args: []string{"-f", "testdata/incident18.yaml", "-f", "testdata/storm27.yaml", "-o", "json"}, code: 1,
			jsonAmps: map[string]int64{"shop/checkout": 18, "payments/storm": 27}},
		{name: "within cap", args: []string{"-f", "testdata/within.yaml"}, code: 0,
			out: []string{"WITHIN CAP: yes", "client -x1-> gateway -x2-> order -x2-> db = 4 <= cap 4", "12 requests at db"}},
		{name: "directory, recursive, json and yml", args: []string{"-R", "-f", "testdata/dir", "-o", "json"}, code: 0,
			jsonAmps: map[string]int64{"web/fanout": 6}},
		{name: "stdin", stdin: string(storm), args: []string{"-f", "-", "-o", "tree"}, code: 1,
			out: []string{"frontend (client x1) *\n└─ -x3-> checkout *\n   └─ -x3-> billing *\n      └─ -x3-> payment *\n"}},
		// A cycle is not a call loop: chains visit each service once (gateway>order>payment).
		{name: "retry cycle in a List, default namespace", args: []string{"-f", "testdata/cycle.yaml"}, code: 0,
			out: []string{"RetryPolicy default/loop  cap 4  amplification 2  WITHIN CAP: yes", "client -x1-> gateway -x1-> order -x2-> payment = 2 <= cap 4",
				"cycles:                order -> payment -> order: not a call loop, retries counted once per chain (chains visit each service once)"}},
		{name: "namespace flag", args: []string{"-f", "testdata/cycle.yaml", "-n", "lab", "-o", "json"}, code: 0,
			out: []string{`"namespace": "lab"`, `"bounded": true`, `"cycle": [`}},
		{name: "bad annotation", args: []string{"-f", "testdata/bad-annotation.yaml"}, code: 2,
			stderr: []string{`testdata/bad-annotation.yaml: document 2: Deployment shop/gateway: annotation retrycap.dev/upstreams: token "order=x" at column 12: attempts must be an integer 1..100`}},
		{name: "malformed yaml", stdin: "apiVersion: v1\nkind: [", args: []string{"-f", "-"}, code: 2, stderr: []string{"-: document 1:"}},
		{name: "no policy", stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", args: []string{"-f", "-"}, code: 2, stderr: []string{"no RetryPolicy"}},
		{name: "bad cap", stdin: "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: x}\nspec: {}\n", args: []string{"-f", "-"}, code: 2,
			stderr: []string{"-: document 1: RetryPolicy default/x: spec.maxAmplification must be 1..1000, got 0"}},
		{name: "missing file", args: []string{"-f", "testdata/nope.yaml"}, code: 2, stderr: []string{"nope.yaml"}},
		{name: "no -f", args: nil, code: 2, stderr: []string{"-f PATH or -k DIR is required"}},
		{name: "bad output", args: []string{"-f", "testdata/within.yaml", "-o", "xml"}, code: 2, stderr: []string{`unknown output "xml"`}},
		{name: "dot", args: []string{"-f", "testdata/incident18.yaml", "-o", "dot"}, code: 1,
			out: []string{`digraph "shop/checkout" {`, `"gateway" -> "catalog" [label="x3", color=red, penwidth=2];`}},
		{name: "mermaid", args: []string{"-f", "testdata/within.yaml", "-o", "mermaid"}, code: 0,
			out: []string{"flowchart LR", `-->|x2 *3|`, `(["api.stripe.com"])`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := run(t, tt.stdin, append([]string{"analyze"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, stderr)
			}
			for _, s := range tt.out {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if tt.jsonAmps != nil {
				var rep analyze.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				for _, p := range rep.Policies {
					got[p.Namespace+"/"+p.Name] = p.Amplification
				}
				for k, v := range tt.jsonAmps {
					if got[k] != v {
						t.Errorf("%s amplification %d, want %d", k, got[k], v)
					}
				}
				if rep.WithinCap != (tt.code == 0) {
					t.Errorf("withinCap %v", rep.WithinCap)
				}
			}
		})
	}
}

// A directory laid out for kustomize (a kustomization.yaml beside the manifests, a hidden
// directory) is analysed as the manifests it holds: the samples' directory is exactly that.
func TestAnalyzeKustomizeDirectory(t *testing.T) {
	// A directory holding a kustomization is built (-k); -f on it is refused (see the
	// kustomize-dir-as-files golden case).
	code, stdout, stderr := run(t, "", "analyze", "-k", "../../config/samples", "-o", "json")
	if code != ExitOverCap {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, ExitOverCap, stderr)
	}
	for _, want := range []string{`"name": "storm"`, `"amplification": 27`, `"name": "checkout"`, `"amplification": 18`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %s", want)
		}
	}
}
