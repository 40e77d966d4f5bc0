package proxy

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The proxy driven by curl (Debian's /usr/bin/curl), its users' most common
// client, as they type it: -x or http_proxy, --proxytunnel (CONNECT),
// HTTP/2 with prior knowledge, -d, --data-binary @file, -T file and -T -
// (chunked), bodies large enough for curl's Expect: 100-continue, curl's
// own --retry on top of the proxy's, --max-time against a stalling
// upstream, --http1.0, Connection: close, an emptied Expect and
// --compressed. Each case counts what reached a real loopback backend
// (Go's net/http server, HTTP/1.1 and h2c) and reads what curl printed.

// curlBin is Debian's curl; a test that needs it fails when it is missing
// (the CI image installs it), so that the promise is never left unchecked.
const curlBin = "/usr/bin/curl"

func curlPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(curlBin); err != nil {
		t.Fatalf("Debian's curl is needed (apt-get install curl): %v", err)
	}
	return curlBin
}

// curlReq is one execution at the backend.
type curlReq struct {
	method, path, proto string
	header              http.Header
	te                  []string
	length              int64
	close               bool
	body                []byte
	start               time.Time
}

// curlBackend serves HTTP/1.1 and h2c (prior knowledge, as the h2 relay
// dials) on loopback. The path's first segment says what happens to each
// execution (the rest names the case, so each case counts its own):
//
//	/503/...             always 503 "down"
//	/503-then-ok/K/...   503 to the first K executions, then 200
//	/reset/...           read the whole body, then reset (HTTP/1.1: RST;
//	                     HTTP/2: RST_STREAM)
//	/reset-then-ok/K/... the same for the first K executions, then 200
//	/stall/...           never answer: wait until the proxy ends the request
//	/503-then-stall/K/...  503 to the first K executions, then stall
//	/503-retry-after/K/... 503 with Retry-After: K (seconds)
//	/big/K/...           200 with K bytes, streamed (chunked on HTTP/1.1)
//	/gz/...              200 with "ok PATH" gzip-encoded (Content-Encoding)
//	anything else        200 "ok PATH"
type curlBackend struct {
	ln    net.Listener
	mu    sync.Mutex
	reqs  []curlReq
	execs map[string]int
	ended atomic.Int64 // stalled executions the proxy ended
}

func newCurlBackend(t *testing.T) *curlBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &curlBackend{ln: ln, execs: map[string]int{}}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: http.HandlerFunc(b.serve), Protocols: &protos, ReadHeaderTimeout: proxytest.Bound,
		ErrorLog: nil}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

func (b *curlBackend) addr() string { return b.ln.Addr().String() }

func (b *curlBackend) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return // not whole: no execution
	}
	b.mu.Lock()
	b.execs[r.URL.Path]++
	n := b.execs[r.URL.Path]
	b.reqs = append(b.reqs, curlReq{r.Method, r.URL.Path, r.Proto, r.Header.Clone(), r.TransferEncoding, r.ContentLength, r.Close, body, start})
	b.mu.Unlock()
	seg := strings.Split(r.URL.Path, "/")
	k := 0
	if len(seg) > 2 {
		k, _ = strconv.Atoi(seg[2])
	}
	switch seg[1] {
	case "503":
		w.WriteHeader(503)
		_, _ = io.WriteString(w, "down")
		return
	case "503-retry-after":
		// 503 with Retry-After: K seconds (the proxy waits that long).
		w.Header().Set("Retry-After", strconv.Itoa(k))
		w.WriteHeader(503)
		_, _ = io.WriteString(w, "down")
		return
	case "503-then-stall":
		if n <= k {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "down")
			return
		}
		select {
		case <-r.Context().Done():
			b.ended.Add(1)
		case <-time.After(proxytest.Bound):
		}
		return
	case "503-then-ok":
		if n <= k {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, "down")
			return
		}
	case "reset":
		b.reset(w, r)
		return
	case "reset-then-ok":
		if n <= k {
			b.reset(w, r)
			return
		}
	case "stall":
		select {
		case <-r.Context().Done():
			b.ended.Add(1)
		case <-time.After(proxytest.Bound):
		}
		return
	case "big":
		// k bytes of a pattern, streamed (chunked on HTTP/1.1: no length).
		data := proxytest.Pattern(k)
		for len(data) > 0 {
			n := min(len(data), 16384)
			_, _ = w.Write(data[:n])
			http.NewResponseController(w).Flush()
			data = data[n:]
		}
		return
	case "gz":
		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		_, _ = io.WriteString(zw, "ok "+r.URL.Path)
		_ = zw.Close()
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", strconv.Itoa(zb.Len()))
		_, _ = w.Write(zb.Bytes())
		return
	}
	_, _ = io.WriteString(w, "ok "+r.URL.Path)
}

