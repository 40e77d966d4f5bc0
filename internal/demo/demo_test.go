package demo

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDemoEndToEnd runs the whole demo in its short mode against a real control plane and checks
// the lines a user is shown at each chapter.
func TestDemoEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane and the storm lab")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	chart := filepath.Join(t.TempDir(), "storm.svg")
	if err := Run(ctx, Options{Out: &out, Short: true, ChartPath: chart}); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	got := out.String()
	// The chart where the caller asked (make demo: bin/storm.svg; before: a new temporary
	// directory per run, left behind).
	if svg, err := os.ReadFile(chart); err != nil || !bytes.HasPrefix(svg, []byte("<?xml")) {
		t.Errorf("the chart at %s: %v, %.40q", chart, err, svg)
	}
	for _, want := range []string{
		// The samples' computed status, as kubectl get rp -A prints it.
		"payments    storm      4     27              frontend>checkout>billing>payment   6.3s         Reject   False",
		"shop        checkout   3     18              gateway>catalog>db                  12.6s        Reject   False",
		"client -x1-> frontend -x3-> checkout -x3-> billing -x3-> payment = 27 > cap 4\n  suggestion: checkout: billing=1; billing: payment=1\n",
		// The refused deploy.
		`admission webhook "gate.retrycap.dev" denied the request: RetryPolicy orders/orders: web -x2-> orders -x3-> ledger = 6 > cap 4; orders may keep ledger=2`,
		// The rewritten deploy; the patch as a shell takes it (before: -p {"spec":...} bare).
		`$ kubectl patch rp -n orders orders --type=merge -p '{"spec":{"enforcement":"Rewrite"}}'` + "\n",
		"Warning: RetryPolicy orders/orders rewrote retrycap.dev/upstreams of Deployment orders/orders: ledger=3 -> ledger=2 (web -x2-> orders -x3-> ledger = 6 > cap 4)",
		"upstreams: ledger=2\nrewritten-from: ledger=3\n",
		// The injected pod.
		"injected by: shop/checkout\nsidecar: retrycap-proxy (restartPolicy Always)\n",
		`"--service=cart","--upstreams=db=2"`,
		"HTTP_PROXY=http://127.0.0.1:15001",
		" RETRYCAP_POD_IP=<status.podIP> \n",
		// The chain across three namespaces, refused by the ClusterRetryPolicy.
		`admission webhook "gate.retrycap.dev" denied the request: ClusterRetryPolicy teams-chain: client -x3-> web.shop -x3-> order.orders -x3-> payment.payments = 27 > cap 9; order.orders may keep payment.payments=1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	// The storm lab's summary (its figures depend on timing; its own tests pin exact counts).
	for _, re := range []string{
		`retrycap storm: scenario storm27: `,
		// Counted exactly per failed user request (mean, max; how many at 27): the retrycap
		// arm's max within the chain cap, 4.
		`requests at payment per failed user request sent during the outage \(exact, joined by storm-op\).*\s\d+\.\d\d \(max \d+; \d+ of \d+ at 27\)\s+\d+\.\d\d \(max [0-4]; \d+ of \d+ at 27\)\s`,
		`retries during the outage \(sent by the proxies\)\s+\d+\s+\d+ \(\d+\.\d % fewer\)`,
		`duplicated POST side effects\s+\d+\s+0\s`,
		// The short preset meets every target (its 3 s hang did not: 92 % fewer retries).
		`\nresult: every target met\n`,
		// What to run next: retrycap's own view of the cluster (before: only kubectl lines).
		`\ngo run ./cmd/retrycap graph -A\n`,
		`chart: ` + regexp.QuoteMeta(chart) + `\n`,
	} {
		if !regexp.MustCompile(re).MatchString(got) {
			t.Errorf("demo output does not match %q", re)
		}
	}
	// The README shows these lines as what `make demo` prints, and docs/cluster-policies.md the
	// cluster policy's: each output line of those blocks must be in the demo's output (a command
	// line, "$ ...", and an elided "..." are the reader's; the AGE column is the clock's).
	age := regexp.MustCompile(`\s\d+[smhd](\d+[smhd])?$`)
	checked := 0
	for _, doc := range []struct{ path, section string }{
		{"README.md", "What you see"},
		{"docs/cluster-policies.md", "Status, events, metrics"},
	} {
		for _, line := range docOutputLines(t, doc.path, doc.section) {
			re := regexp.QuoteMeta(line)
			if a := age.FindString(line); a != "" {
				re = strings.TrimSuffix(re, strings.TrimSpace(a)) + `\d+[smhd](\d+[smhd])?`
			}
			checked++
			if !regexp.MustCompile(`(?m)^` + re + `$`).MatchString(got) {
				t.Errorf("%s shows %q, which the demo does not print", doc.path, line)
			}
		}
	}
	if checked < 12 {
		t.Errorf("checked %d lines of the docs: their blocks were not found", checked)
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", got)
	}
}

// docOutputLines are the output lines of the code blocks in the section "## title" of the
// repository's file path.
func docOutputLines(t *testing.T, path, title string) []string {
	t.Helper()
	data, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("%s: no section %q", path, "## "+title)
	}
	rest, _, _ = strings.Cut(rest, "\n## ")
	var lines []string
	in := false
	for _, line := range strings.Split(rest, "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			in = !in
		case in && line != "" && !strings.HasPrefix(line, "$ ") && !strings.Contains(line, "..."):
			lines = append(lines, strings.TrimRight(line, " "))
		}
	}
	return lines
}

// The command lines the demo prints can be pasted into a shell. Before, the args were joined
// bare: `-p {"spec":{"enforcement":"Rewrite"}}` reached kubectl as {spec:{enforcement:Rewrite}}
// and a jsonpath template split at each space.
func TestShellJoin(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "-k", "/work/repo/config/samples"}, "apply -k /work/repo/config/samples"},
		{[]string{"apply", "-f", "-"}, "apply -f -"},
		{[]string{"patch", "rp", "-n", "orders", "orders", "--type=merge", "-p", `{"spec":{"enforcement":"Rewrite"}}`},
			`patch rp -n orders orders --type=merge -p '{"spec":{"enforcement":"Rewrite"}}'`},
		{[]string{"get", "rp", "-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`},
			`get rp -o 'jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}'`},
		{[]string{"-p", "it's", ""}, `-p 'it'\''s' ''`},
		{[]string{"get", "x", "-o", "jsonpath=$HOME"}, `get x -o 'jsonpath=$HOME'`},
	} {
		if got := shellJoin(c.args); got != c.want {
			t.Errorf("shellJoin(%q) = %s, want %s", c.args, got, c.want)
		}
	}
}

// Ctrl-C before the story's end: Run stops everything it started and says in which step it was
// interrupted. Before, it returned the chapter's "kubectl apply -k .../config/samples: context
// canceled" (in the storm lab "the storm lab: storm: naive arm interrupted: context canceled"),
// and the CLI exited 2 as for a failed demo.
func TestDemoInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	err := Run(ctx, Options{Out: &out, Short: true})
	var intr *Interrupted
	if !errors.As(err, &intr) || intr.Step != 1 {
		t.Fatalf("Run with ctx cancelled: %v (%T), want *Interrupted in step 1\n%s", err, err, out.String())
	}
	if want := "interrupted during step 1; the control plane and every process the demo started are stopped"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	got := regexp.MustCompile(`up in [0-9.]+m?s`).ReplaceAllString(out.String(), "up in T")
	if want := "\n== 1. Starting the embedded control plane (real kube-apiserver and etcd; the first run on a machine builds them)\ncontrol plane up in T\n"; got != want {
		t.Errorf("output %q", got)
	}
}
