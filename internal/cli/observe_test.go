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

func accessLine(svc, up, key string, attempt, status int) string {
	return fmt.Sprintf(`{"log":"retrycap-access","time":"2026-12-01T10:00:00.%06dZ","service":%q,"upstream":%q,"method":"GET","authority":%q,"path":"/x","attempt":%d,"budget_in":4,"budget_out":1,"status":%d,"duration_us":1500,"idempotency_key":%q}`,
		attempt*1000, svc, up, up, attempt, status, key)
}

func TestObserveFilesDirsStdin(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	var a, b strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintln(&a, accessLine("gateway", "order", "k1", i, 503))
	}
	for i := 1; i <= 9; i++ {
		fmt.Fprintln(&b, accessLine("order", "payment", "k1", (i-1)%3+1, 503))
	}
	fmt.Fprintln(&b, "2026/12/01 10:00:00 retrycap-proxy: listening") // the proxy's own log: skipped
	if err := os.WriteFile(filepath.Join(dir, "gateway.log"), []byte(a.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "order.log"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	want := "KEY  KIND             METHOD  ATTEMPTS  CHAIN LINKS  FAILURES  DEEPEST  AMPLIFICATION  FIRST                     SPAN  SERVICES (attempts)\n" +
		"k1   idempotency-key  GET     12        0            12        payment  9              2026-12-01T10:00:00.001Z  3 ms  gateway > order 3 > payment 9\n" +
		"1 key with more than 5 attempts; peak 12 for one key; longest span 3 ms (1 key, 12 attempts; observed amplification up to 9 at payment)\n"
	for _, args := range [][]string{
		{"observe", "-f", dir},
		{"observe", filepath.Join(dir, "gateway.log"), filepath.Join(dir, "sub")},
		{"observe", "-f", "-"},
		{"observe"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(args, strings.NewReader(a.String()+b.String()), &stdout, &stderr)
		if code != ExitOK || stdout.String() != want || stderr.String() != "observe: 13 lines read: 12 attempts, 1 skipped, 0 bad, 0 over the line limit\n" {
			t.Errorf("%v: exit %d\nstdout:\n%s\nstderr: %s\nwant:\n%s", args, code, stdout.String(), stderr.String(), want)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"observe", "-f", dir, "-o", "json", "--threshold", "20"}, nil, &stdout, &stderr); code != ExitOK {
		t.Fatalf("json: exit %d: %s", code, stderr.String())
	}
	var rep struct {
		Summary   string `json:"summary"`
		OverCount int    `json:"over_count"`
		Peak      int    `json:"peak_attempts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.OverCount != 0 || rep.Peak != 12 ||
		!strings.HasPrefix(rep.Summary, "0 keys with more than 20 attempts; peak 12 for one key") {
		t.Fatalf("json: %+v %v\n%s", rep, err, stdout.String())
	}
}

func TestObserveBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"observe", "-o", "yaml"}, `retrycap: observe: unknown output "yaml" (table, json, sql, logql, csv)` + "\n"},
		{[]string{"observe", "--from-cluster", "-f", "x"}, "retrycap: observe: --from-cluster reads no files; drop -f and the arguments\n"},
		{[]string{"observe", "-l", "app=x"}, "retrycap: observe: -l and -A need --from-cluster\n"},
		{[]string{"observe", "-f", "/nonexistent/retrycap"}, "observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\nretrycap: observe: -f /nonexistent/retrycap: no such file or directory\n"},
		// Before: passed over, the whole input read as if it were the last 40 minutes, or the
		// namespace's pods.
		{[]string{"observe", "--since", "40m", "-f", "x.log"}, "retrycap: observe: --since 40m0s: reads the pods' logs, needs --from-cluster (files and stdin are read whole)\n"},
		{[]string{"observe", "-n", "shop"}, "retrycap: observe: -n shop: reads the pods' logs, needs --from-cluster (files and stdin are read whole)\n"},
		{[]string{"observe", "-c", "istio-proxy", "-f", "x.log"}, "retrycap: observe: -c istio-proxy: reads the pods' logs, needs --from-cluster (files and stdin are read whole)\n"},
		{[]string{"observe", "--from-cluster", "-l", "app in (a"}, `retrycap: observe: -l "app in (a": unable to parse requirement: found '', expected: ',' or ')'` + "\n"},
		{[]string{"observe", "--table", "logs; DROP TABLE x", "-o", "sql"}, `retrycap: observe: --table: table "logs; DROP TABLE x": want an identifier (letters, digits, _; optionally schema.table)` + "\n"},
		{[]string{"observe", "--dialect", "mysql", "-o", "sql"}, `retrycap: observe: --dialect "mysql": want postgres or clickhouse` + "\n"},
		{[]string{"observe", "-o", "sql", "-f", "x.log"}, "retrycap: observe: -o sql prints the query for the store and reads no logs: drop -f, the arguments and --from-cluster (load the table with -o csv)\n"},
		{[]string{"observe", "--postgres", "host=/tmp", "-f", "x.log"}, "retrycap: observe: --postgres reads the table, not logs: drop -f, the arguments and --from-cluster\n"},
		{[]string{"observe", "--max-line", "10"}, "retrycap: observe: --max-line 10: must be at least 1024 bytes\n"},
	} {
		var stdout, stderr bytes.Buffer
		if code := execute(tt.args, strings.NewReader(""), &stdout, &stderr); code != ExitBadInput || stderr.String() != tt.want {
			t.Errorf("%v: exit %d, stderr %q; want 2, %q", tt.args, code, stderr.String(), tt.want)
		}
	}
}

// --from-cluster against an API server on loopback that serves pods and pods/log the way the
// real one does: the selector and the container and sinceSeconds of the log request are
// checked, a pod without the container is skipped.
func TestObserveFromCluster(t *testing.T) {
	logs := map[string]string{
		"gateway-1": accessLine("gateway", "order", "k1", 1, 503) + "\n" + accessLine("gateway", "order", "k1", 2, 503) + "\n",
		"order-1":   accessLine("order", "payment", "k1", 1, 503) + "\n" + accessLine("order", "payment", "k1", 2, 503) + "\n",
	}
	pod := func(name string, sidecar bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": strings.TrimSuffix(name, "-1")}}}
		p.Spec.Containers = []corev1.Container{{Name: "app"}}
		if sidecar {
			p.Spec.InitContainers = []corev1.Container{injectedProxy(p.Labels["app"])}
			p.Annotations = map[string]string{"retrycap.dev/injected": "shop/all"}
		}
		return p
	}
	var requests []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests = append(requests, r.URL.Path+"?"+r.URL.RawQuery)
		switch {
		case r.URL.Path == "/api/v1/namespaces/shop/pods":
			if r.URL.Query().Get("labelSelector") == "part-of=none" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","items":[]}`)
				return
			}
			if r.URL.Query().Get("labelSelector") != "part-of=shop" {
				http.Error(w, "bad selector", 400)
				return
			}
			list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"},
				Items: []corev1.Pod{pod("order-1", true), pod("gateway-1", true), pod("legacy-1", false)}}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(list)
		case strings.HasSuffix(r.URL.Path, "/log"):
			name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/shop/pods/"), "/log")
			if r.URL.Query().Get("container") != "retrycap-proxy" || r.URL.Query().Get("sinceSeconds") != "2400" {
				http.Error(w, "bad log options", 400)
				return
			}
			fmt.Fprint(w, logs[name])
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
	code := execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "-l", "part-of=shop", "-c", "retrycap-proxy", "--since", "40m", "--threshold", "0"}, nil, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	wantOut := "KEY  KIND             METHOD  ATTEMPTS  CHAIN LINKS  FAILURES  DEEPEST  AMPLIFICATION  FIRST                     SPAN  SERVICES (attempts)\n" +
		"k1   idempotency-key  GET     4         0            4         payment  2              2026-12-01T10:00:00.001Z  2 ms  gateway > order 2 > payment 2\n" +
		"1 key with more than 0 attempts; peak 4 for one key; longest span 2 ms (1 key, 4 attempts; observed amplification up to 2 at payment)\n"
	wantErr := "\robserve: pod 1/2 shop/gateway-1 (0 attempts so far)\robserve: pod 2/2 shop/order-1 (2 attempts so far)\robserve: 2 pods read\nobserve: 4 lines read: 4 attempts, 0 skipped, 0 bad, 0 over the line limit\n"
	if stdout.String() != wantOut || stderr.String() != wantErr {
		t.Fatalf("stdout:\n%s\nwant:\n%s\nstderr %q\nwant   %q", stdout.String(), wantOut, stderr.String(), wantErr)
	}
	if len(requests) != 3 {
		t.Fatalf("requests %v", requests)
	}
	// Over --max-keys in the first pod's log, the run stops there: the second pod's log is
	// not asked for (before the bound, every key was held; then the other pods were still
	// asked for their logs, each read as nothing).
	logs["gateway-1"] = accessLine("gateway", "order", "k2", 1, 503) + "\n" + accessLine("gateway", "order", "k3", 1, 503) + "\n" + accessLine("gateway", "order", "k4", 1, 503) + "\n"
	requests = nil
	stdout.Reset()
	stderr.Reset()
	code = execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "-l", "part-of=shop", "--since", "40m", "--max-keys", "2"}, nil, &stdout, &stderr)
	wantErr = "\robserve: pod 1/2 shop/gateway-1 (0 attempts so far)\robserve: stopped at pod 1 of 2\n" +
		"observe: 2 lines read: 2 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
		`retrycap: observe: stopped at shop/gateway-1/retrycap-proxy: line 3: "k4" would be one of more than 2 distinct keys, over --max-keys 2 (memory is per key: about 1 GiB per 4,000,000); ` +
		"aggregate in the log store (-o csv to load it, -o sql or --postgres to query it), read fewer lines, or raise --max-keys where the memory is\n"
	if code != ExitBadInput || stdout.Len() != 0 || stderr.String() != wantErr || len(requests) != 2 {
		t.Fatalf("--max-keys: exit %d, stdout %q, requests %v\nstderr %q\nwant   %q", code, stdout.String(), requests, stderr.String(), wantErr)
	}
	// A selector that selects nothing is named with the namespace (before: "among the 0 pods
	// selected", neither named).
	stdout.Reset()
	stderr.Reset()
	code = execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "-l", "part-of=none"}, nil, &stdout, &stderr)
	wantErr = "observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
		`retrycap: observe: no pod with a container "retrycap-proxy" (-c) among the pods -l "part-of=none" selects in namespace shop (0 pod(s))` + "\n"
	if code != ExitBadInput || stdout.Len() != 0 || stderr.String() != wantErr {
		t.Fatalf("a selector that selects nothing: exit %d, stdout %q, stderr %q\nwant %q", code, stdout.String(), stderr.String(), wantErr)
	}
}

