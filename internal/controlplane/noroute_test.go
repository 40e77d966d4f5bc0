package controlplane

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestStartWithoutDefaultRoute: the control plane (the demo's, the tests') starts on a host
// with loopback only. The test runs itself again in a network namespace it creates (unshare
// -n, loopback brought up, no route out; and a PID namespace of its own, so that an etcd or
// kube-apiserver the child leaves behind, if it fails half-way, dies with it); before, kube-apiserver refused to start there ("no
// default routes found") and Start failed after its retries.
func TestStartWithoutDefaultRoute(t *testing.T) {
	if os.Getenv("RETRYCAP_NOROUTE_CHILD") == "1" {
		if hasDefaultRoute() {
			t.Fatal("the child has a default route: not the case under test")
		}
		cp, err := Start(Options{})
		if err != nil {
			t.Fatalf("Start without a default route: %v", err)
		}
		if err := cp.Stop(); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		return
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS unset (make test sets it)")
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s (util-linux, iproute2): no network namespace to run in", tool)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	cmd := exec.Command("unshare", "-n", "-p", "-f", "--kill-child", "--", "sh", "-c", `ip link set lo up && exec "$0" -test.run '^TestStartWithoutDefaultRoute$' -test.count=1`, os.Args[0])
	cmd.Env = append(os.Environ(), "RETRYCAP_NOROUTE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PASS") {
		t.Fatalf("the child in its own network namespace: %v\n%s", err, out)
	}
}
