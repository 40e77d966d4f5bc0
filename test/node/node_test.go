package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrycap/retrycap/test/internal/labyaml"
)

const (
	release   = "retrycap"
	systemNS  = "retrycap-system"
	leaseName = "retrycap-manager.retrycap.dev"
	gateNS    = "node-gate"
)

// TestNode is the whole story on one node, in order; a step that fails stops the ones after it
// (they build on it), and the node is torn down whatever happened.
func TestNode(t *testing.T) {
	if os.Getenv("RETRYCAP_NODE_E2E") != "1" {
		t.Skip("the node e2e suite runs in its own step of `make test` (make test-node sets RETRYCAP_NODE_E2E=1)")
	}
	root := repoRoot(t)
	if r := script(t, root, time.Minute, "node.sh", "check"); r.err != nil {
		var ee *exec.ExitError
		if errors.As(r.err, &ee) && ee.ExitCode() == 2 {
			t.Skipf("SKIPPING the node e2e suite: %s", strings.TrimSpace(r.stderr))
		}
		t.Fatalf("hack/node.sh check: %s", r)
	}
	h := &harness{t: t, root: root}
	kb := script(t, root, 60*time.Minute, "kube-bins.sh")
	if kb.err != nil {
		t.Fatalf("hack/kube-bins.sh: %s", kb)
	}
	h.kubectl = filepath.Join(strings.TrimSpace(kb.stdout), "kubectl")
	hb := script(t, root, 30*time.Minute, "helm-bin.sh")
	if hb.err != nil {
		t.Fatalf("hack/helm-bin.sh: %s", hb)
	}
	h.helm = strings.TrimSpace(hb.stdout)
	im := script(t, root, 20*time.Minute, "images.sh")
	if im.err != nil {
		t.Fatalf("hack/images.sh (make images): %s", im)
	}
	var tarballs []string
	for _, line := range strings.Split(strings.TrimSpace(im.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || !strings.HasSuffix(f[1], ".tar") {
			t.Fatalf("make images printed %q: want `<repository:tag> <tarball>` per line", line)
		}
		tarballs = append(tarballs, filepath.Join(root, f[1]))
	}
	if len(tarballs) != 4 {
		t.Fatalf("make images printed %d images, want 4 (manager, proxy, lab app, pause):\n%s", len(tarballs), im.stdout)
	}

	// What a killed earlier run left goes first.
	if dirExists(runDir) || dirExists("/run/netns/"+netnsName) || fileExists("/run/netns/"+netnsName) {
		r := script(t, root, 5*time.Minute, "node.sh", "down")
		if r.err != nil {
			t.Fatalf("hack/node.sh down (a previous node's leftovers): %s", r)
		}
		if left := leftovers(nil); len(left) > 0 {
			t.Fatalf("a previous node's leftovers could not be removed:\n  %s\nhack/node.sh down said:\n%s", strings.Join(left, "\n  "), r.stderr)
		}
	}
	t.Cleanup(func() { teardown(t, h) })
	up := script(t, root, 50*time.Minute, "node.sh", "up")
	if up.err != nil {
		t.Fatalf("the node did not start: %v\n%s", up.err, tailLines(up.stderr, 60))
	}
	const prefix = "export KUBECONFIG="
	out := strings.TrimSpace(up.stdout)
	if !strings.HasPrefix(out, prefix) || strings.Contains(out, "\n") {
		t.Fatalf("hack/node.sh up printed %q on stdout, want one line %s<path>", out, prefix)
	}
	h.kubeconfig = strings.TrimPrefix(out, prefix)
	if r := script(t, root, 10*time.Minute, "node.sh", append([]string{"load"}, tarballs...)...); r.err != nil {
		t.Fatalf("hack/node.sh load: %s", r)
	}

	steps := []struct {
		name string
		f    func(*testing.T, *harness)
	}{
		{"helm install: two replicas Available, a leader, webhooks through their Service", testHelmInstall},
		{"samples: status 27 and 18", testSamples},
		{"over-cap Deployment refused with the policy's message", testRefused},
		{"admitted Deployment injected, Running, native sidecar ready", testInjected},
		{"storm without injection: 27 requests at payment per failed user request", testStormPlain},
		{"storm with the policy: at most 4 requests at payment per failed user request, observe agreeing", testStormPolicy},
		{"gRPC storm: 27 calls at payment per failed user call, at most 4 with the policy, observe agreeing", testGRPCStorm},
		{"rolling update of injected Deployments under steady load: no request lost", testRollingUpdate},
		{"the leader's pod deleted under load: admission answers throughout, status written by the new leader", testLeaderFailover},
		{"the sidecar's footprint under load: memory within its limit, added latency per hop", testSidecarFootprint},
		{"pods as people write them: injected or skipped by name, running, each call counted", testPodsAsWritten},
		{"helm uninstall leaves no webhook configuration", testUninstall},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) { s.f(t, h) }) {
			t.Logf("step %q failed: the steps after it are not run", s.name)
			break
		}
	}
}

