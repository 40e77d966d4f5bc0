package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/labapp"
	"github.com/retrycap/retrycap/internal/proxy"
)

// procCPU is a process's user+system CPU time, from /proc/PID/stat.
func procCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("proxy process: %v", err)
	}
	// The fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.Atoi(f[11])
	st, _ := strconv.Atoi(f[12])
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

func adminGet(addr, path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func metricValue(text, name string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

// TestDescriptorExhaustion (defect 4): a real proxy process with
// RLIMIT_NOFILE 48 is flooded with idle connections until accept fails with
// EMFILE. It pauses accepting (counted, logged once per interval), does not
// exit or spin (CPU over a second of exhaustion), serves the connection it
// has (a keep-alive request reaches the backend) and its admin port
// (/healthz, /metrics); once connections go, it accepts again. Before: the
// goroutine engine exited, the loop engine spun writing ~500k lines/s.
func TestDescriptorExhaustion(t *testing.T) {
	engine := proxy.EngineFlag(t)
	var hits []string
	hitCh := make(chan string, 100)
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hitCh <- r.URL.Path
		_, _ = io.WriteString(w, "ok "+r.URL.Path)
	}), ReadHeaderTimeout: 5 * time.Second}
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = backend.Serve(bln) }()
	t.Cleanup(func() { _ = backend.Close() })

	script := filepath.Join(t.TempDir(), "proxy-nofile.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nulimit -n 48 || exit 3\nexec "+proxyBin+" \"$@\"\n"), 0o700); err != nil { //nolint:gosec // a test's script
		t.Fatal(err)
	}
	p, err := labapp.StartProxy(script, 10*time.Second, "--engine", engine, "--service", "emfile",
		"--upstreams", "backend", "--resolve", "backend="+bln.Addr().String(),
		"--http-request-timeout", "1m", "--upstream-idle-timeout", "1m")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(5 * time.Second); err != nil {
			t.Logf("proxy stop: %v", err)
		}
	})
	pid := p.Cmd.Process.Pid

	// The connection already open when descriptors run out.
	k, err := net.Dial("tcp", p.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	_ = k.SetDeadline(time.Now().Add(30 * time.Second))
	kr := bufio.NewReader(k)
	get := func(path string) {
		t.Helper()
		fmt.Fprintf(k, "GET http://backend%s HTTP/1.1\r\nHost: backend\r\n\r\n", path)
		resp, err := http.ReadResponse(kr, nil)
		if err != nil {
			t.Fatalf("%s on the open connection: %v\n%s", path, err, p.Log())
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "ok "+path {
			t.Fatalf("%s on the open connection: %d %q", path, resp.StatusCode, b)
		}
		select {
		case h := <-hitCh:
			hits = append(hits, h)
		case <-time.After(5 * time.Second):
			t.Fatalf("the backend did not see %s", path)
		}
	}
	get("/before")

	// The flood: more idle connections than the proxy has descriptors.
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 80 {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		flood = append(flood, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, text, err := adminGet(p.AdminAddr, "/metrics")
		if err == nil && metricValue(text, "retrycap_proxy_accept_pauses_total") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no accept pause within 10s (metrics: %v)\n%s", err, p.Log())
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}

	// Exhausted: no spinning, the open connection and the admin port serve.
	cpu0 := procCPU(t, pid)
	window := time.Now()
	time.Sleep(time.Second) // the measurement window, not synchronisation
	cpu := procCPU(t, pid) - cpu0
	elapsed := time.Since(window)
	if cpu > elapsed/4 {
		t.Fatalf("the proxy used %s of CPU in %s while descriptors were exhausted: spinning", cpu, elapsed)
	}
	get("/during")
	for range 3 {
		if code, body, err := adminGet(p.AdminAddr, "/healthz"); err != nil || code != 200 || body != "ok\n" {
			t.Fatalf("/healthz while exhausted: %d %q %v", code, body, err)
		}
	}
	if err := p.Cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the proxy exited: %v\n%s", err, p.Log())
	}
	logLines := strings.Count(p.Log(), "\n")
	if acceptLines := strings.Count(p.Log(), "accepting paused"); acceptLines < 1 || acceptLines > 2 || logLines != acceptLines {
		t.Fatalf("%d log lines (%d about the pause), want 1 or 2 about the pause (one per 10s) and no other:\n%s", logLines, acceptLines, p.Log())
	}

	// The flood goes: the proxy accepts again.
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	deadline = time.Now().Add(10 * time.Second)
	for {
		code, _, err := func() (int, string, error) {
			c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(mustURL("http://" + p.Addr)), DisableKeepAlives: true}}
			resp, err := c.Get("http://backend/after")
			if err != nil {
				return 0, "", err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b), err
		}()
		if err == nil && code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no new connection served within 10s after the flood: %d %v\n%s", code, err, p.Log())
		}
		time.Sleep(10 * time.Millisecond) // polling interval
	}
	<-hitCh
	if strings.Join(hits, ",") != "/before,/during" {
		t.Fatalf("the backend saw %v on the open connection", hits)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}