// reset ends the request without an answer after its body was read: an
// RST on HTTP/1.1, RST_STREAM on HTTP/2.
func (b *curlBackend) reset(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// received is every execution of path, in the order they arrived.
func (b *curlBackend) received(path string) []curlReq {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []curlReq
	for _, r := range b.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// checkCurlExecs fails unless path was executed once per budget given,
// each with body and that Retrycap-Budget.
func checkCurlExecs(t *testing.T, b *curlBackend, path string, body []byte, budgets ...string) []curlReq {
	t.Helper()
	got := b.received(path)
	var gotBudgets []string
	for _, r := range got {
		gotBudgets = append(gotBudgets, r.header.Get("Retrycap-Budget"))
		if !bytes.Equal(r.body, body) {
			t.Errorf("%s: the backend read a body of %d bytes (%.40q), want %d (%.40q)", path, len(r.body), r.body, len(body), body)
		}
	}
	if strings.Join(gotBudgets, ",") != strings.Join(budgets, ",") {
		t.Fatalf("%s executed %d times with budgets %q, want %d with %q", path, len(got), gotBudgets, len(budgets), budgets)
	}
	return got
}

// curlOut is what curl printed with -i: every head (interim ones, a
// CONNECT's answer, the final one) and the body.
type curlOut struct {
	heads  []string // each head's status line
	status int
	proto  string // the final status line's version: HTTP/1.1, HTTP/2
	header http.Header
	body   []byte
	exit   int
	stderr string
}

// runCurl runs curl -q -sS -i with a bound of 20 s (a later --max-time
// overrides it) and only the *_proxy variables given. The process is
// killed by its PID when the test's bound passes (exec.CommandContext).
func runCurl(t *testing.T, env []string, stdin []byte, args ...string) curlOut {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curlPath(t), append([]string{"-q", "-sS", "-i", "--max-time", "20"}, args...)...)
	cmd.WaitDelay = 5 * time.Second
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasSuffix(strings.ToLower(name), "_proxy") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := curlOut{stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		out.exit = ee.ExitCode()
	case err != nil:
		t.Fatalf("curl %q: %v", args, err)
	}
	rest := stdout.Bytes()
	for len(rest) > 0 {
		i := bytes.Index(rest, []byte("\r\n\r\n"))
		if i < 0 {
			break
		}
		head := string(rest[:i+4])
		line, _, _ := strings.Cut(head, "\r\n")
		proto, code, _ := strings.Cut(line, " ")
		code, _, _ = strings.Cut(code, " ")
		st, err := strconv.Atoi(code)
		if err != nil || !strings.HasPrefix(proto, "HTTP/") {
			break
		}
		out.heads = append(out.heads, line)
		rest = rest[i+4:]
		hdr, _ := textproto.NewReader(bufio.NewReader(strings.NewReader(head[len(line)+2:]))).ReadMIMEHeader()
		out.status, out.proto, out.header = st, proto, http.Header(hdr)
		// A 1xx, the answer to curl's CONNECT, or (-D - -o /dev/null with
		// --retry) the answer to an earlier try: another head follows.
		if !bytes.HasPrefix(rest, []byte("HTTP/")) {
			break
		}
	}
	out.body = rest
	return out
}

func (o curlOut) String() string {
	return fmt.Sprintf("exit %d, heads %q, %d %v, body %q, stderr %q", o.exit, o.heads, o.status, o.header, o.body, o.stderr)
}

// expect fails unless curl exited 0 with status and body.
func (o curlOut) expect(t *testing.T, what string, status int, body string) {
	t.Helper()
	if o.exit != 0 || o.status != status || string(o.body) != body {
		t.Errorf("%s: %s; want exit 0, %d %q", what, o, status, body)
	}
}

// expect502 fails unless curl got the proxy's 502 for a request it would
// not send twice.
func (o curlOut) expect502(t *testing.T, what string) {
	t.Helper()
	if o.exit != 0 || o.status != 502 || !strings.HasPrefix(string(o.body), notRetried502Prefix) || !strings.HasSuffix(string(o.body), notRetried502Suffix) {
		t.Errorf("%s: %s; want 502 %q...%q", what, o, notRetried502Prefix, notRetried502Suffix)
	}
	if got := o.header.Get("Retrycap-Exhausted"); got != "" {
		t.Errorf("%s: Retrycap-Exhausted %q on a request never retried, want none", what, got)
	}
}

// curlProxy is the sidecar of an app calling "backend": 3 attempts, a
// chain cap of 4 (budgets 2, 1, 1), the default retry conditions.
func curlProxy(t *testing.T, engine string, b *curlBackend, extra ...string) *Proxy {
	return startProxyOn(t, engine, append([]string{"--upstreams", "backend=3", "--resolve", "backend=" + b.addr(), "--chain-cap", "4"}, extra...)...)
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "body")
	if err := os.WriteFile(f, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCurlHTTP11 is the HTTP/1.1 matrix, on both engines.
func TestCurlHTTP11(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) { curlHTTP11(t, engine) })
	}
}

