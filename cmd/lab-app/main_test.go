package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/labapp"
)

// The test binary is also the lab app: with LAB_APP_CHILD=1 it runs as main does, configured by
// the environment (a child started by the tests, which signal it as the kubelet would).
func TestMain(m *testing.M) {
	if os.Getenv("LAB_APP_CHILD") == "1" {
		if err := run(nil); err != nil {
			fmt.Fprintln(os.Stderr, "lab-app:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child is a lab app started as a process, its stderr read line by line.
type child struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), "LAB_APP_CHILD=1", "HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy="), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 64), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range c.lines {
		}
	})
	return c
}

// expect reads stderr lines until one matches re, and returns its submatches.
func (c *child) expect(t *testing.T, re string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				t.Fatalf("the lab app exited before printing %q", re)
			}
			if m := rx.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("no line matching %q within 30s", re)
		}
	}
}

// After SIGTERM the app keeps answering, each answer closing its connection, for the shutdown
// delay, then exits 0.
func TestShutdownDelay(t *testing.T) {
	c := startChild(t, "LAB_LISTEN=127.0.0.1:0", "LAB_SHUTDOWN_DELAY=2s", "LAB_NAME=back")
	addr := c.expect(t, `^lab-app back: serving on (\S+),`)[1]
	client := &http.Client{Timeout: 10 * time.Second}
	get := func() *http.Response {
		t.Helper()
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatalf("GET during the shutdown delay: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if r := get(); r.StatusCode != http.StatusOK || r.Close {
		t.Fatalf("before SIGTERM: status %d, close %v; want 200 on a kept-alive connection", r.StatusCode, r.Close)
	}
	signaled := time.Now()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.expect(t, `^lab-app back: terminating: serving 2s more, then stopping$`)
	if r := get(); r.StatusCode != http.StatusOK || !r.Close {
		t.Fatalf("after SIGTERM: status %d, close %v; want 200 with Connection: close", r.StatusCode, r.Close)
	}
	if err := <-c.done; err != nil {
		t.Fatalf("the lab app's exit: %v, want 0", err)
	}
	// Not a timing assertion on the machine's speed: the app must not exit before its delay.
	if d := time.Since(signaled); d < 2*time.Second {
		t.Fatalf("exited %s after SIGTERM, before its 2s shutdown delay", d)
	}
}

// --protocol grpc: a failing leaf answers UNAVAILABLE and counts the call on its stats port.
func TestGRPCMode(t *testing.T) {
	c := startChild(t, "LAB_PROTOCOL=grpc", "LAB_LISTEN=127.0.0.1:0", "LAB_STATS_LISTEN=127.0.0.1:0", "LAB_FAIL=1", "LAB_NAME=payment", "LAB_SHUTDOWN_DELAY=0s")
	m := c.expect(t, `^lab-app payment: serving gRPC on (\S+) \(counters on (\S+)\), upstream "", attempts 1, proxy "", failing true$`)
	cc, err := grpc.NewClient("passthrough:///"+m[1], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := labapp.InvokeGRPC(ctx, cc, labapp.GRPCGet); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "payment: failing" {
		t.Fatalf("Get of a failing gRPC lab app: %v, want UNAVAILABLE payment: failing", err)
	}
	// grpc.health.v1 answers SERVING (the kubelet's gRPC probes), and is not counted.
	hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Check: %v, %v; want SERVING", hr, err)
	}
	resp, err := http.Get("http://" + m[2] + "/_labapp/stats")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "received 1\nfailed 1\n" {
		t.Fatalf("stats: %q", b)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-c.done; err != nil {
		t.Fatalf("the lab app's exit: %v, want 0", err)
	}
}

func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocol", "tcp"}, `--protocol="tcp": must be http or grpc`},
		{[]string{"--shutdown-delay", "-1s"}, "--shutdown-delay=-1s: must not be negative"},
		{[]string{"--attempts", "0"}, "--attempts=0: must be at least 1"},
		{[]string{"--protocol", "grpc", "--upstreams", "http://checkout:8080/"}, "--upstreams=http://checkout:8080/: a gRPC upstream is NAME:PORT (dialed as dns:///NAME:PORT)"},
		{[]string{"--protocol", "grpc", "--upstreams", "checkout"}, "--upstreams=checkout: a gRPC upstream is NAME:PORT (dialed as dns:///NAME:PORT)"},
		{[]string{"--protocol", "grpc", "--upstreams", "a:1,b:2"}, "--upstreams=a:1,b:2: a gRPC app calls one upstream, NAME:PORT"},
	} {
		err := run(tc.args)
		if err == nil || err.Error() != tc.want {
			t.Errorf("lab-app %s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// --call: one GET through HTTP_PROXY (Go's default client), the answer printed, exit 0 on 2xx
// and 1 otherwise: the one-shot client of the node suite's init containers and Jobs.
func TestCallMode(t *testing.T) {
	var targets []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		targets = append(targets, r.RequestURI)
		if r.URL.Path == "/down" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "back: ok\n")
	}))
	defer proxy.Close()
	for _, tc := range []struct {
		url, out string
		exit     int
	}{
		{"http://back.shop:8080/job", "HTTP/1.1 200 OK\nback: ok\n", 0},
		{"http://back.shop:8080/down", "HTTP/1.1 503 Service Unavailable\ndown\n", 1},
	} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "LAB_APP_CHILD=1", "LAB_CALL="+tc.url, "HTTP_PROXY="+proxy.URL, "NO_PROXY=")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.exit || stdout.String() != tc.out {
			t.Errorf("--call %s: exit %d, stdout %q (stderr %q); want %d, %q", tc.url, code, stdout.String(), stderr.String(), tc.exit, tc.out)
		}
	}
	if got := strings.Join(targets, " "); got != "http://back.shop:8080/job http://back.shop:8080/down" {
		t.Fatalf("the proxy got %q: want both calls in absolute form, once each", got)
	}
}
