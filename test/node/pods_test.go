package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The warnings and skips the injector writes on the pods of testdata/pods-as-written.yaml.
const (
	ownHTTPProxy = "container app sets HTTP_PROXY itself, so its calls do not go through the retrycap proxy"
	hostNetSkip  = "HostNetwork: the pod uses the host network, where the proxy's ports 127.0.0.1:15001 and 15020 would clash with other pods"
	portSkip     = "PortConflict: spec.containers[0] (container app) ports[0].containerPort is 15001: the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
)

// oneShot are pods whose app makes one call and exits (lab-app --call): an init container before
// a serving app, a Job, a bare pod with restartPolicy Never.
const oneShot = `apiVersion: v1
kind: Pod
metadata: {name: initcall, namespace: rt, labels: {app.kubernetes.io/name: initcall, app.kubernetes.io/part-of: rt}, annotations: {retrycap.dev/upstreams: "back=1"}}
spec:
  initContainers:
  - {name: warmup, image: retrycap/lab-app:v0.1.0, env: [{name: LAB_CALL, value: "http://back:8080/init"}]}
  containers:
  - {name: app, image: retrycap/lab-app:v0.1.0, env: [{name: LAB_UPSTREAMS, value: "http://back:8080/"}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: job, namespace: rt}
spec:
  backoffLimit: 0
  template:
    metadata: {labels: {app.kubernetes.io/name: job, app.kubernetes.io/part-of: rt}, annotations: {retrycap.dev/upstreams: "back=1"}}
    spec:
      restartPolicy: Never
      containers:
      - {name: call, image: retrycap/lab-app:v0.1.0, env: [{name: LAB_CALL, value: "http://back:8080/job"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: never, namespace: rt, labels: {app.kubernetes.io/name: never, app.kubernetes.io/part-of: rt}, annotations: {retrycap.dev/upstreams: "back=1"}}
spec:
  restartPolicy: Never
  containers:
  - {name: call, image: retrycap/lab-app:v0.1.0, env: [{name: LAB_CALL, value: "http://back:8080/never"}]}
`

// backCounts is back's received and budgeted (requests that carried Retrycap-Budget, which only
// a sidecar adds here) in namespace ns, read at its pod's IP.
func (h *harness) backCounts(t *testing.T, ns string) (received, budgeted int) {
	t.Helper()
	base := "http://" + h.podIP(t, ns, "back") + ":8080"
	return h.labStat(t, base, "received"), h.labStat(t, base, "budgeted")
}

// podState waits for a pod's phase and Ready condition (want "Running True", "Succeeded False").
func (h *harness) podState(t *testing.T, ns, name, want string) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("pod %s/%s %s", ns, name, want), func() error {
		r := h.k("", "get", "pod", "-n", ns, name, "-o", `jsonpath={.status.phase} {.status.conditions[?(@.type=="Ready")].status}`)
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		if got := strings.TrimSpace(r.stdout); got != want {
			return fmt.Errorf("phase and Ready %q", got)
		}
		return nil
	})
}

func (h *harness) annotation(t *testing.T, ns, name, key string) string {
	t.Helper()
	return h.mustK(t, "", "get", "pod", "-n", ns, name, "-o", "jsonpath={.metadata.annotations."+strings.ReplaceAll(key, ".", `\.`)+"}")
}

