package inject

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// buildProxy builds the real retrycap-proxy into a temporary directory.
func buildProxy(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "retrycap-proxy")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/retrycap/retrycap/cmd/retrycap-proxy")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building retrycap-proxy: %v\n%s", err, out)
	}
	return bin
}

// TestProxyAcceptsRenderedArgs starts the real proxy in --check mode (parse and validate every
// flag, print the effective configuration, exit) with the command line rendered for each
// injected golden case, so the injector and the proxy cannot drift apart.
func TestProxyAcceptsRenderedArgs(t *testing.T) {
	bin := buildProxy(t)
	injected := 0
	for _, c := range loadCases(t) {
		d := Decide(testConfig, c.input)
		if !d.Injected {
			continue
		}
		injected++
		t.Run(c.name, func(t *testing.T) {
			args := d.Pod.Spec.InitContainers[len(d.Pod.Spec.InitContainers)-1].Args
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(bin, append([]string{"--check"}, args...)...)
			// The kubelet sets $POD_NAMESPACE from the downward API, as the sidecar's env says.
			cmd.Env = append(os.Environ(), sidecar.NamespaceEnv+"="+d.Pod.Namespace)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("retrycap-proxy --check %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
			}
			// Every rendered flag is in the effective configuration, with the value rendered
			// (the proxy prints "flag value" lines; durations and lists in its own format).
			effective := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				k, v, _ := strings.Cut(line, " ")
				effective[k] = v
			}
			s, err := SettingsFor(d.Policy)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				"listen":                ListenAddr,
				"admin":                 ":15020",
				"chain-cap":             itoa(s.ChainCap),
				"default-attempts":      itoa(s.DefaultAttempts),
				"per-try-timeout":       s.PerTryTimeout.String(),
				"backoff-base":          s.BackoffBase.String(),
				"backoff-max":           s.BackoffMax.String(),
				"budget-percent":        itoa(s.BudgetPercent),
				"budget-min-per-second": itoa(s.BudgetMinPerSecond),
				"budget-window":         s.BudgetWindow.String(),
				"breaker-failures":      itoa(s.BreakerFailures),
				"breaker-window":        s.BreakerWindow.String(),
				"breaker-open-for":      s.BreakerOpenFor.String(),
				"retry-methods":         strings.Join(s.Methods, ","),
				"namespace":             d.Pod.Namespace,
			}
			for _, a := range args {
				k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if k == "service" || k == "entrypoint" {
					want[k] = v
				}
			}
			// Upstreams as the proxy resolves them: attempts defaulted, the per-try timeout when
			// given (the proxy honours it), calls default 1.
			ups, err := annotations.ParseUpstreams(d.Pod.Annotations[annotations.Upstreams])
			if err != nil {
				t.Fatal(err)
			}
			var resolved []string
			for _, u := range ups {
				timeout := ""
				if u.PerTryTimeout > 0 {
					timeout = "/" + u.PerTryTimeout.String()
				}
				resolved = append(resolved, fmt.Sprintf("%s=%d%s*%d", u.Name, orInt(u.Attempts, s.DefaultAttempts), timeout, orInt(u.Calls, 1)))
			}
			want["upstreams"] = strings.Join(resolved, ",")
			want["max-time-to-answer"] = s.MaxTimeToAnswer.String()
			want["dedup-upstreams"] = dedupAmong(ups, s.DedupUpstreams)
			for k, v := range want {
				if effective[k] != v {
					t.Errorf("effective %s = %q, want %q (output:\n%s)", k, effective[k], v, stdout.String())
				}
			}
		})
	}
	if injected == 0 {
		t.Fatal("no injected golden case")
	}

	// The check is real: a bad value fails, naming the flag.
	out, err := exec.Command(bin, "--check", "--chain-cap=0x").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "chain-cap") {
		t.Errorf("retrycap-proxy --check --chain-cap=0x: err %v, output %q; want a non-zero exit naming chain-cap", err, out)
	}
}
