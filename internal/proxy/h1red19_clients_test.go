package proxy

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// r19Backend is a raw upstream that counts each request's executions by
// its path (its complete head arrived) and fails every execution as fail
// says: "head-fin" (closed, the body unread), "partbody-rst" (one body
// byte read, then reset), "body-fin" and "body-rst" (the whole body read),
// "early-503" (a 503 with Connection: close before the body is read, then
// its write side shut and the body drained), "ok" (a 200); "by-path":
// the path's first segment says which.
type r19Backend struct {
	mu    sync.Mutex
	execs map[string]int
	addr  string
}

func newR19Backend(t *testing.T, fail string) *r19Backend {
	b := &r19Backend{execs: map[string]int{}}
	ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b.mu.Lock()
			b.execs[r.URL.Path]++
			b.mu.Unlock()
			fail := fail
			if fail == "by-path" {
				fail = strings.Split(r.URL.Path, "/")[1]
			}
			switch fail {
			case "head-fin":
				return
			case "partbody-rst":
				_, _ = io.ReadFull(r.Body, make([]byte, 1))
				_ = c.SetLinger(0)
				return
			case "body-fin", "body-rst":
				_, _ = io.Copy(io.Discard, r.Body)
				if fail == "body-rst" {
					_ = c.SetLinger(0)
				}
				return
			case "early-503":
				_, _ = io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbusy")
				_ = c.CloseWrite()
				_, _ = io.Copy(io.Discard, br)
				return
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"); err != nil {
				return
			}
		}
	})
	b.addr = ln.Addr().String()
	return b
}

func (b *r19Backend) count(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execs[path]
}

