package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// timeManifests: gateway -> order (the policy's 1s per-try timeout) -> payment (payment=2/3s)
// -> db (db/500ms). payment: 500ms; order -> payment: 2 x 500ms + 100ms = 1.1s; gateway ->
// order: 2 x min(1s, 1.1s) + 100ms = 2.1s (an inversion: 1s < 1.1s).
func timeManifests(t *testing.T, maxTime string) string {
	t.Helper()
	dep := func(name, ups string) string {
		return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: " + name + ", namespace: shop}\nspec:\n  selector: {matchLabels: {app: " + name + "}}\n" +
			"  template:\n    metadata:\n      labels: {app: " + name + "}\n      annotations: {retrycap.dev/upstreams: \"" + ups + "\"}\n    spec: {containers: [{name: app, image: app}]}\n"
	}
	spec := "  maxAmplification: 10\n  retry: {perTryTimeout: 1s}\n"
	if maxTime != "" {
		spec += "  maxTimeToAnswer: " + maxTime + "\n"
	}
	docs := []string{
		"apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec:\n" + spec,
		dep("gateway", "order=2"), dep("order", "payment=2/3s"), dep("payment", "db/500ms"),
	}
	path := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(docs, "---\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAnalyzeTime(t *testing.T) {
	inversion := "gateway -> order: Deployment shop/gateway per-try timeout 1s < order's worst time 1.1s: gateway retries while order still works on the abandoned try"
	fix := "Deployment shop/gateway per-try timeout for order >= 1.1s, or a timeout of at most 1s on order's own calls"

	// An inversion alone: a warning, exit 0; --fail-on-inversion: exit 1, saying why.
	f := timeManifests(t, "")
	code, out, stderr := run(t, "", "analyze", "-f", f)
	if code != 0 || !strings.Contains(out, "  worst time to answer:  2.1s (gateway -> order -> payment -> db)\n  timeout inversions:\n    - "+inversion+"\n      fix: "+fix+"\n") {
		t.Fatalf("exit %d stderr %q\n%s", code, stderr, out)
	}
	code, _, stderr = run(t, "", "analyze", "-f", f, "--fail-on-inversion")
	if code != ExitOverCap || !strings.Contains(stderr, "analyze: 1 timeout inversion(s) (--fail-on-inversion)") {
		t.Fatalf("--fail-on-inversion: exit %d stderr %q", code, stderr)
	}

	// Over maxTimeToAnswer: a violation, exit 1; JSON per policy.
	f = timeManifests(t, "2s")
	code, out, _ = run(t, "", "analyze", "-f", f, "-o", "json")
	if code != ExitOverCap {
		t.Fatalf("over maxTimeToAnswer: exit %d", code)
	}
	var rep struct {
		Policies []struct {
			WorstTimeToAnswer      string   `json:"worstTimeToAnswer"`
			WorstTimePath          []string `json:"worstTimePath"`
			MaxTimeToAnswer        string   `json:"maxTimeToAnswer"`
			WithinMaxTime          bool     `json:"withinMaxTime"`
			WithinCap              bool     `json:"withinCap"`
			TimeViolations         []map[string]any
			TimeoutInversions      []map[string]any
			TimeoutInversionsTotal int `json:"timeoutInversionsTotal"`
		} `json:"policies"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	p := rep.Policies[0]
	if p.WorstTimeToAnswer != "2.1s" || strings.Join(p.WorstTimePath, ">") != "gateway>order>payment>db" || p.MaxTimeToAnswer != "2s" || p.WithinMaxTime || !p.WithinCap {
		t.Fatalf("policy %+v", p)
	}
	wantV := []map[string]any{{"path": []any{"gateway", "order", "payment", "db"}, "worstTimeToAnswer": "2.1s",
		"message": "gateway 2.1s -> order 1.1s -> payment 500ms -> db ? = 2.1s > maxTimeToAnswer 2s"}}
	if !reflect.DeepEqual(p.TimeViolations, wantV) {
		t.Fatalf("time violations %v", p.TimeViolations)
	}
	wantI := []map[string]any{{"caller": "gateway", "callee": "order", "layer": "Deployment shop/gateway", "inner": "order",
		"perTryTimeout": "1s", "innerTime": "1.1s", "message": inversion, "fix": fix}}
	if !reflect.DeepEqual(p.TimeoutInversions, wantI) || p.TimeoutInversionsTotal != 1 {
		t.Fatalf("inversions %v (%d)", p.TimeoutInversions, p.TimeoutInversionsTotal)
	}

	// SARIF: the chain over the max an error, the inversion a warning (an error with the flag),
	// each at the caller's manifest.
	for _, tc := range []struct {
		flag  []string
		level string
	}{{nil, "warning"}, {[]string{"--fail-on-inversion"}, "error"}} {
		_, out, _ = run(t, "", append([]string{"analyze", "-f", f, "-o", "sarif"}, tc.flag...)...)
		var log struct {
			Runs []struct {
				Results []struct {
					RuleID, Level string
					Message       struct{ Text string }
					Locations     []struct {
						PhysicalLocation struct {
							ArtifactLocation struct{ URI string }
						}
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &log); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range log.Runs[0].Results {
			if strings.HasPrefix(r.RuleID, "retrycap/over-max-time") || strings.HasPrefix(r.RuleID, "retrycap/timeout-inversion") {
				got = append(got, r.RuleID+" "+r.Level+" "+r.Message.Text)
			}
		}
		want := []string{
			"retrycap/over-max-time error RetryPolicy shop/p: gateway 2.1s -> order 1.1s -> payment 500ms -> db ? = 2.1s > maxTimeToAnswer 2s",
			"retrycap/timeout-inversion " + tc.level + " RetryPolicy shop/p: " + inversion + "; fix: " + fix,
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sarif %v:\n got %q\nwant %q", tc.flag, got, want)
		}
	}
}
