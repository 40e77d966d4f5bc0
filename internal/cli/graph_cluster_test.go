package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// graph against a real API server: the cluster chain sample, and a RetryPolicy of one of its
// namespaces that sees the next namespace's service as a leaf.
func TestGraphClusterPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	cp, ctx := startControlPlane(t, time.Minute)
	if _, stderr, err := cp.RunKubectl(ctx, "", "apply", "-f", filepath.Join(cp.RepoRoot, "config", "samples", "cluster-chain.yaml")); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	rp := "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: fulfilment, namespace: fulfilment}\nspec: {maxAmplification: 4}\n"
	if _, stderr, err := cp.RunKubectl(ctx, rp, "apply", "-f", "-", "--namespace", "fulfilment"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, stderr, err := cp.RunKubectl(ctx, "", "create", "namespace", "batch"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	tests := []struct {
		args           []string
		code           int
		stdout, stderr string
	}{{
		args: []string{"-n", "fulfilment"}, code: ExitOverCap,
		stdout: "RetryPolicy fulfilment/fulfilment  cap 4  amplification 3  (* worst path)\n" +
			"order (client x1) *\n" +
			"└─ -x3-> payment.billing *\n" +
			"\n" +
			"ClusterRetryPolicy checkout-chain  cap 4  amplification 27  (* worst path)\n" +
			"web.storefront (client x3) *\n" +
			"└─ -x3-> order.fulfilment *\n" +
			"   └─ -x3-> payment.billing *\n",
	}, {
		args: []string{"checkout-chain", "-n", "storefront", "-o", "mermaid"}, code: ExitOverCap,
		stdout: "---\ntitle: checkout-chain amplification 27 cap 4\n---\nflowchart LR\n",
	}, {
		args: []string{"-n", "batch"}, code: 0, stderr: "No RetryPolicy or ClusterRetryPolicy found in namespace batch; -A looks in every namespace.\n",
	}, {
		args: []string{"checkout-chain", "-n", "batch"}, code: ExitBadInput,
		stderr: "retrycap: graph: RetryPolicy batch/checkout-chain not found (nor a ClusterRetryPolicy checkout-chain selecting namespace batch)\n",
	}}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append([]string{"graph", "--kubeconfig", cp.Kubeconfig}, tt.args...)
		code := execute(args, strings.NewReader(""), &stdout, &stderr)
		// The mermaid case checks its header only: the node ids are the renderer's (render_test).
		got := stdout.String()
		if tt.args[len(tt.args)-1] == "mermaid" {
			got = got[:min(len(got), len(tt.stdout))]
		}
		if code != tt.code || got != tt.stdout || stderr.String() != tt.stderr {
			t.Errorf("graph %v: exit %d\nstdout %q\nstderr %q\nwant exit %d\nstdout %q\nstderr %q", tt.args, code, stdout.String(), stderr.String(), tt.code, tt.stdout, tt.stderr)
		}
	}
}