// TestH1Red19GoClientKeylessOnce: Go's net/http client (its Transport
// pools connections to the proxy and re-sends a request itself when a
// reused connection fails before the request was written) sends 30 keyless
// POSTs at a time through the proxy, over both engines, with a body of 100
// bytes (buffered, replayable by size) and of 200 KiB (streamed: the loop
// hands it off), to an upstream that fails each one after reading its
// head, part of its body, all of it, by a FIN or a reset, or answers 503
// early with Connection: close; with Go's Expect: 100-continue and
// without. Asserted for every request: the upstream
// executed it exactly once (neither the proxy nor Go's client sent it
// again), the client got the proxy's 502 naming one attempt and
// "not-retryable" (or the upstream's early 503 as it came), no
// Retrycap-Exhausted; its one access-log line (attempt 1, the reset or
// the 503, "not-retryable"); and the proxy's counters: 30 attempts, no
// retry, no stale re-send.
func TestH1Red19GoClientKeylessOnce(t *testing.T) {
	const n = 30
	for _, engine := range []string{"loop", "goroutine"} {
		for _, fail := range []string{"head-fin", "partbody-rst", "body-fin", "body-rst", "early-503"} {
			for _, size := range []int{100, 200 << 10} {
				for _, expect := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/%d/expect=%t", engine, fail, size, expect), func(t *testing.T) {
						b := newR19Backend(t, fail)
						log := filepath.Join(t.TempDir(), "access.log")
						p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr,
							"--retry-on", "connect-failure,reset,timeout,5xx", "--access-log", log)
						client := proxytest.Client(p.Addr())
						defer client.CloseIdleConnections()
						if expect {
							// Go's client sends Expect: 100-continue and waits up
							// to 5 s for the 100 before the body.
							client.Transport.(*http.Transport).ExpectContinueTimeout = 5 * time.Second
						}
						body := proxytest.Pattern(size)
						var wg sync.WaitGroup
						errs := make(chan string, n)
						for i := 0; i < n; i++ {
							wg.Add(1)
							go func() {
								defer wg.Done()
								path := fmt.Sprintf("/order/%d", i)
								req, err := http.NewRequest("POST", "http://backend"+path, bytes.NewReader(body))
								if err != nil {
									errs <- err.Error()
									return
								}
								if expect {
									req.Header.Set("Expect", "100-continue")
								}
								resp, err := client.Do(req)
								if err != nil {
									errs <- fmt.Sprintf("%s: %v", path, err)
									return
								}
								got, err := io.ReadAll(resp.Body)
								_ = resp.Body.Close()
								if err != nil {
									errs <- fmt.Sprintf("%s: reading the answer: %v", path, err)
									return
								}
								if ex := resp.Header.Get("Retrycap-Exhausted"); ex != "" {
									errs <- fmt.Sprintf("%s: Retrycap-Exhausted %q", path, ex)
								}
								switch {
								case fail == "early-503":
									if resp.StatusCode != http.StatusServiceUnavailable || string(got) != "busy" {
										errs <- fmt.Sprintf("%s: answer %d %q, want the upstream's 503 \"busy\"", path, resp.StatusCode, got)
									}
								case resp.StatusCode != http.StatusBadGateway ||
									!strings.HasPrefix(string(got), "retrycap-proxy: upstream backend ("+b.addr+"): 1 attempt(s), last failed with reset (") ||
									!strings.HasSuffix(string(got), "; not retried: not-retryable\n"):
									errs <- fmt.Sprintf("%s: answer %d %q, want the proxy's 502 after 1 attempt, not retried: not-retryable", path, resp.StatusCode, got)
								}
							}()
						}
						wg.Wait()
						close(errs)
						for e := range errs {
							t.Error(e)
						}
						for i := 0; i < n; i++ {
							if got := b.count(fmt.Sprintf("/order/%d", i)); got != 1 {
								t.Errorf("/order/%d executed %d times, want 1", i, got)
							}
						}
						proxytest.Eventually(t, "every attempt logged", func() bool { return p.accessLog.w.Written() >= n })
						// One line per request, its one attempt, in the
						// proxy's words: the reset, or the upstream's 503.
						lines, _ := os.ReadFile(log)
						want := map[string]bool{}
						for i := 0; i < n; i++ {
							outcome := `"status":0,"duration_us":0,"exhausted":"not-retryable","error":"reset"}`
							if fail == "early-503" {
								outcome = `"status":503,"duration_us":0,"exhausted":"not-retryable"}`
							}
							want[fmt.Sprintf(`{"log":"retrycap-access","time":"T","upstream":"backend","method":"POST","authority":"backend","path":"/order/%d","attempt":1,`, i)+outcome] = true
						}
						got := strings.Split(strings.TrimSuffix(string(lines), "\n"), "\n")
						for _, l := range got {
							l = logClock.ReplaceAllStringFunc(l, func(s string) string {
								if strings.HasPrefix(s, `"time"`) {
									return `"time":"T"`
								}
								return `"duration_us":0`
							})
							if !want[l] {
								t.Errorf("access log line %s, not one of the %d wanted", l, n)
							}
							delete(want, l)
						}
						if len(got) != n || len(want) != 0 {
							t.Errorf("%d access-log lines, want %d (%d wanted not seen)", len(got), n, len(want))
						}
						m := metricsText(t, p)
						for _, s := range []struct {
							series string
							want   float64
						}{
							{`retrycap_proxy_attempts_total{upstream="backend"}`, n},
							{`retrycap_proxy_retries_total{upstream="backend"}`, 0},
							{`retrycap_proxy_stale_resends_total{upstream="backend"}`, 0},
						} {
							if got := metricSum(m, s.series); got != s.want {
								t.Errorf("%s = %v, want %v", s.series, got, s.want)
							}
						}
					})
				}
			}
		}
	}
}

// metricSum sums the samples of the series whose name and labels begin
// with prefix (its closing brace left out: other labels may follow).
func metricSum(text, prefix string) float64 {
	prefix = strings.TrimSuffix(prefix, "}")
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			if i := strings.LastIndexByte(line, ' '); i > 0 {
				_, _ = fmt.Sscan(line[i+1:], &v)
			}
			sum += v
		}
	}
	return sum
}

