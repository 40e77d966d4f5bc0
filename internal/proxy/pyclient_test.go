package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The proxy driven by real Python clients, as a sidecar's Python app
// reaches it: the standard library (urllib.request, http.client), requests
// (on urllib3) and grpcio (gRPC's C-core), all Debian's packages, run by
// Debian's /usr/bin/python3 with the proxy in http_proxy or grpc_proxy.
// The scripts (testdata/python) read a plan on stdin and write what the
// client got on stdout; the backends here count what arrived. Installing:
// hack/python-deps.sh, a prerequisite of `make test` and `make test-unit`.

// pyInterp is Debian's interpreter, never a python3 found first on PATH (a
// pyenv shim has neither requests nor grpcio).
const pyInterp = "/usr/bin/python3"

var (
	pyOnce sync.Once
	pyErr  error
)

// python fails the test, naming the install command, when Debian's
// interpreter or one of the client libraries is missing: a test that
// skipped here would let the "real Python clients" promise go unchecked.
func python(t *testing.T) string {
	t.Helper()
	pyOnce.Do(func() {
		out, err := exec.Command(pyInterp, "-I", "-c", "import http.client, urllib.request, requests, urllib3, grpc").CombinedOutput()
		if err != nil {
			pyErr = fmt.Errorf("%s: %w", pyInterp, err)
			if out = bytes.TrimSpace(out); len(out) > 0 {
				pyErr = fmt.Errorf("%w: %s", pyErr, out)
			}
		}
	})
	if pyErr != nil {
		t.Fatalf("Debian's Python with requests and grpcio is needed: run hack/python-deps.sh "+
			"(apt-get install python3 python3-requests python3-grpcio): %v", pyErr)
	}
	return pyInterp
}

// runPy runs testdata/python/script with plan (JSON) on stdin and decodes
// its stdout into out. proxyEnv are the only *_proxy variables it sees
// (the package's own HTTPS_PROXY, set for grpc-go in h2_seam_test.go, is
// not passed on). The process is bounded in time and killed by its PID
// when the bound passes (exec.CommandContext); Run returns once it ended.
func runPy(t *testing.T, script string, proxyEnv []string, plan, out any) {
	t.Helper()
	py := python(t)
	in, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-I", filepath.Join("testdata", "python", script))
	cmd.WaitDelay = 5 * time.Second
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasSuffix(strings.ToLower(name), "_proxy") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "GRPC_VERBOSITY=ERROR")
	cmd.Env = append(cmd.Env, proxyEnv...)
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python %s: %v\nstderr:\n%s\nstdout:\n%s", script, err, stderr.String(), stdout.String())
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		t.Fatalf("python %s: its output: %v\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
}

// pyHTTPReq is one request of a stdlib or requests plan.
type pyHTTPReq struct {
	Method  string      `json:"method"`
	URL     string      `json:"url"`
	Headers [][2]string `json:"headers,omitempty"`
	Body    *string     `json:"body"`
	Chunks  []string    `json:"chunks,omitempty"`
	Expect  bool        `json:"expect,omitempty"`
}

// pyHTTPResult is what the Python client got for one request.
type pyHTTPResult struct {
	Status    int         `json:"status"`
	Headers   [][2]string `json:"headers"`
	Body      string      `json:"body"`
	Interim   string      `json:"interim"`
	WillClose bool        `json:"will_close"`
	Error     string      `json:"error"`
}

// header is the value of the answer's field name (case-insensitive), "" if none.
func (r pyHTTPResult) header(name string) string {
	for _, kv := range r.Headers {
		if strings.EqualFold(kv[0], name) {
			return kv[1]
		}
	}
	return ""
}

func strp(s string) *string { return &s }

// stdlibPlan runs the standard library's client ("urllib" or
// "http.client") through the proxy at addr, found in http_proxy.
func stdlibPlan(t *testing.T, client, addr string, reqs ...pyHTTPReq) []pyHTTPResult {
	t.Helper()
	var out struct{ Results []pyHTTPResult }
	runPy(t, "stdlib_client.py", []string{"http_proxy=http://" + addr}, map[string]any{"client": client, "requests": reqs}, &out)
	if len(out.Results) != len(reqs) {
		t.Fatalf("%s: %d results for %d requests: %+v", client, len(out.Results), len(reqs), out.Results)
	}
	for i, r := range out.Results {
		if r.Error != "" {
			t.Fatalf("%s: request %d (%s %s): %s (interim %q)", client, i, reqs[i].Method, reqs[i].URL, r.Error, r.Interim)
		}
	}
	return out.Results
}

// pyBackend is a raw-socket keep-alive HTTP/1.1 upstream that records every
// request it read whole (net/http's parser) and answers by act, given the
// request and how many times its path has been executed, this one included:
// an answer, or a reset after reading the request (an app that read it,
// ran it and crashed).
type pyBackend struct {
	ln  net.Listener
	act func(r *http.Request, n int) pyAct

	mu    sync.Mutex
	reqs  []pyReq
	execs map[string]int
	conns *atomic.Int64 // connections accepted
}

