package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// graph (kubectl retrycap graph) against a real API server without retrycap's CRDs: exit 2 and
// an error naming the server and what is missing. Before, it said "the cluster serves no
// RetryPolicy ...", not which cluster of the user's kubeconfig that was.
func TestGraphNoCRDsNamesServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set (make test sets it)")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	user, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := execute([]string{"graph", "--kubeconfig", path, "-A"}, strings.NewReader(""), &stdout, &stderr)
	want := "retrycap: graph: the cluster at " + strings.TrimSuffix(cfg.Host, "/") + " serves no RetryPolicy (retrycap.dev/v1alpha1): retrycap is not installed there (helm install retrycap charts/retrycap: docs/helm.md; the CRDs alone: make install)\n"
	if code != ExitBadInput || stdout.Len() != 0 || stderr.String() != want {
		t.Errorf("graph -A without the CRDs: exit %d, stdout %q\nstderr %q\nwant exit 2 and %q", code, stdout.String(), stderr.String(), want)
	}
}
