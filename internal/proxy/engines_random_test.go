package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// The randomized version of TestEnginesAnswerAlike: generated pairs of a
// request and a backend behaviour, each sent through a proxy on each engine,
// whose answers (and the requests the backend received) must be the same.

var (
	enginesSeed  = flag.Uint64("engines.seed", 0, "seed of TestEnginesAnswerAlikeRandom (0: $RETRYCAP_ENGINES_SEED, else a fixed one)")
	enginesCases = flag.Int("engines.cases", 300, "cases TestEnginesAnswerAlikeRandom generates")
)

const (
	defaultEnginesSeed = 0x5eed_2026_0301
	// fixedDate is the Date the backend sets when a case asks for one.
	fixedDate = "Mon, 30 Nov 2026 07:00:00 GMT"
)

// randCase is one generated case: the raw request (its second copy adds
// Connection: close) and what the backend does with it.
type randCase struct {
	n    int
	req  string // with runMarker where the X-Run value goes
	head bool   // the request is a HEAD (answers have no body)

	// The backend: the first fails attempts (counted per proxy) get a 503,
	// the later ones the answer below.
	fails          int
	failRetryAfter string
	raw            bool // hijack and write the answer's bytes (with Connection: close)
	status         int
	reason         string // raw only
	headers        [][2]string
	date           bool
	ctype          string
	retryAfter     string
	exhausted      *string
	bodyLen        int
	chunked        bool
	chunkSizes     []int // raw chunked: the chunk sizes in turn
	closeDelimited bool  // raw only: neither length nor chunked, the body ends with the connection
	lengthOn304    int   // raw 304 only: a Content-Length describing the representation
}

const runMarker = "{RUN}"

func (c *randCase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "request (twice, the second with Connection: close):\n%s\n", shortMessage(c.req))
	fmt.Fprintf(&b, "backend: fails %d (Retry-After %q); raw %t; status %d %q; date %t; content-type %q; retry-after %q; ",
		c.fails, c.failRetryAfter, c.raw, c.status, c.reason, c.date, c.ctype, c.retryAfter)
	if c.exhausted != nil {
		fmt.Fprintf(&b, "exhausted %q; ", *c.exhausted)
	}
	fmt.Fprintf(&b, "body %d bytes, chunked %t %v, close-delimited %t, 304 length %d\nheaders %q", c.bodyLen, c.chunked, c.chunkSizes,
		c.closeDelimited, c.lengthOn304, c.headers)
	return b.String()
}

// bodyFor is a case's answer body: a pattern, so that it need not be kept.
func bodyFor(n, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		if i%64 == 63 {
			b[i] = '\n'
		} else {
			b[i] = byte('a' + (i*7+n)%26) //nolint:gosec // < 26
		}
	}
	return b
}