type pyAct struct {
	reset  bool
	status int
	header string // extra fields, each ending in CRLF
	body   string
}

type pyReq struct {
	method, path string
	header       http.Header
	te           []string // Transfer-Encoding as it arrived
	length       int64    // Content-Length as it arrived (-1: none)
	body         string
}

func newPyBackend(t *testing.T, act func(r *http.Request, n int) pyAct) *pyBackend {
	t.Helper()
	b := &pyBackend{act: act, execs: map[string]int{}}
	b.ln, b.conns = proxytest.RawBackend(t, func(c *net.TCPConn) { b.serve(c) })
	return b
}

func (b *pyBackend) serve(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		b.mu.Lock()
		b.execs[r.URL.Path]++
		n := b.execs[r.URL.Path]
		b.reqs = append(b.reqs, pyReq{r.Method, r.URL.Path, r.Header, r.TransferEncoding, r.ContentLength, string(body)})
		b.mu.Unlock()
		a := b.act(r, n)
		if a.reset {
			_ = c.SetLinger(0) // the close sends an RST
			return
		}
		if a.status == 0 {
			a.status, a.body = 200, "ok "+r.URL.Path
		}
		if _, err := fmt.Fprintf(c, "HTTP/1.1 %d %s\r\n%sContent-Length: %d\r\n\r\n%s", a.status, http.StatusText(a.status),
			a.header, len(a.body), a.body); err != nil {
			return
		}
	}
}

func (b *pyBackend) addr() string { return b.ln.Addr().String() }

// received is every request of path, in the order they arrived.
func (b *pyBackend) received(path string) []pyReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []pyReq
	for _, r := range b.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// pyActs is the backend every HTTP/1.1 Python test uses: the path's first
// segment says what happens to each execution (the rest names the case, so
// that each case counts its own executions).
//
//	/503/...             always 503 "down"
//	/503-then-ok/K/...   503 to the first K executions, then 200
//	/reset/...           reset after reading every execution
//	/reset-then-ok/K/... reset after reading the first K executions, then 200
//	anything else        200 "ok PATH"
func pyActs(r *http.Request, n int) pyAct {
	seg := strings.Split(r.URL.Path, "/")
	k := 0
	if len(seg) > 2 {
		_, _ = fmt.Sscanf(seg[2], "%d", &k)
	}
	switch seg[1] {
	case "503":
		return pyAct{status: 503, body: "down"}
	case "reset":
		return pyAct{reset: true}
	case "503-then-ok":
		if n <= k {
			return pyAct{status: 503, body: "down"}
		}
	case "reset-then-ok":
		if n <= k {
			return pyAct{reset: true}
		}
	}
	return pyAct{}
}

// pyProxy is the sidecar of an app calling "backend": 3 attempts, a chain
// cap of 4 (a GET forwards budgets 2, 1, 1), retries on the defaults
// (connect-failure, reset, 502, 503, 504).
func pyProxy(t *testing.T, b *pyBackend, extra ...string) *Proxy {
	return startProxy(t, append([]string{"--upstreams", "backend=3", "--resolve", "backend=" + b.addr(), "--chain-cap", "4"}, extra...)...)
}

// checkExecs fails unless path was executed exactly want times, each with
// the body and the Retrycap-Budget values given (one per execution).
func checkExecs(t *testing.T, b *pyBackend, path string, body string, budgets ...string) []pyReq {
	t.Helper()
	got := b.received(path)
	var gotBudgets []string
	for _, r := range got {
		gotBudgets = append(gotBudgets, r.header.Get("Retrycap-Budget"))
		if r.body != body {
			t.Errorf("%s: the backend read the body %q, want %q", path, r.body, body)
		}
	}
	if len(got) != len(budgets) || strings.Join(gotBudgets, ",") != strings.Join(budgets, ",") {
		t.Fatalf("%s executed %d times with budgets %q, want %d with %q", path, len(got), gotBudgets, len(budgets), budgets)
	}
	return got
}

// notRetried502 is the prefix and the end of the proxy's answer to a
// request it would not send twice, after the upstream reset it.
const (
	notRetried502Prefix = "retrycap-proxy: upstream backend (127.0.0.1:"
	notRetried502Middle = "): 1 attempt(s), last failed with reset ("
	notRetried502Suffix = "); not retried: not-retryable\n"
)

func check502NotRetried(t *testing.T, what string, r pyHTTPResult) {
	t.Helper()
	if r.Status != 502 || !strings.HasPrefix(r.Body, notRetried502Prefix) || !strings.Contains(r.Body, notRetried502Middle) || !strings.HasSuffix(r.Body, notRetried502Suffix) {
		t.Errorf("%s: %d %q, want 502 %q<port>%q...%q", what, r.Status, r.Body, notRetried502Prefix, notRetried502Middle, notRetried502Suffix)
	}
}

