package proxy

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// red16: a chunked body that waits for room in the body budget
// (forward.BodyBudget.Grow) must never hold what cannot come, nor hold up
// what is ahead of it. Every test counts the backend's executions by path.

// lenBackend answers each request with its body's length.
func lenBackend(t *testing.T) *proxytest.Backend {
	return proxytest.NewBackend(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		_, _ = io.WriteString(w, strconv.Itoa(len(body)))
	})
}

// TestRed16HopelessGrowthRefusedAtOnce: with a budget of 1 MiB (large
// bodies may hold 983,040), a chunked body whose first chunk is 786,432
// bytes needs a 1,048,576-byte buffer: more than large bodies may ever hold,
// so it can never fit. It is refused at once (503, the words naming its
// 786,432 bytes and the 40,000-byte body held beside it), and a 100,000-byte
// POST sent next is answered 200 (executed once). On main it waited, for
// --client-timeout, for room that could not come (any other body held
// kept the "only waiters hold bytes" rule off), and while it waited every
// body over 64 KiB was refused (a large body does not pass a waiter).
func TestRed16HopelessGrowthRefusedAtOnce(t *testing.T) {
	const max = 1 << 20
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := lenBackend(t)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m")
			held := budgetHeld(engine, 40000)
			x := proxytest.Dial(t, p.Addr())
			x.Send(postHead("/x", 40000) + strings.Repeat("x", 1000))
			proxytest.Eventually(t, "X holds its body", func() bool { return p.fw.Bodies.InUse() == held })

			c := proxytest.Dial(t, p.Addr())
			c.Send(chunkedHead("/b") + "c0000\r\n")
			want := string(forward.BudgetAnswer(budgetWords(786432, held, max, 1048576)))
			proxytest.Eventually(t, "the hopeless chunked body refused", func() bool { return p.fw.Bodies.Refused() == 1 })
			if n := p.fw.Bodies.Waiting(); n != 0 {
				t.Fatalf("waiting bodies: %d, want 0", n)
			}
			if got := c.Rest(); got != want {
				t.Fatalf("answer to the hopeless body:\n%q\nwant\n%q", got, want)
			}

			d := proxytest.Dial(t, p.Addr())
			d.Send(postHead("/d", 100000) + strings.Repeat("d", 100000))
			d.Expect("POST", http.StatusOK, "100000")
			x.Send(strings.Repeat("x", 39000))
			x.Expect("POST", http.StatusOK, "40000")
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			got := uris(b)
			if got["/x"] != 1 || got["/d"] != 1 || got["/b"] != 0 || b.Hits.Load() != 2 {
				t.Errorf("executed %v (%d in all), want /x and /d once, /b never", got, b.Hits.Load())
			}
			if n := p.fw.Bodies.Refused(); n != 1 {
				t.Errorf("refusals: %d, want 1", n)
			}
		})
	}
}

// TestRed16PipelinedWaiterHoldsNothingAhead: a GET and, pipelined behind it
// in the same write, a chunked POST whose first chunk (300,000 bytes: a
// 524,288-byte buffer) does not fit beside a slow 500,000-byte body held
// by another client (budget 1 MiB). The GET is answered 200 at once
// (executed once) whatever becomes of the POST.
//
// The goroutine engine refuses the POST (503, its 300,000 bytes named):
// fasthttp holds the GET's answer unflushed while it reads a body pipelined
// behind it, so that body must not wait. On main the POST's chunk line,
// read with the GET, waited inside the read that carried the GET: the GET
// was never served until the slow body ended (or --client-timeout). The
// loop engine answers the GET itself, then hands the POST over alone: it
// waits (1 waiting), and is answered once the slow body ends.
func TestRed16PipelinedWaiterHoldsNothingAhead(t *testing.T) {
	const max = 1 << 20
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := lenBackend(t)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m")
			x := proxytest.Dial(t, p.Addr())
			x.Send(postHead("/x", 500000) + strings.Repeat("x", 1000))
			proxytest.Eventually(t, "X holds its body", func() bool { return p.fw.Bodies.InUse() == 500000 })

			c := proxytest.Dial(t, p.Addr())
			c.Send("GET http://backend/g HTTP/1.1\r\nHost: backend\r\n\r\n" + chunkedHead("/b") + "493e0\r\n")
			c.Expect("GET", http.StatusOK, "0")
			refused := engine == "goroutine"
			if refused {
				want := string(forward.BudgetAnswer(budgetWords(300000, 500000, max, 524288)))
				if got := c.Rest(); got != want {
					t.Fatalf("answer to the pipelined chunked body:\n%q\nwant\n%q", got, want)
				}
			} else {
				proxytest.Eventually(t, "the POST waits", func() bool { return p.fw.Bodies.Waiting() == 1 })
			}
			x.Send(strings.Repeat("x", 499000))
			x.Expect("POST", http.StatusOK, "500000")
			if !refused {
				c.Send(strings.Repeat("b", 300000) + "\r\n0\r\n\r\n")
				c.Expect("POST", http.StatusOK, "300000")
			}
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			if n := p.fw.Bodies.Waiting(); n != 0 {
				t.Errorf("waiting bodies: %d, want 0", n)
			}
			got, wantB, wantRefused := uris(b), 1, int64(0)
			if refused {
				wantB, wantRefused = 0, 1
			}
			if got["/g"] != 1 || got["/x"] != 1 || got["/b"] != wantB || b.Hits.Load() != int64(2+wantB) {
				t.Errorf("executed %v (%d in all), want /g and /x once, /b %d times", got, b.Hits.Load(), wantB)
			}
			if n := p.fw.Bodies.Refused(); n != wantRefused {
				t.Errorf("refusals: %d, want %d", n, wantRefused)
			}
		})
	}
}