func curlHTTP11(t *testing.T, engine string) {
	fresh := func(t *testing.T, extra ...string) (*curlBackend, string) {
		b := newCurlBackend(t)
		return b, curlProxy(t, engine, b, extra...).Addr()
	}
	// How users point curl at the proxy: -x, http_proxy, -x with CONNECT.
	ways := []struct {
		name string
		env  func(addr string) []string
		args func(addr string) []string
	}{
		{"-x", func(string) []string { return nil }, func(a string) []string { return []string{"-x", "http://" + a} }},
		{"http_proxy", func(a string) []string { return []string{"http_proxy=http://" + a} }, func(string) []string { return nil }},
		{"proxytunnel", func(string) []string { return nil }, func(a string) []string { return []string{"-p", "-x", "http://" + a} }},
	}
	for _, w := range ways {
		t.Run(w.name+"/GET retried on 503", func(t *testing.T) {
			b, addr := fresh(t)
			o := runCurl(t, w.env(addr), nil, append(w.args(addr), "http://backend/503-then-ok/2/get")...)
			o.expect(t, "GET /503-then-ok/2/get", 200, "ok /503-then-ok/2/get")
			if w.name == "proxytunnel" && (len(o.heads) != 2 || o.heads[0] != "HTTP/1.1 200 Connection established") {
				t.Errorf("heads %q, want the CONNECT's 200 Connection established, then the answer", o.heads)
			}
			if got := o.header.Get("Retrycap-Exhausted"); got != "" {
				t.Errorf("Retrycap-Exhausted %q on a 200", got)
			}
			checkCurlExecs(t, b, "/503-then-ok/2/get", nil, "2", "1", "1")

			o = runCurl(t, w.env(addr), nil, append(w.args(addr), "-D", "-", "-o", "/dev/null", "http://backend/503/get")...)
			o.expect(t, "GET /503/get", 503, "")
			if got := o.header.Get("Retrycap-Exhausted"); got != "attempts" {
				t.Errorf("GET /503/get: Retrycap-Exhausted %q, want attempts", got)
			}
			checkCurlExecs(t, b, "/503/get", nil, "2", "1", "1")
		})
		t.Run(w.name+"/keyless POST reset: once, 502", func(t *testing.T) {
			b, addr := fresh(t)
			o := runCurl(t, w.env(addr), nil, append(w.args(addr), "-d", "order=1", "http://backend/reset/post")...)
			o.expect502(t, "curl -d")
			for _, r := range checkCurlExecs(t, b, "/reset/post", []byte("order=1"), "4") {
				if ct := r.header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
					t.Errorf("Content-Type %q", ct)
				}
			}
		})
		t.Run(w.name+"/keyed POST reset: retried", func(t *testing.T) {
			b, addr := fresh(t)
			data := []byte("binary\x00body\r\nline 2\n")
			f := writeFile(t, data)
			o := runCurl(t, w.env(addr), nil, append(w.args(addr), "--data-binary", "@"+f, "-H", "Idempotency-Key: k1", "http://backend/reset-then-ok/2/key")...)
			o.expect(t, "keyed POST", 200, "ok /reset-then-ok/2/key")
			for _, r := range checkCurlExecs(t, b, "/reset-then-ok/2/key", data, "2", "1", "1") {
				if k := r.header.Get("Idempotency-Key"); k != "k1" {
					t.Errorf("Idempotency-Key %q, want k1", k)
				}
			}
			o = runCurl(t, w.env(addr), nil, append(w.args(addr), "--data-binary", "@"+f, "-H", "Idempotency-Key: k2", "http://backend/reset/key")...)
			if o.exit != 0 || o.status != 503 || o.header.Get("Retrycap-Exhausted") != "attempts" {
				t.Errorf("keyed POST always reset: %s; want 503 Retrycap-Exhausted: attempts", o)
			}
			checkCurlExecs(t, b, "/reset/key", data, "2", "1", "1")
		})
	}

	big := proxytest.Pattern(1<<20 + 12345) // over 1 MiB: curl sends Expect: 100-continue
	t.Run("large POST keyless and keyed", func(t *testing.T) {
		b, addr := fresh(t)
		f := writeFile(t, big)
		o := runCurl(t, nil, nil, "-x", "http://"+addr, "--data-binary", "@"+f, "http://backend/reset/big")
		o.expect502(t, "large keyless POST")
		if len(o.heads) != 2 || o.heads[0] != "HTTP/1.1 100 Continue" {
			t.Errorf("large keyless POST: heads %q, want a 100 Continue first", o.heads)
		}
		checkCurlExecs(t, b, "/reset/big", big, "4")
		// Keyed but over --max-replay-bytes (64 KiB): not replayable, once.
		o = runCurl(t, nil, nil, "-x", "http://"+addr, "--data-binary", "@"+f, "-H", "Idempotency-Key: k1", "http://backend/reset-then-ok/2/big")
		o.expect502(t, "large keyed POST over --max-replay-bytes")
		checkCurlExecs(t, b, "/reset-then-ok/2/big", big, "4")
		// Without Expect: the same.
		o = runCurl(t, nil, nil, "-x", "http://"+addr, "--data-binary", "@"+f, "-H", "Expect:", "http://backend/reset/noexpect")
		o.expect502(t, "large keyless POST, Expect emptied")
		if len(o.heads) != 1 {
			t.Errorf("Expect emptied: heads %q, want the answer only", o.heads)
		}
		checkCurlExecs(t, b, "/reset/noexpect", big, "4")
	})
	t.Run("large keyed POST within --max-replay-bytes", func(t *testing.T) {
		b, addr := fresh(t, "--max-replay-bytes", "2097152")
		f := writeFile(t, big)
		o := runCurl(t, nil, nil, "-x", "http://"+addr, "--data-binary", "@"+f, "-H", "Idempotency-Key: k1", "http://backend/reset-then-ok/2/big")
		o.expect(t, "large keyed POST", 200, "ok /reset-then-ok/2/big")
		checkCurlExecs(t, b, "/reset-then-ok/2/big", big, "2", "1", "1")
		o = runCurl(t, nil, nil, "-x", "http://"+addr, "--data-binary", "@"+f, "-H", "Idempotency-Key: k2", "-H", "Expect:", "http://backend/reset-then-ok/2/noexpect")
		o.expect(t, "large keyed POST, Expect emptied", 200, "ok /reset-then-ok/2/noexpect")
		checkCurlExecs(t, b, "/reset-then-ok/2/noexpect", big, "2", "1", "1")
		o = runCurl(t, nil, nil, "-x", "http://"+addr, "--data-binary", "@"+f, "http://backend/reset/big")
		o.expect502(t, "large keyless POST within --max-replay-bytes")
		checkCurlExecs(t, b, "/reset/big", big, "4")
	})
	t.Run("upload -T file and -T - (chunked)", func(t *testing.T) {
		b, addr := fresh(t)
		// -T file is a PUT with its length (and, from 1 MiB, Expect):
		// replayed within --max-replay-bytes (64 KiB), once above it.
		data := proxytest.Pattern(60000)
		o := runCurl(t, nil, nil, "-x", "http://"+addr, "-T", writeFile(t, data), "http://backend/503-then-ok/1/put")
		o.expect(t, "-T file", 200, "ok /503-then-ok/1/put")
		checkCurlExecs(t, b, "/503-then-ok/1/put", data, "2", "1")
		over := proxytest.Pattern(70000)
		o = runCurl(t, nil, nil, "-x", "http://"+addr, "-T", writeFile(t, over), "http://backend/503-then-ok/1/putover")
		o.expect(t, "-T file over --max-replay-bytes", 503, "down")
		if got := o.header.Get("Retrycap-Exhausted"); got != "" {
			t.Errorf("-T file over --max-replay-bytes: Retrycap-Exhausted %q, want none (never retried)", got)
		}
		checkCurlExecs(t, b, "/503-then-ok/1/putover", over, "4")
		small := []byte("from stdin\n")
		o = runCurl(t, nil, small, "-x", "http://"+addr, "-T", "-", "http://backend/reset-then-ok/1/stdin")
		o.expect(t, "-T -", 200, "ok /reset-then-ok/1/stdin")
		for _, r := range checkCurlExecs(t, b, "/reset-then-ok/1/stdin", small, "2", "1") {
			if r.method != "PUT" || len(r.te) != 0 || r.length != int64(len(small)) {
				t.Errorf("-T -: %s with Transfer-Encoding %q, Content-Length %d; want PUT framed by its length %d", r.method, r.te, r.length, len(small))
			}
		}
		o = runCurl(t, nil, small, "-x", "http://"+addr, "-X", "POST", "-T", "-", "http://backend/reset/stdin")
		o.expect502(t, "-X POST -T -")
		checkCurlExecs(t, b, "/reset/stdin", small, "4")
		// A chunked body over the replay bound, keyed: once.
		o = runCurl(t, nil, big, "-x", "http://"+addr, "-H", "Idempotency-Key: k9", "-X", "POST", "-T", "-", "http://backend/reset-then-ok/1/bigstdin")
		o.expect502(t, "-T - over --max-replay-bytes")
		checkCurlExecs(t, b, "/reset-then-ok/1/bigstdin", big, "4")
	})
	t.Run("--http1.0, Connection: close, --compressed", func(t *testing.T) {
		b, addr := fresh(t)
		o := runCurl(t, nil, nil, "-x", "http://"+addr, "--http1.0", "http://backend/503-then-ok/1/h10")
		o.expect(t, "--http1.0", 200, "ok /503-then-ok/1/h10")
		if o.proto != "HTTP/1.1" || o.header.Get("Transfer-Encoding") != "" {
			t.Errorf("--http1.0: %s; want the proxy's HTTP/1.1 status line, not chunked", o)
		}
		checkCurlExecs(t, b, "/503-then-ok/1/h10", nil, "2", "1")
		o = runCurl(t, nil, nil, "-x", "http://"+addr, "--http1.0", "-d", "x=1", "http://backend/reset/h10")
		o.expect502(t, "--http1.0 -d")
		checkCurlExecs(t, b, "/reset/h10", []byte("x=1"), "4")

		o = runCurl(t, nil, nil, "-x", "http://"+addr, "-H", "Connection: close", "http://backend/503-then-ok/1/close")
		o.expect(t, "Connection: close", 200, "ok /503-then-ok/1/close")
		if got := o.header.Get("Connection"); got != "close" {
			t.Errorf("Connection: close: the answer's Connection %q, want close", got)
		}
		for _, r := range checkCurlExecs(t, b, "/503-then-ok/1/close", nil, "2", "1") {
			if r.close || r.header.Get("Connection") != "" {
				t.Errorf("the client's Connection: close went upstream (%q)", r.header.Get("Connection"))
			}
		}

		o = runCurl(t, nil, nil, "-x", "http://"+addr, "--compressed", "http://backend/gz/c")
		o.expect(t, "--compressed", 200, "ok /gz/c")
		if got := o.header.Get("Content-Encoding"); got != "gzip" {
			t.Errorf("--compressed: Content-Encoding %q, want gzip", got)
		}
		for _, r := range checkCurlExecs(t, b, "/gz/c", nil, "2") {
			if ae := r.header.Get("Accept-Encoding"); !strings.Contains(ae, "gzip") {
				t.Errorf("--compressed: Accept-Encoding %q went upstream", ae)
			}
		}
	})
}