// TestPyStdlib: urllib.request (ProxyHandler from http_proxy) and
// http.client (absolute-form requests to the proxy) through the sidecar.
//
// Each case has a backend and a proxy of its own, so that no upstream
// connection is pooled when it starts. (Until branch resendcap a
// replayable request that an upstream reset on a reused connection was
// re-sent once, uncounted, which added an execution that depended on what
// the pool held; that repeat is now an attempt, within the counts
// asserted here: TestStaleResendWithinCap.)
func TestPyStdlib(t *testing.T) {
	fresh := func(t *testing.T) (*pyBackend, string) {
		b := newPyBackend(t, pyActs)
		return b, pyProxy(t, b).Addr()
	}

	t.Run("urllib GET retried on 503s", func(t *testing.T) {
		b, addr := fresh(t)
		rs := stdlibPlan(t, "urllib", addr,
			pyHTTPReq{Method: "GET", URL: "http://backend/503-then-ok/2/urllib"},
			pyHTTPReq{Method: "GET", URL: "http://backend/503/urllib"})
		if rs[0].Status != 200 || rs[0].Body != "ok /503-then-ok/2/urllib" {
			t.Errorf("GET /503-then-ok/2/urllib: %d %q, want 200 %q", rs[0].Status, rs[0].Body, "ok /503-then-ok/2/urllib")
		}
		checkExecs(t, b, "/503-then-ok/2/urllib", "", "2", "1", "1")
		// Given up: the upstream's last 503, marked.
		if rs[1].Status != 503 || rs[1].Body != "down" || rs[1].header("Retrycap-Exhausted") != "attempts" {
			t.Errorf("GET /503/urllib: %d %q Retrycap-Exhausted %q, want the backend's 503 %q with attempts", rs[1].Status, rs[1].Body,
				rs[1].header("Retrycap-Exhausted"), "down")
		}
		checkExecs(t, b, "/503/urllib", "", "2", "1", "1")
	})

	t.Run("http.client keyless POST read then reset: once, 502", func(t *testing.T) {
		b, addr := fresh(t)
		rs := stdlibPlan(t, "http.client", addr,
			pyHTTPReq{Method: "POST", URL: "http://backend/reset/http.client", Body: strp("order 1")},
			// The client's connection goes on serving (or http.client reopens it).
			pyHTTPReq{Method: "GET", URL: "http://backend/after"})
		check502NotRetried(t, "POST /reset/http.client", rs[0])
		checkExecs(t, b, "/reset/http.client", "order 1", "4")
		if rs[1].Status != 200 || rs[1].Body != "ok /after" {
			t.Errorf("GET /after: %d %q", rs[1].Status, rs[1].Body)
		}
	})

	t.Run("urllib keyless POST read then reset: once, 502", func(t *testing.T) {
		b, addr := fresh(t)
		rs := stdlibPlan(t, "urllib", addr, pyHTTPReq{Method: "POST", URL: "http://backend/reset/urllib", Body: strp("order 1")})
		check502NotRetried(t, "POST /reset/urllib", rs[0])
		checkExecs(t, b, "/reset/urllib", "order 1", "4")
	})

	t.Run("urllib POST with a key retried on resets", func(t *testing.T) {
		b, addr := fresh(t)
		// urllib sends the field as "Idempotency-key" (add_header
		// capitalizes): names are case-insensitive.
		rs := stdlibPlan(t, "urllib", addr,
			pyHTTPReq{Method: "POST", URL: "http://backend/reset-then-ok/2/urllib", Body: strp("order 2"),
				Headers: [][2]string{{"Idempotency-Key", "py-key-2"}}})
		if rs[0].Status != 200 || rs[0].Body != "ok /reset-then-ok/2/urllib" {
			t.Errorf("POST with a key: %d %q, want 200", rs[0].Status, rs[0].Body)
		}
		for _, r := range checkExecs(t, b, "/reset-then-ok/2/urllib", "order 2", "2", "1", "1") {
			if k := r.header.Get("Idempotency-Key"); k != "py-key-2" {
				t.Errorf("the backend got Idempotency-Key %q, want py-key-2", k)
			}
		}
	})

	t.Run("http.client chunked bodies", func(t *testing.T) {
		b, addr := fresh(t)
		chunks := []string{"first,", "second,", strings.Repeat("x", 5000)}
		whole := strings.Join(chunks, "")
		rs := stdlibPlan(t, "http.client", addr,
			// A chunked POST with a key: retried (first: nothing pooled yet).
			pyHTTPReq{Method: "POST", URL: "http://backend/reset-then-ok/1/chunked", Chunks: []string{"c", "d"},
				Headers: [][2]string{{"idempotency-key", "py-key-3"}}},
			// An idempotent PUT, chunked: replayed whole on the 503.
			pyHTTPReq{Method: "PUT", URL: "http://backend/503-then-ok/1/chunked", Chunks: chunks},
			// A keyless chunked POST the backend read and reset: once.
			pyHTTPReq{Method: "POST", URL: "http://backend/reset/chunked", Chunks: []string{"a", "b"}})
		if rs[0].Status != 200 || rs[0].Body != "ok /reset-then-ok/1/chunked" {
			t.Errorf("chunked POST with a key: %d %q, want 200", rs[0].Status, rs[0].Body)
		}
		checkExecs(t, b, "/reset-then-ok/1/chunked", "cd", "2", "1")
		if rs[1].Status != 200 || rs[1].Body != "ok /503-then-ok/1/chunked" {
			t.Errorf("chunked PUT: %d %q, want 200", rs[1].Status, rs[1].Body)
		}
		// Framed by its length, never with the Transfer-Encoding it came with.
		for _, r := range checkExecs(t, b, "/503-then-ok/1/chunked", whole, "2", "1") {
			if len(r.te) != 0 || r.length != int64(len(whole)) {
				t.Errorf("chunked PUT reached the backend with Transfer-Encoding %q, Content-Length %d; want none, %d", r.te, r.length, len(whole))
			}
		}
		check502NotRetried(t, "chunked POST /reset/chunked", rs[2])
		checkExecs(t, b, "/reset/chunked", "ab", "4")
	})

	t.Run("http.client Expect: 100-continue", func(t *testing.T) {
		b, addr := fresh(t)
		rs := stdlibPlan(t, "http.client", addr,
			pyHTTPReq{Method: "PUT", URL: "http://backend/503-then-ok/1/expect", Body: strp("after the 100"), Expect: true})
		// The proxy answers the 100 itself (it buffers the body to replay
		// it), then sends head and body together, Expect passed on (as
		// TestAdvRequestSmuggling's Expect case has it): the upstream's own 100
		// is skipped.
		if rs[0].Interim != "HTTP/1.1 100 Continue\r\n\r\n" {
			t.Errorf("interim answer %q, want HTTP/1.1 100 Continue", rs[0].Interim)
		}
		if rs[0].Status != 200 || rs[0].Body != "ok /503-then-ok/1/expect" {
			t.Errorf("PUT with Expect: %d %q, want 200", rs[0].Status, rs[0].Body)
		}
		for _, r := range checkExecs(t, b, "/503-then-ok/1/expect", "after the 100", "2", "1") {
			if e := r.header.Get("Expect"); e != "100-continue" {
				t.Errorf("the backend got Expect %q, want 100-continue passed on", e)
			}
		}
	})

	t.Run("urllib deadline and budget fields", func(t *testing.T) {
		b, addr := fresh(t)
		// urllib sends "Retrycap-deadline" and "Retrycap-budget".
		rs := stdlibPlan(t, "urllib", addr,
			pyHTTPReq{Method: "GET", URL: "http://backend/503-then-ok/1/deadline",
				Headers: [][2]string{{"Retrycap-Deadline", "1200"}, {"Retrycap-Budget", "999"}}})
		if rs[0].Status != 200 {
			t.Errorf("GET with a deadline: %d %q, want 200", rs[0].Status, rs[0].Body)
		}
		// 999 is clamped to the cap, 4: 2 for the first attempt, 1 for the
		// retry; each attempt carries the time left in whole ms: below the
		// 1200 sent, never above the attempt before (the same when the retry
		// leaves within the millisecond: the fast backoff can).
		got := checkExecs(t, b, "/503-then-ok/1/deadline", "", "2", "1")
		prev := 1199
		for i, r := range got {
			var ms int
			if _, err := fmt.Sscanf(r.header.Get("Retrycap-Deadline"), "%d", &ms); err != nil || ms > prev || ms < 200 {
				t.Errorf("attempt %d carried Retrycap-Deadline %q, want at most %d ms (below 1200 and the attempt before)", i+1, r.header.Get("Retrycap-Deadline"), prev)
			}
			prev = ms
		}
	})
}

