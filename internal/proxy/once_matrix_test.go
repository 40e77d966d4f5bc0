package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The at-most-once matrix (issue 25 item 1, DESIGN.md "The data plane"):
// a request that is not safe to repeat reaches an upstream at most once,
// and one that is (an idempotent method, a client's key, a generated key
// toward an upstream that deduplicates) is retried within the policy.
// Every cell: both HTTP/1.1 engines, one and 20 concurrent requests over
// a pool of reused connections (warmed first, one per client connection),
// a raw backend that counts executions (the request's complete head
// arrived) and fails each request's first execution (or every one, for
// the "always" shapes) the way the shape says. Asserted per request: the
// exact executions, the status the client gets, the Retrycap-Exhausted
// header and, for the proxy's own answers, why (its body).
// docs/proxy.md "The at-most-once matrix" is this table in words.

// onceShape is how the backend fails a request's execution.
type onceShape struct {
	name string
	at   onceAt
	rst  bool // the close is a reset (SO_LINGER 0), else a FIN (shutdown, then drain)
	// always: every execution fails (else only each request's first).
	always bool
}

type onceAt int

const (
	atIdle     onceAt = iota // the pooled connection closed after the warm-up, before the request
	atHead                   // closed once the head is read, the body unread
	atPartBody               // closed after one byte of the body
	atBody                   // closed after the whole request
	atRespHead               // part of an answer's head, then closed
	at5xx                    // a whole 503 answer (the connection kept)
	atTimeout                // the whole request read, no answer: the per-try timeout
)

var onceShapes = []onceShape{
	{"idle-fin", atIdle, false, false},
	{"idle-rst", atIdle, true, false},
	{"head-fin", atHead, false, false},
	{"head-rst", atHead, true, false},
	{"partbody-fin", atPartBody, false, false},
	{"partbody-rst", atPartBody, true, false},
	{"body-fin", atBody, false, false},
	{"body-rst", atBody, true, false},
	{"resphead-fin", atRespHead, false, false},
	{"resphead-rst", atRespHead, true, false},
	{"503", at5xx, false, false},
	{"timeout", atTimeout, false, false},
	{"body-rst-always", atBody, true, true},
	{"503-always", at5xx, false, true},
}

// onceKind is a request kind: how it is written, the proxy flags it
// needs, and whether the policy may repeat it.
type onceKind struct {
	name       string
	method     string
	body       int // body bytes (0: none)
	key        bool
	chunked    bool
	expect     bool     // Expect: 100-continue
	flags      []string // extra proxy flags
	replayable bool
	// unknown: the host is no --upstreams entry's (forwarded once, one
	// attempt; a stale connection's loss is answered as out of attempts).
	unknown bool
}

// onceMaxReplay is the matrix's --max-replay-bytes: the "big" kind's body is over it.
const onceMaxReplay = 1024

var onceKinds = []onceKind{
	{name: "GET", method: "GET", replayable: true},
	{name: "POST", method: "POST", body: 100},
	{name: "PATCH", method: "PATCH", body: 100},
	// Idempotent by RFC 9110 (9.2.2) and in --retry-methods' default: retried.
	{name: "PUT", method: "PUT", body: 100, replayable: true},
	{name: "DELETE", method: "DELETE", replayable: true},
	{name: "POST-key", method: "POST", body: 100, key: true, replayable: true},
	{name: "POST-key-big", method: "POST", body: 2 * onceMaxReplay, key: true},
	// Over --max-replay-bytes, whatever the method; 100 KiB: the goroutine
	// engine writes it while it reads the answer, the loop hands it off.
	{name: "PUT-huge", method: "PUT", body: 100 << 10},
	{name: "POST-chunked", method: "POST", body: 100, chunked: true},
	{name: "POST-key-chunked", method: "POST", body: 100, key: true, chunked: true, replayable: true},
	{name: "POST-expect", method: "POST", body: 100, expect: true},
	// The entry proxy's generated key makes nothing retryable...
	{name: "POST-genkey", method: "POST", body: 100, flags: []string{"--entrypoint", "--chain-cap", "4"}},
	// ...except toward an upstream declared to deduplicate by key.
	{name: "GET-unknown-host", method: "GET", replayable: true, unknown: true},
	{name: "POST-genkey-dedup", method: "POST", body: 100, flags: []string{"--entrypoint", "--chain-cap", "4", "--dedup-upstreams", "svc"}, replayable: true},
}

// onceWant is a cell's outcome, the same for every request of the cell.
type onceWant struct {
	execs     int
	code      int
	exhausted string // Retrycap-Exhausted
	why       string // in the proxy's own answer's body ("": an upstream's answer)
}