// TestCurlRetryOnTop: curl's own --retry 3 above the proxy's 3 attempts.
// Each of curl's tries is a new request to the proxy: without a key the
// chain budget cannot tie them together (4 x 3 executions of a GET, 4 of a
// keyless POST), with a key at an entrypoint the key's ledger caps them.
func TestCurlRetryOnTop(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // curl's retry delays are seconds of waiting
			b := newCurlBackend(t)
			p := curlProxy(t, engine, b, "--entrypoint")
			// -o a file: curl truncates it before each try (it cannot
			// truncate /dev/null), -D - prints every try's head.
			body := filepath.Join(t.TempDir(), "body")
			retry := []string{"-x", "http://" + p.Addr(), "--retry", "3", "--retry-delay", "1", "-o", body, "-D", "-"}
			tries := func(o curlOut, want string) {
				t.Helper()
				if len(o.heads) != 4 || o.status != 503 || o.header.Get("Retrycap-Exhausted") != want || o.exit != 0 {
					t.Errorf("curl --retry 3: %s; want 4 answers 503, the last Retrycap-Exhausted %q", o, want)
				}
			}
			o := runCurl(t, nil, nil, append(retry, "http://backend/503/get")...)
			tries(o, "attempts")
			checkCurlExecs(t, b, "/503/get", nil, "2", "1", "1", "2", "1", "1", "2", "1", "1", "2", "1", "1")

			o = runCurl(t, nil, nil, append(retry, "-H", "Idempotency-Key: k1", "http://backend/503/key")...)
			tries(o, "chain")
			checkCurlExecs(t, b, "/503/key", nil, "2", "1", "1")

			o = runCurl(t, nil, nil, append(retry, "-d", "x=1", "http://backend/503/post")...)
			tries(o, "")
			// At an entrypoint a keyless POST gets a generated key and forwards 2
			// of its budget of 4, keeping 2 for a retry with that key; curl
			// does not send the key back, so each try is a new request.
			checkCurlExecs(t, b, "/503/post", []byte("x=1"), "2", "2", "2", "2")
		})
	}
}