// TestH1Red19CurlSlowUpload: curl uploads slowly (--limit-rate) through
// the proxy on both engines, by Content-Length (--data-binary) and chunked
// (-T - from stdin, with curl's Expect: 100-continue and without); whole,
// it executes once with every byte; cut by --max-time mid-body, it never
// reaches the upstream as a complete request (the backend counts only a
// whole body), the proxy ends the call (nothing in flight) and logs it.
func TestH1Red19CurlSlowUpload(t *testing.T) {
	curlPath(t)
	body := proxytest.Pattern(160 << 10)
	ways := []struct {
		name  string
		args  []string
		stdin bool
	}{
		{"data-binary", []string{"--data-binary", "@FILE"}, false},
		{"data-binary, no Expect", []string{"--data-binary", "@FILE", "-H", "Expect:"}, false},
		{"chunked from stdin", []string{"-X", "POST", "-T", "-"}, true},
		{"chunked from stdin, no Expect", []string{"-X", "POST", "-T", "-", "-H", "Expect:"}, true},
	}
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			for _, w := range ways {
				t.Run(w.name, func(t *testing.T) {
					b := newCurlBackend(t)
					log := filepath.Join(t.TempDir(), "access.log")
					p := curlProxy(t, engine, b, "--access-log", log)
					file := writeFile(t, body)
					args := []string{"-x", "http://" + p.Addr(), "--limit-rate", "400k"}
					for _, a := range w.args {
						args = append(args, strings.ReplaceAll(a, "FILE", file))
					}
					var stdin []byte
					if w.stdin {
						stdin = body
					}
					// Whole: once, every byte.
					o := runCurl(t, nil, stdin, append(args, "http://backend/slow/"+engine)...)
					o.expect(t, "slow upload", 200, "ok /slow/"+engine)
					checkCurlExecs(t, b, "/slow/"+engine, body, "4")
					// Cut at 0.2 s, about 80 KiB in.
					o = runCurl(t, nil, stdin, append(args, "--max-time", "0.2", "http://backend/cut/"+engine)...)
					if o.exit != 28 {
						t.Errorf("curl --max-time 0.2: %s; want exit 28", o)
					}
					proxytest.Eventually(t, "the call ended", func() bool { return p.m.InFlight.Load() == 0 })
					if got := b.received("/cut/" + engine); len(got) != 0 {
						t.Errorf("the cut upload reached the backend whole %d times (%d bytes), want never", len(got), len(got[0].body))
					}
					// An attempt of the cut call, if one started (the body
					// streams), is logged as the client's cancellation.
					lines, _ := os.ReadFile(log)
					for _, l := range strings.Split(strings.TrimSpace(string(lines)), "\n") {
						if strings.Contains(l, `"path":"/cut/`) && !strings.Contains(l, `"status":0,`) {
							t.Errorf("the cut call's attempt logged %s, want status 0", l)
						}
					}
					t.Logf("%s", lines)
				})
			}
		})
	}
}

// TestH1Red19CurlSlowDownload: curl reads a 32 MiB streamed (chunked)
// answer slowly (--limit-rate 2M) and gives up at --max-time 3, some 6
// MiB in, on both engines: the call ends (nothing in flight), the upstream
// executed the GET once (no retry after the answer began), the access-log
// line is the upstream's 200 cut by the client, counted once by="client"
// and never by="upstream". A whole slow download (1 MiB) comes byte for
// byte.
func TestH1Red19CurlSlowDownload(t *testing.T) {
	curlPath(t)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newCurlBackend(t)
			log := filepath.Join(t.TempDir(), "access.log")
			p := curlProxy(t, engine, b, "--access-log", log)
			o := runCurl(t, nil, nil, "-x", "http://"+p.Addr(), "--limit-rate", "8M", "http://backend/big/1048576/"+engine)
			o.expect(t, "slow download", 200, string(proxytest.Pattern(1<<20)))
			// 16 s of download at 2 MB/s, cut at 3 s (margin for the
			// head's arrival on a loaded machine).
			o = runCurl(t, nil, nil, "-x", "http://"+p.Addr(), "--limit-rate", "2M", "--max-time", "3", "http://backend/big/33554432/cut")
			if o.exit != 28 || o.status != 200 || len(o.body) >= 32<<20 {
				t.Errorf("curl --max-time 3: exit %d, %d, %d bytes; want exit 28 mid-body after a 200", o.exit, o.status, len(o.body))
			}
			proxytest.Eventually(t, "the cut counted, the call ended", func() bool {
				return p.m.InFlight.Load() == 0 &&
					counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": "client"}) == 1
			})
			if n := counterValue(t, p, "retrycap_proxy_responses_cut_total", map[string]string{"upstream": "backend", "by": "upstream"}); n != 0 {
				t.Errorf("retrycap_proxy_responses_cut_total{by=upstream} %v, want 0", n)
			}
			if got := len(b.received("/big/33554432/cut")); got != 1 {
				t.Errorf("the GET executed %d times, want 1", got)
			}
			proxytest.Eventually(t, "two access-log lines", func() bool { return p.accessLog.w.Written() >= 2 })
			lines, _ := os.ReadFile(log)
			last := strings.Split(strings.TrimSpace(string(lines)), "\n")
			if l := last[len(last)-1]; !strings.Contains(l, `"path":"/big/33554432/cut","attempt":1,`) || !strings.Contains(l, `"status":200,`) ||
				!strings.Contains(l, `"cut":"client"`) {
				t.Errorf("the cut download's line %s, want attempt 1, status 200, cut by the client", l)
			}
		})
	}
}