// requestsPlan runs requests' Session through the proxy at addr (from
// http_proxy); retry, when set, mounts urllib3's Retry on the session.
func requestsPlan(t *testing.T, addr string, retry map[string]any, reqs ...pyHTTPReq) ([]pyHTTPResult, int) {
	t.Helper()
	var out struct {
		Results     []pyHTTPResult
		Connections int
		Versions    map[string]string
	}
	runPy(t, "requests_client.py", []string{"http_proxy=http://" + addr}, map[string]any{"retry": retry, "requests": reqs}, &out)
	if len(out.Results) != len(reqs) {
		t.Fatalf("requests: %d results for %d requests: %+v", len(out.Results), len(reqs), out.Results)
	}
	for i, r := range out.Results {
		if r.Error != "" {
			t.Fatalf("requests: request %d (%s %s): %s", i, reqs[i].Method, reqs[i].URL, r.Error)
		}
	}
	t.Logf("requests %s, urllib3 %s", out.Versions["requests"], out.Versions["urllib3"])
	return out.Results, out.Connections
}

// TestPyRequests: requests (urllib3 underneath) with one Session through
// the sidecar: keep-alive, the same rules as above, and what urllib3's own
// retries do on top of the proxy's.
func TestPyRequests(t *testing.T) {
	b := newPyBackend(t, pyActs)
	p := pyProxy(t, b)
	addr := p.Addr()

	t.Run("one keep-alive session", func(t *testing.T) {
		chunks := []string{"gen-1,", "gen-2,", strings.Repeat("y", 3000)}
		rs, conns := requestsPlan(t, addr, nil,
			// First, while no upstream connection is pooled (see TestPyStdlib).
			pyHTTPReq{Method: "POST", URL: "http://backend/reset-then-ok/2/requests", Body: strp("order 2"),
				Headers: [][2]string{{"Idempotency-Key", "py-key-r"}}},
			pyHTTPReq{Method: "GET", URL: "http://backend/503-then-ok/2/requests"},
			pyHTTPReq{Method: "POST", URL: "http://backend/reset/requests", Body: strp("order 1")},
			// A generator body: requests sends it chunked.
			pyHTTPReq{Method: "PUT", URL: "http://backend/503-then-ok/1/requests-chunked", Chunks: chunks},
			pyHTTPReq{Method: "GET", URL: "http://backend/last"})
		if rs[0].Status != 200 || rs[0].Body != "ok /reset-then-ok/2/requests" {
			t.Errorf("POST with a key: %d %q, want 200", rs[0].Status, rs[0].Body)
		}
		checkExecs(t, b, "/reset-then-ok/2/requests", "order 2", "2", "1", "1")
		if rs[1].Status != 200 || rs[1].Body != "ok /503-then-ok/2/requests" {
			t.Errorf("GET: %d %q, want 200", rs[1].Status, rs[1].Body)
		}
		checkExecs(t, b, "/503-then-ok/2/requests", "", "2", "1", "1")
		check502NotRetried(t, "keyless POST /reset/requests", rs[2])
		checkExecs(t, b, "/reset/requests", "order 1", "4")
		if rs[3].Status != 200 {
			t.Errorf("chunked PUT: %d %q, want 200", rs[3].Status, rs[3].Body)
		}
		whole := strings.Join(chunks, "")
		for _, r := range checkExecs(t, b, "/503-then-ok/1/requests-chunked", whole, "2", "1") {
			if len(r.te) != 0 || r.length != int64(len(whole)) {
				t.Errorf("chunked PUT reached the backend with Transfer-Encoding %q, Content-Length %d; want none, %d", r.te, r.length, len(whole))
			}
		}
		if rs[4].Status != 200 || rs[4].Body != "ok /last" {
			t.Errorf("GET /last: %d %q", rs[4].Status, rs[4].Body)
		}
		// Five requests, one connection to the proxy: the proxy kept it
		// alive through the retries and the 502.
		if conns != 1 {
			t.Errorf("urllib3 opened %d connections to the proxy for 5 requests, want 1", conns)
		}
	})

	t.Run("urllib3 retries multiply", func(t *testing.T) {
		// requests' default (Retry(0, read=False)): one request, the
		// proxy's 3 attempts.
		rs, _ := requestsPlan(t, addr, nil, pyHTTPReq{Method: "GET", URL: "http://backend/503/requests-default"})
		if rs[0].Status != 503 || rs[0].header("Retrycap-Exhausted") != "attempts" {
			t.Errorf("GET: %d Retrycap-Exhausted %q, want 503 attempts", rs[0].Status, rs[0].header("Retrycap-Exhausted"))
		}
		checkExecs(t, b, "/503/requests-default", "", "2", "1", "1")
		// An app that mounts Retry(total=2, status_forcelist=[503]) sends 3
		// requests, each of which the proxy tries 3 times: 9 at the backend.
		rs, _ = requestsPlan(t, addr, map[string]any{"total": 2, "status_forcelist": []int{503}},
			pyHTTPReq{Method: "GET", URL: "http://backend/503/requests-retry"})
		if rs[0].Status != 503 {
			t.Errorf("GET with urllib3 retries: %d, want 503", rs[0].Status)
		}
		checkExecs(t, b, "/503/requests-retry", "", "2", "1", "1", "2", "1", "1", "2", "1", "1")
	})
}

