package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/observe"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The proxy-wide budget of buffered request bodies (--max-buffered-body-bytes,
// forward.BodyBudget). Before it, each request body was read whole with a
// per-request cap of 16 MiB and no bound across requests: three concurrent
// 15 MiB uploads OOM-killed the 64Mi sidecar. These tests did not compile on
// main (no flag, no budget); the bound under abuse is
// TestBodyBudgetBoundsRSS (bodybudget_rss_test.go).

// budgetHeld is what each engine reserves for a Content-Length body of n
// bytes: its length, except for the goroutine engine's bodies up to 64 KiB
// (the loop's own), which reserve the length fasthttp's read buffer takes
// (a power of two, as fasthttp's buffer grows). A larger body (the loop
// hands it to the goroutine engine) gets a buffer of exactly its length.
func budgetHeld(engine string, n int64) int64 {
	if engine == "loop" || n > 64<<10 {
		return n
	}
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}

// gatedBackend counts the requests it executes (their bodies read whole)
// and holds the answer to the first until release is closed; got is closed
// when the first has been read.
func gatedBackend(t *testing.T) (b *proxytest.Backend, got, release chan struct{}) {
	got, release = make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	b = proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if first.CompareAndSwap(false, true) {
			close(got)
			<-release
		}
		_, _ = io.WriteString(w, strconv.Itoa(len(body)))
	})
	return b, got, release
}

// budgetWords is the 503's body to a body of size bytes that asked for
// asked bytes beside held, with the budget at max: a large one (asked over
// forward.SmallBody) is told what large bodies may hold (max less the
// sixteenth kept for small ones).
func budgetWords(size, held, max, asked int64) string {
	if asked > forward.SmallBody {
		return forward.BudgetBody(size, held, max, max-max/16)
	}
	return forward.BudgetBody(size, held, max, 0)
}

func postHead(path string, n int) string {
	return "POST http://backend" + path + " HTTP/1.1\r\nHost: backend\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
}

// TestBodyBudgetRefusesExactly: with a body of 40,000 bytes held by a call in
// flight and the budget at its least (64 KiB), a second 40,000-byte POST is
// answered at once with the proxy's 503 (Retry-After: 1, Connection: close,
// the sizes named), byte for byte the same on both engines, and is never
// executed; the budget is back to 0 once the first is answered, and a third
// POST then goes through. The loop refuses it itself (a body up to 64 KiB is
// its own), the goroutine engine from its pre-parser.
//
// A body over 64 KiB (100,000 bytes, the budget 144 KiB): the goroutine
// engine's (the loop hands it over) reserved as its head is read, refused
// before fasthttp allocates its buffer; a large body's words say what
// large bodies may hold (138,240: the budget less the sixteenth kept for
// bodies up to 64 KiB).
func TestBodyBudgetRefusesExactly(t *testing.T) {
	for _, tc := range []struct{ size, max int64 }{{40000, 64 << 10}, {100000, 144 << 10}} {
		for _, engine := range []string{"loop", "goroutine"} {
			t.Run(fmt.Sprintf("%s/%d", engine, tc.size), func(t *testing.T) {
				testBudgetRefuses(t, engine, tc.size, tc.max)
			})
		}
	}
}

