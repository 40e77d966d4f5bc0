package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// FuzzFramingDifferential sends random pipelines of requests (a small
// generator over methods, header sets with repeats, hop-by-hop fields,
// framing by Content-Length, chunked, both or none, bodies) through the
// proxy and, the same bytes, straight to a backend; both backends are Go's
// net/http server, recording each request they parse (method, path, host,
// headers with the values of each name in order, body). The proxy may
// refuse what it does not read (its own 4xx, then the close), so what it
// forwarded must be the direct backend's requests, one for one, from the
// first: a request that differs, or one more, is a request the proxy made
// up or cut differently (smuggling). When the proxy refused nothing, the
// counts must match too.
//
// The seeds (testdata/fuzz/FuzzFramingDifferential) run under go test;
// go test -run '^$' -fuzz '^FuzzFramingDifferential$' ./internal/proxy
// fuzzes (add -args -engine=goroutine for the other engine).
func FuzzFramingDifferential(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} {
		f.Add(s, uint8(s%4)+1)
	}
	// Bare LFs in the last head (bareLF): alone, behind others, behind
	// chunked and Content-Length bodies.
	for _, s := range []uint64{1, 2, 3, 4, 5, 6, 7, 8} {
		f.Add(s, uint8(s%4)|[...]uint8{0x40, 0x80, 0xc0}[s%3])
	}
	via, direct := newDiffBackend(f), newDiffBackend(f)
	p := startProxy(f, "--upstreams", "backend=1", "--resolve", "backend="+via.addr(), "--chain-cap", "4")
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		r := rand.New(rand.NewPCG(seed, uint64(n)))
		var reqs []string
		for range int(n%4) + 1 {
			reqs = append(reqs, genRequest(r))
		}
		// n's high bits (the generator uses n%4) end a line of the last
		// request's head in a bare LF: the proxy refuses that head (400),
		// on either engine, where the backend reads it.
		reqs[len(reqs)-1] = bareLF(reqs[len(reqs)-1], n)
		wire := strings.Join(reqs, "")
		via.reset()
		direct.reset()
		proxied := diffSend(t, p.Addr(), wire, len(reqs))
		directly := diffSend(t, direct.addr(), wire, len(reqs))
		if proxied.stalled && !directly.stalled {
			t.Fatalf("the proxy left a request unanswered that the backend answered\nwire %q\nanswers %q\ndirect %q", wire, proxied.raw, directly.raw)
		}
		got, want := via.taken(), direct.taken()
		for i := range got {
			if i >= len(want) {
				t.Fatalf("the proxy forwarded %d requests, the backend parsed %d from the same bytes\nwire %q\nforwarded %v\ndirect %v", len(got), len(want), wire, got, want)
			}
			if got[i] != want[i] {
				t.Fatalf("request %d differs\nwire %q\nforwarded %s\ndirect    %s", i, wire, got[i], want[i])
			}
		}
		if !proxied.refused && len(got) != len(want) {
			t.Fatalf("the proxy forwarded %d requests, the backend parsed %d, and the proxy refused none\nwire %q\nanswers %q", len(got), len(want), wire, proxied.raw)
		}
	})
}

// bareLF ends the request line of req in a bare LF when n has bit 7 set
// (fasthttp reads that head), its empty line when it has bit 6 (fasthttp
// would wait for the CRLF CRLF that never comes).
func bareLF(req string, n uint8) string {
	if n&0x40 != 0 {
		end := strings.Index(req, "\r\n\r\n") + 2
		req = req[:end] + req[end+1:]
	}
	if n&0x80 != 0 {
		line := strings.Index(req, "\r\n")
		req = req[:line] + req[line+1:]
	}
	return req
}