// rawCodec hands a gRPC server the message bytes as they came (the Python
// client sends raw bytes: no stubs, no protobuf).
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return v.([]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// pyGRPCCall is one call a pyGRPC server received.
type pyGRPCCall struct {
	method   string
	req      string
	budget   string        // metadata retrycap-budget
	previous string        // metadata grpc-previous-rpc-attempts
	left     time.Duration // time to the call's deadline on arrival; -1: none
}

// pyGRPC is a grpc-go server whose method name says what each call gets:
//
//	Unavailable  UNAVAILABLE "down"
//	Flaky        UNAVAILABLE to the first 2 calls, then "echo:" + the request
//	Denied       PERMISSION_DENIED "no"
//	Slow         UNAVAILABLE "slow" after 800 ms (or its deadline)
//	Silent       nothing until the call ends
type pyGRPC struct {
	mu    sync.Mutex
	calls map[string][]pyGRPCCall
}

func startPyGRPC(t *testing.T) (*pyGRPC, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &pyGRPC{calls: map[string][]pyGRPCCall{}}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(s.handle))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return s, ln.Addr().String()
}

func (s *pyGRPC) handle(_ any, st grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(st)
	var req []byte
	if err := st.RecvMsg(&req); err != nil {
		return err
	}
	ctx := st.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	c := pyGRPCCall{method: method, req: string(req), left: -1}
	if v := md.Get("retrycap-budget"); len(v) > 0 {
		c.budget = strings.Join(v, ",")
	}
	if v := md.Get("grpc-previous-rpc-attempts"); len(v) > 0 {
		c.previous = strings.Join(v, ",")
	}
	if dl, ok := ctx.Deadline(); ok {
		c.left = time.Until(dl)
	}
	s.mu.Lock()
	s.calls[method] = append(s.calls[method], c)
	n := len(s.calls[method])
	s.mu.Unlock()
	switch method[strings.LastIndexByte(method, '/')+1:] {
	case "Unavailable":
		return grpcstatus.Error(codes.Unavailable, "down")
	case "Flaky":
		if n <= 2 {
			return grpcstatus.Error(codes.Unavailable, "down")
		}
		return st.SendMsg(append([]byte("echo:"), req...))
	case "Denied":
		return grpcstatus.Error(codes.PermissionDenied, "no")
	case "Slow":
		select {
		case <-time.After(800 * time.Millisecond): // the upstream's latency under test, not a synchronisation
		case <-ctx.Done():
		}
		return grpcstatus.Error(codes.Unavailable, "slow")
	case "Silent":
		<-ctx.Done()
		return grpcstatus.FromContextError(ctx.Err()).Err()
	}
	return grpcstatus.Error(codes.Unimplemented, method)
}