// onceExpect is the rule the matrix checks, in one place: the product's
// policy (attempts 3, --retry-on connect-failure,reset,timeout,5xx).
func onceExpect(k onceKind, s onceShape) onceWant {
	switch {
	case s.at == atIdle:
		// The close came before the request: it never reached the
		// upstream, and goes on a fresh connection, once.
		return onceWant{execs: 1, code: 200}
	case k.unknown:
		switch s.at {
		case atHead, atPartBody, atBody:
			// Lost on its reused connection with no byte of an answer: a
			// stale attempt, and the one attempt is spent.
			return onceWant{execs: 1, code: 503, exhausted: "attempts", why: "not retried: attempts"}
		case at5xx:
			return onceWant{execs: 1, code: 503}
		case atTimeout:
			return onceWant{execs: 1, code: 504, why: "not retried: not-retryable"}
		}
		return onceWant{execs: 1, code: 502, why: "not retried: not-retryable"}
	case !k.replayable:
		switch s.at {
		case at5xx:
			return onceWant{execs: 1, code: 503} // the upstream's answer, passed on
		case atTimeout:
			return onceWant{execs: 1, code: 504, why: "not retried: not-retryable"}
		}
		return onceWant{execs: 1, code: 502, why: "not retried: not-retryable"}
	case s.always && s.at == at5xx:
		return onceWant{execs: 3, code: 503, exhausted: "attempts"}
	case s.always:
		return onceWant{execs: 3, code: 503, exhausted: "attempts", why: "3 attempt(s)"}
	}
	return onceWant{execs: 2, code: 200}
}

// onceBackend is a raw keep-alive upstream: /warm/... is answered 200
// (after all the cell's warm-ups arrived, so that each went on a
// connection of its own), /x/ID is counted and failed as shape says.
type onceBackend struct {
	ln    net.Listener
	conns *atomic.Int64
	shape onceShape

	warmWant int
	warmN    atomic.Int64
	warmAll  chan struct{}

	mu    sync.Mutex
	execs map[string]int
}

func newOnceBackend(t *testing.T, shape onceShape, warm int) *onceBackend {
	t.Helper()
	b := &onceBackend{shape: shape, warmWant: warm, warmAll: make(chan struct{}), execs: map[string]int{}}
	b.ln, b.conns = proxytest.RawBackend(t, func(c *net.TCPConn) { b.serve(c) })
	return b
}

func (b *onceBackend) serve(c *net.TCPConn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if strings.HasPrefix(req.URL.Path, "/warm/") {
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if b.warmN.Add(1) == int64(b.warmWant) {
				close(b.warmAll)
			}
			if b.warmWant > 0 {
				select {
				case <-b.warmAll:
				case <-time.After(proxytest.Bound):
					return
				}
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwarm"); err != nil {
				return
			}
			if b.shape.at == atIdle {
				if b.shape.rst {
					_ = c.SetLinger(0)
				}
				return // closed idle: FIN (nothing unread) or RST
			}
			continue
		}
		id := strings.TrimPrefix(req.URL.Path, "/x/")
		b.mu.Lock()
		b.execs[id]++
		n := b.execs[id]
		b.mu.Unlock()
		if b.shape.at == atIdle || (n > 1 && !b.shape.always) {
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nok %s", 3+len(id), id); err != nil {
				return
			}
			continue
		}
		switch b.shape.at {
		case atHead:
		case atPartBody:
			var one [1]byte
			if _, err := io.ReadFull(req.Body, one[:]); err != nil {
				return
			}
		case atBody:
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
		case atRespHead:
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Le"); err != nil {
				return
			}
		case at5xx:
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"); err != nil {
				return
			}
			continue
		case atTimeout:
			if _, err := io.Copy(io.Discard, req.Body); err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, br) // until the proxy gives up and closes
			return
		}
		if b.shape.rst {
			_ = c.SetLinger(0) // the deferred close resets
			return
		}
		// FIN: the write side shut, the rest read until the proxy closes
		// (a close with bytes unread would be a reset).
		_ = c.CloseWrite()
		_, _ = io.Copy(io.Discard, br)
		return
	}
}

func (b *onceBackend) executions(id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execs[id]
}

// onceAnswer is what a client got.
type onceAnswer struct {
	code      int
	exhausted string
	key       string // Idempotency-Key
	body      string
}

// onceClient is one keep-alive client connection to the proxy.
type onceClient struct {
	c  net.Conn
	br *bufio.Reader
}

