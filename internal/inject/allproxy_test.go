package inject

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// inject18: a container that sends its calls through its own egress proxy by ALL_PROXY (or
// all_proxy). curl, libcurl and Python's requests take a scheme's own variable first, so on main
// the injector's HTTP_PROXY took the container's plain-HTTP calls from the egress proxy to
// retrycap's, which dials out directly, and said nothing. It is now left unchanged, with a
// warning, as a container with its own HTTP_PROXY. Real curl and Python requests on loopback
// show where each environment sends a call.
func TestInject18AllProxy(t *testing.T) {
	for _, name := range []string{"ALL_PROXY", "all_proxy"} {
		t.Run(name, func(t *testing.T) {
			egress := corev1.EnvVar{Name: name, Value: "http://egress.corp:3128"}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1", Env: []corev1.EnvVar{egress}}}}}
			d := Decide(testConfig, Input{Pod: pod, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"},
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			if !d.Injected {
				t.Fatalf("skipped: %v", d.Skip)
			}
			if got := d.Pod.Spec.Containers[0].Env; !slices.Equal(got, []corev1.EnvVar{egress}) {
				t.Errorf("env %v, want the container's own, unchanged", got)
			}
			if want := []string{fmt.Sprintf("container app sets %s itself, so its calls do not go through the retrycap proxy", name)}; !slices.Equal(d.Warnings, want) {
				t.Errorf("warnings %q, want %q", d.Warnings, want)
			}
		})
	}
}

// TestInject18AllProxyClients: where curl and Python requests send a plain-HTTP call with the
// container's ALL_PROXY alone (as stored now) and with retrycap's HTTP_PROXY beside it (as
// main stored it). Two loopback listeners stand for the egress proxy and retrycap's.
func TestInject18AllProxyClients(t *testing.T) {
	type hit struct{ who, target string }
	var mu sync.Mutex
	var hits []hit
	listener := func(who string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits = append(hits, hit{who, r.RequestURI})
			mu.Unlock()
			fmt.Fprint(w, who)
		}))
		t.Cleanup(s.Close)
		return s
	}
	egress, retrycap := listener("egress"), listener("retrycap")
	const target = "http://upstream.example:8080/x"
	clients := map[string][]string{}
	if curl, err := exec.LookPath("curl"); err == nil {
		clients["curl"] = []string{curl, "-sS", "--max-time", "10", target}
	}
	if py, err := exec.LookPath("python3"); err == nil && exec.Command(py, "-c", "import requests").Run() == nil {
		clients["python requests"] = []string{py, "-c", "import requests,sys; sys.stdout.write(requests.get('" + target + "', timeout=10).text)"}
	}
	if len(clients) == 0 {
		t.Skip("neither curl nor python3 with requests is installed")
	}
	for _, all := range []string{"ALL_PROXY", "all_proxy"} {
		for client, argv := range clients {
			for _, tc := range []struct {
				env  []string
				want string
			}{
				{env: []string{all + "=" + egress.URL}, want: "egress"},
				// Both spellings, as the injector writes them (curl reads only http_proxy).
				{env: []string{all + "=" + egress.URL, "HTTP_PROXY=" + retrycap.URL, "http_proxy=" + retrycap.URL}, want: "retrycap"},
			} {
				mu.Lock()
				hits = nil
				mu.Unlock()
				cmd := exec.Command(argv[0], argv[1:]...)
				cmd.Env = append(cleanEnv(), tc.env...)
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Fatalf("%s with %v: %v\n%s", client, tc.env, err, out)
				}
				mu.Lock()
				got := slices.Clone(hits)
				mu.Unlock()
				if string(out) != tc.want || !slices.Equal(got, []hit{{tc.want, target}}) {
					t.Errorf("%s with %v: answered %q, listeners saw %v; want %s only, for %s", client, tc.env, out, got, tc.want, target)
				}
			}
		}
	}
}

// cleanEnv is the test's environment without any proxy variable of its own.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasSuffix(strings.ToLower(name), "_proxy") {
			out = append(out, kv)
		}
	}
	return out
}