// genRequest is one random request in absolute form to the backend.
func genRequest(r *rand.Rand) string {
	method := pick(r, "GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")
	var h []string
	add := func(k, v string) { h = append(h, k+": "+v) }
	add("Host", "backend")
	nominated, ctype := "", false
	for range r.IntN(6) {
		switch r.IntN(10) {
		case 0, 1:
			add("X-A", fmt.Sprint(r.IntN(3)))
		case 2:
			add("X-B", pick(r, "b", "", "b, c"))
		case 3:
			add(pick(r, "Proxy-Connection", "Keep-Alive", "TE"), pick(r, "keep-alive", "timeout=5", "trailers"))
		case 4:
			nominated = pick(r, "X-Gone", "X-A", "Keep-Alive")
			add("Connection", pick(r, "", "keep-alive, ")+nominated)
			add(nominated, "g")
		case 5:
			add(pick(r, "Retrycap-Budget", "retrycap-budget"), pick(r, "1", "3", "x"))
		case 6:
			add("Cookie", pick(r, "a=1", "b=2; c=3"))
		case 7:
			// Once: fasthttp holds Content-Type (like Host and User-Agent)
			// as one value, so a repeated one goes on as one
			// (docs/proxy.md, Hardening).
			if !ctype {
				add("Content-Type", "text/plain")
				ctype = true
			}
		case 8:
			add("Accept", "*/*")
		case 9:
			add("X-Empty", "")
		}
	}
	body := strings.Repeat(pick(r, "a", "0\r\n\r\n", "GET /s HTTP/1.1\r\nHost: backend\r\n\r\n"), r.IntN(3))
	framing := r.IntN(6)
	if method == "GET" && r.IntN(2) == 0 {
		framing = 0
	}
	var payload string
	switch framing {
	case 1, 2: // Content-Length
		add("Content-Length", fmt.Sprint(len(body)))
		payload = body
	case 3, 4: // chunked, in one or two chunks, perhaps with a trailer
		add(pick(r, "Transfer-Encoding", "transfer-encoding"), pick(r, "chunked", "Chunked"))
		payload = genChunks(r, body)
	case 5: // both: chunked wins (RFC 9112 6.3), or the request is refused
		add("Content-Length", fmt.Sprint(len(body)+r.IntN(3)))
		add("Transfer-Encoding", "chunked")
		payload = genChunks(r, body)
	}
	r.Shuffle(len(h), func(i, j int) {
		if h[i] != "Host: backend" && h[j] != "Host: backend" && !strings.HasPrefix(h[i], "Connection") && !strings.HasPrefix(h[j], "Connection") {
			h[i], h[j] = h[j], h[i]
		}
	})
	return method + " http://backend/" + pick(r, "", "p", "p?q=1", "a/b") + " HTTP/1.1\r\n" + strings.Join(h, "\r\n") + "\r\n\r\n" + payload
}

func genChunks(r *rand.Rand, body string) string {
	var b strings.Builder
	if len(body) > 0 {
		cut := r.IntN(len(body)+1) % len(body)
		for _, part := range []string{body[:cut], body[cut:]} {
			if part != "" {
				fmt.Fprintf(&b, "%x\r\n%s\r\n", len(part), part)
			}
		}
	}
	b.WriteString("0\r\n")
	if r.IntN(4) == 0 {
		b.WriteString("X-Trailer: t\r\n")
	}
	b.WriteString("\r\n")
	return b.String()
}

// diffBackend is a net/http server recording the requests it parsed.
type diffBackend struct {
	ln  net.Listener
	mu  sync.Mutex
	got []string
}

func newDiffBackend(tb testing.TB) *diffBackend {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	b := &diffBackend{ln: ln}
	srv := &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return b
}

func (b *diffBackend) addr() string { return b.ln.Addr().String() }

func (b *diffBackend) reset() {
	b.mu.Lock()
	b.got = nil
	b.mu.Unlock()
}

func (b *diffBackend) taken() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

// The fields a forwarded request may differ in: the connection's own
// (hop-by-hop, and what Connection nominates), the chain budget the proxy
// sets, and the framing, which the proxy may rewrite (the body is
// compared).
var diffSkip = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true,
	"Retrycap-Budget": true, "Content-Length": true, "Transfer-Encoding": true,
}

func (b *diffBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(400)
		return
	}
	skip := map[string]bool{}
	for _, v := range r.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			skip[http.CanonicalHeaderKey(strings.TrimSpace(tok))] = true
		}
	}
	var keys []string
	for k := range r.Header {
		if !diffSkip[k] && !skip[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var hs []string
	for _, k := range keys {
		hs = append(hs, k+"="+strings.Join(r.Header[k], "|"))
	}
	rec := fmt.Sprintf("%s %s?%s host=%s [%s] body=%q", r.Method, r.URL.Path, r.URL.RawQuery, r.Host, strings.Join(hs, " "), body)
	b.mu.Lock()
	b.got = append(b.got, rec)
	b.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

type diffAnswers struct {
	raw string
	// refused: the connection ended before every request had an answer,
	// or with a 4xx/5xx or a Connection: close (the proxy may close after
	// a request it will not read further, such as one with both
	// Content-Length and Transfer-Encoding, as HAProxy does).
	refused bool
	// stalled: the 5 seconds ran out waiting for an answer.
	stalled bool
}

// diffSend writes wire on a new connection and reads up to n answers
// (until the close), within 5 seconds.
func diffSend(t *testing.T, addr, wire string, n int) diffAnswers {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, wire); err != nil {
		t.Fatal(err)
	}
	var out diffAnswers
	var raw strings.Builder
	br := bufio.NewReader(io.TeeReader(c, &raw))
	out.refused = true
	for i := range n {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			out.stalled = errors.As(err, &ne) && ne.Timeout()
			break
		}
		if i == n-1 {
			out.refused = false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		_ = body
		if resp.StatusCode >= 400 || resp.Close {
			out.refused = true
			break
		}
	}
	out.raw = raw.String()
	return out
}