func (s *pyGRPC) received(method string) []pyGRPCCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pyGRPCCall(nil), s.calls[method]...)
}

// pyGRPCCallPlan is one call of a grpc_client.py plan.
type pyGRPCCallPlan struct {
	Method   string      `json:"method"`
	Request  string      `json:"request"`
	Timeout  *float64    `json:"timeout"`
	Metadata [][2]string `json:"metadata,omitempty"`
}

// pyGRPCResult is what the Python client got for one call.
type pyGRPCResult struct {
	Code     string      `json:"code"`
	Details  string      `json:"details"`
	Response *string     `json:"response"`
	Trailing [][2]string `json:"trailing"`
	Elapsed  float64     `json:"elapsed"`
}

func (r pyGRPCResult) trailer(name string) string {
	for _, kv := range r.Trailing {
		if kv[0] == name {
			return kv[1]
		}
	}
	return ""
}

// grpcPlan runs grpcio's calls to order:50051 with proxyEnv (grpc_proxy or
// http_proxy naming the proxy).
func grpcPlan(t *testing.T, proxyEnv string, calls ...pyGRPCCallPlan) []pyGRPCResult {
	t.Helper()
	var out struct {
		Results []pyGRPCResult
		Version string
	}
	runPy(t, "grpc_client.py", []string{proxyEnv}, map[string]any{"target": "order:50051", "calls": calls}, &out)
	if len(out.Results) != len(calls) {
		t.Fatalf("grpcio: %d results for %d calls: %+v", len(out.Results), len(calls), out.Results)
	}
	t.Logf("grpcio %s", out.Version)
	return out.Results
}

func secs(s float64) *float64 { return &s }