// TestCurlMaxTime: curl --max-time 1 against an upstream that answers the
// first execution 503 at once and stalls every later one, the deadline set
// by the entry proxy (--max-time-to-answer 10s), per-try timeout 1.5 s. A
// GET (or a keyed POST) is retried at once; curl gives up at 1 s (it closes
// its connection: a FIN) while the second attempt stalls; that attempt,
// failed at 1.5 s, is the client's cancellation: no third attempt starts
// after curl's exit. A keyless POST is never retried: curl gets the 503.
// (The margins, 0.5 s either side of curl's exit, hold on a loaded CI.)
func TestCurlMaxTime(t *testing.T) {
	curlPath(t)
	ways := []struct {
		name  string
		args  []string
		execs int // 2: curl gives up during the second attempt
	}{
		{"-x", []string{"-x", "http://ADDR"}, 2},
		{"proxytunnel", []string{"-p", "-x", "http://ADDR"}, 2},
		{"tunnel keyed POST", []string{"-p", "-x", "http://ADDR", "-d", "x=1", "-H", "Idempotency-Key: k1"}, 2},
		{"keyless POST", []string{"-x", "http://ADDR", "-d", "x=1"}, 1},
		{"tunnel keyless POST", []string{"-p", "-x", "http://ADDR", "-d", "x=1"}, 1},
		{"h2 keyless POST", []string{"--http2-prior-knowledge", "--connect-to", "backend:80:ADDR", "-d", "x=1"}, 1},
		// The h2 relay probes a client's FIN (a PING: curl's closed
		// socket answers RST) and judges the attempt that fails after it
		// the client's cancellation (before: a half-close, and curl's GET
		// got a third attempt after curl had gone).
		{"h2 connect-to", []string{"--http2-prior-knowledge", "--connect-to", "backend:80:ADDR"}, 2},
		{"h2 proxytunnel", []string{"--http2-prior-knowledge", "-p", "-x", "http://ADDR"}, 2},
	}
	const path = "/503-then-stall/1/x"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // seconds of waiting each
			for _, w := range ways {
				t.Run(w.name, func(t *testing.T) {
					b := newCurlBackend(t)
					log := filepath.Join(t.TempDir(), "access.log")
					p := curlProxy(t, engine, b, "--entrypoint", "--max-time-to-answer", "10s", "--per-try-timeout", "1500ms",
						"--retry-on", "timeout,503", "--access-log", log)
					var args []string
					for _, a := range w.args {
						args = append(args, strings.ReplaceAll(a, "ADDR", p.Addr()))
					}
					o := runCurl(t, nil, nil, append(args, "--max-time", "1", "http://backend"+path)...)
					exited := time.Now()
					cancelled, ended := 1, int64(1)
					if w.execs == 1 {
						// Not retried: the upstream's 503, before curl gave up.
						cancelled, ended = 0, 0
						o.expect(t, "keyless POST", 503, "down")
					} else if o.exit != 28 || (len(o.heads) != 0 && strings.Join(o.heads, ",") != "HTTP/1.1 200 Connection established") {
						t.Fatalf("curl --max-time 1: %s; want exit 28 (timed out) and no answer", o)
					}
					// The call ends (nothing in flight) and the stalled attempt
					// with it (the proxy closed its upstream connection at its
					// timeout), judged the client's cancellation.
					proxytest.Eventually(t, "the call ended, each execution logged", func() bool {
						n := len(b.received(path))
						lines, _ := os.ReadFile(log)
						return p.m.InFlight.Load() == 0 && b.ended.Load() == int64(n-1) && bytes.Count(lines, []byte(`"attempt":`)) == n
					})
					got := b.received(path)
					lines, _ := os.ReadFile(log)
					if len(got) != w.execs || b.ended.Load() != ended || bytes.Count(lines, []byte(`"attempt":`)) != w.execs ||
						bytes.Count(lines, []byte(`"error":"cancelled"`)) != cancelled {
						t.Fatalf("the backend got %d attempts (%d stalled ended), want %d (%d); the log:\n%s", len(got), b.ended.Load(), w.execs, ended, lines)
					}
					prev := 10000
					for _, r := range got {
						if r.start.After(exited) {
							t.Errorf("an attempt started %v after curl exited", r.start.Sub(exited))
						}
						// Set by the proxy from --max-time-to-answer, rounded
						// down at each attempt: never raised.
						d, err := strconv.Atoi(r.header.Get("Retrycap-Deadline"))
						if err != nil || d > prev-1 || d < 9000 {
							t.Errorf("Retrycap-Deadline %q, want 9000..%d", r.header.Get("Retrycap-Deadline"), prev-1)
						}
						prev = d + 1
					}
				})
			}
		})
	}
}