// mixCase flips the case of some letters of a header name.
func mixCase(r *rand.Rand, s string) string {
	if r.IntN(3) != 0 {
		return s
	}
	b := []byte(s)
	for i, ch := range b {
		if r.IntN(2) == 0 {
			switch {
			case ch >= 'a' && ch <= 'z':
				b[i] = ch - 32
			case ch >= 'A' && ch <= 'Z':
				b[i] = ch + 32
			}
		}
	}
	return string(b)
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// genCase makes case n.
func genCase(r *rand.Rand, n int) *randCase {
	c := &randCase{n: n}
	method := pick(r, "GET", "HEAD", "POST", "PUT", "DELETE", "PATCH")
	c.head = method == "HEAD"
	host := "backend"
	switch r.IntN(10) {
	case 0:
		host = "Backend"
	case 1:
		host = "backend:80"
	}
	path := fmt.Sprintf("/case/%d", n) + pick(r, "", "", "", "/", "/a/b", "//x", "/a%2Fb", "/./y", "/%7Euser")
	query := pick(r, "", "", "", "?a=1", "?a=1&b=two", "?q=%20x+y", "?", "?k=v?w", "?x=%zz")
	target := path + query
	absolute := r.IntN(10) < 7
	if absolute {
		target = "http://" + host + target
	}
	var lines [][2]string
	add := func(k, v string) { lines = append(lines, [2]string{k, v}) }
	hostHdr := host
	if absolute && r.IntN(10) == 0 {
		hostHdr = "elsewhere.test" // the absolute URI's host wins
	}
	add(mixCase(r, "Host"), hostHdr)
	if r.IntN(10) < 3 {
		add(mixCase(r, "Idempotency-Key"), fmt.Sprintf("key-%d-%d", n, r.IntN(1000)))
	}
	extras := []string{"X-Custom", "X-Trace-Id", "Accept", "User-Agent", "Authorization", "X-Forwarded-For",
		"Cache-Control", "If-None-Match", "Accept-Encoding", "Content-Type", "X-Empty", "Via"}
	for range r.IntN(6) {
		k := mixCase(r, pick(r, extras...))
		v := pick(r, "v1", "a, b", "*/*", "text/plain; charset=utf-8", "", "x  y", fmt.Sprintf("%d", r.IntN(1e6)))
		add(k, v)
		if r.IntN(5) == 0 { // repeated, maybe in another case
			add(mixCase(r, k), "again")
		}
	}
	if r.IntN(10) < 3 {
		budgets := []string{"0", "1", "2", "3", "4", "7", "abc", "-1", "", " 2 ", "1.5"}
		add(mixCase(r, "Retrycap-Budget"), pick(r, budgets...))
		if r.IntN(3) == 0 {
			add(mixCase(r, "Retrycap-Budget"), pick(r, budgets...))
		}
	}
	if r.IntN(4) == 0 {
		bags := []string{"a=1", "a=1, retrycap-budget=2, b=2", "retrycap-budget=1", "retrycap-budget=x", "retrycap-budget=9;p=1", "k=v;prop"}
		add(mixCase(r, "Baggage"), pick(r, bags...))
		if r.IntN(5) == 0 {
			add(mixCase(r, "Baggage"), pick(r, bags...))
		}
	}
	if r.IntN(4) == 0 {
		switch r.IntN(7) {
		case 0:
			add(mixCase(r, "Connection"), "keep-alive")
		case 1:
			add(mixCase(r, "Connection"), "X-Drop, keep-alive")
			add("X-Drop", "1")
		case 2:
			add(mixCase(r, "Connection"), "Retrycap-Budget")
		case 3:
			add(mixCase(r, "Connection"), "idempotency-key")
		case 4:
			add(mixCase(r, "Connection"), "Baggage, X-Drop")
			add("x-drop", "2")
		case 5:
			add(mixCase(r, "Connection"), "te")
		case 6:
			add(mixCase(r, "Connection"), "Keep-Alive, X-Custom")
			add("X-Custom", "nominated")
		}
	}
	if r.IntN(7) == 0 {
		add(mixCase(r, "Proxy-Connection"), "keep-alive")
	}
	if r.IntN(10) == 0 {
		add(mixCase(r, "Keep-Alive"), "timeout=5")
	}
	if r.IntN(10) == 0 {
		add(mixCase(r, "TE"), "trailers")
	}
	if r.IntN(10) == 0 {
		add(mixCase(r, "Proxy-Authorization"), "Basic eA==")
	}
	if r.IntN(7) == 0 {
		add(mixCase(r, "Cookie"), "a=1; b=2")
		if r.IntN(3) == 0 {
			add("Cookie", "c=3")
		}
	}
	if r.IntN(30) == 0 {
		add("Expect", "100-continue")
	}
	var body []byte
	withBody := r.IntN(2) == 0
	if method == "GET" || method == "HEAD" {
		withBody = r.IntN(5) == 0
	}
	if withBody {
		body = make([]byte, r.IntN(2001))
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 \r\n{}\":,"
		for i := range body {
			body[i] = alphabet[r.IntN(len(alphabet))]
		}
	}
	if len(body) > 0 || r.IntN(3) == 0 {
		add(mixCase(r, "Content-Length"), strconv.Itoa(len(body)))
	}
	// The marker goes anywhere among the headers.
	at := r.IntN(len(lines) + 1)
	lines = append(lines[:at], append([][2]string{{"X-Run", runMarker}}, lines[at:]...)...)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	for _, l := range lines {
		fmt.Fprintf(&b, "%s: %s\r\n", l[0], l[1])
	}
	b.WriteString("\r\n")
	b.Write(body)
	c.req = b.String()

	// The backend.
	if r.IntN(5) < 2 {
		c.fails = 1 + r.IntN(3)
		if r.IntN(3) == 0 {
			c.failRetryAfter = "0"
		}
	}
	c.raw = r.IntN(100) < 15
	c.status = pick(r, 200, 201, 204, 301, 304, 400, 404, 429, 500, 502, 503, 504)
	c.reason = pick(r, "", "", "Fine Thanks", "x")
	if r.IntN(10) < 3 {
		c.retryAfter = pick(r, "0", "0", " 0 ", "3600", "soon", "-1", "Sun, 06 Nov 1994 08:49:37 GMT")
	}
	if r.IntN(100) < 15 {
		c.exhausted = new(pick(r, "attempts", "budget", ""))
	}
	if r.IntN(10) < 7 {
		c.ctype = pick(r, "text/plain", "application/json", "application/octet-stream; x=1")
	}
	c.date = r.IntN(2) == 0
	switch x := r.IntN(100); {
	case x < 35:
	case x < 65:
		c.bodyLen = 1 + r.IntN(2000)
	case x < 80:
		c.bodyLen = 2000 + r.IntN(63537)
	case x < 85:
		c.bodyLen = pick(r, 65535, 65536, 65537)
	default:
		c.bodyLen = 65537 + r.IntN(70000-65537+1)
	}
	if c.status == 204 || (c.status == 304 && !c.raw) {
		c.bodyLen = 0
	}
	c.chunked = r.IntN(4) == 0 && c.status != 204 && c.status != 304
	if c.raw {
		switch {
		case c.status == 304 && r.IntN(2) == 0:
			c.lengthOn304, c.bodyLen = 1+r.IntN(100000), 0
		case c.status == 304:
			c.bodyLen = 0
		case c.chunked:
			for left := c.bodyLen; left > 0; {
				s := min(left, 1+r.IntN(20000))
				c.chunkSizes = append(c.chunkSizes, s)
				left -= s
			}
		case c.status != 204 && r.IntN(10) < 3:
			c.closeDelimited = true
		}
	}
	hdrs := []func(){
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "X-Backend"), "b1"}) },
		func() { c.headers = append(c.headers, [2]string{"x-lower-case", "v"}) },
		func() { c.headers = append(c.headers, [2]string{"X-UPPER-CASE", "V"}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Cache-Control"), "no-store"}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "ETag"), `"v1"`}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Server"), "backend/1"}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Vary"), "Accept"}) },
		func() {
			for i := range 2 + r.IntN(2) {
				c.headers = append(c.headers, [2]string{"Set-Cookie", fmt.Sprintf("c%d=%d; Path=/", i, i)})
			}
		},
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Keep-Alive"), "timeout=5"}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Proxy-Authenticate"), "Basic"}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Upgrade"), "h2c"}) },
		func() { c.headers = append(c.headers, [2]string{mixCase(r, "Te"), "trailers"}) },
		func() { c.headers = append(c.headers, [2]string{"Proxy-Connection", "keep-alive"}) },
		func() {
			nominated := pick(r, "X-Private", "Retry-After", "Retrycap-Exhausted", "Set-Cookie", "x-private")
			c.headers = append(c.headers, [2]string{"Connection", nominated + ", keep-alive"}, [2]string{"X-Private", "secret"})
		},
	}
	for range r.IntN(5) {
		pick(r, hdrs...)()
	}
	return c
}

