package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// TestBodyWaitClientResetIsNoRefusal: chunked body A waits for room (as in
// TestRed16WaiterClientGone: budget 1 MiB, A and B hold 262,144 each, A's
// sixth chunk needs 524,288), then its client resets the connection. No
// 503 was sent to anyone: the budget counts no refusal
// (retrycap_proxy_body_budget_refused_total 0) but one body whose
// connection ended while it waited (retrycap_proxy_body_budget_gone_total
// 1), and A's access-log line says so (attempt 0, status 0, error
// "cancelled"), beside B's one attempt (200). Before, A was counted as
// refused and logged as a 503 with error "body-budget".
func TestBodyWaitClientResetIsNoRefusal(t *testing.T) {
	const max = 1 << 20
	five := strings.Repeat(chunk50k, 5)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := lenBackend(t)
			logPath := filepath.Join(t.TempDir(), "access.log")
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m", "--access-log", logPath)
			a := proxytest.Dial(t, p.Addr())
			a.Send(chunkedHead("/a") + five)
			proxytest.Eventually(t, "A holds its buffer", func() bool { return p.fw.Bodies.InUse() == 262144 })
			c := proxytest.Dial(t, p.Addr())
			c.Send(chunkedHead("/b") + five)
			proxytest.Eventually(t, "B holds its buffer", func() bool { return p.fw.Bodies.InUse() == 2*262144 })
			a.Send(chunk50k)
			proxytest.Eventually(t, "A waits", func() bool { return p.fw.Bodies.Waiting() == 1 })
			_ = a.C.(*net.TCPConn).SetLinger(0)
			_ = a.C.Close()
			proxytest.Eventually(t, "A's wait ended, its bytes back", func() bool {
				return p.fw.Bodies.Waiting() == 0 && p.fw.Bodies.InUse() == 262144
			})
			c.Send("0\r\n\r\n")
			c.Expect("POST", http.StatusOK, "250000")
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			if n := p.fw.Bodies.Refused(); n != 0 {
				t.Errorf("refusals counted: %d, want 0 (no 503 was sent)", n)
			}
			if n := p.fw.Bodies.Gone(); n != 1 {
				t.Errorf("bodies gone while waiting: %d, want 1", n)
			}
			scrape := metricsText(t, p)
			for _, line := range []string{"retrycap_proxy_body_budget_refused_total 0\n", "retrycap_proxy_body_budget_gone_total 1\n", "retrycap_proxy_body_budget_waiting 0\n"} {
				if !strings.Contains(scrape, line) {
					t.Errorf("metrics lack %q", line)
				}
			}
			got := uris(b)
			if got["/a"] != 0 || got["/b"] != 1 || b.Hits.Load() != 1 {
				t.Errorf("executed %v (%d in all), want /b once, /a never", got, b.Hits.Load())
			}

			lines, data := loggedAttempts(t, p, logPath)
			var gone, attempts int
			for _, x := range lines {
				l := x.Line
				switch {
				case x.Path == "/a":
					gone++
					if x.Number != 0 || x.Status != 0 || x.Error != forward.ErrCancelled || x.Target != "backend" || x.Method != "POST" {
						t.Errorf("A's line: %q", l)
					}
				case x.Path == "/b" && x.Status == http.StatusOK && x.Number == 1 && x.Error == "":
					attempts++
				default:
					t.Errorf("line %q", l)
				}
			}
			if gone != 1 || attempts != 1 {
				t.Errorf("access log: %d lines of A, %d attempts of B; want 1, 1:\n%s", gone, attempts, data)
			}
		})
	}
}