// TestCurlH2: curl speaking HTTP/2 to the proxy's h2 relay, as users do:
// with prior knowledge on the proxy's listener (--connect-to names it for
// the upstream's host), and inside a CONNECT (--proxytunnel). The relay
// dials the upstream with h2c.
func TestCurlH2(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		for _, way := range []string{"connect-to", "proxytunnel", "-x"} {
			t.Run(engine+"/"+way, func(t *testing.T) {
				b := newCurlBackend(t)
				addr := curlProxy(t, engine, b).Addr()
				args := []string{"--http2-prior-knowledge"}
				proto := "HTTP/2.0"
				switch way {
				case "connect-to":
					args = append(args, "--connect-to", "backend:80:"+addr)
				case "proxytunnel":
					args = append(args, "-p", "-x", "http://"+addr)
				case "-x":
					// curl speaks HTTP/1.1 to an HTTP proxy whatever it is
					// asked: the request is the HTTP/1.1 engine's.
					args = append(args, "-x", "http://"+addr)
					proto = "HTTP/1.1"
				}
				o := runCurl(t, nil, nil, append(args, "http://backend/503-then-ok/2/get")...)
				o.expect(t, "GET", 200, "ok /503-then-ok/2/get")
				for _, r := range checkCurlExecs(t, b, "/503-then-ok/2/get", nil, "2", "1", "1") {
					if r.proto != proto {
						t.Errorf("the backend got %s, want %s", r.proto, proto)
					}
				}
				o = runCurl(t, nil, nil, append(args, "http://backend/503/get")...)
				o.expect(t, "GET always 503", 503, "down")
				if got := o.header.Get("Retrycap-Exhausted"); got != "attempts" {
					t.Errorf("Retrycap-Exhausted %q, want attempts", got)
				}
				checkCurlExecs(t, b, "/503/get", nil, "2", "1", "1")

				o = runCurl(t, nil, nil, append(args, "-d", "order=1", "http://backend/reset/post")...)
				if o.status != 502 || o.exit != 0 {
					t.Errorf("keyless POST reset: %s; want 502", o)
				}
				checkCurlExecs(t, b, "/reset/post", []byte("order=1"), "4")

				data := []byte("keyed\x00body")
				o = runCurl(t, nil, nil, append(args, "--data-binary", "@"+writeFile(t, data), "-H", "Idempotency-Key: k1", "http://backend/reset-then-ok/2/key")...)
				o.expect(t, "keyed POST", 200, "ok /reset-then-ok/2/key")
				checkCurlExecs(t, b, "/reset-then-ok/2/key", data, "2", "1", "1")

				small := []byte("from stdin\n")
				o = runCurl(t, nil, small, append(args, "-T", "-", "http://backend/reset-then-ok/1/stdin")...)
				o.expect(t, "-T -", 200, "ok /reset-then-ok/1/stdin")
				checkCurlExecs(t, b, "/reset-then-ok/1/stdin", small, "2", "1")

				big := proxytest.Pattern(1<<20 + 12345)
				o = runCurl(t, nil, nil, append(args, "--data-binary", "@"+writeFile(t, big), "http://backend/reset/big")...)
				if o.status != 502 || o.exit != 0 {
					t.Errorf("large keyless POST reset: %s; want 502", o)
				}
				checkCurlExecs(t, b, "/reset/big", big, "4")
			})
		}
	}
}

