package node

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/test/internal/labyaml"
)

// stormChain is the storm lab's chain as real Deployments of the lab app: frontend -> checkout ->
// billing -> payment, each app trying its upstream __APP__ times (its own retries) and declaring
// __DECLARED__ attempts, payment failing (503 to
// everything). One Service per tier: the apps call each other by their DNS names.
var stormChain = labyaml.Join(
	labyaml.Namespace("NS", false),
	stormTier("frontend", "checkout=__DECLARED__", `[{name: LAB_UPSTREAMS, value: "http://checkout:8080/"}, {name: LAB_ATTEMPTS, value: "__APP__"}]`),
	stormTier("checkout", "billing=__DECLARED__", `[{name: LAB_UPSTREAMS, value: "http://billing:8080/"}, {name: LAB_ATTEMPTS, value: "__APP__"}]`),
	stormTier("billing", "payment=__DECLARED__", `[{name: LAB_UPSTREAMS, value: "http://payment:8080/"}, {name: LAB_ATTEMPTS, value: "__APP__"}]`),
	stormTier("payment", "", `[{name: LAB_FAIL, value: "1"}]`),
	labyaml.Service("NS", "frontend"), labyaml.Service("NS", "checkout"), labyaml.Service("NS", "billing"), labyaml.Service("NS", "payment"),
)

// stormTier is a tier of stormChain: the lab app with its readiness probe, part of the storm.
func stormTier(name, upstreams, env string) string {
	return labyaml.App{Namespace: "NS", Name: name, PartOf: "storm", Upstreams: upstreams, Env: env, Probe: true}.String()
}

// inNode runs curl inside the node's network namespace (the Service addresses exist only there),
// with extra arguments (headers) before the URL.
func (h *harness) inNode(url string, extra ...string) result {
	args := append([]string{"--net=/run/netns/" + netnsName, "curl", "-sS", "--max-time", "30", "-w", "\n%{http_code}"}, extra...)
	return run(time.Minute, h.root, nil, "", "nsenter", append(args, url)...)
}

// serviceURL is http://<ClusterIP>:8080 of a Service.
func (h *harness) serviceURL(t *testing.T, ns, name string) string {
	t.Helper()
	ip := strings.TrimSpace(h.mustK(t, "", "get", "service", name, "-n", ns, "-o", "jsonpath={.spec.clusterIP}"))
	return "http://" + ip + ":8080"
}

// labStat reads one counter of a lab app's /_labapp/stats through its Service.
func (h *harness) labStat(t *testing.T, base, key string) int {
	t.Helper()
	r := h.inNode(base + "/_labapp/stats")
	if r.err != nil {
		t.Fatalf("stats at %s: %s", base, r)
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("stats at %s: %q", base, line)
			}
			return n
		}
	}
	t.Fatalf("stats at %s: no %q in %q", base, key, r.stdout)
	return 0
}

// waitServices waits until each Service URL answers the lab app's stats: a Deployment is
// Available before kube-proxy has written its Service's rules (a first curl to a new VIP can be
// refused, curl exit 7).
func (h *harness) waitServices(t *testing.T, bases ...string) {
	t.Helper()
	for _, base := range bases {
		eventually(t, 2*time.Minute, base+" answers through its Service", func() error {
			if r := h.inNode(base + "/_labapp/stats"); r.err != nil {
				return fmt.Errorf("%s", r)
			}
			return nil
		})
	}
}

// testStormPlain: no injection, the apps' own retries 3 x 3 x 3: every failed user request costs
// payment 27 requests, counted by payment itself.
func testStormPlain(t *testing.T, h *harness) {
	const ns = "storm-plain"
	h.mustK(t, strings.NewReplacer("NS", ns, "__DECLARED__", "3", "__APP__", "3").Replace(stormChain), "apply", "-f", "-")
	h.waitAvailable(t, ns, "the chain's four Deployments Available", "billing=1 checkout=1 frontend=1 payment=1")
	front, pay := h.serviceURL(t, ns, "frontend"), h.serviceURL(t, ns, "payment")
	h.waitServices(t, front, h.serviceURL(t, ns, "checkout"), h.serviceURL(t, ns, "billing"), pay)
	before := h.labStat(t, pay, "received")
	const users = 4
	for i := 0; i < users; i++ {
		r := h.inNode(front + "/")
		if r.err != nil {
			t.Fatalf("user request %d: %s", i, r)
		}
		if code := r.stdout[strings.LastIndex(r.stdout, "\n")+1:]; code != "502" {
			t.Fatalf("user request %d: status %s, want 502 (payment is failing): %s", i, code, r)
		}
	}
	got := h.labStat(t, pay, "received") - before
	t.Logf("storm without injection: %d requests at payment for %d failed user requests (%.1f each)", got, users, float64(got)/users)
	if got != 27*users {
		t.Fatalf("requests at payment: %d for %d failed user requests, want %d (3 x 3 x 3 each)", got, users, 27*users)
	}
}

