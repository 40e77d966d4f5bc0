package cli

import (
	"bytes"
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

// injectedProxy is the retrycap-proxy container as the injector renders it (the arguments
// observe checks; internal/inject's render.go).
func injectedProxy(service string) corev1.Container {
	return corev1.Container{Name: "retrycap-proxy", Image: "retrycap/retrycap-proxy:v0.1.0",
		Args: []string{"--listen=127.0.0.1:15001", "--admin=:15020", "--service=" + service}}
}

// inj19: --from-cluster with the default -c retrycap-proxy read every pod's container of that
// name, also one the injector did not add: a pod's own container named retrycap-proxy (another
// proxy, writing lines of the same shape), or a pod that carries a copied retrycap.dev/injected
// annotation beside a container without the injector's arguments. Their lines were counted as
// retrycap's attempts (here: 6 attempts for key k1 instead of 2, amplification 3 at payment, in
// silence). Now only the injector's sidecars are read, and each pod passed over is named on
// stderr with the reason; with none left, the error says that pods were skipped and why.
func TestInj19ObserveOnlyInjectedSidecars(t *testing.T) {
	line := func(n int) string { return accessLine("order", "payment", "k1", n, 503) + "\n" }
	logs := map[string]string{
		"order-1":  line(1) + line(2),
		"own-1":    line(3) + line(4), // the pod's own container named retrycap-proxy
		"copied-1": line(5) + line(6), // a copied annotation, a container of the pod's own
	}
	pods := map[string][]corev1.Pod{}
	mk := func(name string, c corev1.Container, injected bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": "order"}}}
		p.Spec.Containers = []corev1.Container{{Name: "app"}, c}
		if injected {
			p.Annotations = map[string]string{"retrycap.dev/injected": "shop/all"}
		}
		return p
	}
	own := corev1.Container{Name: "retrycap-proxy", Image: "example/egress-proxy:2", Args: []string{"--port=15001"}}
	pods["part-of=shop"] = []corev1.Pod{mk("order-1", injectedProxy("order"), true), mk("own-1", own, false), mk("copied-1", own, true)}
	pods["part-of=legacy"] = []corev1.Pod{mk("own-1", own, false)}
	var logReads []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/namespaces/shop/pods":
			list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods[r.URL.Query().Get("labelSelector")]}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(list)
		case strings.HasSuffix(r.URL.Path, "/log"):
			name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/shop/pods/"), "/log")
			logReads = append(logReads, name)
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
	code := execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "-l", "part-of=shop", "--threshold", "0", "-o", "json"}, nil, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	wantErr := `observe: skipped shop/copied-1: container retrycap-proxy (image "example/egress-proxy:2") lacks the --listen=127.0.0.1:15001 and --service= arguments retrycap's injector gives its proxy` + "\n" +
		"observe: skipped shop/own-1: container retrycap-proxy was not added by retrycap's injector (the pod has no annotation retrycap.dev/injected)\n" +
		"\robserve: pod 1/1 shop/order-1 (0 attempts so far)\robserve: 1 pods read\n" +
		"observe: 2 lines read: 2 attempts, 0 skipped, 0 bad, 0 over the line limit\n"
	if stderr.String() != wantErr {
		t.Fatalf("stderr %q\nwant   %q", stderr.String(), wantErr)
	}
	if strings.Join(logReads, ",") != "order-1" {
		t.Fatalf("logs read: %v, want order-1's only", logReads)
	}
	var report struct {
		Summary string `json:"summary"`
		Peak    int    `json:"peak_attempts"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("-o json: %v\n%s", err, stdout.String())
	}
	const wantSummary = "1 key with more than 0 attempts; peak 2 for one key; longest span 2 ms (1 key, 2 attempts; observed amplification up to 2 at payment)"
	if report.Summary != wantSummary || report.Peak != 2 {
		t.Fatalf("summary %q, peak %d\nwant %q, 2 (order-1's own lines)", report.Summary, report.Peak, wantSummary)
	}

	// Only pods with a container of their own: named, and the error says so.
	stdout.Reset()
	stderr.Reset()
	logReads = nil
	code = execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "-l", "part-of=legacy"}, nil, &stdout, &stderr)
	wantErr = "observe: skipped shop/own-1: container retrycap-proxy was not added by retrycap's injector (the pod has no annotation retrycap.dev/injected)\n" +
		"observe: 0 lines read: 0 attempts, 0 skipped, 0 bad, 0 over the line limit\n" +
		`retrycap: observe: no pod with the container "retrycap-proxy" (-c) that retrycap's injector added among the pods -l "part-of=legacy" selects in namespace shop (1 pod(s); 1 with a container of that name of their own, skipped above)` + "\n"
	if code != ExitBadInput || stdout.Len() != 0 || stderr.String() != wantErr || len(logReads) != 0 {
		t.Fatalf("exit %d, stdout %q, logs read %v, stderr %q\nwant %q", code, stdout.String(), logReads, stderr.String(), wantErr)
	}

	// Another -c (Envoy's istio-proxy) is read as before: the annotation is retrycap's.
	stdout.Reset()
	stderr.Reset()
	logReads = nil
	pods["part-of=mesh"] = []corev1.Pod{mk("own-1", corev1.Container{Name: "istio-proxy"}, false)}
	code = execute([]string{"observe", "--from-cluster", "--kubeconfig", kc, "-l", "part-of=mesh", "-c", "istio-proxy", "--threshold", "0"}, nil, &stdout, &stderr)
	if code != ExitOK || strings.Join(logReads, ",") != "own-1" || strings.Contains(stderr.String(), "skipped shop") {
		t.Fatalf("-c istio-proxy: exit %d, logs read %v, stderr %q", code, logReads, stderr.String())
	}
}