// TestRed16WaiterClientGone: chunked body A waits for room (as in
// TestBodyBudgetChunkedWaits: budget 1 MiB, A and B hold 262,144 each, A's
// sixth chunk needs 524,288), then its client goes away.
//
//   - A reset: A's wait ends and its bytes come back at once (0 waiting,
//     262,144 held: B's), A is never executed, and B is answered. On main
//     the wait went on until --client-timeout (nobody reads a waiting
//     body's socket), the bytes held and every body over 64 KiB refused
//     meanwhile.
//   - A FIN after the whole body (a half-close: the client still reads):
//     A keeps waiting, gets B's room once B is answered, and is answered
//     200 with its 300,000 bytes (executed once), as on main.
func TestRed16WaiterClientGone(t *testing.T) {
	const max = 1 << 20
	five := strings.Repeat(chunk50k, 5)
	for _, engine := range []string{"loop", "goroutine"} {
		for _, reset := range []bool{false, true} {
			name := engine + "/half-close"
			if reset {
				name = engine + "/reset"
			}
			t.Run(name, func(t *testing.T) {
				b := lenBackend(t)
				p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
					"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m")
				a := proxytest.Dial(t, p.Addr())
				a.Send(chunkedHead("/a") + five)
				proxytest.Eventually(t, "A holds its buffer", func() bool { return p.fw.Bodies.InUse() == 262144 })
				c := proxytest.Dial(t, p.Addr())
				c.Send(chunkedHead("/b") + five)
				proxytest.Eventually(t, "B holds its buffer", func() bool { return p.fw.Bodies.InUse() == 2*262144 })
				wantA := 0
				if reset {
					a.Send(chunk50k)
					proxytest.Eventually(t, "A waits", func() bool { return p.fw.Bodies.Waiting() == 1 })
					_ = a.C.(*net.TCPConn).SetLinger(0)
					_ = a.C.Close()
					proxytest.Eventually(t, "A's wait ended, its bytes back", func() bool {
						return p.fw.Bodies.Waiting() == 0 && p.fw.Bodies.InUse() == 262144
					})
				} else {
					a.Send(chunk50k + "0\r\n\r\n")
					proxytest.Eventually(t, "A waits", func() bool { return p.fw.Bodies.Waiting() == 1 })
					if err := a.C.(*net.TCPConn).CloseWrite(); err != nil {
						t.Fatal(err)
					}
					wantA = 1
				}
				c.Send("0\r\n\r\n")
				c.Expect("POST", http.StatusOK, "250000")
				if !reset {
					a.Expect("POST", http.StatusOK, "300000")
				}
				proxytest.Eventually(t, "the budget back to 0, none waiting", func() bool {
					return p.fw.Bodies.InUse() == 0 && p.fw.Bodies.Waiting() == 0
				})
				proxytest.Eventually(t, "no client socket watched", func() bool { return netpoll.HangupsWatched() == 0 })
				got := uris(b)
				if got["/a"] != wantA || got["/b"] != 1 || b.Hits.Load() != int64(1+wantA) {
					t.Errorf("executed %v (%d in all), want /b once, /a %d times", got, b.Hits.Load(), wantA)
				}
			})
		}
	}
}

// TestRed16WaiterWithPipelinedRequest: chunked body B waits for room (budget 1 MiB; X's
// 500,000-byte body, all held, at a backend that holds its answer), and its client sends
// the rest of B and, pipelined behind it, a GET. Once X is answered B gets its room: B is
// answered 200 with its 300,000 bytes, then the GET 200, each executed exactly once, and the
// budget is back to exactly 0 with none waiting; while B waits another client is served. Passes
// on main.
func TestRed16WaiterWithPipelinedRequest(t *testing.T) {
	const max = 1 << 20
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b, gotX, release := gatedBackend(t)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m", "--per-try-timeout", "1m")
			x := proxytest.Dial(t, p.Addr())
			x.Send(postHead("/x", 500000) + strings.Repeat("x", 500000))
			proxytest.Wait(t, gotX, "X at the backend")
			c := proxytest.Dial(t, p.Addr())
			c.Send(chunkedHead("/b") + "493e0\r\n")
			proxytest.Eventually(t, "B waits", func() bool { return p.fw.Bodies.Waiting() == 1 })
			// While B waits, another client's GET and 1,000-byte POST are answered (the
			// loop engine serves them on its loop: nothing there waits for budget).
			o := proxytest.Dial(t, p.Addr())
			o.Send("GET http://backend/other HTTP/1.1\r\nHost: backend\r\n\r\n" + postHead("/small", 1000) + strings.Repeat("s", 1000))
			o.Expect("GET", http.StatusOK, "0")
			o.Expect("POST", http.StatusOK, "1000")
			c.Send(strings.Repeat("b", 300000) + "\r\n0\r\n\r\nGET http://backend/after HTTP/1.1\r\nHost: backend\r\n\r\n")
			close(release)
			x.Expect("POST", http.StatusOK, "500000")
			c.Expect("POST", http.StatusOK, "300000")
			c.Expect("GET", http.StatusOK, "0")
			proxytest.Eventually(t, "the budget back to 0, none waiting", func() bool {
				return p.fw.Bodies.InUse() == 0 && p.fw.Bodies.Waiting() == 0
			})
			got := uris(b)
			if got["/x"] != 1 || got["/b"] != 1 || got["/after"] != 1 || got["/other"] != 1 || got["/small"] != 1 || b.Hits.Load() != 5 {
				t.Errorf("executed %v (%d in all), want /x, /b, /after, /other and /small once each", got, b.Hits.Load())
			}
			if n := p.fw.Bodies.Refused(); n != 0 {
				t.Errorf("refusals: %d, want 0", n)
			}
		})
	}
}