// stormPolicy is a cap of 4 on the storm chain, Audit so that the over-cap chain is admitted (and
// reported) and its pods injected with the cap: the chain budget is what bounds it at run time.
var stormPolicy = labyaml.Join(labyaml.Namespace("NS", true),
	labyaml.Policy{Namespace: "NS", Name: "storm", PartOf: "storm", Cap: 4, Entry: "frontend", Enforcement: "Audit",
		Extra: "  # The sidecars' access log, which retrycap observe --from-cluster reads.\n  observability: {accessLog: Stdout}\n"}.String())

// podIP is the IP of the one Running pod of a Deployment.
func (h *harness) podIP(t *testing.T, ns, app string) string {
	t.Helper()
	out := strings.TrimSpace(h.mustK(t, "", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+app,
		"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].status.podIP}"))
	if out == "" || strings.Contains(out, " ") {
		t.Fatalf("pods of %s/%s: IPs %q, want one", ns, app, out)
	}
	return out
}

// proxyMetric sums a counter of a sidecar's /metrics (admin port 15020) over the series whose
// labels contain match.
func (h *harness) proxyMetric(t *testing.T, ip, name, match string) int {
	t.Helper()
	r := h.inNode("http://" + ip + ":15020/metrics")
	if r.err != nil {
		t.Fatalf("sidecar metrics at %s: %s", ip, r)
	}
	total, found := 0.0, false
	for _, line := range strings.Split(r.stdout, "\n") {
		if !strings.HasPrefix(line, name) || !strings.Contains(line, match) {
			continue
		}
		rest := strings.TrimPrefix(line, name)
		if rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue // another metric whose name starts with this one
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("sidecar metrics at %s: %q", ip, line)
		}
		total += v
		found = true
	}
	if !found {
		return 0
	}
	return int(total)
}

// testStormPolicy: the same chain injected, the apps not retrying themselves, the sidecars
// retrying 3 times per hop as declared under a chain cap of 4: at most 4 requests at payment per
// failed user request, counted by payment and by billing's sidecar.
func testStormPolicy(t *testing.T, h *harness) {
	const ns = "storm-policy"
	h.mustK(t, strings.ReplaceAll(stormPolicy, "NS", ns), "apply", "-f", "-")
	h.mustK(t, strings.NewReplacer("NS", ns, "__DECLARED__", "3", "__APP__", "1").
		Replace(stormChain[strings.Index(stormChain, "---\n")+4:]), "apply", "-f", "-")
	h.waitAvailable(t, ns, "the injected chain's four Deployments Available", "billing=1 checkout=1 frontend=1 payment=1")
	for _, app := range []string{"frontend", "checkout", "billing", "payment"} {
		out := h.mustK(t, "", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+app, "-o", "jsonpath={.items[*].spec.initContainers[*].name}")
		if strings.TrimSpace(out) != "retrycap-proxy" {
			t.Fatalf("%s's pod is not injected: init containers %q", app, out)
		}
	}
	front, pay := h.serviceURL(t, ns, "frontend"), h.serviceURL(t, ns, "payment")
	billingIP := h.podIP(t, ns, "billing")
	h.waitServices(t, front, h.serviceURL(t, ns, "checkout"), h.serviceURL(t, ns, "billing"), pay)
	before := h.labStat(t, pay, "received")
	// Each hop's attempts, counted by the caller's sidecar.
	hops := []struct{ caller, callee, ip string }{{"frontend", "checkout", ""}, {"checkout", "billing", ""}, {"billing", "payment", billingIP}}
	hopBefore := make([]int, len(hops))
	for i := range hops {
		if hops[i].ip == "" {
			hops[i].ip = h.podIP(t, ns, hops[i].caller)
		}
		hopBefore[i] = h.proxyMetric(t, hops[i].ip, "retrycap_proxy_attempts_total", `upstream="`+hops[i].callee+`"`)
	}
	attemptsBefore := hopBefore[2]
	const users = 4
	for i := 0; i < users; i++ {
		// The user's key, which the apps pass on: observe groups each hop's attempts by it.
		r := h.inNode(front+"/", "-H", fmt.Sprintf("Idempotency-Key: node-storm-%d", i))
		if r.err != nil {
			t.Fatalf("user request %d: %s", i, r)
		}
		if code := r.stdout[strings.LastIndex(r.stdout, "\n")+1:]; code != "502" {
			t.Fatalf("user request %d: status %s, want 502 (payment is failing): %s", i, code, r)
		}
	}
	got := h.labStat(t, pay, "received") - before
	viaProxy := h.proxyMetric(t, billingIP, "retrycap_proxy_attempts_total", `upstream="payment"`) - attemptsBefore
	t.Logf("storm with the policy (cap 4): %d requests at payment for %d failed user requests (%.2f each); billing's sidecar counted %d attempts at payment",
		got, users, float64(got)/users, viaProxy)
	if got < users || got > 4*users {
		t.Fatalf("requests at payment: %d for %d failed user requests, want between %d and %d (cap 4)", got, users, users, 4*users)
	}
	if viaProxy != got {
		t.Fatalf("billing's sidecar counted %d attempts at payment, payment received %d", viaProxy, got)
	}
	metrics := map[string]int{}
	for i, hp := range hops {
		metrics[hp.callee] = h.proxyMetric(t, hp.ip, "retrycap_proxy_attempts_total", `upstream="`+hp.callee+`"`) - hopBefore[i]
	}
	h.observeMatches(t, ns, users, "node-storm-", metrics)
}

