package cli

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestObserveTruncatedRotation: a directory holding a whole log and a rotation cut short (a
// copy taken while logrotate compressed it). Before: the run stopped at the broken file, so
// the files after it were never read, and printed no report. Now: every file is read, the
// lines before the break are counted and reported, and the run exits 2 naming the file, the
// line and the offsets.
func TestObserveTruncatedRotation(t *testing.T) {
	dir := t.TempDir()
	var rot strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&rot, "%s\n", accessLine("web", "order", fmt.Sprintf("rot-%05d", i), 1, 200))
	}
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(rot.String()))
	zw.Close()
	cut := z.Bytes()[:z.Len()/2]
	broken := filepath.Join(dir, "a-proxy.log.1.gz") // walked first
	if err := os.WriteFile(broken, cut, 0o600); err != nil {
		t.Fatal(err)
	}
	whole := filepath.Join(dir, "b-proxy.log")
	var w strings.Builder
	for a := 1; a <= 7; a++ {
		fmt.Fprintf(&w, "%s\n", accessLine("web", "order", "retried", a, 503))
	}
	if err := os.WriteFile(whole, []byte(w.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe", "-f", dir}, strings.NewReader(""), &stdout, &stderr)
	if code != ExitBadInput {
		t.Fatalf("exit %d, want 2\n%s", code, stderr.String())
	}
	// The whole file's key is in the report: the break did not end the run.
	if !strings.Contains(stdout.String(), "retried") {
		t.Fatalf("the report lacks the key of the file after the broken one:\n%s", stdout.String())
	}
	errLine := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(errLine) != 2 {
		t.Fatalf("stderr: %q", stderr.String())
	}
	var lines, attempts, bad int
	if _, err := fmt.Sscanf(strings.ReplaceAll(errLine[0], ",", ""), "observe: %d lines read: %d attempts 0 skipped %d bad 0 over the line limit", &lines, &attempts, &bad); err != nil {
		t.Fatalf("counts %q: %v", errLine[0], err)
	}
	if lines != attempts+bad || bad != 1 || attempts < 7+100 || attempts >= 7+3000 {
		t.Fatalf("counts %q", errLine[0])
	}
	rotWhole := attempts - 7
	lineLen := len(accessLine("web", "order", "rot-00000", 1, 200)) + 1
	want := fmt.Sprintf("retrycap: observe: 1 stream(s) could not be read to the end (the lines before each break are counted above): "+
		"%s: read error at line %d, byte %d of the stream (the lines before it are counted): gzip: the compressed stream breaks after byte %d of the file: unexpected EOF",
		broken, rotWhole+1, rotWhole*lineLen, len(cut))
	if errLine[1] != want {
		t.Fatalf("got  %s\nwant %s", errLine[1], want)
	}
}

// TestObserveBlankLinesOnly: nothing read is an error, exit 2.
func TestObserveBlankLinesOnly(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe"}, strings.NewReader("\n\n   \n\r\n"), &stdout, &stderr)
	want := "observe: 4 lines read: 0 attempts, 4 skipped, 0 bad, 0 over the line limit\n" +
		"retrycap: observe: no access-log line among the 4 line(s) read: nothing to report (is the access log on? a RetryPolicy's spec.observability.accessLog, " +
		"retrycap-proxy --access-log; or Envoy's or Istio's default formats)\n"
	if code != ExitBadInput || stderr.String() != want || stdout.Len() != 0 {
		t.Fatalf("exit %d stdout %q stderr %q", code, stdout.String(), stderr.String())
	}
}

// TestObserveFromClusterBrokenPods: one pod's log request fails (the API server's 500), one
// pod's log stream is cut mid-line (the connection dropped); the third pod is read whole.
// Before: the first failure ended the run, no other pod was read, and no report was printed.
func TestObserveFromClusterBrokenPods(t *testing.T) {
	whole := accessLine("order", "payment", "k1", 1, 503) + "\n" + accessLine("order", "payment", "k1", 2, 503) + "\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/namespaces/shop/pods":
			var list corev1.PodList
			list.TypeMeta = metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}
			for _, n := range []string{"a-1", "b-1", "c-1"} {
				p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: "shop", Labels: map[string]string{"app": n[:1]}}}
				p.Spec.Containers = []corev1.Container{injectedProxy(n[:1])}
				p.Annotations = map[string]string{"retrycap.dev/injected": "shop/all"}
				list.Items = append(list.Items, p)
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(list)
		case "/api/v1/namespaces/shop/pods/a-1/log":
			http.Error(w, "container retrycap-proxy is waiting to start", http.StatusInternalServerError)
		case "/api/v1/namespaces/shop/pods/b-1/log":
			fmt.Fprint(w, accessLine("web", "order", "k2", 1, 200)+"\n"+accessLine("web", "order", "k2", 2, 200)[:40])
			w.(http.Flusher).Flush()
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // the chunked stream ends without its last chunk
			}
		case "/api/v1/namespaces/shop/pods/c-1/log":
			fmt.Fprint(w, whole)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\ncontexts:\n- name: c\n  context:\n    cluster: c\n    namespace: shop\ncurrent-context: c\nusers: []\n", srv.URL)
	if err := os.WriteFile(kc, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "--threshold", "0"}, nil, &stdout, &stderr)
	if code != ExitBadInput {
		t.Fatalf("exit %d, want 2: %s", code, stderr.String())
	}
	for _, k := range []string{"k1 ", "k2 "} {
		if !strings.Contains(stdout.String(), k) {
			t.Errorf("the report lacks %s:\n%s", k, stdout.String())
		}
	}
	last := stderr.String()[strings.LastIndex(strings.TrimSuffix(stderr.String(), "\n"), "\n")+1:]
	wantCounts := "observe: 4 lines read: 3 attempts, 0 skipped, 1 bad, 0 over the line limit (the first bad: shop/b-1/retrycap-proxy: line 2: cut by the read error (40 bytes read of it))\n"
	if !strings.Contains(stderr.String(), wantCounts) {
		t.Errorf("stderr %q\nlacks %q", stderr.String(), wantCounts)
	}
	want := "retrycap: observe: 2 stream(s) could not be read to the end (the lines before each break are counted above): " +
		"log of shop/a-1 container retrycap-proxy: an error on the server (\"container retrycap-proxy is waiting to start\") has prevented the request from succeeding (get pods a-1); " +
		fmt.Sprintf("shop/b-1/retrycap-proxy: read error at line 2, byte %d of the stream (the lines before it are counted): unexpected EOF\n", len(accessLine("web", "order", "k2", 1, 200))+1)
	if last != want {
		t.Fatalf("got  %q\nwant %q", last, want)
	}
}
