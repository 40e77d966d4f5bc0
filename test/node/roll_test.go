package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/test/internal/labyaml"
)

const rollNS = "node-roll"

// rollChain is an injected two-tier chain, two replicas each: front calls back through its
// sidecar (back=2 declared under a cap of 4); the steady load goes to front's Service.
var rollChain = labyaml.Join(labyaml.Namespace("NS", true),
	labyaml.Policy{Namespace: "NS", Name: "roll", PartOf: "roll", Cap: 4, Entry: "front", Enforcement: "Reject"}.String(),
	labyaml.App{Namespace: "NS", Name: "front", PartOf: "roll", Replicas: 2, Upstreams: "back=2", Env: `[{name: LAB_UPSTREAMS, value: "http://back:8080/"}]`, Probe: true}.String(),
	labyaml.App{Namespace: "NS", Name: "back", PartOf: "roll", Replicas: 2, Probe: true}.String(),
	labyaml.Service("NS", "front"), labyaml.Service("NS", "back"))

// podNames lists the pods of an app in a namespace (terminating ones included).
func (h *harness) podNames(t *testing.T, ns, app string) []string {
	t.Helper()
	return strings.Fields(h.mustK(t, "", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+app,
		"-o", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`))
}

// rollAndWait restarts a Deployment (`kubectl rollout restart`), waits for `kubectl rollout
// status`, then until none of its old pods is left (a terminating pod still gets the requests
// that reached it, and its shutdown is what a rollout puts at risk).
func (h *harness) rollAndWait(t *testing.T, ns, app string) {
	t.Helper()
	old := h.podNames(t, ns, app)
	if len(old) != 2 {
		t.Fatalf("%s/%s before the rollout: pods %v, want 2", ns, app, old)
	}
	h.mustK(t, "", "rollout", "restart", "deployment/"+app, "-n", ns)
	if r := run(5*time.Minute, h.root, nil, "", h.kubectl, "--kubeconfig", h.kubeconfig, "rollout", "status", "deployment/"+app, "-n", ns, "--timeout=4m"); r.err != nil {
		t.Fatalf("kubectl rollout status deployment/%s: %s", app, r)
	}
	eventually(t, 2*time.Minute, fmt.Sprintf("%s/%s: the old pods %v gone", ns, app, old), func() error {
		now := h.podNames(t, ns, app)
		for _, p := range now {
			for _, o := range old {
				if p == o {
					return fmt.Errorf("pods now %v", now)
				}
			}
		}
		if len(now) != 2 {
			return fmt.Errorf("pods now %v, want 2 new ones", now)
		}
		return nil
	})
}

// testRollingUpdate: a steady client in the node's namespace calls front's Service while back
// (behind front's sidecar) and then front itself (the client's own target) are rolled: every
// request sent is answered 200.
func testRollingUpdate(t *testing.T, h *harness) {
	h.mustK(t, strings.ReplaceAll(rollChain, "NS", rollNS), "apply", "-f", "-")
	h.waitAvailable(t, rollNS, "front and back: two replicas each Available, injected", "back=2 front=2")
	for _, app := range []string{"front", "back"} {
		out := h.mustK(t, "", "get", "pods", "-n", rollNS, "-l", "app.kubernetes.io/name="+app, "-o", `jsonpath={range .items[*]}{.spec.initContainers[*].name}{"\n"}{end}`)
		if strings.TrimSpace(out) != "retrycap-proxy\nretrycap-proxy" {
			t.Fatalf("%s's pods are not both injected: init containers %q", app, out)
		}
	}
	front := h.serviceURL(t, rollNS, "front")
	h.waitServices(t, front, h.serviceURL(t, rollNS, "back"))

	const rate = 25 // requests per second
	load := startLoad(front+"/", rate)
	start := time.Now()
	load.phase.Store("back's rollout")
	h.rollAndWait(t, rollNS, "back")
	mid := load.sent.Load()
	load.phase.Store("front's rollout")
	h.rollAndWait(t, rollNS, "front")
	sent, ok, failures := load.finish()
	t.Logf("rolling update of back then front under %d req/s for %.1fs: %d sent (%d during back's rollout), %d answered 200, failures: %v",
		rate, time.Since(start).Seconds(), sent, mid, ok, failures)
	if len(failures) > 0 || ok != sent {
		t.Fatalf("requests lost during the rolling updates: %d sent, %d answered 200; failures: %s", sent, ok, strings.Join(failures, "; "))
	}
	// Nothing checked is not a pass: the load has to have spanned both rollouts.
	if mid < rate || sent-mid < rate {
		t.Fatalf("the load did not span both rollouts: %d requests during back's, %d during front's", mid, sent-mid)
	}
}

// podContainer is one container of a running pod: its pod's UID, its container ID and restarts.
type podContainer struct {
	pod, uid, id, ip string
	restarts         int
}

func (h *harness) sidecarOf(t *testing.T, ns, app string) podContainer {
	t.Helper()
	out := strings.TrimSpace(h.mustK(t, "", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+app,
		"--field-selector=status.phase=Running", "-o",
		`jsonpath={range .items[*]}{.metadata.name} {.metadata.uid} {.status.podIP} {range .status.initContainerStatuses[?(@.name=="retrycap-proxy")]}{.containerID} {.restartCount}{end}{"\n"}{end}`))
	line, _, _ := strings.Cut(out, "\n")
	f := strings.Fields(line)
	if len(f) != 5 || !strings.HasPrefix(f[3], "containerd://") {
		t.Fatalf("%s/%s: pod, uid, IP, sidecar container and restarts: %q", ns, app, out)
	}
	n, err := strconv.Atoi(f[4])
	if err != nil {
		t.Fatalf("%s/%s: restarts %q", ns, app, f[4])
	}
	return podContainer{pod: f[0], uid: f[1], ip: f[2], id: strings.TrimPrefix(f[3], "containerd://"), restarts: n}
}

// containerCgroup finds a container's cgroup in one hierarchy (cgroup v1, the kubelet's cgroupfs
// driver under the node's cgroup root): .../pod<UID>/<container ID>.
func containerCgroup(t *testing.T, hierarchy string, c podContainer) string {
	t.Helper()
	for _, pat := range []string{"*/pod%s/%s", "*/*/pod%s/%s", "pod%s/%s"} {
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", hierarchy, cgroupDir, fmt.Sprintf(pat, c.uid, c.id)))
		if len(m) == 1 {
			return m[0]
		}
	}
	t.Fatalf("no %s cgroup of container %s (pod %s) under /sys/fs/cgroup/%s/%s", hierarchy, c.id, c.uid, hierarchy, cgroupDir)
	return ""
}

func readInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("%s: %q", path, b)
	}
	return n
}

// procStatusKB reads a "Name:   N kB" line of /proc/PID/status.
func procStatusKB(t *testing.T, pid int, name string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+":"); ok {
			f := strings.Fields(v)
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("/proc/%d/status: %q", pid, l)
			}
			return n
		}
	}
	t.Fatalf("/proc/%d/status: no %s", pid, name)
	return 0
}

