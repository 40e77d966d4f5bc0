package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiscoverReadsPathsAsAnalyze: discover -f DIR lists its files as analyze -f DIR does
// (analyze.Reader.Files). Before, it had a walk of its own: a directory holding a kustomization
// had its patch files read as whole objects (analyze refuses it), and an empty directory or a
// subdirectory without -R was passed over without a word.
func TestDiscoverReadsPathsAsAnalyze(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec: {containers: [{name: app, image: x, env: [{name: ORDER_URL, value: \"http://order:8080\"}]}]}\n"
	write("kust/kustomization.yaml", "resources: [web.yaml]\n")
	write("kust/web.yaml", deploy)
	write("flat/web.yaml", deploy)
	write("flat/more/order.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: order, namespace: shop}\nspec: {selector: {app: order}, ports: [{port: 8080}]}\n")
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a kustomization directory", []string{"-f", filepath.Join(dir, "kust")}, ExitBadInput,
			"error: " + filepath.Join(dir, "kust") + " holds a kustomization (kustomization.yaml): its files are kustomize's build input, not objects (a patch is not a Deployment): use -k " + filepath.Join(dir, "kust") + ", or name its plain manifests one by one with -f\n" +
				"retrycap: discover: 1 error(s) in the input\n"},
		{"an empty directory", []string{"-f", filepath.Join(dir, "empty")}, ExitBadInput,
			"warning: " + filepath.Join(dir, "empty") + ": a directory with no *.yaml, *.yml or *.json file: nothing read from it\n" +
				"retrycap: discover: nothing found: no env value of 0 workload(s) names a Service\n"},
		{"a subdirectory without -R", []string{"-f", filepath.Join(dir, "flat")}, ExitOK,
			"warning: " + filepath.Join(dir, "flat", "more") + ": a subdirectory with 1 manifest file(s), not read: use -R to read directories recursively\n"},
		{"with -R", []string{"-R", "-f", filepath.Join(dir, "flat")}, ExitOK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(append([]string{"discover"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || stderr.String() != tt.stderr {
				t.Fatalf("exit %d, stderr\n%s\nwant exit %d, stderr\n%s", code, stderr.String(), tt.code, tt.stderr)
			}
			if tt.code == ExitOK && !strings.Contains(stdout.String(), "- annotation: order\n") {
				t.Fatalf("stdout:\n%s", stdout.String())
			}
		})
	}
}
