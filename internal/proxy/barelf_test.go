package proxy

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// A head the proxy refuses before parsing it (a bare LF) is answered at
// once with the loop's 400, byte for byte, on either engine and on every
// connection: the first request, a later one on a keep-alive connection,
// one pipelined behind others, one on a connection the loop handed off
// (the goroutine engine's pre-parser, headConn, answers those). The
// head timeout is a minute, and every read here has 5 seconds: a head left
// waiting fails the test. Bytes that only look like such a head inside a
// body are a body, forwarded. A bare LF in a chunked request's trailer
// section is refused alike, the request not forwarded.
func TestFramingBareLFRefusedOnEveryPath(t *testing.T) {
	b := newFrBackend(t, nil)
	p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--chain-cap", "4", "--http-request-timeout", "1m")
	refusal := "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 60\r\nConnection: close\r\n\r\n" +
		"retrycap-proxy: malformed request: a line ends in a bare LF\n"
	if got := string(forward.MalformedAnswer("a line ends in a bare LF")); got != refusal {
		t.Fatalf("forward.MalformedAnswer = %q, want %q", got, refusal)
	}
	ok := "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	get := "GET http://backend/ok HTTP/1.1\r\nHost: backend\r\n\r\n"
	lfLine := "GET http://backend/lf HTTP/1.1\nHost: backend\r\n\r\n"
	lfHeader := "GET http://backend/lf HTTP/1.1\r\nHost: backend\nX-A: 1\r\n\r\n"
	lfEnd := "GET http://backend/lf HTTP/1.1\r\nHost: backend\r\nX-A: 1\n\n"
	lfAll := "GET http://backend/lf HTTP/1.1\nHost: backend\n\n"
	chunkedPost := "POST http://backend/c HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked("GET /x HTTP/1.1\nHost: x\n\n")
	lengthPost := "POST http://backend/l HTTP/1.1\r\nHost: backend\r\nContent-Length: 25\r\n\r\nGET /y HTTP/1.1\nHost: y\n\n"
	expect := "POST http://backend/e HTTP/1.1\r\nHost: backend\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"
	// Chunked requests whose trailer section has a bare LF (the loop hands
	// every chunked request off; the pre-parser refuses these).
	chunkedHead := "POST http://backend/t HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n"
	lfTrailer := chunkedHead + "2\r\nhi\r\n0\r\nX-T: 1\n\r\n"
	lfTrailerEnd := chunkedHead + "2\r\nhi\r\n0\r\nX-T: 1\r\n\n"
	lfNoTrailer := chunkedHead + "2\r\nhi\r\n0\r\n\n"
	for _, c := range []struct {
		name string
		// sends, each written once the answers to the one before are read
		// (answers of them: final answers, after any 100).
		sends   []string
		answers []int
		// want: every byte the client reads, to the close; forwarded: the
		// request paths the backend got.
		want      string
		forwarded []string
	}{
		{"request line", []string{lfLine}, []int{0}, refusal, nil},
		{"header line", []string{lfHeader}, []int{0}, refusal, nil},
		{"empty line", []string{lfEnd}, []int{0}, refusal, nil},
		{"every line", []string{lfAll}, []int{0}, refusal, nil},
		{"second request, keep-alive", []string{get, lfLine}, []int{1, 0}, ok + refusal, []string{"/ok"}},
		{"third request, pipelined", []string{get + get + lfHeader}, []int{0}, ok + ok + refusal, []string{"/ok", "/ok"}},
		{"after a chunked request (handed off by the loop)", []string{chunkedPost, lfLine}, []int{1, 0}, ok + refusal, []string{"/c"}},
		{"after a chunked request, pipelined", []string{chunkedPost + lfHeader}, []int{0}, ok + refusal, []string{"/c"}},
		{"after a body, pipelined", []string{lengthPost + lfAll}, []int{0}, ok + refusal, []string{"/l"}},
		{"after Expect (handed off by the loop)", []string{expect, get, lfEnd}, []int{1, 1, 0}, "HTTP/1.1 100 Continue\r\n\r\n" + ok + ok + refusal, []string{"/e", "/ok"}},
		{"after a head sent in pieces", []string{"GET http://backend/ok HTTP/1.1\r\nHo", "st: backend\r\n\r\n", lfLine}, []int{0, 1, 0}, ok + refusal, []string{"/ok"}},
		{"a head sent in pieces", []string{get, "GET http://backend/lf HTTP/1.1\r\nHost: backend\r", "\n\n"}, []int{1, 0, 0}, ok + refusal, []string{"/ok"}},
		{"chunked trailer field", []string{lfTrailer}, []int{0}, refusal, nil},
		{"chunked trailers' empty line", []string{lfTrailerEnd}, []int{0}, refusal, nil},
		{"chunked, no trailer field", []string{lfNoTrailer}, []int{0}, refusal, nil},
		{"chunked trailer, head first", []string{chunkedHead, "2\r\nhi\r\n0\r\nX-T: 1\n\r\n"}, []int{0, 0}, refusal, nil},
		{"chunked trailer in pieces", []string{chunkedHead + "2\r\nhi\r\n0\r\nX-T: 1\n", "X-U: 2\r\n\r\n"}, []int{0, 0}, refusal, nil},
		{"chunked trailer, keep-alive", []string{get, lfTrailer}, []int{1, 0}, ok + refusal, []string{"/ok"}},
		{"chunked trailer, pipelined", []string{get + chunkedPost + lfTrailer}, []int{0}, ok + ok + refusal, []string{"/ok", "/c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, before := b.received()
			conn := proxytest.Dial(t, p.Addr())
			var raw strings.Builder
			conn.BR = bufio.NewReader(io.TeeReader(conn.C, &raw))
			for i, s := range c.sends {
				conn.Send(s)
				for range c.answers[i] {
					for {
						if resp, _ := conn.Answer(methodOf(s)); resp.StatusCode >= 200 {
							break
						}
					}
				}
			}
			conn.Rest()
			if got := raw.String(); got != c.want {
				t.Errorf("the client read\n%q\nwant\n%q", got, c.want)
			}
			_, after := b.received()
			var paths []string
			for _, r := range after[len(before):] {
				paths = append(paths, r.uri)
			}
			if strings.Join(paths, " ") != strings.Join(c.forwarded, " ") {
				t.Errorf("backend got %v, want %v", paths, c.forwarded)
			}
		})
	}
	// The bodies above were forwarded whole, their bare-LF "heads" with them.
	_, reqs := b.received()
	for _, r := range reqs {
		if want := map[string]string{"/c": "GET /x HTTP/1.1\nHost: x\n\n", "/l": "GET /y HTTP/1.1\nHost: y\n\n", "/e": "hi"}[r.uri]; want != "" && r.body != want {
			t.Errorf("backend got %s with the body %q, want %q", r.uri, r.body, want)
		}
	}
}