// TestCurlMore: HEAD (-I), other methods, a streamed answer to --http1.0
// and Connection: close, the client's own Retrycap-Deadline, a port in
// the URL.
func TestCurlMore(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		for _, way := range []string{"-x", "h2"} {
			t.Run(engine+"/"+way, func(t *testing.T) {
				b := newCurlBackend(t)
				addr := curlProxy(t, engine, b).Addr()
				args := []string{"-x", "http://" + addr}
				if way == "h2" {
					args = []string{"--http2-prior-knowledge", "--connect-to", "backend::" + addr}
				}
				o := runCurl(t, nil, nil, append(args, "-I", "http://backend/503-then-ok/1/head")...)
				o.expect(t, "-I", 200, "")
				if got := o.header.Get("Content-Length"); got != "22" {
					t.Errorf("-I: Content-Length %q, want 22 (ok /503-then-ok/1/head)", got)
				}
				checkCurlExecs(t, b, "/503-then-ok/1/head", nil, "2", "1")

				o = runCurl(t, nil, nil, append(args, "-X", "DELETE", "http://backend/503-then-ok/2/del")...)
				o.expect(t, "DELETE", 200, "ok /503-then-ok/2/del")
				checkCurlExecs(t, b, "/503-then-ok/2/del", nil, "2", "1", "1")
				o = runCurl(t, nil, nil, append(args, "-X", "PATCH", "-d", "p", "http://backend/reset/patch")...)
				if o.status != 502 || o.exit != 0 {
					t.Errorf("keyless PATCH reset: %s; want 502", o)
				}
				checkCurlExecs(t, b, "/reset/patch", []byte("p"), "4")

				big := proxytest.Pattern(300000)
				for _, extra := range [][]string{nil, {"--http1.0"}, {"-H", "Connection: close"}, {"--compressed"}} {
					if way == "h2" && len(extra) > 0 && extra[0] == "--http1.0" {
						continue
					}
					path := fmt.Sprintf("/big/300000/%d", len(b.reqs))
					o = runCurl(t, nil, nil, append(append(args, extra...), "http://backend"+path)...)
					if o.exit != 0 || o.status != 200 || !bytes.Equal(o.body, big) {
						t.Errorf("%q streamed 300000 bytes: exit %d, %d, %d bytes, %q", extra, o.exit, o.status, len(o.body), o.stderr)
					}
					checkCurlExecs(t, b, path, nil, "2")
				}

				// The client's own deadline: the attempt is cut by it (not
				// the 2 s per-try timeout) and not retried.
				o = runCurl(t, nil, nil, append(args, "-H", "Retrycap-Deadline: 500", "http://backend/stall/d")...)
				if o.exit != 0 || o.status != 504 || o.header.Get("Retrycap-Exhausted") != "deadline" {
					t.Errorf("Retrycap-Deadline: 500: %s; want 504 Retrycap-Exhausted: deadline", o)
				}
				proxytest.Eventually(t, "the stalled attempt ended", func() bool { return b.ended.Load() == 1 })
				for _, r := range checkCurlExecs(t, b, "/stall/d", nil, "2") {
					if d, err := strconv.Atoi(r.header.Get("Retrycap-Deadline")); err != nil || d > 499 || d < 1 {
						t.Errorf("the backend got Retrycap-Deadline %q, want 1..499", r.header.Get("Retrycap-Deadline"))
					}
				}

				o = runCurl(t, nil, nil, append(args, "http://backend:8080/503-then-ok/1/port")...)
				o.expect(t, "a port in the URL", 200, "ok /503-then-ok/1/port")
				checkCurlExecs(t, b, "/503-then-ok/1/port", nil, "2", "1")
			})
		}
	}
}

// TestCurlMaxTimeBackoff: curl --max-time 1 while the proxy waits out an
// upstream's Retry-After: 2 (its deadline, 10 s, has room for it): curl
// leaves during the wait, and the retry after it is never sent.
func TestCurlMaxTimeBackoff(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel() // seconds of waiting each
			for _, way := range []string{"-x", "proxytunnel", "h2"} {
				t.Run(way, func(t *testing.T) {
					b := newCurlBackend(t)
					log := filepath.Join(t.TempDir(), "access.log")
					p := curlProxy(t, engine, b, "--entrypoint", "--max-time-to-answer", "10s", "--access-log", log)
					args := map[string][]string{"-x": {"-x", "http://" + p.Addr()}, "proxytunnel": {"-p", "-x", "http://" + p.Addr()},
						"h2": {"--http2-prior-knowledge", "--connect-to", "backend:80:" + p.Addr()}}[way]
					o := runCurl(t, nil, nil, append(args, "--max-time", "1", "http://backend/503-retry-after/2/x")...)
					exited := time.Now()
					if o.exit != 28 {
						t.Fatalf("curl --max-time 1: %s; want exit 28", o)
					}
					// The call ends (nothing in flight): after its backoff, without
					// a retry for a client that left.
					proxytest.Eventually(t, "the call ended", func() bool { return p.m.InFlight.Load() == 0 })
					got := b.received("/503-retry-after/2/x")
					if len(got) != 1 {
						t.Fatalf("%d executions, want 1: a retry was sent after curl exited (%v after)", len(got), got[len(got)-1].start.Sub(exited))
					}
					lines, _ := os.ReadFile(log)
					if n := bytes.Count(lines, []byte(`"attempt":`)); n != 1 {
						t.Errorf("%d access-log lines, want 1:\n%s", n, lines)
					}
				})
			}
		})
	}
}

// TestHalfClosedDuringBackoffGetsAnswer: a client that shuts down its write
// side during the backoff before a retry (a half-close, not an abort: it
// still reads) gets the last answer, the upstream's 503, and no retry is
// sent for it (ClientLeft).
func TestHalfClosedDuringBackoffGetsAnswer(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newCurlBackend(t)
			p := curlProxy(t, engine, b)
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
			if _, err := io.WriteString(c, "GET http://backend/503-retry-after/1/hc HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			proxytest.Eventually(t, "the first attempt", func() bool { return len(b.received("/503-retry-after/1/hc")) == 1 })
			if err := c.(*net.TCPConn).CloseWrite(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(got)), nil)
			if err != nil {
				t.Fatalf("%v: %q", err, got)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 503 || string(body) != "down" || resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Retrycap-Exhausted") != "" {
				t.Errorf("half-closed client got %q, want the upstream's 503 \"down\" with its Retry-After, unmarked", got)
			}
			if n := len(b.received("/503-retry-after/1/hc")); n != 1 {
				t.Errorf("%d executions, want 1", n)
			}
		})
	}
}