// randBackend serves the cases: each request it records (its bytes as
// received, with the X-Run value replaced) and answers as its case says.
type randBackend struct {
	cases    []*randCase
	mu       sync.Mutex
	attempts map[string]int      // by run and case
	got      map[string][]string // by run and case: the requests received
}

type connCtxKey struct{}

// recConn keeps what was read from the connection since the last request
// was taken: the proxy sends a request only after the answer to the one
// before, so at the handler it is exactly the request being served.
type recConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.buf = append(c.buf, p[:n]...)
	c.mu.Unlock()
	return n, err
}

func (c *recConn) take() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := string(c.buf)
	c.buf = c.buf[:0]
	return s
}

type recListener struct{ net.Listener }

func (l recListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &recConn{Conn: c}, nil
}

func (b *randBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	run := r.Header.Get("X-Run")
	raw := r.Context().Value(connCtxKey{}).(*recConn).take() //nolint:forcetypeassert // set by ConnContext
	raw = strings.Replace(raw, "X-Run: "+run+"\r\n", "X-Run: "+runMarker+"\r\n", 1)
	parts := strings.Split(r.URL.Path, "/")
	n := -1
	if len(parts) > 2 && parts[1] == "case" {
		if v, err := strconv.Atoi(parts[2]); err == nil && v >= 0 && v < len(b.cases) {
			n = v
		}
	}
	if n < 0 || run == "" {
		http.Error(w, "no such case: "+r.RequestURI, http.StatusTeapot)
		return
	}
	key := run + "/" + strconv.Itoa(n)
	b.mu.Lock()
	b.attempts[key]++
	attempt := b.attempts[key]
	b.got[key] = append(b.got[key], raw)
	b.mu.Unlock()
	c := b.cases[n]
	if attempt <= c.fails {
		h := w.Header()
		h["Date"] = nil
		h["Content-Type"] = []string{"text/plain"}
		h["Content-Length"] = []string{"5"}
		if c.failRetryAfter != "" {
			h["Retry-After"] = []string{c.failRetryAfter}
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "fail\n")
		return
	}
	if c.raw {
		c.writeRaw(w)
		return
	}
	h := w.Header()
	h["Date"] = nil // net/http adds none (and sniffs no type) for a nil value
	if c.date {
		h["Date"] = []string{fixedDate}
	}
	h["Content-Type"] = nil
	if c.ctype != "" {
		h["Content-Type"] = []string{c.ctype}
	}
	for _, kv := range c.headers {
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
	if c.retryAfter != "" {
		h["Retry-After"] = []string{c.retryAfter}
	}
	if c.exhausted != nil {
		h["Retrycap-Exhausted"] = []string{*c.exhausted}
	}
	noBody := c.status == 204 || c.status == 304
	if !c.chunked && !noBody {
		h["Content-Length"] = []string{strconv.Itoa(c.bodyLen)}
	}
	w.WriteHeader(c.status)
	if noBody || c.head {
		return
	}
	body := bodyFor(c.n, c.bodyLen)
	if c.chunked {
		_ = http.NewResponseController(w).Flush() // chunked, however short the body
	}
	for len(body) > 0 {
		k := min(len(body), 16<<10)
		if _, err := w.Write(body[:k]); err != nil {
			return
		}
		body = body[k:]
		if c.chunked {
			_ = http.NewResponseController(w).Flush()
		}
	}
}

// writeRaw answers with bytes written as they are (names in the case
// given, any framing) and closes the connection: it is never reused.
func (c *randCase) writeRaw(w http.ResponseWriter) {
	conn, bw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	reason := c.reason
	if reason == "" {
		reason = http.StatusText(c.status)
	}
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", c.status, reason)
	if c.date {
		fmt.Fprintf(bw, "date: %s\r\n", fixedDate)
	}
	if c.ctype != "" {
		fmt.Fprintf(bw, "content-type: %s\r\n", c.ctype)
	}
	for _, kv := range c.headers {
		fmt.Fprintf(bw, "%s: %s\r\n", kv[0], kv[1])
	}
	if c.retryAfter != "" {
		fmt.Fprintf(bw, "retry-after: %s\r\n", c.retryAfter)
	}
	if c.exhausted != nil {
		fmt.Fprintf(bw, "retrycap-exhausted: %s\r\n", *c.exhausted)
	}
	switch {
	case c.lengthOn304 > 0:
		fmt.Fprintf(bw, "content-length: %d\r\n", c.lengthOn304)
	case c.chunked:
		bw.WriteString("transfer-encoding: chunked\r\n")
	case !c.closeDelimited && c.status != 204 && c.status != 304:
		fmt.Fprintf(bw, "content-length: %d\r\n", c.bodyLen)
	}
	bw.WriteString("connection: close\r\n\r\n")
	if !c.head && c.status != 204 && c.status != 304 {
		body := bodyFor(c.n, c.bodyLen)
		if c.chunked {
			for _, s := range c.chunkSizes {
				fmt.Fprintf(bw, "%x\r\n", s)
				bw.Write(body[:s])
				bw.WriteString("\r\n")
				body = body[s:]
			}
			bw.WriteString("0\r\n\r\n")
		} else {
			bw.Write(body)
		}
	}
	_ = bw.Flush()
}

// canonical renders the answers read from one connection for comparison:
// each head byte for byte, each body by its length, digest and first bytes
// (decoded when chunked: the proxy re-chunks a streamed body, and its chunk
// sizes depend on timing). A Date the proxy made itself (not the backend's
// fixed one) is replaced, as its time varies.
func canonical(raw string, head bool) (string, error) {
	sr := strings.NewReader(raw)
	br := bufio.NewReader(sr)
	var out strings.Builder
	method := "GET"
	if head {
		method = "HEAD"
	}
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return out.String(), nil
		}
		start := len(raw) - sr.Len() - br.Buffered()
		end := forward.HeadEnd([]byte(raw[start:]))
		if end < 0 {
			return out.String(), fmt.Errorf("incomplete answer head at byte %d", start)
		}
		h := raw[start : start+end]
		for _, l := range strings.Split(h, "\r\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Date") && strings.TrimSpace(v) != fixedDate {
				l = k + ": <the proxy's>"
			}
			fmt.Fprintf(&out, "%q\n", l)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			return out.String(), fmt.Errorf("answer at byte %d: %w", start, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return out.String(), fmt.Errorf("answer body at byte %d: %w", start, err)
		}
		sum := sha256.Sum256(body)
		fmt.Fprintf(&out, "body %d bytes %v sha256 %x %q\n", len(body), resp.TransferEncoding, sum[:8], body[:min(len(body), 48)])
	}
}

