package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// ownAnswer is the form of every answer the proxy makes itself outside an
// exchange (forward.OwnAnswer): status, a plain-text body ending in a
// newline, no Date (neither engine writes one on these), and the close
// when the connection cannot go on.
func ownAnswer(code int, reason, body string, closes bool) string {
	s := "HTTP/1.1 " + strconv.Itoa(code) + " " + reason + "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	if closes {
		s += "Connection: close\r\n"
	}
	return s + "\r\n" + body
}

// exchangeAnswer is the form of the exchange's own answers (a call that
// failed, or was refused before an attempt): they carry the proxy's Date
// (sameSecond gives it one value: compared by presence and place, its
// value is the clock's) and Retrycap-Exhausted when a limit ended the call.
func exchangeAnswer(code int, reason, exhausted, body string) string {
	s := "HTTP/1.1 " + strconv.Itoa(code) + " " + reason + "\r\nDate: (the proxy's clock)\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
	if exhausted != "" {
		s += "Retrycap-Exhausted: " + exhausted + "\r\n"
	}
	return s + "\r\n" + body
}

// ownCase is one request the proxy answers itself, and the answer.
type ownCase struct {
	name, req, want string
	// halfClose: the client shuts its writing side after the request (a
	// tunnel ends when both sides have).
	halfClose bool
}