// stdin starting with gzip's magic is read through gzip (zcat-less `kubectl cp` of a rotation),
// and the counts go to stderr in every output format, -o json and -o csv too.
func TestObserveGzipStdinAndStats(t *testing.T) {
	var plain strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintln(&plain, accessLine("gateway", "order", "k1", i, 503))
	}
	plain.WriteString("not a log line\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(plain.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	const stats = "observe: 4 lines read: 3 attempts, 1 skipped, 0 bad, 0 over the line limit\n"
	for _, o := range []string{"table", "json", "csv"} {
		var stdout, stderr bytes.Buffer
		if code := execute([]string{"observe", "-o", o, "--threshold", "0"}, bytes.NewReader(gz.Bytes()), &stdout, &stderr); code != ExitOK || stderr.String() != stats {
			t.Errorf("-o %s: exit %d, stderr %q", o, code, stderr.String())
		}
		if o == "csv" && strings.Count(stdout.String(), "\n") != 4 {
			t.Errorf("csv: %q", stdout.String())
		}
		if o == "table" && !strings.Contains(stdout.String(), "k1   idempotency-key  GET     3") {
			t.Errorf("table: %q", stdout.String())
		}
	}
}

// TestObserveRotationMidCompress: a directory caught between the kubelet's rename of X.tmp to
// X.gz and its removal of X holds the same lines twice; X is passed over with a warning, and
// the key's attempts are counted once (before: 6 attempts for 3, amplification 6).
func TestObserveRotationMidCompress(t *testing.T) {
	dir := t.TempDir()
	var plain strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintln(&plain, accessLine("gateway", "order", "k1", i, 503))
	}
	x := filepath.Join(dir, "0.log.20261203-120000")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write([]byte(plain.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(x, []byte(plain.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(x+".gz", gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := execute([]string{"observe", "-f", dir, "--threshold", "0"}, nil, &stdout, &stderr)
	wantErr := "observe: warning: " + x + ": not read, 0.log.20261203-120000.gz beside it holds its lines (the kubelet removes the uncompressed copy after the rename; reading both would count its attempts twice)\n" +
		"observe: 3 lines read: 3 attempts, 0 skipped, 0 bad, 0 over the line limit\n"
	if code != ExitOK || stderr.String() != wantErr || !strings.Contains(stdout.String(), "k1   idempotency-key  GET     3 ") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stderr:\n%s", code, stdout.String(), stderr.String(), wantErr)
	}
}