// randExchange sends req on a new connection and reads until the proxy
// closes it.
func randExchange(addr, req string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}

// TestEnginesAnswerAlikeRandom is TestEnginesAnswerAlike over generated
// cases: requests of every method, with and without bodies, keys and
// chain headers, hop-by-hop and repeated headers in any case, in origin or
// absolute form; answers of the statuses the policy treats differently,
// with Retry-After and Retrycap-Exhausted, bodies buffered or streamed
// (over 64 KiB, chunked, close-delimited), hop-by-hop headers, written by
// net/http or byte by byte; a backend failing the first attempts. Both
// proxies must answer the same bytes and send the backend the same bytes.
// -engines.seed (or RETRYCAP_ENGINES_SEED) varies the cases.
func TestEnginesAnswerAlikeRandom(t *testing.T) {
	seed := *enginesSeed
	if seed == 0 {
		if s := os.Getenv("RETRYCAP_ENGINES_SEED"); s != "" {
			v, err := strconv.ParseUint(s, 0, 64)
			if err != nil {
				t.Fatalf("RETRYCAP_ENGINES_SEED: %v", err)
			}
			seed = v
		}
	}
	if seed == 0 {
		seed = defaultEnginesSeed
	}
	t.Logf("seed %d (-engines.seed=%d to repeat)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0x7e57))
	cases := make([]*randCase, *enginesCases)
	for i := range cases {
		cases[i] = genCase(r, i)
	}

	t.Logf("cases: %s", coverage(cases))

	be := &randBackend{cases: cases, attempts: map[string]int{}, got: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: be, ReadHeaderTimeout: 5 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connCtxKey{}, c) },
	}
	go func() { _ = srv.Serve(recListener{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })

	flags := []string{"--upstreams", "backend=3", "--resolve", "backend=" + ln.Addr().String(), "--chain-cap", "4",
		"--retry-on", "connect-failure,reset,429,502,503,504"}
	runs := []struct {
		name string
		p    *Proxy
	}{
		{"goroutine", startProxyOn(t, "goroutine", flags...)},
		{"loop", startProxyOn(t, "loop", flags...)},
	}

	t.Cleanup(func() {
		be.mu.Lock()
		defer be.mu.Unlock()
		var n [2]int
		for i, run := range runs {
			for _, c := range cases {
				n[i] += len(be.got[run.name+"/"+strconv.Itoa(c.n)])
			}
		}
		t.Logf("requests the backend received: %d through the goroutine engine, %d through the event loop", n[0], n[1])
	})
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(strconv.Itoa(c.n), func(t *testing.T) {
				t.Parallel()
				var answers [2]string
				for i, run := range runs {
					req := strings.Replace(c.req, runMarker, run.name, 1)
					req += strings.Replace(req, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
					raw, err := randExchange(run.p.Addr(), req)
					if err != nil {
						t.Fatalf("seed %d case %d: %s engine: %v (read %q)\n%s", seed, c.n, run.name, err, raw, c)
					}
					if !strings.HasPrefix(raw, "HTTP/1.1 ") {
						t.Fatalf("seed %d case %d: %s engine: no answer: %q\n%s", seed, c.n, run.name, raw, c)
					}
					canon, err := canonical(raw, c.head)
					if err != nil {
						t.Fatalf("seed %d case %d: %s engine: %v\n%s\nanswer %q", seed, c.n, run.name, err, c, raw)
					}
					answers[i] = canon
				}
				if answers[0] != answers[1] {
					t.Errorf("seed %d case %d: the answers differ\n%s\nevent loop answered\n%s\ngoroutine engine answered\n%s",
						seed, c.n, c, answers[1], answers[0])
				}
				be.mu.Lock()
				gor, loop := be.got["goroutine/"+strconv.Itoa(c.n)], be.got["loop/"+strconv.Itoa(c.n)]
				be.mu.Unlock()
				if !slices.Equal(gor, loop) {
					t.Errorf("seed %d case %d: the backend received different requests\n%s\nfrom the event loop\n%s\nfrom the goroutine engine\n%s",
						seed, c.n, c, quoteAll(loop), quoteAll(gor))
				}
			})
		}
	})
}