// ownCases are the requests the proxy answers itself on its HTTP/1.1
// listener, found in both engines' code (every status either writes of its
// own) and in the exchange's: self is the proxy's address, gone an address
// nothing listens on, backend the backend's.
func ownCases(self, gone, backend string) []ownCase {
	_, selfPort, _ := net.SplitHostPort(self)
	malformed := func(why string) string {
		return ownAnswer(400, "Bad Request", "retrycap-proxy: malformed request: "+why+"\n", true)
	}
	const upgrade = "Connection: Upgrade\r\nUpgrade: websocket\r\n"
	return []ownCase{
		// 400s to heads the proxy does not read (forward.MalformedAnswer).
		{name: "400 a bare LF", req: "GET http://backend/ok HTTP/1.1\nHost: backend\n\n", want: malformed("a line ends in a bare LF")},
		{name: "400 two Transfer-Encoding fields", req: "POST http://backend/ok HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", want: malformed("too many transfer-encoding headers")},
		{name: "400 a header name with a blank", req: "GET http://backend/ok HTTP/1.1\r\nHost: backend\r\nBad Name: x\r\n\r\n", want: malformed("a header name with a byte that is not a token character")},
		{name: "400 userinfo", req: "GET http://user@backend/ok HTTP/1.1\r\nHost: backend\r\n\r\n", want: malformed("userinfo in the request target or Host")},
		{name: "400 https scheme", req: "GET https://backend/ok HTTP/1.1\r\nHost: backend\r\n\r\n", want: malformed("a request target whose scheme is not http")},
		{name: "400 no host", req: "GET /ok HTTP/1.0\r\n\r\n", want: ownAnswer(400, "Bad Request", "retrycap-proxy: request has no host\n", true)},
		{name: "400 CONNECT target without a port", req: "CONNECT backend HTTP/1.1\r\nHost: backend\r\n\r\n",
			want: ownAnswer(400, "Bad Request", "retrycap-proxy: CONNECT target must be HOST:PORT, got \"backend\"\n", false)},
		{name: "400 CONNECT target without a port, long", req: "CONNECT " + strings.Repeat("a", 100) + " HTTP/1.1\r\nHost: a\r\n\r\n",
			want: ownAnswer(400, "Bad Request", "retrycap-proxy: CONNECT target must be HOST:PORT, got \""+strings.Repeat("a", 64)+"\"...\n", false)},
		// 408, 413, 431: the limits.
		{name: "408 head cut off", req: "GET http://backend/ok HTTP/1.1\r\nHost: back",
			want: ownAnswer(408, "Request Timeout", "retrycap-proxy: request timeout: request head not received within --http-request-timeout\n", true)},
		{name: "408 body cut off", req: "POST http://backend/ok HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhe",
			want: ownAnswer(408, "Request Timeout", "retrycap-proxy: request timeout: request body not received within --client-timeout\n", true)},
		{name: "413 body over 16 MiB", req: "POST http://backend/ok HTTP/1.1\r\nHost: backend\r\nContent-Length: 16777217\r\n\r\n",
			want: ownAnswer(413, "Request Entity Too Large", "retrycap-proxy: request body larger than 16777216 bytes\n", true)},
		{name: "431 head over 64 KiB", req: "GET http://backend/ok HTTP/1.1\r\nHost: backend\r\nX: " + strings.Repeat("a", 70000) + "\r\n\r\n",
			want: ownAnswer(431, "Request Header Fields Too Large", "retrycap-proxy: request header too large\n", true)},
		// 505, 508s.
		{name: "505 HTTP/3.0", req: "GET http://backend/ok HTTP/3.0\r\nHost: backend\r\n\r\n",
			want: ownAnswer(505, "HTTP Version Not Supported", "retrycap-proxy: HTTP version not supported: \"HTTP/3.0\"\n", true)},
		{name: "508 request to the proxy itself", req: "GET /ok HTTP/1.1\r\nHost: " + self + "\r\n\r\n",
			want: ownAnswer(508, "Loop Detected", "retrycap-proxy: request addressed to the proxy itself ("+self+"): loop refused; send requests for upstreams through HTTP_PROXY in absolute form\n", false)},
		{name: "508 an upstream resolving to the proxy", req: "GET http://localhost:" + selfPort + "/ok HTTP/1.1\r\nHost: localhost:" + selfPort + "\r\n\r\n",
			want: ownAnswer(508, "Loop Detected", "retrycap-proxy: request for upstream localhost (localhost:"+selfPort+") would be sent to the proxy itself: loop refused; an upstream must not resolve to the proxy's own address (--upstreams, --resolve)\n", false)},
		// CONNECT: the tunnel's answers.
		{name: "502 CONNECT target refuses", req: "CONNECT " + gone + " HTTP/1.1\r\nHost: " + gone + "\r\n\r\n",
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: CONNECT "+gone+": dial tcp "+gone+": connect: connection refused\n", true)},
		{name: "200 CONNECT tunnel", req: "CONNECT " + backend + " HTTP/1.1\r\nHost: " + backend + "\r\n\r\nGET /ok HTTP/1.1\r\nHost: backend\r\n\r\n", halfClose: true,
			want: "HTTP/1.1 200 Connection established\r\n\r\n" + smOK},
		// Upgrade: the 502s of an upgrade that did not reach a 101.
		{name: "502 upgrade upstream refuses", req: "GET http://gone/ok HTTP/1.1\r\nHost: gone\r\n" + upgrade + "\r\n",
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: upgrade: upstream gone ("+gone+"): dial tcp "+gone+": connect: connection refused\n", false)},
		{name: "502 upgrade answer without a status line", req: "GET http://backend/nostatus HTTP/1.1\r\nHost: backend\r\n" + upgrade + "\r\n",
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: upgrade: upstream backend ("+backend+"): bad answer: no status line\n", false)},
		{name: "502 upgrade answer head malformed", req: "GET http://backend/badhead HTTP/1.1\r\nHost: backend\r\n" + upgrade + "\r\n",
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: upgrade: upstream backend ("+backend+"): bad answer: the upstream's answer is malformed: a header name with a byte that is not a token character\n", false)},
		{name: "502 upgrade answer status 600", req: "GET http://backend/status600 HTTP/1.1\r\nHost: backend\r\n" + upgrade + "\r\n",
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: upgrade: upstream backend ("+backend+"): bad answer: the upstream's answer has a status outside 100-599: 600\n", false)},
		{name: "502 upgrade answer body malformed", req: "GET http://backend/badchunk HTTP/1.1\r\nHost: backend\r\n" + upgrade + "\r\n",
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: upgrade: upstream backend ("+backend+"): reading the answer: empty hex number\n", false)},
		// 100 Continue before the upstream's answer.
		{name: "100 Continue", req: "POST http://backend/ok HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi",
			want: "HTTP/1.1 100 Continue\r\n\r\n" + smOK},
		// The exchange's own answers.
		{name: "503 attempts exhausted on a refused connection", req: "GET http://gone/ok HTTP/1.1\r\nHost: gone\r\n\r\n",
			want: exchangeAnswer(503, "Service Unavailable", "attempts", "retrycap-proxy: upstream gone ("+gone+"): 2 attempt(s), last failed with connect-failure (dial: dial tcp "+gone+": connect: connection refused); not retried: attempts\n")},
		{name: "502 a bad answer to a POST without a key", req: "POST http://backend/badhead HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi",
			want: exchangeAnswer(502, "Bad Gateway", "", "retrycap-proxy: upstream backend ("+backend+"): 1 attempt(s), last failed with bad-answer (the upstream's answer is malformed: a header name with a byte that is not a token character); not retried: not-retryable\n")},
		{name: "504 no time left", req: "GET http://backend/ok HTTP/1.1\r\nHost: backend\r\nRetrycap-Deadline: 0\r\n\r\n",
			want: exchangeAnswer(504, "Gateway Timeout", "deadline", "retrycap-proxy: upstream backend: no time left (Retrycap-Deadline: 0): nothing forwarded\n")},
	}
}

// TestOwnAnswersAlike sends every request the proxy answers itself (not an
// upstream) to a proxy on each engine, with the same flags and backend, and
// compares the whole answers, byte for byte, with each other and with the
// answer the proxy's documentation gives (docs/proxy.md). The loop hands
// CONNECT, Upgrade, HTTP/1.0, unknown hosts and the heads it cannot parse
// to the goroutine engine, so the goroutine engine's answers are the ones
// both give there: their form is checked against the other own answers'.
func TestOwnAnswersAlike(t *testing.T) {
	b := newFrBackend(t, func(_ int, r *http.Request, _ []byte) []byte {
		switch r.URL.Path {
		case "/nostatus":
			return []byte("garbage\r\n\r\n")
		case "/badhead":
			return []byte("HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 0\r\n\r\n")
		case "/status600":
			return []byte("HTTP/1.1 600 X\r\nContent-Length: 0\r\n\r\n")
		case "/badchunk":
			return []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
		}
		return []byte(smOK)
	})
	goneLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := goneLn.Addr().String()
	_ = goneLn.Close()
	flags := []string{"--upstreams", "backend=3,gone=2,localhost=2", "--resolve", "backend=" + b.addr() + ",gone=" + gone,
		"--http-request-timeout", "300ms", "--client-timeout", "300ms", "--keepalive-timeout", "300ms"}
	loop := startProxyOn(t, "loop", flags...)
	gor := startProxyOn(t, "goroutine", flags...)
	loopCases := ownCases(loop.Addr(), gone, b.addr())
	gorCases := ownCases(gor.Addr(), gone, b.addr())
	for i := range loopCases {
		lc, gc := loopCases[i], gorCases[i]
		t.Run(lc.name, func(t *testing.T) {
			t.Parallel()
			got := make(chan string, 1)
			go func() { got <- ownExchange(t, loop.Addr(), lc.req, lc.halfClose) }()
			fromGor := ownExchange(t, gor.Addr(), gc.req, gc.halfClose)
			fromLoop := <-got
			if fromGor != gc.want {
				t.Errorf("goroutine engine answered\n%q\nwant\n%q", fromGor, gc.want)
			}
			if fromLoop != lc.want {
				t.Errorf("event loop answered\n%q\nwant\n%q", fromLoop, lc.want)
			}
			// The engines alike, the proxy's own port aside (the two
			// proxies listen on two ports; ephemeral, 5 digits both).
			if a, b := strings.ReplaceAll(fromLoop, ":"+ownPort(loop.Addr()), ":SELF"), strings.ReplaceAll(fromGor, ":"+ownPort(gor.Addr()), ":SELF"); a != b {
				t.Errorf("the engines differ:\nloop      %q\ngoroutine %q", a, b)
			}
		})
	}
}

// ownExchange writes req on a new connection and returns what the proxy
// wrote until it closed the connection, its Date lines made one (sameSecond).
func ownExchange(t *testing.T, addr, req string, halfClose bool) string {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a hang, not a timing
	if _, err := io.WriteString(c, req); err != nil {
		t.Error(err)
		return ""
	}
	if halfClose {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	got, err := io.ReadAll(bufio.NewReader(c))
	// A close with the rest of a refused head unread resets the
	// connection after the answer: what came before counts.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("reading the answers: %v (read %q)", err, got)
	}
	return sameSecond(string(got))
}

func ownPort(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestOwnAnswersAlikeLimits: the exchange's own answers to a call a limit
// ended (the retry budget, the circuit breaker, the per-try timeout), in
// order on each engine (the first call's retry finds no budget, the
// second call's failure opens the breaker, the third finds it open),
// compared as TestOwnAnswersAlike compares.
func TestOwnAnswersAlikeLimits(t *testing.T) {
	release := make(chan struct{})
	b := newFrBackend(t, func(_ int, r *http.Request, _ []byte) []byte {
		if r.URL.Path == "/hang" {
			<-release // past the per-try timeout: until the test ends
		}
		return []byte(smOK)
	})
	t.Cleanup(func() { close(release) }) // before the backend's cleanup, which waits for its handlers
	goneLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := goneLn.Addr().String()
	_ = goneLn.Close()
	flags := []string{"--upstreams", "backend=3,gone=3", "--resolve", "backend=" + b.addr() + ",gone=" + gone,
		"--breaker-failures", "2", "--budget-percent", "0", "--budget-min-per-second", "0", "--per-try-timeout", "100ms"}
	loop := startProxyOn(t, "loop", flags...)
	gor := startProxyOn(t, "goroutine", flags...)
	closing := func(answer string) string {
		return strings.Replace(answer, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
	}
	const get = "GET http://gone/ok HTTP/1.1\r\nHost: gone\r\nConnection: close\r\n\r\n"
	refused := "last failed with connect-failure (dial: dial tcp " + gone + ": connect: connection refused)"
	cases := []ownCase{
		{name: "503 no retry budget", req: get,
			want: closing(exchangeAnswer(503, "Service Unavailable", "budget", "retrycap-proxy: upstream gone ("+gone+"): 1 attempt(s), "+refused+"; not retried: budget\n"))},
		{name: "503 the breaker opened", req: get,
			want: closing(exchangeAnswer(503, "Service Unavailable", "breaker", "retrycap-proxy: upstream gone ("+gone+"): 1 attempt(s), "+refused+"; not retried: breaker\n"))},
		{name: "503 the breaker open", req: get,
			want: closing(exchangeAnswer(503, "Service Unavailable", "breaker", "retrycap-proxy: upstream gone: circuit breaker open\n"))},
		// The limit that ended the attempt, in the proxy's words (was the
		// transport's "fasthttp: timeout" on both engines).
		{name: "504 per-try timeout", req: "GET http://backend/hang HTTP/1.1\r\nHost: backend\r\nConnection: close\r\n\r\n",
			want: closing(exchangeAnswer(504, "Gateway Timeout", "", "retrycap-proxy: upstream backend ("+b.addr()+"): 1 attempt(s), last failed with timeout (no answer within the per-try timeout 100ms)\n"))},
		{name: "504 the deadline cut the attempt", req: "GET http://backend/hang HTTP/1.1\r\nHost: backend\r\nRetrycap-Deadline: 50\r\nConnection: close\r\n\r\n",
			want: closing(exchangeAnswer(504, "Gateway Timeout", "deadline", "retrycap-proxy: upstream backend ("+b.addr()+"): 1 attempt(s), last failed with timeout (no answer before the call's deadline); not retried: deadline\n"))},
		// An upgrade the upstream never answers: the limit, not a "bad
		// answer" (was "bad answer from the upstream: read tcp ...: i/o
		// timeout", naming neither the upstream nor the limit).
		{name: "502 upgrade not answered", req: "GET http://backend/hang HTTP/1.1\r\nHost: backend\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", halfClose: true,
			want: ownAnswer(502, "Bad Gateway", "retrycap-proxy: upgrade: upstream backend ("+b.addr()+"): no answer within the per-try timeout 100ms\n", false)},
	}
	for _, tc := range cases {
		fromGor := ownExchange(t, gor.Addr(), tc.req, tc.halfClose)
		fromLoop := ownExchange(t, loop.Addr(), tc.req, tc.halfClose)
		if fromGor != tc.want {
			t.Errorf("%s: goroutine engine answered\n%q\nwant\n%q", tc.name, fromGor, tc.want)
		}
		if fromLoop != fromGor {
			t.Errorf("%s: the engines differ:\nloop      %q\ngoroutine %q", tc.name, fromLoop, fromGor)
		}
	}
}