// observeMatches runs `kubectl retrycap observe --from-cluster` over the chain's sidecars and
// checks it against the sidecars' metrics: one key per user request, and at each service the
// attempts the keys add up to are the attempts its caller's sidecar counted (metrics), the
// same at every key (so the per-failed-request count is the metric's over the users).
func (h *harness) observeMatches(t *testing.T, ns string, users int, keyPrefix string, metrics map[string]int) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl-retrycap")
	if r := run(10*time.Minute, h.root, nil, "", "go", "build", "-o", bin, "./cmd/kubectl-retrycap"); r.err != nil {
		t.Fatalf("go build ./cmd/kubectl-retrycap: %s", r)
	}
	var last string
	eventually(t, time.Minute, "observe --from-cluster agrees with the sidecars' metrics", func() error {
		r := run(2*time.Minute, h.root, nil, "", bin, "observe", "--from-cluster", "--kubeconfig", h.kubeconfig, "-n", ns,
			"-l", "app.kubernetes.io/part-of=storm", "-c", "retrycap-proxy", "--threshold", "0", "--top", "0", "-o", "json")
		if r.err != nil {
			return fmt.Errorf("observe: %s", r)
		}
		var rep struct {
			Over []struct {
				Key      string `json:"key"`
				Kind     string `json:"kind"`
				Services []struct {
					Service  string `json:"service"`
					Attempts int    `json:"attempts"`
				} `json:"services"`
			} `json:"over"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			return fmt.Errorf("observe -o json: %v: %s", err, r.stdout)
		}
		sums, perKey := map[string]int{}, map[string]map[int]bool{}
		keys := 0
		for _, k := range rep.Over {
			if !strings.HasPrefix(k.Key, keyPrefix) || k.Kind != "idempotency-key" {
				return fmt.Errorf("observe found key %q (%s): want only the %d users' idempotency keys", k.Key, k.Kind, users)
			}
			keys++
			for _, s := range k.Services {
				sums[s.Service] += s.Attempts
				if perKey[s.Service] == nil {
					perKey[s.Service] = map[int]bool{}
				}
				perKey[s.Service][s.Attempts] = true
			}
		}
		last = fmt.Sprintf("%d keys, attempts per service %v (the sidecars' metrics: %v)", keys, sums, metrics)
		if keys != users {
			return fmt.Errorf("%s: want %d keys", last, users)
		}
		for svc, n := range metrics {
			if sums[svc] != n {
				return fmt.Errorf("%s: at %s observe counts %d", last, svc, sums[svc])
			}
			if len(perKey[svc]) != 1 {
				return fmt.Errorf("%s: at %s the keys' attempts differ: %v", last, svc, perKey[svc])
			}
		}
		return nil
	})
	t.Logf("observe --from-cluster: %s", last)
}