// testPodsAsWritten: pods as people write them, injected (or skipped, naming why) and run on the
// node; each app's one call to back counted at back (and as carrying the chain budget where it
// went through the sidecar) and at the pod's sidecar, exactly.
func testPodsAsWritten(t *testing.T, h *harness) {
	manifest, err := os.ReadFile(filepath.Join(h.root, "test", "node", "testdata", "pods-as-written.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h.mustK(t, string(manifest), "apply", "-f", "-")
	h.waitAvailable(t, "rt", "back in rt Available", "back=1")
	h.waitAvailable(t, "rt-restricted", "back in rt-restricted (Pod Security restricted) Available", "back=1")
	// Available is not yet routed: kube-proxy writes a new Service's rules after (CI at
	// 85bf9d90: the first app's call got the sidecar's 503 for a refused VIP).
	h.waitServices(t, h.serviceURL(t, "rt", "back"), h.serviceURL(t, "rt-restricted", "back"))

	// call makes one GET to the app of pod name and checks the answer and what back and the
	// pod's sidecar counted: carried (through the sidecar, with the budget) or not.
	call := func(ns, name, url, wantBody string, wantCode string, atBack, budgeted, atSidecar int) {
		t.Helper()
		r0, b0 := h.backCounts(t, ns)
		r := h.inNode(url)
		if r.err != nil {
			t.Fatalf("%s/%s: %s", ns, name, r)
		}
		cut := strings.LastIndex(r.stdout, "\n")
		body, code := strings.TrimSpace(r.stdout[:max(cut, 0)]), r.stdout[cut+1:]
		if code != wantCode || (wantBody != "" && body != wantBody) {
			t.Fatalf("%s/%s: answered %q, want %q then %s", ns, name, r.stdout, wantBody, wantCode)
		}
		r1, b1 := h.backCounts(t, ns)
		if r1-r0 != atBack || b1-b0 != budgeted {
			t.Fatalf("%s/%s: back received %d (%d with the chain budget), want %d (%d)", ns, name, r1-r0, b1-b0, atBack, budgeted)
		}
		if atSidecar >= 0 {
			ip := h.mustK(t, "", "get", "pod", "-n", ns, name, "-o", "jsonpath={.status.podIP}")
			// Every series: the kubelet's probes never pass through the sidecar.
			if got := h.proxyMetric(t, ip, "retrycap_proxy_attempts_total", ""); got != atSidecar {
				t.Fatalf("%s/%s: the sidecar counted %d attempts, want %d", ns, name, got, atSidecar)
			}
		}
	}
	injected := func(ns, name string) {
		t.Helper()
		if got := h.annotation(t, ns, name, "retrycap.dev/injected"); got != ns+"/rt" {
			t.Fatalf("%s/%s: annotation retrycap.dev/injected %q, want %s/rt (skipped: %q)", ns, name, got, ns, h.annotation(t, ns, name, "retrycap.dev/injection-skipped"))
		}
	}
	podURL := func(ns, name, port string) string {
		return "http://" + h.mustK(t, "", "get", "pod", "-n", ns, name, "-o", "jsonpath={.status.podIP}") + ":" + port + "/"
	}

	// Injected, and the app's call carried: its own NO_PROXY (a value: merged; a valueFrom:
	// kept, warned), envFrom's HTTP_PROXY (replaced by retrycap's), HTTP probes of every kind,
	// a shared process namespace, no service account token, Pod Security restricted with a
	// read-only root filesystem.
	for _, p := range []struct{ ns, name string }{
		{"rt", "envval-noproxy"}, {"rt", "valuefrom"}, {"rt", "envfrom"}, {"rt", "probes-http"},
		{"rt", "sharepid"}, {"rt", "nosa"}, {"rt-restricted", "restricted"},
	} {
		h.podState(t, p.ns, p.name, "Running True")
		injected(p.ns, p.name)
		call(p.ns, p.name, podURL(p.ns, p.name, "8080"), p.name+": ok", "200", 1, 1, 1)
	}
	// gRPC probes (grpc.health.v1 on the app's port) pass, and never reach the sidecar.
	h.podState(t, "rt", "probes-grpc", "Running True")
	injected("rt", "probes-grpc")
	if got := h.proxyMetric(t, h.mustK(t, "", "get", "pod", "-n", "rt", "probes-grpc", "-o", "jsonpath={.status.podIP}"), "retrycap_proxy_attempts_total", ""); got != 0 {
		t.Fatalf("rt/probes-grpc: the sidecar counted %d attempts, want 0", got)
	}
	// The app's own HTTP_PROXY (a value, or from a ConfigMap key) wins, with the warning: its
	// call goes to its egress proxy (which does not resolve here), never to back.
	for _, name := range []string{"envval-proxy", "valuefrom-proxy"} {
		h.podState(t, "rt", name, "Running True")
		injected("rt", name)
		if got := h.annotation(t, "rt", name, "retrycap.dev/injection-warnings"); got != ownHTTPProxy {
			t.Fatalf("rt/%s: warnings %q, want %q", name, got, ownHTTPProxy)
		}
		call("rt", name, podURL("rt", name, "8080"), "", "502", 0, 0, 0)
	}
	// Skipped, named, and running without the proxy: the host network (the call goes direct,
	// without the budget), the proxy's port declared by the app.
	h.podState(t, "rt", "hostnet", "Running True")
	if got := h.annotation(t, "rt", "hostnet", "retrycap.dev/injection-skipped"); got != hostNetSkip {
		t.Fatalf("rt/hostnet: skip %q, want %q", got, hostNetSkip)
	}
	call("rt", "hostnet", podURL("rt", "hostnet", "28080"), "hostnet: ok", "200", 1, 0, -1)
	h.podState(t, "rt", "port-declared", "Running True")
	if got := h.annotation(t, "rt", "port-declared", "retrycap.dev/injection-skipped"); got != portSkip {
		t.Fatalf("rt/port-declared: skip %q, want %q", got, portSkip)
	}

	// One-shot calls, one at a time so that back's counts are each one's.
	docs := strings.Split(oneShot, "---\n")
	// An init container starts before the proxy (appended after the pod's own) and is not
	// pointed at it: its call goes direct, without the budget; the app's is carried.
	r0, b0 := h.backCounts(t, "rt")
	h.mustK(t, docs[0], "apply", "-f", "-")
	h.podState(t, "rt", "initcall", "Running True")
	injected("rt", "initcall")
	if got := h.mustK(t, "", "logs", "-n", "rt", "initcall", "-c", "warmup"); !strings.HasPrefix(got, "HTTP/1.1 200 OK\n") {
		t.Fatalf("rt/initcall: warmup printed %q, want the answer 200", got)
	}
	if r1, b1 := h.backCounts(t, "rt"); r1-r0 != 1 || b1-b0 != 0 {
		t.Fatalf("rt/initcall: back received %d (%d with the budget) from the init container, want 1 (0)", r1-r0, b1-b0)
	}
	call("rt", "initcall", podURL("rt", "initcall", "8080"), "initcall: ok", "200", 1, 1, 1)
	// A Job and a pod with restartPolicy Never: the call carried, and the native sidecar stops
	// once the app has exited, so the pod Succeeds and the Job completes.
	for i, name := range []string{"job", "never"} {
		r0, b0 := h.backCounts(t, "rt")
		h.mustK(t, docs[i+1], "apply", "-f", "-")
		pod := name
		if name == "job" {
			eventually(t, 3*time.Minute, "Job rt/job Complete", func() error {
				r := h.k("", "get", "job", "-n", "rt", "job", "-o", `jsonpath={.status.conditions[?(@.type=="Complete")].status} {.status.succeeded}`)
				if got := strings.TrimSpace(r.stdout); r.err != nil || got != "True 1" {
					return fmt.Errorf("Complete and succeeded: %q %v", got, r.err)
				}
				return nil
			})
			pod = strings.TrimSpace(h.mustK(t, "", "get", "pods", "-n", "rt", "-l", "job-name=job", "-o", "jsonpath={.items[*].metadata.name}"))
		}
		h.podState(t, "rt", pod, "Succeeded False")
		injected("rt", pod)
		if got := h.mustK(t, "", "logs", "-n", "rt", pod, "-c", "call"); !strings.HasPrefix(got, "HTTP/1.1 200 OK\n") {
			t.Fatalf("rt/%s: the call printed %q, want the answer 200", pod, got)
		}
		if r1, b1 := h.backCounts(t, "rt"); r1-r0 != 1 || b1-b0 != 1 {
			t.Fatalf("rt/%s: back received %d (%d with the budget), want 1 (1)", pod, r1-r0, b1-b0)
		}
	}
}
