package promtest

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// T is what the helpers need of a test (testing.T, ginkgo's GinkgoT()).
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
	Cleanup(func())
}

// Binary is the Prometheus server's path: $RETRYCAP_PROMETHEUS, else what
// hack/prometheus-bin.sh under repoRoot prints (it builds the binary into the cache the first
// time on a machine: minutes; then it returns at once).
func Binary(repoRoot string) (string, error) {
	binOnce.Do(func() {
		if p := os.Getenv("RETRYCAP_PROMETHEUS"); p != "" {
			binPath = p
			return
		}
		cmd := exec.Command("bash", filepath.Join(repoRoot, "hack", "prometheus-bin.sh"))
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			binErr = fmt.Errorf("hack/prometheus-bin.sh: %w", err)
			return
		}
		binPath = strings.TrimSpace(string(out))
	})
	return binPath, binErr
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// FreeAddr is a loopback address nothing listens on (just closed): Prometheus takes its port
// from the command line and does not say which one it bound.
func FreeAddr(t T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("%v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("%v", err)
	}
	return addr
}

// Server is a running Prometheus.
type Server struct {
	URL  string
	stop func()
}

// Stop ends the server (SIGINT, then SIGKILL after 10 s) and waits for it; idempotent.
func (s *Server) Stop() { s.stop() }

// Start runs Prometheus scraping every target (an admin address -> its "service" label) every
// 100 ms, and waits until it is ready. It is stopped at the test's cleanup.
func Start(t T, repoRoot string, targets map[string]string) *Server {
	t.Helper()
	ts := make([]Target, 0, len(targets))
	for a, svc := range targets {
		ts = append(ts, Target{Addr: a, Labels: map[string]string{"service": svc}})
	}
	return StartTargets(t, repoRoot, ts)
}

// Target is one scrape target: its address and the labels the scrape adds to its series (what
// a PodMonitor's relabelings add in a cluster: service, namespace).
type Target struct {
	Addr   string
	Labels map[string]string
}

// StartTargets is Start with the labels of each target given.
func StartTargets(t T, repoRoot string, targets []Target) *Server {
	t.Helper()
	return StartTargetsArgs(t, repoRoot, targets)
}

// StartTargetsArgs is StartTargets with more command-line arguments for Prometheus
// (--web.config.file=... for a server that asks for credentials). Readiness is then polled
// (a 401 from /-/ready counts as up: the server answers).
func StartTargetsArgs(t T, repoRoot string, targets []Target, args ...string) *Server {
	t.Helper()
	return StartTargetsEvery(t, repoRoot, 100*time.Millisecond, targets, args...)
}

// StartTargetsEvery is StartTargetsArgs scraping every interval instead of every 100 ms (a
// cluster's scrape interval, for what a window shorter than two of them holds).
func StartTargetsEvery(t T, repoRoot string, interval time.Duration, targets []Target, args ...string) *Server {
	t.Helper()
	return StartConfig(t, repoRoot, Config{Interval: interval, Targets: targets, Args: args})
}

// Config is a Prometheus' configuration for StartConfig.
type Config struct {
	// Interval is the scrape and rule evaluation interval; 100 ms when 0.
	Interval time.Duration
	// Targets are job proxies' static targets.
	Targets []Target
	// FileSD, when set, is the file_sd_configs file of job pods: the test writes it (a JSON
	// list of {"targets": [...], "labels": {...}}), and a target it adds later is a target born
	// then, as Kubernetes service discovery lists a new pod. Absent until written.
	FileSD string
	// Rules is a rule file's YAML (groups: ...), evaluated every Interval; none when "".
	Rules string
	// Federate, when set, adds job federate: /federate of other Prometheus servers.
	Federate *Federate
	// ExternalLabels are the server's external labels (a cluster's Prometheus names its
	// cluster so: /federate adds them to every series it answers).
	ExternalLabels map[string]string
	// Args are more command-line arguments.
	Args []string
}

// Federate is a federation scrape job, as Prometheus' federation docs and Istio's
// observability best practices write it.
type Federate struct {
	// Targets are the federated Prometheus servers (host:port) and the labels the federation
	// job gives each.
	Targets []Target
	// Match are the match[] selectors.
	Match []string
	// HonorLabels keeps the federated series' job, instance and external labels (true), or
	// renames those the scrape sets to exported_NAME (false, Prometheus' default).
	HonorLabels bool
}

