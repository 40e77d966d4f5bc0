package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestApplyInvocationName(t *testing.T) {
	tests := []struct{ argv0, usage string }{
		{"/usr/local/bin/kubectl-retrycap", "kubectl retrycap graph"},
		{"kubectl-retrycap.exe", "kubectl retrycap graph"},
		{"/usr/local/bin/retrycap", "retrycap graph"},
		{"./retrycap.test", "retrycap graph"},
	}
	for _, tt := range tests {
		root := &cobra.Command{Use: "retrycap"}
		sub := &cobra.Command{Use: "graph", Run: func(*cobra.Command, []string) {}}
		root.AddCommand(sub)
		applyInvocationName(root, tt.argv0)
		if got := sub.CommandPath(); got != tt.usage {
			t.Errorf("%s: command path %q, want %q", tt.argv0, got, tt.usage)
		}
	}
}

// Flag errors are reported before any cluster is contacted.
func TestGraphBadInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"graph", "-o", "table"}, `retrycap: graph: unknown output "table" (tree, json, dot, mermaid)` + "\n"},
		{[]string{"graph", "-o", "yaml"}, `retrycap: graph: unknown output "yaml" (tree, json, dot, mermaid)` + "\n"},
		{[]string{"graph", "checkout", "-A"}, "retrycap: graph: a POLICY name needs one namespace; drop -A\n"},
		{[]string{"graph", "a", "b"}, "retrycap: graph: one POLICY name at most, got 2: a b\n"},
		{[]string{"graph", "--kubeconfig", missing}, "retrycap: graph: loading the kubeconfig: --kubeconfig \"" + missing + "\": no such file or directory\n"},
		// Before: client-go's "no configuration has been provided, try setting KUBERNETES_MASTER
		// environment variable", the missing $KUBECONFIG file unnamed.
		{[]string{"graph"}, "retrycap: graph: loading the kubeconfig: no cluster found: looked at " + missing + " (none), and not running in a pod; give --kubeconfig or set KUBECONFIG\n"},
		// Before: unknown command "x.yaml" for "retrycap analyze".
		{[]string{"analyze", "x.yaml"}, `retrycap: analyze: unexpected argument "x.yaml": files and directories are given with -f (-f x.yaml), a kustomization with -k` + "\n"},
		{[]string{"discover", "x.yaml"}, `retrycap: discover: unexpected argument "x.yaml": manifests are given with -f (-f x.yaml) or -k, Prometheus with --prometheus-url` + "\n"},
	}
	t.Setenv("KUBECONFIG", missing)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod, wherever the test runs
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := execute(tt.args, strings.NewReader(""), &stdout, &stderr)
		if code != ExitBadInput || stderr.String() != tt.want || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit 2, stderr %q", tt.args, code, stderr.String(), stdout.String(), tt.want)
		}
	}
}