// TestBodyWaitLineOrder pins what a body meets while another waits for
// room (docs/proxy.md, "Buffered request bodies": the decision on bodies
// over 64 KiB). Budget 1 MiB (large bodies may hold 983,040): chunked
// bodies A and B hold 262,144 each, B complete at a backend that holds its
// answer, and A's sixth chunk waits for 524,288. Meanwhile:
//   - C, a 100,000-byte Content-Length body, would fit by bytes (655,360)
//     but does not pass the waiter: 503 at once, its words naming the
//     524,288 held; never executed;
//   - E, a 40,000-byte Content-Length body (a small one), passes it: 200;
//   - D, a chunked body whose first chunk is 100,000 bytes (131,072),
//     waits in line behind A (2 waiting).
//
// Once B is answered A gets its room, then D (655,360 held once A's
// outgrown buffer is back): both are answered, each executed once. Passes
// on main: it pins the decision, it fixes nothing.
func TestBodyWaitLineOrder(t *testing.T) {
	const max = 1 << 20
	five := strings.Repeat(chunk50k, 5)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			release := make(chan struct{})
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if r.URL.Path == "/b" {
					<-release
				}
				_, _ = io.WriteString(w, strconv.Itoa(len(body)))
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m")
			a := proxytest.Dial(t, p.Addr())
			a.Send(chunkedHead("/a") + five)
			proxytest.Eventually(t, "A holds its buffer", func() bool { return p.fw.Bodies.InUse() == 262144 })
			bc := proxytest.Dial(t, p.Addr())
			bc.Send(chunkedHead("/b") + five + "0\r\n\r\n")
			proxytest.Eventually(t, "B holds its buffer", func() bool { return p.fw.Bodies.InUse() == 2*262144 })
			a.Send(chunk50k)
			proxytest.Eventually(t, "A waits", func() bool { return p.fw.Bodies.Waiting() == 1 })

			c := proxytest.Dial(t, p.Addr())
			c.Send(postHead("/c", 100000))
			want := string(forward.BudgetAnswer(budgetWords(100000, 2*262144, max, 131072)))
			if got := c.Rest(); got != want {
				t.Fatalf("answer to C:\n%q\nwant\n%q", got, want)
			}
			e := proxytest.Dial(t, p.Addr())
			e.Send(postHead("/e", 40000) + strings.Repeat("e", 40000))
			e.Expect("POST", http.StatusOK, "40000")

			d := proxytest.Dial(t, p.Addr())
			d.Send(chunkedHead("/d") + fmt.Sprintf("%x\r\n", 100000))
			proxytest.Eventually(t, "D waits behind A", func() bool { return p.fw.Bodies.Waiting() == 2 })

			close(release)
			bc.Expect("POST", http.StatusOK, "250000")
			// A holds 524,288 (its outgrown 262,144 released once read past),
			// D 131,072.
			proxytest.Eventually(t, "A and D got their room", func() bool {
				return p.fw.Bodies.Waiting() == 0 && p.fw.Bodies.InUse() == 524288+131072
			})
			d.Send(strings.Repeat("d", 100000) + "\r\n0\r\n\r\n")
			d.Expect("POST", http.StatusOK, "100000")
			a.Send("0\r\n\r\n")
			a.Expect("POST", http.StatusOK, "300000")
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			got := uris(b)
			if got["/a"] != 1 || got["/b"] != 1 || got["/c"] != 0 || got["/d"] != 1 || got["/e"] != 1 || b.Hits.Load() != 4 {
				t.Errorf("executed %v (%d in all), want /a /b /d /e once, /c never", got, b.Hits.Load())
			}
			if n := p.fw.Bodies.Refused(); n != 1 {
				t.Errorf("refusals: %d, want 1 (C)", n)
			}
		})
	}
}

// TestBodyBudgetTwoLargeFit: at the default budget (32 MiB, of which
// bodies over 64 KiB may hold 30 MiB), two 15 MiB Content-Length bodies
// are held at once (each reserves its 15,728,640 bytes: 31,457,280, all a
// large body may hold), both executed once; a third body over 64 KiB
// (100,000 bytes) is refused with the 503 naming the 31,457,280 held, and a
// 40,000-byte one still fits in the share kept for small bodies. Before,
// each reserved 16 MiB (fasthttp's buffer for it, rounded up to a power of
// two) and the second got the 503: one of eight concurrent 15 MiB uploads
// was served (TestBodyBudgetBoundsRSS).
func TestBodyBudgetTwoLargeFit(t *testing.T) {
	const size = 15 << 20
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			release := make(chan struct{})
			t.Cleanup(func() {
				select {
				case <-release:
				default:
					close(release)
				}
			})
			b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				if strings.HasPrefix(r.URL.Path, "/big") {
					<-release
				}
				_, _ = io.WriteString(w, strconv.Itoa(len(body)))
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr())
			body := strings.Repeat("u", size)
			x := proxytest.Dial(t, p.Addr())
			x.Send(postHead("/big1", size) + body)
			proxytest.Eventually(t, "the first held", func() bool { return p.fw.Bodies.InUse() == size })
			y := proxytest.Dial(t, p.Addr())
			y.Send(postHead("/big2", size) + body)
			proxytest.Eventually(t, "both at the backend", func() bool { return b.Hits.Load() == 2 })
			if n := p.fw.Bodies.InUse(); n != 2*size {
				t.Fatalf("budget in use with both in flight: %d, want %d", n, 2*size)
			}

			c := proxytest.Dial(t, p.Addr())
			c.Send(postHead("/c", 100000))
			want := string(forward.BudgetAnswer(budgetWords(100000, 2*size, 32<<20, 100000)))
			if got := c.Rest(); got != want {
				t.Fatalf("answer to the third large body:\n%q\nwant\n%q", got, want)
			}
			e := proxytest.Dial(t, p.Addr())
			e.Send(postHead("/e", 40000) + strings.Repeat("e", 40000))
			e.Expect("POST", http.StatusOK, "40000")

			close(release)
			x.Expect("POST", http.StatusOK, strconv.Itoa(size))
			y.Expect("POST", http.StatusOK, strconv.Itoa(size))
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			got := uris(b)
			if got["/big1"] != 1 || got["/big2"] != 1 || got["/c"] != 0 || got["/e"] != 1 || b.Hits.Load() != 3 {
				t.Errorf("executed %v (%d in all), want /big1 /big2 /e once, /c never", got, b.Hits.Load())
			}
			if n := p.fw.Bodies.Refused(); n != 1 {
				t.Errorf("refusals: %d, want 1", n)
			}
		})
	}
}
