package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// analyze -k and discover -k on a kustomization whose patch and resource are on an HTTP server
// (loopback here): nothing is fetched (before: kustomize's in-process build sent 2 requests to
// it, and runs git fetch for a git base), and the error names the kustomization file, the
// field and the URL. The real build (kustomize.Build, as the retrycap binary sets it) runs.
func TestRedteamKustomizeRemoteNotFetched(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: remote}\n"))
	}))
	defer srv.Close()
	dir := t.TempDir()
	in, err := os.ReadFile("testdata/redteam/remote-kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kust := strings.ReplaceAll(string(in), "SERVER", srv.URL)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kust), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: local}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"analyze", "discover"} {
		var stdout, stderr bytes.Buffer
		code := execute([]string{cmd, "-k", dir}, strings.NewReader(""), &stdout, &stderr)
		want := "-k " + dir + ": " + filepath.Join(dir, "kustomization.yaml") + `: resources[1] "` + srv.URL + `/base.yaml" is remote (kustomize would fetch it with git or HTTP): retrycap reads only local files and does not reach the network; vendor it (a local copy the kustomization names), or build it yourself and give the output with -f -: kustomize build ` + dir + " | retrycap analyze -f -"
		if code != 2 || !strings.Contains(stderr.String(), want) || hits.Load() != 0 {
			t.Fatalf("%s: exit %d, %d request(s) to the server, stderr\n%s\nwant exit 2, none, and\n%s", cmd, code, hits.Load(), stderr.String(), want)
		}
	}
}