// StartConfig runs Prometheus with cfg and waits until it is ready. It is stopped at the
// test's cleanup.
func StartConfig(t T, repoRoot string, c Config) *Server {
	t.Helper()
	bin, err := Binary(repoRoot)
	if err != nil {
		t.Fatalf("%v", err)
	}
	interval, targets, args := c.Interval, c.Targets, c.Args
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	dir := t.TempDir()
	targets = append([]Target(nil), targets...)
	sort.Slice(targets, func(i, j int) bool { return targets[i].Addr < targets[j].Addr })
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: %dms\n  scrape_timeout: 100ms\n  evaluation_interval: %dms\n", interval.Milliseconds(), interval.Milliseconds())
	if len(c.ExternalLabels) > 0 {
		fmt.Fprintf(&cfg, "  external_labels: {%s}\n", yamlLabels(c.ExternalLabels))
	}
	if c.Rules != "" {
		rules := filepath.Join(dir, "rules.yml")
		if err := os.WriteFile(rules, []byte(c.Rules), 0o600); err != nil {
			t.Fatalf("%v", err)
		}
		fmt.Fprintf(&cfg, "rule_files: [%q]\n", rules)
	}
	cfg.WriteString("scrape_configs:\n- job_name: proxies\n")
	if len(targets) == 0 {
		cfg.WriteString("  static_configs: []\n")
	} else {
		cfg.WriteString("  static_configs:\n")
	}
	for _, tg := range targets {
		fmt.Fprintf(&cfg, "  - targets: [%q]\n    labels: {%s}\n", tg.Addr, yamlLabels(tg.Labels))
	}
	if c.FileSD != "" {
		fmt.Fprintf(&cfg, "- job_name: pods\n  file_sd_configs:\n  - files: [%q]\n    refresh_interval: 1s\n", c.FileSD)
	}
	if f := c.Federate; f != nil {
		match := make([]string, len(f.Match))
		for i, m := range f.Match {
			match[i] = fmt.Sprintf("%q", m)
		}
		fmt.Fprintf(&cfg, "- job_name: federate\n  honor_labels: %v\n  metrics_path: /federate\n  params:\n    'match[]': [%s]\n  static_configs:\n",
			f.HonorLabels, strings.Join(match, ", "))
		for _, tg := range f.Targets {
			fmt.Fprintf(&cfg, "  - targets: [%q]\n    labels: {%s}\n", tg.Addr, yamlLabels(tg.Labels))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatalf("%v", err)
	}
	addr := FreeAddr(t)
	cmd := exec.Command(bin, append([]string{"--config.file=" + filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn",
		// Targets reach the scrape manager on its reload tick, 5 s by default: the first
		// scrape came 5 s after /-/ready, in every test. The targets are static; the tick only
		// throttles their updates.
		"--scrape.discovery-reload-interval=100ms"}, args...)...)
	// A server under a path prefix (--web.route-prefix) answers its readiness there.
	prefix := ""
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, "--web.route-prefix="); ok {
			prefix = strings.TrimSuffix(p, "/")
		}
	}
	logs := &lockedBuilder{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s := &Server{URL: "http://" + addr, stop: sync.OnceFunc(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("Prometheus exited before it was ready:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(s.URL + prefix + "/-/ready")
		if err == nil {
			_ = resp.Body.Close()
			// 401: a server that asks for credentials (--web.config.file) answers, so it is up.
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return s
			}
			// 400: one that serves TLS (tls_server_config) answers a plain request with it: asked
			// again over TLS (its certificate is the test's to check, not readiness's).
			if resp.StatusCode == http.StatusBadRequest && readyTLS(addr) {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus at %s not ready within 60s (%v):\n%s", s.URL, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// yamlLabels writes labels as a YAML flow mapping's entries, sorted.
func yamlLabels(labels map[string]string) string {
	names := make([]string, 0, len(labels))
	for n := range labels {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = fmt.Sprintf("%s: %q", n, labels[n])
	}
	return strings.Join(out, ", ")
}

// readyTLS says whether the TLS server at addr answers /-/ready with 200 or 401.
func readyTLS(addr string) bool {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a readiness probe of the test's own server
	defer c.CloseIdleConnections()
	resp, err := c.Get("https://" + addr + "/-/ready")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