func (k *onceClient) do(kind onceKind, path string) (onceAnswer, error) {
	var a onceAnswer
	_ = k.c.SetDeadline(time.Now().Add(proxytest.Bound))
	var head strings.Builder
	host := "svc"
	if kind.unknown {
		host = "other"
	}
	fmt.Fprintf(&head, "%s http://%s%s HTTP/1.1\r\nHost: %s\r\n", kind.method, host, path, host)
	body := proxytest.Pattern(kind.body)
	if kind.key {
		fmt.Fprintf(&head, "Idempotency-Key: k-%s-%s\r\n", kind.name, path)
	}
	if kind.expect {
		head.WriteString("Expect: 100-continue\r\n")
	}
	switch {
	case kind.chunked:
		head.WriteString("Transfer-Encoding: chunked\r\n")
		body = fmt.Appendf(nil, "%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	case kind.body > 0:
		fmt.Fprintf(&head, "Content-Length: %d\r\n", len(body))
	}
	head.WriteString("\r\n")
	if !kind.expect {
		if _, err := k.c.Write(append([]byte(head.String()), body...)); err != nil {
			return a, err
		}
	} else if _, err := io.WriteString(k.c, head.String()); err != nil {
		return a, err
	}
	for {
		resp, err := http.ReadResponse(k.br, &http.Request{Method: kind.method})
		if err != nil {
			return a, err
		}
		if resp.StatusCode == http.StatusContinue {
			if !kind.expect || body == nil {
				return a, fmt.Errorf("a 100 Continue unasked")
			}
			if _, err := k.c.Write(body); err != nil {
				return a, err
			}
			body = nil
			continue
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return a, err
		}
		if body != nil && kind.expect {
			return a, fmt.Errorf("answered %d before the body was asked for", resp.StatusCode)
		}
		return onceAnswer{code: resp.StatusCode, exhausted: resp.Header.Get("Retrycap-Exhausted"), key: resp.Header.Get("Idempotency-Key"), body: string(got)}, nil
	}
}

// runOnceCell runs one cell: conc client connections, each warmed with a
// GET (so the proxy pools conc upstream connections), then one request of
// the kind each, all at once.
func runOnceCell(t *testing.T, engine string, kind onceKind, shape onceShape, conc int) {
	warm, perTry := conc, "5s"
	if shape.at == atTimeout {
		// The per-try timeout is what the cell waits for; its warm-ups
		// are not held back for each other (a held one could time out).
		warm, perTry = 0, "500ms"
	}
	b := newOnceBackend(t, shape, warm)
	args := append([]string{"--upstreams", "svc=3", "--resolve", "svc=" + b.ln.Addr().String() + ",other=" + b.ln.Addr().String(),
		"--retry-on", "connect-failure,reset,timeout,502,503,504", "--max-replay-bytes", strconv.Itoa(onceMaxReplay), "--per-try-timeout", perTry}, kind.flags...)
	p := startProxyOn(t, engine, args...)
	clients := make([]*onceClient, conc)
	for i := range clients {
		c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = &onceClient{c: c, br: bufio.NewReader(c)}
	}
	each := func(fn func(i int, k *onceClient) error) {
		t.Helper()
		errs := make([]error, conc)
		var wg sync.WaitGroup
		for i, k := range clients {
			wg.Go(func() { errs[i] = fn(i, k) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	each(func(i int, k *onceClient) error {
		a, err := k.do(onceKind{method: "GET", unknown: kind.unknown}, "/warm/"+strconv.Itoa(i))
		if err == nil && (a.code != 200 || a.body != "warm") {
			err = fmt.Errorf("warm-up %d: %d %q", i, a.code, a.body)
		}
		return err
	})
	if shape.at == atIdle {
		proxytest.Eventually(t, "the proxy's pooled connections see the upstream's close", func() bool { return proxytest.PeerClosed(b.ln.Addr().String()) })
	}
	want := onceExpect(kind, shape)
	answers := make([]onceAnswer, conc)
	each(func(i int, k *onceClient) error {
		var err error
		answers[i], err = k.do(kind, "/x/"+strconv.Itoa(i))
		return err
	})
	for i, a := range answers {
		id := strconv.Itoa(i)
		got := onceWant{execs: b.executions(id), code: a.code, exhausted: a.exhausted}
		if want.why != "" && strings.Contains(a.body, want.why) {
			got.why = want.why
		}
		if got != want {
			t.Errorf("request %s: executed %d times, answered %d (Retrycap-Exhausted %q) %q; want %d times, %d (%q), body with %q",
				id, got.execs, a.code, a.exhausted, a.body, want.execs, want.code, want.exhausted, want.why)
		}
		if want.code == 200 && a.body != "ok "+id {
			t.Errorf("request %s: 200 with body %q, want %q", id, a.body, "ok "+id)
		}
		// A generated key comes back on a failed answer: the client may
		// retry with it (its retry is charged to the same chain).
		if strings.HasPrefix(kind.name, "POST-genkey") && want.code >= 500 && !strings.HasPrefix(a.key, "retrycap-gen-") {
			t.Errorf("request %s: %d without the generated Idempotency-Key (%q)", id, a.code, a.key)
		}
	}
}

func TestAtMostOnceMatrix(t *testing.T) {
	type cell struct {
		engine string
		kind   onceKind
		shape  onceShape
		conc   int
	}
	var cells []cell
	for _, engine := range []string{"loop", "goroutine"} {
		for _, kind := range onceKinds {
			for _, shape := range onceShapes {
				if shape.at == atPartBody && kind.body == 0 {
					continue // no body to cut
				}
				for _, conc := range []int{1, 20} {
					cells = append(cells, cell{engine, kind, shape, conc})
				}
			}
		}
	}
	// The cells wait on sockets and timers more than they compute: a few
	// at once (t.Run is safe from several goroutines; the timeouts overlap).
	next := make(chan cell)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for c := range next {
				t.Run(fmt.Sprintf("%s/%s/%s/c%d", c.engine, c.kind.name, c.shape.name, c.conc), func(t *testing.T) {
					runOnceCell(t, c.engine, c.kind, c.shape, c.conc)
				})
			}
		})
	}
	for _, c := range cells {
		next <- c
	}
	close(next)
	wg.Wait()
	t.Logf("%d cells", len(cells))
}