// A NUL in a head is fasthttp's to refuse, on either engine (the loop hands
// such a head off): the same 400 and its message, whichever engine serves,
// without a Date (as the loop's own refusals).
func TestFramingNULRefused(t *testing.T) {
	b := newFrBackend(t, nil)
	p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+b.addr(), "--http-request-timeout", "1m")
	date := regexp.MustCompile(`\r\nDate: [^\r]*`)
	for req, msg := range map[string]string{
		// In the proxy's words (forward.Reason), never the head's bytes.
		"GET http://backend/n HTTP/1.1\r\nHost: backend\r\nX-A: \x001\r\n\r\n": "invalid header value",
		"GET http://backend/n HTTP/1.1\r\nHost: backend\r\nX\x00A: 1\r\n\r\n":  "malformed header line",
	} {
		body := "retrycap-proxy: malformed request: " + msg + "\n"
		want := "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body
		if got := date.ReplaceAllString(frExchange(t, p.Addr(), req, 0, "GET"), ""); got != want {
			t.Errorf("%q: the client read\n%q\nwant (Date aside)\n%q", req, got, want)
		}
	}
	if raw, _ := b.received(); raw != "" {
		t.Errorf("backend received %q, want nothing", raw)
	}
}

func methodOf(req string) string {
	m, _, _ := strings.Cut(req, " ")
	return m
}

// A head fasthttp parses but the proxy does not read (a header name with a
// space, an obs-fold line) gets the loop's bytes on either engine too.
func TestFramingParsedHeadRefusedAlike(t *testing.T) {
	b := newFrBackend(t, nil)
	p := startProxy(t, "--upstreams", "backend=3", "--resolve", "backend="+b.addr())
	for bad, why := range map[string]string{
		"X A: 1":       "a header name with a byte that is not a token character",
		"X-A: 1\r\n b": "a folded header line (obs-fold)",
	} {
		ans := frExchange(t, p.Addr(), "GET http://backend/ HTTP/1.1\r\nHost: backend\r\n"+bad+"\r\n\r\n", 0, "GET")
		if want := string(forward.MalformedAnswer(why)); ans != want {
			t.Errorf("%q: the client read\n%q\nwant\n%q", bad, ans, want)
		}
	}
	if raw, _ := b.received(); raw != "" {
		t.Errorf("backend received %q, want nothing", raw)
	}
}