func testBudgetRefuses(t *testing.T, engine string, size, max int64) {
	{
		{
			b, got, release := gatedBackend(t)
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.FormatInt(max, 10), "--access-log", logPath)
			body := strings.Repeat("a", int(size))
			a := proxytest.Dial(t, p.Addr())
			a.Send(postHead("/1", int(size)) + body)
			proxytest.Wait(t, got, "the first POST at the backend")
			held := budgetHeld(engine, size)
			if n := p.fw.Bodies.InUse(); n != held {
				t.Fatalf("budget in use with the first POST in flight: %d, want %d", n, held)
			}

			c := proxytest.Dial(t, p.Addr())
			c.Send(postHead("/2", int(size))) // the head alone: refused before any body byte
			words := fmt.Sprintf("retrycap-proxy: request body of %d bytes refused: %d of the proxy's %d buffered-body bytes (--max-buffered-body-bytes) are in use\n", size, held, max)
			if held > forward.SmallBody {
				words = fmt.Sprintf("retrycap-proxy: request body of %d bytes refused: %d of the proxy's %d buffered-body bytes (--max-buffered-body-bytes) are in use; bodies over 65536 bytes may hold %d (the rest is kept for smaller ones)\n", size, held, max, max-max/16)
			}
			want := "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
				strconv.Itoa(len(words)) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + words
			if got := c.Rest(); got != want {
				t.Fatalf("answer to the POST over the budget:\n%q\nwant\n%q", got, want)
			}
			if got := string(forward.BudgetAnswer(budgetWords(size, held, max, held))); got != want {
				t.Fatalf("forward.BudgetAnswer:\n%q\nwant\n%q", got, want)
			}
			if n := p.fw.Bodies.Refused(); n != 1 {
				t.Errorf("refusals counted: %d, want 1", n)
			}

			close(release)
			a.Expect("POST", http.StatusOK, strconv.Itoa(int(size)))
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			a.Send(postHead("/3", int(size)) + body)
			a.Expect("POST", http.StatusOK, strconv.Itoa(int(size)))
			if n := b.Hits.Load(); n != 2 {
				t.Errorf("the backend executed %d requests, want 2 (the refused one never)", n)
			}
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			scrape := metricsText(t, p)
			for _, line := range []string{"retrycap_proxy_body_budget_refused_total 1\n", "retrycap_proxy_buffered_body_bytes 0\n", "retrycap_proxy_body_budget_waiting 0\n"} {
				if !strings.Contains(scrape, line) {
					t.Errorf("metrics lack %q", line)
				}
			}
			// The access log: the refusal's line (attempt 0, nothing sent),
			// between the two attempts that ran.
			lines, data := loggedAttempts(t, p, logPath)
			var refusals, attempts int
			for _, a := range lines {
				l := a.Line
				switch {
				case a.Status == http.StatusServiceUnavailable:
					refusals++
					if a.Number != 0 || a.Error != forward.ErrBodyBudget || a.Target != "backend" || a.Method != "POST" || a.Path != "/2" {
						t.Errorf("the refusal's line: %+v", a)
					}
				case a.Status == http.StatusOK && a.Number == 1:
					attempts++
				default:
					t.Errorf("line %q", l)
				}
			}
			if refusals != 1 || attempts != 2 {
				t.Errorf("access log: %d refusals, %d attempts; want 1, 2:\n%s", refusals, attempts, data)
			}
		}
	}
}

// loggedLine is one access-log line as observe reads it, with its text.
type loggedLine struct {
	observe.Attempt
	Line string
}

// loggedAttempts flushes p's access log (closing its writer) and reads every line of logPath as
// observe does; a line observe cannot read fails the test. It returns the whole file too.
func loggedAttempts(t *testing.T, p *Proxy, logPath string) ([]loggedLine, []byte) {
	t.Helper()
	if err := p.accessLog.w.Close(); err != nil { // flush
		t.Fatal(err)
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out []loggedLine
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		a, ok, err := observe.ParseLine([]byte(l), observe.Source{})
		if err != nil || !ok {
			t.Errorf("line %q: %v %v", l, ok, err)
			continue
		}
		out = append(out, loggedLine{Attempt: a, Line: l})
	}
	return out, data
}