func quoteAll(reqs []string) string {
	var b bytes.Buffer
	for i, r := range reqs {
		fmt.Fprintf(&b, "%d: %s\n", i+1, shortMessage(r))
	}
	return b.String()
}

// shortMessage quotes a request's head and sums up its body.
func shortMessage(m string) string {
	end := forward.HeadEnd([]byte(m))
	if end < 0 {
		return fmt.Sprintf("%q", m)
	}
	body := m[end:]
	sum := sha256.Sum256([]byte(body))
	return fmt.Sprintf("%q + body %d bytes sha256 %x %q", m[:end], len(body), sum[:8], body[:min(len(body), 32)])
}

// coverage counts the generated cases by some of their traits, for the log.
func coverage(cases []*randCase) string {
	counts := map[string]int{}
	for _, c := range cases {
		method, _, _ := strings.Cut(c.req, " ")
		counts[method]++
		traits := map[string]bool{
			"absolute-form": strings.HasPrefix(c.req[len(method)+1:], "http://"),
			"key":           strings.Contains(strings.ToLower(c.req), "\nidempotency-key:"),
			"budget":        strings.Contains(strings.ToLower(c.req), "\nretrycap-budget:"),
			"baggage":       strings.Contains(strings.ToLower(c.req), "\nbaggage:"),
			"connection":    strings.Contains(strings.ToLower(c.req), "\nconnection:"),
			"failing first": c.fails > 0,
			"raw answer":    c.raw,
			"chunked":       c.chunked,
			"close-delim":   c.closeDelimited,
			"over 64 KiB":   c.bodyLen > forward.BufferedBodyMax,
			"retry-after":   c.retryAfter != "",
			"exhausted":     c.exhausted != nil,
		}
		for k, v := range traits {
			if v {
				counts[k]++
			}
		}
	}
	keys := slices.Sorted(maps.Keys(counts))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s %d, ", k, counts[k])
	}
	return strings.TrimSuffix(b.String(), ", ")
}
