package proxy

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// TestAdvCutBodyLogged: an answer whose head went to the client and whose
// body the upstream then cut (its close or reset mid-body, a broken chunk)
// is logged with the cut: "cut":"upstream" and the body bytes read by then,
// after the status it had, and counted in
// retrycap_proxy_responses_cut_total{by="upstream"}. Before, its line read
// "status":200 like a whole answer's (it was written at the head), and
// nothing counted it. A whole streamed answer's line has no cut; a body of
// known length up to 64 KiB is read before the head goes out, so its cut
// is the attempt's failure (a 502 for a POST, "status":0, "error":"reset"),
// never a 200.
func TestAdvCutBodyLogged(t *testing.T) {
	const chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	const line = `{"log":"retrycap-access","time":"T","upstream":"backend","method":"POST","authority":"backend","path":"/1","attempt":1,`
	big := strings.Repeat("x", 50000)
	cases := []struct {
		name  string
		parts []string // "" waits for the client to have the head
		rst   bool
		want  string // the access-log line, its time and duration as "T" and 0
		cut   float64
	}{
		{"Content-Length 100000, the close after 50000", []string{"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, ""}, false,
			line + `"status":200,"duration_us":0,"cut":"upstream","body_bytes":50000}`, 1},
		{"Content-Length 100000, a reset after 50000", []string{"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, ""}, true,
			line + `"status":200,"duration_us":0,"cut":"upstream","body_bytes":50000}`, 1},
		{"chunked, the close after a chunk", []string{chunkedHead + "5\r\nhello\r\n", ""}, false,
			line + `"status":200,"duration_us":0,"cut":"upstream","body_bytes":5}`, 1},
		{"chunked, the close inside a chunk", []string{chunkedHead + "a\r\nhello", ""}, false,
			line + `"status":200,"duration_us":0,"cut":"upstream","body_bytes":5}`, 1},
		{"chunked, an invalid chunk size", []string{chunkedHead + "5\r\nhello\r\nzz\r\nhello\r\n0\r\n\r\n", ""}, false,
			line + `"status":200,"duration_us":0,"cut":"upstream","body_bytes":5}`, 1},
		{"a 503, chunked, the close after a chunk", []string{"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", ""}, false,
			line + `"status":503,"duration_us":0,"exhausted":"not-retryable","cut":"upstream","body_bytes":5}`, 1},
		// Whole: no cut.
		{"chunked, whole", []string{chunkedHead + "5\r\nhello\r\n", "", "0\r\n\r\n"}, false,
			line + `"status":200,"duration_us":0}`, 0},
		{"Content-Length 100000, whole", []string{"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + big, "", big}, false,
			line + `"status":200,"duration_us":0}`, 0},
		// Read before the head goes out: the attempt failed.
		{"Content-Length 1000, the close after 500", []string{"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + big[:500]}, false,
			line + `"status":0,"duration_us":0,"exhausted":"not-retryable","error":"reset"}`, 0},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		for _, tc := range cases {
			t.Run(engine+"/"+tc.name, func(t *testing.T) {
				up := newStreamUpstream(t, tc.parts, tc.rst, "")
				logPath := filepath.Join(t.TempDir(), "access.log")
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String(),
					"--retry-on", "reset,timeout,503", "--access-log", logPath)
				c := proxytest.Dial(t, p.Addr())
				c.Send("POST http://backend/1 HTTP/1.1\r\nHost: backend\r\nContent-Length: 4\r\n\r\nbody")
				if strings.Contains(tc.want, `"status":0`) {
					// The attempt failed: the proxy's 502, on a connection that stays.
					c.Expect("POST", http.StatusBadGateway, "retrycap-proxy: upstream backend ("+up.ln.Addr().String()+"): 1 attempt(s), last failed with reset (the upstream closed the connection before the whole response: unexpected EOF); not retried: not-retryable\n")
				} else if tc.cut == 0 {
					// Whole: the answer, then the next request's on the same connection.
					resp, err := http.ReadResponse(c.BR, &http.Request{Method: "POST"})
					if err != nil {
						t.Fatal(err)
					}
					close(up.hold) // the body's rest, after the client has the head
					b, err := io.ReadAll(resp.Body)
					if err != nil || resp.StatusCode != 200 || (len(b) != 5 && len(b) != 100000) {
						t.Fatalf("the answer: %d, %d bytes, %v; want 200 and its whole body", resp.StatusCode, len(b), err)
					}
				} else {
					if len(tc.parts) > 1 {
						// The head before the upstream's go-ahead: it was committed.
						if _, err := c.BR.ReadString('\n'); err != nil {
							t.Fatalf("the head's first line: %v", err)
						}
						close(up.hold)
					}
					_ = c.Rest() // to the close
				}
				proxytest.Wait(t, up.ended, "the upstream's end")
				if got := onlyLogLine(t, p, logPath); got != tc.want {
					t.Errorf("access log\n%s\nwant\n%s", got, tc.want)
				}
				if n := counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": "upstream"}); n != tc.cut {
					t.Errorf("retrycap_proxy_responses_cut_total{by=upstream} %v, want %v", n, tc.cut)
				}
				if n := counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": "client"}); n != 0 {
					t.Errorf("retrycap_proxy_responses_cut_total{by=client} %v, want 0", n)
				}
			})
		}
	}
}

// TestAdvCutBodyLoggedClient: a client that resets its connection mid-body
// has its line read "cut":"client" (and the metric's by="client"), never
// the upstream's.
func TestAdvCutBodyLoggedClient(t *testing.T) {
	const chunkedHead = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	const want = `{"log":"retrycap-access","time":"T","upstream":"backend","method":"GET","authority":"backend","path":"/1","attempt":1,"status":200,"duration_us":0,"cut":"client","body_bytes":5}`
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			up := newStreamUpstream(t, []string{chunkedHead + "5\r\nhello\r\n", "", "5\r\nworld\r\n0\r\n\r\n"}, false, "")
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+up.ln.Addr().String(),
				"--access-log", logPath)
			c := proxytest.Dial(t, p.Addr())
			c.Send("GET http://backend/1 HTTP/1.1\r\nHost: backend\r\n\r\n")
			got := make([]byte, len(chunkedHead)+len("5\r\nhello\r\n"))
			if _, err := io.ReadFull(c.BR, got); err != nil || string(got) != chunkedHead+"5\r\nhello\r\n" {
				t.Fatalf("the client read %q (%v), want the head and the first chunk", got, err)
			}
			resetNow(t, c.C, c.BR)
			proxytest.Eventually(t, "the cut counted", func() bool {
				return counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": "client"}) == 1
			})
			close(up.hold)
			proxytest.Wait(t, up.ended, "the upstream's end")
			if line := onlyLogLine(t, p, logPath); line != want {
				t.Errorf("access log\n%s\nwant\n%s", line, want)
			}
			if n := counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": "upstream"}); n != 0 {
				t.Errorf("retrycap_proxy_responses_cut_total{by=upstream} %v, want 0", n)
			}
		})
	}
}

var logClock = regexp.MustCompile(`"time":"[^"]*"|"duration_us":[0-9]+`)

// onlyLogLine waits for p's access log to have written a line, closes it
// and returns the whole log, its time and duration as "T" and 0.
func onlyLogLine(t *testing.T, p *Proxy, path string) string {
	t.Helper()
	proxytest.Eventually(t, "the access-log line", func() bool { return p.accessLog.w.Written() >= 1 })
	if err := p.accessLog.w.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return logClock.ReplaceAllStringFunc(strings.TrimSuffix(string(data), "\n"), func(s string) string {
		if strings.HasPrefix(s, `"time"`) {
			return `"time":"T"`
		}
		return `"duration_us":0`
	})
}