// metricsText is the proxy's /metrics.
func metricsText(t *testing.T, p *Proxy) string {
	t.Helper()
	resp, err := http.Get("http://" + p.AdminAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestBodyBudgetChunkedMidBody: a chunked body reserves the buffer
// fasthttp grows for it (a power of two over the data so far) as each chunk
// is announced, beside the buffers it outgrew until they are dropped: with
// 128 KiB, chunks of 30,000 bytes hold 32 KiB, then 64 KiB (the 32 KiB
// released once fasthttp has read past the chunk line it grew at), and the
// third, 128 KiB more, can never fit (nothing else holds any: it would wait
// for itself) and is refused at once: the proxy's 503 naming the 90,000
// bytes, the connection closed, nothing sent upstream (decisions.md: the
// bytes read are dropped, not forwarded). On the loop, which hands chunked
// bodies to the goroutine engine, alike. On main (twice the buffer
// reserved) the hold was 128 KiB after two chunks.
func TestBodyBudgetChunkedMidBody(t *testing.T) {
	const max = 128 << 10
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, nil)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max))
			chunk := fmt.Sprintf("%x\r\n%s\r\n", 30000, strings.Repeat("c", 30000))
			c := proxytest.Dial(t, p.Addr())
			c.Send("POST http://backend/c HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + chunk)
			proxytest.Eventually(t, "two chunks reserved", func() bool { return p.fw.Bodies.InUse() == 64<<10 })
			_, _ = io.WriteString(c.C, chunk+"0\r\n\r\n") // may meet the close
			want := string(forward.BudgetAnswer(budgetWords(90000, 64<<10, max, 128<<10)))
			if got := c.Rest(); got != want {
				t.Fatalf("answer:\n%q\nwant\n%q", got, want)
			}
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			if n := b.Hits.Load(); n != 0 {
				t.Errorf("the backend executed %d requests, want 0", n)
			}
			// A chunked body that fits goes through, and gives its budget back.
			c = proxytest.Dial(t, p.Addr())
			c.Send("POST http://backend/c HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk + "0\r\n\r\n")
			c.Expect("POST", http.StatusOK, "/c:"+strings.Repeat("c", 30000))
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			if n := b.Hits.Load(); n != 1 {
				t.Errorf("the backend executed %d requests, want 1", n)
			}
		})
	}
}

// TestBodyBudgetReleasedOnEveryPath: the budget returns to 0 after a client
// that goes away mid-body (Content-Length and chunked), an upstream that
// closes without answering (502), an upstream that cannot be reached (502),
// a body that does not come in time (408), and pipelined POSTs, on both
// engines; the backend executes exactly the requests whose bodies came.
func TestBodyBudgetReleasedOnEveryPath(t *testing.T) {
	const size = 40000
	body := strings.Repeat("b", size)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			var execs atomic.Int64
			ln, _ := proxytest.RawBackend(t, func(c *net.TCPConn) {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(proxytest.Bound))
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					n, err := io.Copy(io.Discard, r.Body)
					if err != nil {
						return
					}
					execs.Add(1)
					if r.URL.Path == "/fail" {
						return // closed without an answer
					}
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(strconv.FormatInt(n, 10)))+"\r\n\r\n"+strconv.FormatInt(n, 10))
				}
			})
			dead, _ := net.Listen("tcp", "127.0.0.1:0")
			deadAddr := dead.Addr().String()
			_ = dead.Close()
			p := startProxyOn(t, engine, "--upstreams", "backend=1,dead=1", "--resolve", "backend="+ln.Addr().String()+",dead="+deadAddr,
				"--max-buffered-body-bytes", "1000000", "--client-timeout", "300ms")
			zero := func(what string) {
				t.Helper()
				proxytest.Eventually(t, what+": the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			}

			// A client gone mid-body, Content-Length.
			c := proxytest.Dial(t, p.Addr())
			c.Send(postHead("/gone", size) + body[:1000])
			held := budgetHeld(engine, size)
			proxytest.Eventually(t, "the body reserved", func() bool { return p.fw.Bodies.InUse() == held })
			_ = c.C.Close()
			zero("a client gone mid-body")

			// A client gone mid-body, a body over 64 KiB (reserved by the
			// goroutine engine as its head is read).
			c = proxytest.Dial(t, p.Addr())
			c.Send(postHead("/gone", 100000) + body[:1000])
			proxytest.Eventually(t, "the body reserved", func() bool { return p.fw.Bodies.InUse() == 100000 })
			_ = c.C.Close()
			zero("a client gone mid-body (100,000 bytes)")

			// A client gone mid-body, chunked.
			c = proxytest.Dial(t, p.Addr())
			c.Send("POST http://backend/gone HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n", size) + body[:1000])
			proxytest.Eventually(t, "the chunk reserved", func() bool { return p.fw.Bodies.InUse() == budgetHeld("goroutine", size+2) })
			_ = c.C.Close()
			zero("a chunked client gone mid-body")

			// A body that does not come within --client-timeout: 408.
			c = proxytest.Dial(t, p.Addr())
			c.Send(postHead("/slow", size) + body[:1000])
			resp, _ := c.Answer("POST")
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("a body not in time: %d, want 408", resp.StatusCode)
			}
			zero("a 408")

			// An upstream that closes without answering, and one that
			// cannot be reached: 502, the connection goes on.
			c = proxytest.Dial(t, p.Addr())
			c.Send(postHead("/fail", size) + body)
			if resp, _ := c.Answer("POST"); resp.StatusCode != http.StatusBadGateway {
				t.Errorf("an upstream closed: %d, want 502", resp.StatusCode)
			}
			zero("an upstream closed")
			c.Send(strings.Replace(postHead("/x", size), "backend", "dead", 2) + body)
			if resp, _ := c.Answer("POST"); resp.StatusCode != http.StatusBadGateway {
				t.Errorf("an upstream not reached: %d, want 502", resp.StatusCode)
			}
			zero("an upstream not reached")

			// Pipelined POSTs in one write, then the answers.
			c.Send(postHead("/p1", size) + body + postHead("/p2", size) + body + postHead("/p3", 10) + body[:10])
			c.Expect("POST", http.StatusOK, strconv.Itoa(size))
			c.Expect("POST", http.StatusOK, strconv.Itoa(size))
			c.Expect("POST", http.StatusOK, "10")
			zero("pipelined POSTs")
			if n := execs.Load(); n != 4 {
				t.Errorf("the backend executed %d requests, want 4 (/fail and the three pipelined)", n)
			}
		})
	}
}