// TestH1Red19PipelinedFailures: six requests pipelined in one write on
// one connection, on both engines, each failed its own way upstream: the
// answers come in order, each the right one, and each request executes as
// the policy says: a keyless POST reset after its body once (the proxy's
// 502, not retried), a chunked keyless POST answered 503 early with
// Connection: close once (the 503 passed on, the client's connection
// kept), a GET whose every execution is closed after its head three times
// (the proxy's 503, attempts exhausted), the 200s between them once.
func TestH1Red19PipelinedFailures(t *testing.T) {
	const pipeline = "GET http://backend/ok/1 HTTP/1.1\r\nHost: backend\r\n\r\n" +
		"POST http://backend/body-rst/2 HTTP/1.1\r\nHost: backend\r\nContent-Length: 5\r\n\r\nhello" +
		"GET http://backend/ok/3 HTTP/1.1\r\nHost: backend\r\n\r\n" +
		"POST http://backend/early-503/4 HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
		"GET http://backend/head-fin/5 HTTP/1.1\r\nHost: backend\r\n\r\n" +
		"POST http://backend/ok/6 HTTP/1.1\r\nHost: backend\r\nContent-Length: 2\r\n\r\nhi"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newR19Backend(t, "by-path")
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr,
				"--retry-on", "connect-failure,reset,timeout,5xx")
			c := proxytest.Dial(t, p.Addr())
			c.Send(pipeline)
			c.Expect("GET", 200, "ok")
			resp, body := c.Answer("POST")
			if resp.StatusCode != 502 || !strings.HasPrefix(body, notRetried502Prefix) || !strings.HasSuffix(body, notRetried502Suffix) {
				t.Errorf("the reset POST: %d %q, want the proxy's 502, not retried", resp.StatusCode, body)
			}
			c.Expect("GET", 200, "ok")
			c.Expect("POST", 503, "busy")
			resp, body = c.Answer("GET")
			if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != "attempts" || !strings.HasPrefix(body, "retrycap-proxy: upstream backend ("+b.addr+"): 3 attempt(s), last failed with reset (") {
				t.Errorf("the GET closed after its head: %d %v %q, want the proxy's 503 after 3 attempts", resp.StatusCode, resp.Header, body)
			}
			c.Expect("POST", 200, "ok")
			for path, want := range map[string]int{"/ok/1": 1, "/body-rst/2": 1, "/ok/3": 1, "/early-503/4": 1, "/head-fin/5": 3, "/ok/6": 1} {
				if got := b.count(path); got != want {
					t.Errorf("%s executed %d times, want %d", path, got, want)
				}
			}
		})
	}
}

// TestH1Red19GoClientKeepAliveRace: the proxy closes a client connection
// idle for --keepalive-timeout 40ms while Go's client (its pool keeps
// connections 90 s) sends keyless POSTs on it paced around that timeout:
// 20 clients, 12 POSTs each, on both engines. Each POST is either
// answered 200 and executed exactly once, or fails at the client and was
// never executed: a close that races a request must never lose the answer
// to a POST that ran (its caller would send it again), and Go re-sends a
// POST only when none of it was written. The pacing is load, not
// synchronisation: every outcome of the race is a valid one to check.
func TestH1Red19GoClientKeepAliveRace(t *testing.T) {
	const clients, each = 20, 12
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newR19Backend(t, "ok")
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr, "--keepalive-timeout", "40ms")
			client := proxytest.Client(p.Addr())
			defer client.CloseIdleConnections()
			var mu sync.Mutex
			failed := map[string]string{}
			var answered, errored int
			var wg sync.WaitGroup
			for c := 0; c < clients; c++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < each; i++ {
						time.Sleep(time.Duration(30+(c*7+i*13)%20) * time.Millisecond) // 30-49 ms apart
						path := fmt.Sprintf("/ok/%d-%d", c, i)
						resp, err := client.Post("http://backend"+path, "text/plain", strings.NewReader("order"))
						if err == nil {
							got, rerr := io.ReadAll(resp.Body)
							_ = resp.Body.Close()
							if rerr != nil || resp.StatusCode != 200 || string(got) != "ok" {
								err = fmt.Errorf("answer %d %q (%v)", resp.StatusCode, got, rerr)
							}
						}
						mu.Lock()
						if err != nil {
							failed[path] = err.Error()
							errored++
						} else {
							answered++
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			for c := 0; c < clients; c++ {
				for i := 0; i < each; i++ {
					path := fmt.Sprintf("/ok/%d-%d", c, i)
					n := b.count(path)
					why, lost := failed[path]
					switch {
					case lost && n != 0:
						t.Errorf("%s executed %d times, but its client got %s", path, n, why)
					case !lost && n != 1:
						t.Errorf("%s answered 200, executed %d times, want 1", path, n)
					}
				}
			}
			t.Logf("%d answered, %d failed at the client (never executed): %v", answered, errored, failed)
		})
	}
}