// TestCurlHeaders: what curl users add: a chunked POST forced with
// -H 'Transfer-Encoding: chunked', Expect: 100-continue on a small body,
// proxy credentials (-U: Proxy-Authorization, never forwarded), and two
// URLs on one connection after a 502.
func TestCurlHeaders(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newCurlBackend(t)
			addr := curlProxy(t, engine, b).Addr()
			x := []string{"-x", "http://" + addr}
			data := []byte(`{"order":1}`)
			f := writeFile(t, data)
			o := runCurl(t, nil, nil, append(x, "-H", "Transfer-Encoding: chunked", "--data-binary", "@"+f, "http://backend/reset/te")...)
			o.expect502(t, "forced chunked keyless POST")
			checkCurlExecs(t, b, "/reset/te", data, "4")
			o = runCurl(t, nil, nil, append(x, "-H", "Transfer-Encoding: chunked", "-H", "Idempotency-Key: k1", "--data-binary", "@"+f, "http://backend/reset-then-ok/2/te")...)
			o.expect(t, "forced chunked keyed POST", 200, "ok /reset-then-ok/2/te")
			for _, r := range checkCurlExecs(t, b, "/reset-then-ok/2/te", data, "2", "1", "1") {
				if len(r.te) != 0 || r.length != int64(len(data)) {
					t.Errorf("chunked POST reached the backend with Transfer-Encoding %q, Content-Length %d; want none, %d", r.te, r.length, len(data))
				}
			}

			o = runCurl(t, nil, nil, append(x, "-H", "Expect: 100-continue", "-H", "Idempotency-Key: k2", "--data-binary", "@"+f, "http://backend/503-then-ok/1/expect")...)
			o.expect(t, "Expect: 100-continue, small body", 200, "ok /503-then-ok/1/expect")
			if len(o.heads) != 2 || o.heads[0] != "HTTP/1.1 100 Continue" {
				t.Errorf("heads %q, want the proxy's 100 Continue, then the answer", o.heads)
			}
			checkCurlExecs(t, b, "/503-then-ok/1/expect", data, "2", "1")

			o = runCurl(t, nil, nil, append(x, "-U", "user:secret", "http://backend/503-then-ok/1/auth")...)
			o.expect(t, "-U", 200, "ok /503-then-ok/1/auth")
			for _, r := range checkCurlExecs(t, b, "/503-then-ok/1/auth", nil, "2", "1") {
				if got := r.header.Get("Proxy-Authorization"); got != "" {
					t.Errorf("Proxy-Authorization %q reached the backend", got)
				}
			}

			// Two URLs, one curl: a keyless POST answered 502, then another on
			// the connection curl keeps (or reopens).
			o = runCurl(t, nil, nil, append(x, "-d", "y=2", "http://backend/reset/two", "http://backend/503-then-ok/1/two")...)
			// The second POST is keyless too: its 503 is passed on, not retried.
			first, second, _ := strings.Cut(string(o.body), notRetried502Suffix)
			if o.exit != 0 || o.status != 502 || !strings.HasPrefix(first, notRetried502Prefix) ||
				!strings.HasPrefix(second, "HTTP/1.1 503 Service Unavailable\r\n") || !strings.HasSuffix(second, "\r\n\r\ndown") {
				t.Errorf("two URLs: %s; want the 502, then the backend's 503 \"down\"", o)
			}
			checkCurlExecs(t, b, "/reset/two", []byte("y=2"), "4")
			checkCurlExecs(t, b, "/503-then-ok/1/two", []byte("y=2"), "4")
		})
	}
}

// TestTunnelClientResetCutsUpstream: the HTTP/1.1 served inside a CONNECT
// to a known upstream (what curl -p sends) is watched like any client: a
// reset while the attempt runs cuts the upstream's request at once. The
// per-try timeout is an hour, so only the cut ends it within the wait.
// Before, the engine could not find the socket under fasthttp's hijacked
// connection and the upstream's handler ran on.
func TestTunnelClientResetCutsUpstream(t *testing.T) {
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newCurlBackend(t)
			p := curlProxy(t, engine, b, "--per-try-timeout", "1h")
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
			if _, err := io.WriteString(c, "CONNECT backend:80 HTTP/1.1\r\nHost: backend:80\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			want := "HTTP/1.1 200 Connection established\r\n\r\n"
			got := make([]byte, len(want))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
				t.Fatalf("CONNECT: %q, %v; want %q", got, err, want)
			}
			if _, err := io.WriteString(c, "GET /stall/rst HTTP/1.1\r\nHost: backend\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			proxytest.Eventually(t, "the request at the backend", func() bool { return len(b.received("/stall/rst")) == 1 })
			_ = c.(*net.TCPConn).SetLinger(0)
			_ = c.Close() // an RST
			proxytest.Eventually(t, "the upstream's request cut", func() bool { return b.ended.Load() == 1 })
			proxytest.Eventually(t, "no call in flight", func() bool { return p.m.InFlight.Load() == 0 })
			if n := len(b.received("/stall/rst")); n != 1 {
				t.Errorf("%d executions, want 1", n)
			}
		})
	}
}