// TestBodyBudgetFlag: the flag's bounds, each refusal naming it and the value.
func TestBodyBudgetFlag(t *testing.T) {
	for _, v := range []string{"65535", "0", "-1", "1073741825"} {
		_, err := ParseFlags([]string{"--max-buffered-body-bytes", v}, io.Discard)
		want := `invalid value "` + v + `" for --max-buffered-body-bytes: must be 65536..1073741824 (64 KiB: a body the event loop reads whole; 1 GiB)`
		if err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", v, err, want)
		}
	}
	c, err := ParseFlags(nil, io.Discard)
	if err != nil || c.MaxBufferedBodyBytes != 32<<20 {
		t.Fatalf("default: %v, %v; want 33554432", c.MaxBufferedBodyBytes, err)
	}
	var check strings.Builder
	c.Describe(&check) // --check
	if !strings.Contains(check.String(), "\nmax-buffered-body-bytes 33554432\n") {
		t.Errorf("--check does not show the budget:\n%s", check.String())
	}
}

// TestBodyBudgetExpect: a POST with Expect: 100-continue whose body does
// not fit gets the budget's 503 at once, with no 100 Continue before it
// (its body is never asked for; until h1red17, fasthttp's server sent the
// 100 first and the client uploaded into the closing connection), on both
// engines (the loop hands Expect to the goroutine engine), and is never
// executed. A body up to 64 KiB is the pre-parser's to refuse, a larger
// one headerReceived's (TestH1Red17ExpectRefusedWithoutContinue).
func TestBodyBudgetExpect(t *testing.T) {
	const max = 64 << 10
	for _, size := range []int64{60000, 100000} {
		for _, engine := range []string{"loop", "goroutine"} {
			t.Run(fmt.Sprintf("%s/%d", engine, size), func(t *testing.T) {
				b, got, release := gatedBackend(t)
				p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
					"--max-buffered-body-bytes", strconv.Itoa(max))
				// 40,000 bytes in flight (65,536 of the goroutine engine's).
				a := proxytest.Dial(t, p.Addr())
				a.Send(postHead("/1", 40000) + strings.Repeat("a", 40000))
				proxytest.Wait(t, got, "the first POST at the backend")
				held := budgetHeld(engine, 40000)

				c := proxytest.Dial(t, p.Addr())
				c.Send(strings.Replace(postHead("/2", int(size)), "\r\n\r\n", "\r\nExpect: 100-continue\r\n\r\n", 1))
				if got, want := c.Rest(), string(forward.BudgetAnswer(budgetWords(size, held, max, budgetHeld("goroutine", size)))); got != want {
					t.Fatalf("answer:\n%q\nwant\n%q", got, want)
				}
				close(release)
				a.Expect("POST", http.StatusOK, "40000")
				proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
				if n := b.Hits.Load(); n != 1 {
					t.Errorf("the backend executed %d requests, want 1", n)
				}
			})
		}
	}
}