// TestPyGRPC: grpcio (C-core) with grpc_proxy or http_proxy sends CONNECT
// order:50051 to the proxy, then h2c. The proxy must see the HTTP/2 preface
// and relay the calls with the policy (not tunnel them blind): attempts,
// the chain budget, the deadline, the retryable codes.
func TestPyGRPC(t *testing.T) {
	s, addr := startPyGRPC(t)
	p := startProxy(t, "--upstreams", "order=3", "--resolve", "order="+addr, "--chain-cap", "4")
	for i, env := range []string{"grpc_proxy=http://" + p.Addr(), "http_proxy=http://" + p.Addr()} {
		t.Run(env[:strings.IndexByte(env, '=')], func(t *testing.T) {
			sfx := fmt.Sprint(i)
			rs := grpcPlan(t, env,
				pyGRPCCallPlan{Method: "/py.Test" + sfx + "/Flaky", Request: "ping"},
				pyGRPCCallPlan{Method: "/py.Test" + sfx + "/Unavailable", Request: "ping"},
				pyGRPCCallPlan{Method: "/py.Test" + sfx + "/Denied", Request: "ping"})
			// UNAVAILABLE twice, then the answer: 3 attempts, budgets 2, 1, 1.
			if rs[0].Code != "OK" || rs[0].Response == nil || *rs[0].Response != "echo:ping" {
				t.Errorf("Flaky: %+v, want OK echo:ping", rs[0])
			}
			checkCalls(t, s, "/py.Test"+sfx+"/Flaky", "ping", "2,1,1", ",1,2")
			// Always UNAVAILABLE: given up after 3, the upstream's status marked.
			if rs[1].Code != "UNAVAILABLE" || rs[1].Details != "down" || rs[1].trailer("retrycap-exhausted") != "attempts" {
				t.Errorf("Unavailable: %+v, want UNAVAILABLE down with retrycap-exhausted attempts", rs[1])
			}
			checkCalls(t, s, "/py.Test"+sfx+"/Unavailable", "ping", "2,1,1", ",1,2")
			// Not a retryable code: once.
			if rs[2].Code != "PERMISSION_DENIED" || rs[2].Details != "no" || rs[2].trailer("retrycap-exhausted") != "" {
				t.Errorf("Denied: %+v, want PERMISSION_DENIED no, not marked", rs[2])
			}
			checkCalls(t, s, "/py.Test"+sfx+"/Denied", "ping", "2", "")
		})
	}
	// Both clients' CONNECTs were terminated as h2c (one connection each),
	// none tunnelled blind.
	if got := counterValue(t, p, "retrycap_proxy_h2_connections_total", map[string]string{"kind": "connect"}); got != 2 {
		t.Errorf("h2 connections{connect} = %v, want 2", got)
	}
	if got := counterValue(t, p, "retrycap_proxy_h2_attempts_total", map[string]string{"upstream": "order", "protocol": "grpc"}); got != 14 {
		t.Errorf("h2 attempts{order,grpc} = %v, want 14 (3 + 3 + 1 per client)", got)
	}
}

// checkCalls fails unless the server got method exactly as many times as
// budgets lists (comma-separated retrycap-budget values, one per call),
// each with req, and with the grpc-previous-rpc-attempts values given.
func checkCalls(t *testing.T, s *pyGRPC, method, req, budgets, previous string) []pyGRPCCall {
	t.Helper()
	got := s.received(method)
	var b, prev []string
	for _, c := range got {
		b = append(b, c.budget)
		prev = append(prev, c.previous)
		if c.req != req {
			t.Errorf("%s: the server got %q, want %q", method, c.req, req)
		}
	}
	if strings.Join(b, ",") != budgets || strings.Join(prev, ",") != previous {
		t.Fatalf("%s: %d calls with budgets %q and previous attempts %q, want budgets %q and previous %q",
			method, len(got), b, prev, budgets, previous)
	}
	return got
}

