package labapp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ProxyProc is a retrycap-proxy running as a real child process.
type ProxyProc struct {
	Cmd       *exec.Cmd
	Addr      string // data listener, host:port
	AdminAddr string // admin listener, host:port
	stderr    *lockedWriter
	done      chan struct{} // closed when the process has exited
	waitErr   error
}

// BuildProxy builds ./cmd/retrycap-proxy into dir and returns the binary's
// path. moduleRoot is the repository root (where go.mod is).
func BuildProxy(moduleRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "retrycap-proxy")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/retrycap-proxy")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build retrycap-proxy: %w\n%s", err, out)
	}
	return bin, nil
}

// RunTestsWithProxy is the TestMain of a package whose tests start real proxy processes: it
// builds retrycap-proxy from moduleRoot into a temporary directory, stores the binary's path in
// *bin, runs the tests, removes the directory and returns the exit code for os.Exit. The test
// binary can be a gRPC lab app child too (RunGRPCChild): started as one, it is that and exits.
func RunTestsWithProxy(m interface{ Run() int }, moduleRoot string, bin *string) int {
	RunGRPCChild()
	dir, err := os.MkdirTemp("", "retrycap-proxy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = BuildProxy(moduleRoot, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// StartProxy starts bin with args plus "--listen 127.0.0.1:0 --admin
// 127.0.0.1:0" (unless args set them), reads the ports from the proxy's
// "listening" line and waits until /readyz answers OK or timeout passes.
func StartProxy(bin string, timeout time.Duration, args ...string) (*ProxyProc, error) {
	full := []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}
	full = append(full, args...) // later flags win in pflag
	cmd := exec.Command(bin, full...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("proxy stdout: %w", err)
	}
	p := &ProxyProc{Cmd: cmd, stderr: &lockedWriter{w: &strings.Builder{}}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start proxy: %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if !sent && strings.Contains(sc.Text(), "listening data=") {
				lines <- sc.Text()
				sent = true
			}
		}
		if !sent {
			close(lines)
		}
	}()
	go func() { p.waitErr = cmd.Wait(); close(p.done) }()
	deadline := time.After(timeout)
	select {
	case l, ok := <-lines:
		if !ok {
			return nil, fmt.Errorf("proxy exited before listening: %s", p.Log())
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "data="); ok {
				p.Addr = v
			}
			if v, ok := strings.CutPrefix(f, "admin="); ok {
				p.AdminAddr = v
			}
		}
	case <-deadline:
		_ = p.Kill()
		return nil, fmt.Errorf("proxy did not report its ports within %s", timeout)
	}
	if err := p.waitReady(timeout); err != nil {
		_ = p.Kill()
		return nil, err
	}
	return p, nil
}

func (p *ProxyProc) waitReady(timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	end := time.Now().Add(timeout)
	for time.Now().Before(end) {
		resp, err := c.Get("http://" + p.AdminAddr + "/readyz")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
	return fmt.Errorf("proxy %s not ready within %s", p.Addr, timeout)
}

// URL is the proxy URL an app uses (like HTTP_PROXY).
func (p *ProxyProc) URL() string { return "http://" + p.Addr }

// Stop sends SIGTERM and waits for the graceful drain, at most timeout,
// then kills. It returns the process's exit error, if any.
func (p *ProxyProc) Stop(timeout time.Duration) error {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(timeout):
		_ = p.Cmd.Process.Kill()
		return fmt.Errorf("proxy did not stop within %s", timeout)
	}
}

// Kill ends the process at once.
func (p *ProxyProc) Kill() error {
	if err := p.Cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill proxy: %w", err)
	}
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	return nil
}

// Log is what the proxy wrote to stderr so far.
func (p *ProxyProc) Log() string {
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	return p.stderr.w.String()
}

// Metrics fetches the proxy's /metrics text.
func (p *ProxyProc) Metrics(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.AdminAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("metrics: %w", err)
	}
	return string(b), nil
}
