package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEnginesAnswerAlike sends the same raw requests through a proxy on
// each engine (same backend, same flags) and compares the answers byte for
// byte: the event loop must forward requests and write answers exactly as
// the goroutine engine does (headers cleaned the same way, no Date or
// Content-Type of its own, the same messages for the proxy's own answers).
func TestEnginesAnswerAlike(t *testing.T) {
	mux := http.NewServeMux()
	// echo answers with what the backend received: request line, Host and
	// every header, sorted, so that request handling is compared too.
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Date"] = []string{"Mon, 30 Nov 2026 07:00:00 GMT"}
		w.Header().Set("Content-Type", "text/plain")
		body, _ := io.ReadAll(r.Body)
		var lines []string
		for k, vs := range r.Header {
			lines = append(lines, k+": "+strings.Join(vs, " | "))
		}
		slices.Sort(lines)
		fmt.Fprintf(w, "%s %s %s\nhost %s\n%s\nbody %q\n", r.Method, r.RequestURI, r.Proto, r.Host, strings.Join(lines, "\n"), body)
	})
	// bare: no Date, no Content-Type (the proxy must not add either).
	mux.HandleFunc("/bare", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header()["Content-Type"] = nil
		_, _ = io.WriteString(w, "bare")
	})
	// hop: hop-by-hop headers in the answer, some nominated by Connection.
	mux.HandleFunc("/hop", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("Connection", "X-Private, keep-alive")
		w.Header().Set("X-Private", "secret")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("X-Kept", "yes")
		w.WriteHeader(202)
	})
	mux.HandleFunc("/nocontent", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("X-Kind", "204")
		w.WriteHeader(204)
	})
	mux.HandleFunc("/notmodified", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("ETag", `"v1"`)
		w.WriteHeader(304)
	})
	mux.HandleFunc("/unavailable", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(503)
		_, _ = io.WriteString(w, "down")
	})
	mux.HandleFunc("/exhausted", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("Retrycap-Exhausted", "budget")
		w.WriteHeader(503)
	})
	mux.HandleFunc("/large", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = io.WriteString(w, strings.Repeat("0123456789abcdef", 5000)) // 80,000 bytes: streamed
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Date"] = nil
		for i := range 3 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/lower", func(w http.ResponseWriter, _ *http.Request) {
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nx-lower-case: v\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
		_ = buf.Flush()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	backend := ln.Addr().String()

	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedAddr := refused.Addr().String()
	refused.Close()

	flags := []string{"--upstreams", "backend=3,gone=2", "--resolve", "backend=" + backend + ",gone=" + refusedAddr, "--chain-cap", "4"}
	loop := startProxyOn(t, "loop", flags...)
	gor := startProxyOn(t, "goroutine", flags...)

	cases := []struct {
		name, req string
		streamed  bool // chunk sizes depend on timing: compared decoded
	}{
		{"get", "GET http://backend/echo?q=1 HTTP/1.1\r\nHost: backend\r\nUser-Agent: t\r\nAccept: */*\r\n\r\n", false},
		{"origin form", "GET /echo HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"post with body and key", "POST http://backend/echo HTTP/1.1\r\nHost: backend\r\nIdempotency-Key: k-1\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nhello world", false},
		{"chain headers", "GET http://backend/echo HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 9\r\nRetrycap-Budget: 3\r\nBaggage: a=1, retrycap-budget=2, b=2\r\n\r\n", false},
		{"hop-by-hop request headers", "GET http://backend/echo HTTP/1.1\r\nHost: backend\r\nConnection: X-Drop, keep-alive\r\nX-Drop: 1\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nKeep-Alive: 5\r\nTe: trailers\r\nX-Keep: 2\r\n\r\n", false},
		{"lower-case header names", "GET http://backend/echo HTTP/1.1\r\nhost: backend\r\nx-custom-thing: v\r\n\r\n", false},
		{"no date no content type", "GET http://backend/bare HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"hop-by-hop answer headers", "GET http://backend/hop HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"204", "GET http://backend/nocontent HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"304", "GET http://backend/notmodified HTTP/1.1\r\nHost: backend\r\nIf-None-Match: \"v1\"\r\n\r\n", false},
		{"head", "HEAD http://backend/echo HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"503 retried then exhausted", "GET http://backend/unavailable HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"exhausted below", "GET http://backend/exhausted HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"POST without key not retried", "POST http://backend/unavailable HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi", false},
		{"streamed large", "GET http://backend/large HTTP/1.1\r\nHost: backend\r\n\r\n", true},
		{"streamed chunked", "GET http://backend/chunked HTTP/1.1\r\nHost: backend\r\n\r\n", true},
		{"answer with lower-case names", "GET http://backend/lower HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"connection refused", "GET http://gone/ HTTP/1.1\r\nHost: gone\r\n\r\n", false},
		// The proxy's refusals: no Date on either engine, a newline at
		// the end (the goroutine engine's carried a Date; the 400 ended
		// "no host" without one).
		{"HTTP/1.0 without Host", "GET /echo HTTP/1.0\r\n\r\n", false},
		{"body over 16 MiB", "POST http://backend/echo HTTP/1.1\r\nHost: backend\r\nContent-Length: 16777217\r\n\r\n", false},
		{"bodiless OPTIONS and DELETE", "OPTIONS http://backend/echo HTTP/1.1\r\nHost: backend\r\n\r\nDELETE http://backend/echo HTTP/1.1\r\nHost: backend\r\n\r\n", false},
		{"chain budget of 1 on a retried 503", "GET http://backend/unavailable HTTP/1.1\r\nHost: backend\r\nRetrycap-Budget: 1\r\n\r\n", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Two requests on one connection, the second asking to close,
			// so the whole exchange is read to its end: the answers'
			// framing is compared along with their bytes.
			req := tc.req + strings.Replace(tc.req, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
			want := sameSecond(rawExchange(t, gor.Addr(), req))
			got := sameSecond(rawExchange(t, loop.Addr(), req))
			if tc.streamed {
				want, got = decoded(t, want), decoded(t, got)
			}
			if got != want {
				t.Errorf("event loop answered\n%s\ngoroutine engine answered\n%s", got, want)
			}
			if !strings.HasPrefix(want, "HTTP/1.1 ") {
				t.Fatalf("no answer: %q", want)
			}
			if tc.name == "connection refused" && !strings.Contains(want, "\r\nDate: (the proxy's clock)\r\n") {
				t.Errorf("the proxy's own answer's Date was not recognised: %q", want)
			}
		})
	}
}

// proxyDate is a Date line the proxy writes on its own answers (the
// backend's are fixed, "Mon, 30 Nov 2026 07:00:00 GMT").
var proxyDate = regexp.MustCompile(`(?m)^Date: (Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r$`)

// sameSecond gives the proxy's own Date lines one value: the two engines'
// answers are seconds apart at times (a second boundary crossed between
// them: "17:02:12" beside "17:02:13" failed a run). Whether a Date is
// there, and where, is still compared.
func sameSecond(raw string) string {
	return proxyDate.ReplaceAllStringFunc(raw, func(line string) string {
		if line == "Date: Mon, 30 Nov 2026 07:00:00 GMT\r" {
			return line
		}
		return "Date: (the proxy's clock)\r"
	})
}

// rawExchange writes req on a new connection and returns every byte read
// until the proxy closes it.
func rawExchange(t *testing.T, addr, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(bufio.NewReader(c))
	if err != nil {
		t.Fatalf("reading the answer: %v (read %q)", err, b)
	}
	return string(b)
}

// decoded renders the answers in raw (read to the end of the connection)
// with their bodies decoded: status, headers sorted, body.
func decoded(t *testing.T, raw string) string {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(raw))
	var out strings.Builder
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return out.String()
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("answer %q: %v", raw, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer body: %v", err)
		}
		var lines []string
		for k, vs := range resp.Header {
			lines = append(lines, k+": "+strings.Join(vs, " | "))
		}
		slices.Sort(lines)
		fmt.Fprintf(&out, "%s %v %s\n%s\nbody %d bytes %q...\n", resp.Proto, resp.TransferEncoding, resp.Status, strings.Join(lines, "\n"), len(body), body[:min(len(body), 64)])
		if len(body) > 64 {
			fmt.Fprintf(&out, "sum %x\n", body[len(body)-64:])
		}
	}
}