// teardown dumps diagnostics if the run failed, then tears the node down the hard way: the
// kubelet and containerd are killed first (as in a crashed run: their shims and pods are
// orphaned), and `hack/node.sh down` must still leave nothing behind.
func teardown(t *testing.T, h *harness) {
	if t.Failed() && h.kubeconfig != "" {
		t.Log("diagnostics:")
		for _, args := range [][]string{
			{"get", "nodes,pods,deployments,services,endpointslices", "-A", "-o", "wide"},
			{"describe", "pods", "-A"},
			{"get", "events", "-A", "--sort-by=.lastTimestamp"},
			{"logs", "-n", systemNS, "-l", "app.kubernetes.io/name=retrycap", "--tail=80", "--all-containers", "--prefix"},
		} {
			r := h.k("", args...)
			t.Logf("$ kubectl %s\n%s%s", strings.Join(args, " "), tailLines(r.stdout, 300), r.stderr)
		}
	}
	if t.Failed() {
		r := script(t, h.root, time.Minute, "node.sh", "logs", "80")
		t.Logf("$ hack/node.sh logs 80\n%s", r.stdout)
	}
	pids := recordedPIDs()
	for _, c := range []string{"kubelet", "containerd"} {
		if b, err := os.ReadFile(filepath.Join(runDir, "pids", c)); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	r := script(t, h.root, 5*time.Minute, "node.sh", "down")
	if r.err != nil {
		t.Errorf("hack/node.sh down after the kubelet and containerd were killed: %s", r)
	}
	t.Logf("hack/node.sh down said:\n%s", r.stderr)
	// A SIGKILLed process takes a moment to exit (kube-apiserver frees a large heap): what is
	// still there after 30 s is left behind.
	eventually(t, 30*time.Second, "nothing left behind after hack/node.sh down", func() error {
		if left := leftovers(pids); len(left) > 0 {
			return fmt.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
		}
		return nil
	})
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func testHelmInstall(t *testing.T, h *harness) {
	r := h.helmRun(10*time.Minute, "install", release, filepath.Join(h.root, "charts", "retrycap"),
		"--namespace", systemNS, "--create-namespace",
		// No cert-manager on the node: the chart's own certificates (docs/helm.md).
		"--set", "certificates.mode=self-signed",
		"--wait", "--timeout", "8m")
	if r.err != nil {
		t.Fatalf("helm install: %s", r)
	}
	var pods []string
	eventually(t, 5*time.Minute, "two manager replicas ready, Deployment Available", func() error {
		r := h.k("", "get", "deployment", "-n", systemNS, "-l", "app.kubernetes.io/name=retrycap", "-o",
			`jsonpath={range .items[*]}{.status.readyReplicas} {.status.conditions[?(@.type=="Available")].status}{"\n"}{end}`)
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		if got := strings.TrimSpace(r.stdout); got != "2 True" {
			return fmt.Errorf("readyReplicas and Available: %q, want \"2 True\"", got)
		}
		p := h.k("", "get", "pods", "-n", systemNS, "-l", "app.kubernetes.io/name=retrycap", "--field-selector=status.phase=Running",
			"-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`)
		pods = strings.Fields(p.stdout)
		if len(pods) != 2 {
			return fmt.Errorf("running manager pods: %v, want 2", pods)
		}
		return nil
	})
	eventually(t, 3*time.Minute, "a manager pod holds the leader lease", func() error {
		r := h.k("", "get", "lease", leaseName, "-n", systemNS, "-o", "jsonpath={.spec.holderIdentity}")
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		holder := strings.TrimSpace(r.stdout)
		for _, p := range pods {
			if strings.HasPrefix(holder, p+"_") || holder == p {
				return nil
			}
		}
		return fmt.Errorf("lease holder %q is none of the manager pods %v", holder, pods)
	})
	// The API server reaches the webhooks through their Service (no URL in any configuration).
	for _, kind := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		out := h.mustK(t, "", "get", kind, "-o",
			`jsonpath={range .items[*].webhooks[*]}{.name} {.clientConfig.service.namespace}/{.clientConfig.service.name} {.clientConfig.url}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) == 0 || lines[0] == "" {
			t.Fatalf("no %s after helm install", kind)
		}
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) != 2 || f[1] != systemNS+"/"+release+"-webhook-service" {
				t.Errorf("%s: webhook %q: want the Service %s/%s-webhook-service and no URL", kind, l, systemNS, release)
			}
		}
	}
}

func testSamples(t *testing.T, h *harness) {
	for _, f := range []string{"storm27.yaml", "incident18.yaml"} {
		h.mustK(t, "", "apply", "-f", filepath.Join(h.root, "config", "samples", f))
	}
	for _, p := range []struct {
		ns, name string
		want     string
	}{{"payments", "storm", "27"}, {"shop", "checkout", "18"}} {
		eventually(t, 3*time.Minute, fmt.Sprintf("RetryPolicy %s/%s status.amplification = %s", p.ns, p.name, p.want), func() error {
			r := h.k("", "get", "retrypolicy", p.name, "-n", p.ns, "-o", "jsonpath={.status.amplification}")
			if r.err != nil {
				return fmt.Errorf("%s", r)
			}
			if got := strings.TrimSpace(r.stdout); got != p.want {
				return fmt.Errorf("status.amplification = %q", got)
			}
			return nil
		})
	}
}

// gateChain is test/e2e's admission chain (gateway -x3-> order -x3-> payment against cap 4, order
// to be deployed), in a namespace where the proxy is injected.
var gateChain = labyaml.AdmissionChain("NS", "Reject", true)

// order is the Deployment an engineer applies, with ATTEMPTS tries at payment.
var order = labyaml.Order("NS", "ATTEMPTS")

func orderFile(t *testing.T, attempts string) string {
	// Not t.TempDir(): a subtest's name puts commas in it, and kubectl -f splits paths on commas.
	dir, err := os.MkdirTemp("", "node-order-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "order.yaml")
	doc := strings.NewReplacer("NS", gateNS, "ATTEMPTS", attempts).Replace(order)
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func testRefused(t *testing.T, h *harness) {
	h.mustK(t, strings.ReplaceAll(gateChain, "NS", gateNS), "apply", "-f", "-")
	path := orderFile(t, "3")
	// Both replicas judge from their own caches: a server-side dry run (the gate has no side
	// effects) shows when they have the policy, without storing anything.
	eventually(t, 3*time.Minute, "the gate refuses order (dry run)", func() error {
		r := h.k("", "create", "--dry-run=server", "-f", path)
		if r.err == nil || !strings.Contains(r.stderr, "gate.retrycap.dev") {
			return fmt.Errorf("not refused yet: %s", r)
		}
		return nil
	})
	r := h.k("", "apply", "-f", path)
	want := `Error from server (Forbidden): error when creating "` + path + `": admission webhook "gate.retrycap.dev" denied the request: ` +
		"RetryPolicy " + gateNS + "/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1\n"
	if r.err == nil || r.stdout != "" || r.stderr != want {
		t.Fatalf("kubectl apply of the over-cap order:\n got %s\nwant stderr %q", r, want)
	}
	if g := h.k("", "get", "deployment", "order", "-n", gateNS); g.err == nil || !strings.Contains(g.stderr, `deployments.apps "order" not found`) {
		t.Fatalf("the refused Deployment was stored: %s", g)
	}
}

func testInjected(t *testing.T, h *harness) {
	path := orderFile(t, "1")
	if out := h.mustK(t, "", "apply", "-f", path); out != "deployment.apps/order created\n" {
		t.Fatalf("kubectl apply of order with payment=1 printed %q", out)
	}
	eventually(t, 4*time.Minute, "order's pod Running with the sidecar and the app ready", func() error {
		r := h.k("", "get", "pods", "-n", gateNS, "-l", "app.kubernetes.io/name=order", "-o",
			`jsonpath={range .items[*]}{.status.phase}|{range .spec.initContainers[*]}{.name}:{.restartPolicy},{end}|{range .status.initContainerStatuses[*]}{.name}:{.ready}:{.started},{end}|{range .status.containerStatuses[*]}{.name}:{.ready},{end}{"\n"}{end}`)
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		got := strings.TrimSpace(r.stdout)
		want := "Running|retrycap-proxy:Always,|retrycap-proxy:true:true,|app:true,"
		if got != want {
			return fmt.Errorf("pod: %q, want %q", got, want)
		}
		return nil
	})
}

func testUninstall(t *testing.T, h *harness) {
	if r := h.helmRun(10*time.Minute, "uninstall", release, "--namespace", systemNS, "--wait", "--timeout", "5m"); r.err != nil {
		t.Fatalf("helm uninstall: %s", r)
	}
	for _, kind := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
		out := h.mustK(t, "", "get", kind, "-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`)
		for _, n := range strings.Fields(out) {
			if strings.Contains(n, "retrycap") {
				t.Errorf("after helm uninstall: %s %s is still there", kind, n)
			}
		}
	}
}