// TestH1Red19PyRequestsThreadsOnce: requests from 30 threads at once
// through one Session (urllib3's Retry(total=3) mounted on it) sends
// keyless POSTs through the proxy on both engines to an upstream that
// fails each one after its head, after part of its body, after all of it,
// or answers 503 early with Connection: close. Every POST is executed
// exactly once; each thread gets the proxy's 502 naming one attempt, not
// retried (or the early 503 as it came), never a Python exception.
func TestH1Red19PyRequestsThreadsOnce(t *testing.T) {
	const n = 30
	for _, engine := range []string{"loop", "goroutine"} {
		for _, fail := range []string{"head-fin", "partbody-rst", "body-rst", "early-503"} {
			t.Run(engine+"/"+fail, func(t *testing.T) {
				b := newR19Backend(t, fail)
				p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr,
					"--retry-on", "connect-failure,reset,timeout,5xx")
				var out struct{ Results []pyHTTPResult }
				runPy(t, "requests_threads.py", []string{"http_proxy=http://" + p.Addr()},
					map[string]any{"threads": n, "url": "http://backend/py/", "body_size": 100 << 10}, &out)
				if len(out.Results) != n {
					t.Fatalf("%d results, want %d", len(out.Results), n)
				}
				for i, r := range out.Results {
					switch {
					case r.Error != "":
						t.Errorf("thread %d: %s", i, r.Error)
					case fail == "early-503":
						if r.Status != 503 || r.Body != "busy" {
							t.Errorf("thread %d: %d %q, want the upstream's 503 \"busy\"", i, r.Status, r.Body)
						}
					case r.Status != 502 || !strings.HasPrefix(r.Body, notRetried502Prefix) || !strings.HasSuffix(r.Body, notRetried502Suffix):
						t.Errorf("thread %d: %d %q, want the proxy's 502, not retried", i, r.Status, r.Body)
					}
					if got := b.count(fmt.Sprintf("/py/%d", i)); got != 1 {
						t.Errorf("/py/%d executed %d times, want 1", i, got)
					}
				}
			})
		}
	}
}

// TestH1Red19CurlHTTP10Once: curl --http1.0 (no keep-alive, no chunked,
// no Expect) sends keyless POSTs through the proxy on both engines to an
// upstream that fails each after its head, part of its body, all of it
// (FIN or reset), or answers 503 early: each executes once, curl gets the
// proxy's 502 (not retried) or the 503 as it came, and an answer that is
// read to the close.
func TestH1Red19CurlHTTP10Once(t *testing.T) {
	curlPath(t)
	body := proxytest.Pattern(100 << 10)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := newR19Backend(t, "by-path")
			p := startProxyOn(t, engine, "--upstreams", "backend=3", "--resolve", "backend="+b.addr,
				"--retry-on", "connect-failure,reset,timeout,5xx")
			file := writeFile(t, body)
			for _, fail := range []string{"head-fin", "partbody-rst", "body-fin", "body-rst", "early-503", "ok"} {
				path := "/" + fail + "/http10"
				o := runCurl(t, nil, nil, "-x", "http://"+p.Addr(), "--http1.0", "--data-binary", "@"+file, "http://backend"+path)
				switch fail {
				case "early-503":
					o.expect(t, path, 503, "busy")
				case "ok":
					o.expect(t, path, 200, "ok")
				default:
					o.expect502(t, path)
				}
				if got := b.count(path); got != 1 {
					t.Errorf("%s executed %d times, want 1", path, got)
				}
			}
		})
	}
}