// loadResult is hack/loadgen's RESULT line.
type loadResult map[string]int64

func parseLoadgen(t *testing.T, r result) loadResult {
	t.Helper()
	if r.err != nil {
		t.Fatalf("loadgen: %s", r)
	}
	out := loadResult{}
	for _, line := range strings.Split(r.stdout, "\n") {
		rest, ok := strings.CutPrefix(line, "RESULT ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, _ := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("loadgen: %q", line)
			}
			out[k] = n
		}
	}
	for _, k := range []string{"sent", "p50", "p99", "errors"} {
		if _, ok := out[k]; !ok {
			t.Fatalf("loadgen printed no %s: %s", k, r)
		}
	}
	return out
}

// sidecarLimit is the injected proxy's memory limit (internal/inject).
const sidecarLimit = 64 << 20

// testSidecarFootprint: the same load from inside a front pod to back, through front's sidecar
// and straight to a back pod's IP, alternating, in the same run: the sidecar's added latency per
// hop (recorded, not asserted: docs/benchmarks.md), and its memory under that load from its
// container's cgroup and its process, within the 64Mi limit.
func testSidecarFootprint(t *testing.T, h *harness) {
	sc := h.sidecarOf(t, rollNS, "front")
	memCg := containerCgroup(t, "memory", sc)
	if got := readInt(t, filepath.Join(memCg, "memory.limit_in_bytes")); got != sidecarLimit {
		t.Fatalf("the sidecar's cgroup limit is %d bytes, want %d (64Mi)", got, sidecarLimit)
	}
	procs := strings.Fields(string(mustRead(t, filepath.Join(memCg, "cgroup.procs"))))
	if len(procs) != 1 {
		t.Fatalf("the sidecar's cgroup holds processes %v, want the proxy alone", procs)
	}
	pid, _ := strconv.Atoi(procs[0])
	if comm := strings.TrimSpace(string(mustRead(t, fmt.Sprintf("/proc/%d/comm", pid)))); comm != "retrycap-proxy" {
		t.Fatalf("the sidecar's process %d is %q, want retrycap-proxy", pid, comm)
	}
	backIP := h.podIP2(t, rollNS, "back")
	bin := filepath.Join(t.TempDir(), "loadgen")
	if r := run(5*time.Minute, h.root, []string{"CGO_ENABLED=0"}, "", "go", "build", "-o", bin, "./hack/loadgen"); r.err != nil {
		t.Fatalf("go build ./hack/loadgen: %s", r)
	}
	rssBefore := procStatusKB(t, pid, "VmRSS")
	// In the front pod's network namespace: the sidecar's data port is on its loopback.
	loadgen := func(args ...string) loadResult {
		a := append([]string{"--net=/proc/" + procs[0] + "/ns/net", bin, "-rate", "300", "-conns", "8", "-duration", "6s", "-warmup", "1s"}, args...)
		return parseLoadgen(t, run(2*time.Minute, h.root, nil, "", "nsenter", a...))
	}
	var direct, via []loadResult
	for round := 0; round < 2; round++ {
		direct = append(direct, loadgen("-addr", backIP+":8080", "-target", "/", "-host", "back"))
		via = append(via, loadgen("-addr", "127.0.0.1:15001", "-target", "http://back:8080/", "-host", "back"))
	}
	rss, hwm := procStatusKB(t, pid, "VmRSS"), procStatusKB(t, pid, "VmHWM")
	cgPeak := readInt(t, filepath.Join(memCg, "memory.max_usage_in_bytes"))
	failcnt := readInt(t, filepath.Join(memCg, "memory.failcnt"))
	after := h.sidecarOf(t, rollNS, "front")
	for i := range direct {
		t.Logf("round %d at 300 req/s over 8 connections, 6 s: direct to %s p50 %d us p99 %d us (%d sent, %d errors); through the sidecar p50 %d us p99 %d us (%d sent, %d errors): added p99 %d us",
			i+1, backIP, direct[i]["p50"], direct[i]["p99"], direct[i]["sent"], direct[i]["errors"],
			via[i]["p50"], via[i]["p99"], via[i]["sent"], via[i]["errors"], via[i]["p99"]-direct[i]["p99"])
	}
	t.Logf("sidecar %s memory: VmRSS %d KiB before the load, %d KiB after, VmHWM %d KiB; cgroup peak %d KiB of a %d KiB limit, failcnt %d, restarts %d",
		sc.pod, rssBefore, rss, hwm, cgPeak>>10, sidecarLimit>>10, failcnt, after.restarts)
	for i := range direct {
		if direct[i]["errors"] != 0 || via[i]["errors"] != 0 {
			t.Errorf("round %d: errors direct %d, through the sidecar %d: want none", i+1, direct[i]["errors"], via[i]["errors"])
		}
	}
	// The stated bound: the proxy's own peak resident memory under the load is under the
	// container's limit, which its cgroup never hit (failcnt 0) and which never restarted it.
	if hwm<<10 >= sidecarLimit || failcnt != 0 || after.id != sc.id || after.restarts != 0 {
		t.Fatalf("the sidecar's memory: VmHWM %d KiB (bound: under the %d KiB limit), failcnt %d (want 0), container %s -> %s, restarts %d (want 0)",
			hwm, sidecarLimit>>10, failcnt, sc.id, after.id, after.restarts)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// podIP2 is the IP of one Running pod of a Deployment with several.
func (h *harness) podIP2(t *testing.T, ns, app string) string {
	t.Helper()
	out := strings.Fields(h.mustK(t, "", "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+app,
		"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].status.podIP}"))
	if len(out) == 0 {
		t.Fatalf("no Running pod of %s/%s", ns, app)
	}
	return out[0]
}