// TestPyGRPCDeadline: grpcio's timeout is sent as grpc-timeout; the proxy
// bounds each attempt by what is left and starts a retry only with half a
// try's timeout left.
func TestPyGRPCDeadline(t *testing.T) {
	s, addr := startPyGRPC(t)
	// A try to order is bounded by 1.2 s: a retry needs 600 ms left. The
	// durations leave 600 ms for the proxy's and the machine's own delays
	// before the retry would not start (with 400 ms tries and a 1 s call they
	// left 300 ms, and a loaded machine took them now and then).
	p := startProxy(t, "--upstreams", "order=3/1200ms", "--resolve", "order="+addr, "--chain-cap", "4")
	env := "grpc_proxy=http://" + p.Addr()
	rs := grpcPlan(t, env,
		// 2 s: an 800 ms UNAVAILABLE, a retry (about 1.2 s left), a second
		// 800 ms UNAVAILABLE, then about 400 ms left: no third attempt.
		pyGRPCCallPlan{Method: "/py.Test/Slow", Request: "slow", Timeout: secs(2)},
		// 500 ms and a silent upstream: one attempt, cut by the deadline.
		pyGRPCCallPlan{Method: "/py.Test/Silent", Request: "silent", Timeout: secs(0.5)})
	if rs[0].Code != "UNAVAILABLE" || rs[0].Details != "slow" || rs[0].trailer("retrycap-exhausted") != "deadline" {
		t.Errorf("Slow: %+v, want UNAVAILABLE slow with retrycap-exhausted deadline", rs[0])
	}
	calls := checkCalls(t, s, "/py.Test/Slow", "slow", "2,1", ",1")
	// The deadline reached the server, lower at each attempt; it came
	// from the client (2 s), not from the per-try timeout (1.2 s) alone.
	// C-core's grpc-timeout may exceed the timeout a little: it counts in
	// whole milliseconds of its clock, and from 1 s to 10 s encodes in tens
	// of ms, rounding up (Timeout::FromMillis): 2 s can go as "2010m".
	if l := calls[0].left; l <= 1200*time.Millisecond || l > 2*time.Second+11*time.Millisecond {
		t.Errorf("the first attempt arrived with %v left, want (1.2s, 2.011s]", l)
	}
	if l := calls[1].left; l <= 0 || l > calls[0].left-800*time.Millisecond {
		t.Errorf("the retry arrived with %v left, want at most %v (the first's, less its 800 ms)", l, calls[0].left-800*time.Millisecond)
	}
	if rs[1].Code != "DEADLINE_EXCEEDED" || rs[1].Elapsed < 0.5 || rs[1].Elapsed > 0.5+proxytest.Bound.Seconds() {
		t.Errorf("Silent: %+v, want DEADLINE_EXCEEDED after 0.5 s", rs[1])
	}
	calls = checkCalls(t, s, "/py.Test/Silent", "silent", "2", "")
	// Below 1 s C-core sends whole ms: 0.5 s goes as "500m" or "501m".
	if l := calls[0].left; l <= 0 || l > 501*time.Millisecond {
		t.Errorf("the silent call arrived with %v left, want (0, 501ms]", l)
	}
	// The silent call's one attempt is judged (the client's own deadline and
	// the proxy's end it alike); nothing more is sent.
	proxytest.Eventually(t, "the silent call's attempt judged", func() bool {
		return counterValue(t, p, "retrycap_proxy_h2_attempts_total", map[string]string{"upstream": "order"}) == 3
	})
	if n := len(s.received("/py.Test/Silent")); n != 1 {
		t.Errorf("the silent upstream got %d calls, want 1", n)
	}
}

// TestPyEntrypoint: requests through an entry proxy (--entrypoint,
// --max-time-to-answer 3s): the deadline the backend sees, a keyless POST
// given a key that is returned on the failure, and the client's retry
// with it getting what is left of the chain's budget.
func TestPyEntrypoint(t *testing.T) {
	b := newPyBackend(t, pyActs)
	p := pyProxy(t, b, "--entrypoint", "--max-time-to-answer", "3s")
	rs, _ := requestsPlan(t, p.Addr(), nil,
		pyHTTPReq{Method: "GET", URL: "http://backend/plain/entry"},
		pyHTTPReq{Method: "POST", URL: "http://backend/503/entry", Body: strp("order 9")})
	got := checkExecs(t, b, "/plain/entry", "", "2")
	var ms int
	if _, err := fmt.Sscanf(got[0].header.Get("Retrycap-Deadline"), "%d", &ms); err != nil || ms > 3000 || ms < 1000 {
		t.Errorf("the backend got Retrycap-Deadline %q, want at most 3000 ms (the flag) less the time spent", got[0].header.Get("Retrycap-Deadline"))
	}
	// Sent once with a generated key, which makes nothing retryable, 2 of
	// the 4 forwarded: the rest is the client's, for its retry.
	got = checkExecs(t, b, "/503/entry", "order 9", "2")
	key := got[0].header.Get("Idempotency-Key")
	if !regexp.MustCompile(`^retrycap-gen-[0-9a-f]{32}$`).MatchString(key) {
		t.Fatalf("the backend got Idempotency-Key %q, want retrycap-gen- and 32 hex digits", key)
	}
	if rs[1].Status != 503 || rs[1].header("Idempotency-Key") != key {
		t.Fatalf("keyless POST: %d with Idempotency-Key %q, want 503 with %q", rs[1].Status, rs[1].header("Idempotency-Key"), key)
	}
	// The client retries twice with the key it got: the first is sent once
	// with the 2 left; the second finds the budget spent.
	rs, _ = requestsPlan(t, p.Addr(), nil,
		pyHTTPReq{Method: "POST", URL: "http://backend/503/entry", Body: strp("order 9"), Headers: [][2]string{{"Idempotency-Key", key}}},
		pyHTTPReq{Method: "POST", URL: "http://backend/503/entry", Body: strp("order 9"), Headers: [][2]string{{"Idempotency-Key", key}}})
	checkExecs(t, b, "/503/entry", "order 9", "2", "2")
	if rs[0].Status != 503 || rs[0].Body != "down" {
		t.Errorf("the retry with the key: %d %q, want the backend's 503", rs[0].Status, rs[0].Body)
	}
	if rs[1].Status != 503 || rs[1].header("Retrycap-Exhausted") != "chain" {
		t.Errorf("the second retry with the key: %d %q Retrycap-Exhausted %q, want the proxy's 503, chain", rs[1].Status, rs[1].Body,
			rs[1].header("Retrycap-Exhausted"))
	}
}
