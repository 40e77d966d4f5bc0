package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The node's fixed names (hack/node.sh).
const (
	netnsName = "retrycap-node"
	stateDir  = "/var/lib/retrycap-node"
	runDir    = "/run/retrycap-node"
	cgroupDir = "retrycap-node"
)

// harness is what the tests use: the repo, the built tools and the node's kubeconfig.
type harness struct {
	t          *testing.T
	root       string
	kubectl    string
	helm       string
	kubeconfig string
}

func repoRoot(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// result is a finished command.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("err=%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
}

// run runs a command with a deadline (a hung tool fails the step instead of the whole suite's
// timeout), in the repo's root, with env added.
func run(timeout time.Duration, dir string, env []string, stdin string, name string, args ...string) result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The tools' own children (hack/node.sh's builds) die with them.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s timed out after %s: %w", name, timeout, err)
	}
	return result{stdout.String(), stderr.String(), err}
}

// k runs kubectl against the node.
func (h *harness) k(stdin string, args ...string) result {
	return run(2*time.Minute, h.root, nil, stdin, h.kubectl, append([]string{"--kubeconfig", h.kubeconfig}, args...)...)
}

// mustK runs kubectl and fails the test on a non-zero exit.
func (h *harness) mustK(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := h.k(stdin, args...)
	if r.err != nil {
		t.Fatalf("kubectl %s: %s", strings.Join(args, " "), r)
	}
	return r.stdout
}

// helmRun runs helm against the node.
func (h *harness) helmRun(timeout time.Duration, args ...string) result {
	return run(timeout, h.root, []string{"KUBECONFIG=" + h.kubeconfig, "HELM_CACHE_HOME=" + filepath.Join(h.t.TempDir(), "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(h.t.TempDir(), "config"), "HELM_DATA_HOME=" + filepath.Join(h.t.TempDir(), "data")}, "", h.helm, args...)
}

// waitAvailable waits (5 minutes at most) until kubectl lists ns's Deployments Available as want
// says ("name=replicas ..." in name order, as kubectl lists them); what names the wait.
func (h *harness) waitAvailable(t *testing.T, ns, what, want string) {
	t.Helper()
	eventually(t, 5*time.Minute, what, func() error {
		r := h.k("", "get", "deployments", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}={.status.availableReplicas} {end}`)
		if r.err != nil {
			return fmt.Errorf("%s", r)
		}
		if got := strings.TrimSpace(r.stdout); got != want {
			return fmt.Errorf("available: %q", got)
		}
		return nil
	})
}

// eventually polls f every second until it returns nil, or fails the test after timeout with
// the last error. Bounds are generous: the node shares two cores with the control plane and
// whatever else the machine builds.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	for {
		err := f()
		if err == nil {
			t.Logf("%s (%.1fs)", what, time.Since(start).Seconds())
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within %s: %v", what, timeout, err)
		}
		time.Sleep(time.Second)
	}
}

// script runs one of hack/'s scripts, its stderr (progress) streamed to the test's log.
func script(t *testing.T, root string, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	start := time.Now()
	r := run(timeout, root, nil, "", "bash", append([]string{filepath.Join(root, "hack", name)}, args...)...)
	t.Logf("hack/%s %s: %.1fs", name, strings.Join(args, " "), time.Since(start).Seconds())
	return r
}

// leftovers lists what a torn-down node must not leave: live PIDs among those it recorded,
// the network namespace, mounts under its directories, its cgroups, its directories and libcni's
// cached results of its sandboxes.
func leftovers(pids []int) []string {
	var left []string
	for _, pid := range pids {
		// A zombie has exited and waits for its reaper (killed shims and components are
		// re-parented to the machine's init): gone, as hack/node.sh's alive() counts it.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !isZombie(st) {
			comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
			left = append(left, fmt.Sprintf("process %d (%s)", pid, strings.TrimSpace(string(comm))))
		}
	}
	if _, err := os.Stat("/run/netns/" + netnsName); err == nil {
		left = append(left, "network namespace "+netnsName)
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(mi), "\n") {
			f := strings.Fields(line)
			if len(f) > 4 && (strings.HasPrefix(f[4], stateDir) || strings.HasPrefix(f[4], runDir)) {
				left = append(left, "mount "+f[4])
			}
		}
	}
	cgs, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupDir)
	if c := "/sys/fs/cgroup/" + cgroupDir; dirExists(c) {
		cgs = append(cgs, c)
	}
	for _, c := range cgs {
		left = append(left, "cgroup "+c)
	}
	for _, d := range []string{stateDir, runDir} {
		if dirExists(d) {
			left = append(left, "directory "+d)
		}
	}
	// libcni's cached results of the node's sandboxes (the bridge network's and containerd's
	// loopback network's), which name a network namespace under runDir: before, `down` removed
	// only the bridge network's and left one loopback file per pod running at `down`.
	cached, _ := filepath.Glob("/var/lib/cni/results/*")
	for _, f := range cached {
		if data, err := os.ReadFile(f); err == nil && strings.Contains(string(data), `"sandbox":"`+runDir+`/`) {
			left = append(left, "file "+f)
		}
	}
	return left
}

// isZombie reads the state field of a /proc/PID/stat line (the field after the command's
// closing parenthesis).
func isZombie(stat []byte) bool {
	i := strings.LastIndexByte(string(stat), ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func dirExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// recordedPIDs reads the PIDs hack/node.sh recorded, plus every process in the node's cgroups.
func recordedPIDs() []int {
	var pids []int
	files, _ := filepath.Glob(filepath.Join(runDir, "pids", "*"))
	for _, f := range files {
		var pid int
		if b, err := os.ReadFile(f); err == nil {
			if _, err := fmt.Sscan(string(b), &pid); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	procs, _ := filepath.Glob("/sys/fs/cgroup/pids/" + cgroupDir + "/*/cgroup.procs")
	deeper, _ := filepath.Glob("/sys/fs/cgroup/pids/" + cgroupDir + "/*/*/*/cgroup.procs")
	for _, f := range append(procs, deeper...) {
		b, _ := os.ReadFile(f)
		for _, s := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(s, &pid); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
