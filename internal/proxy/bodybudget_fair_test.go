package proxy

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The body budget's fairness (forward.BodyBudget): a share kept for small
// bodies, and chunked bodies that wait for room in the order they began
// instead of all failing. Every test counts what the backend executed, by
// path: a refused request never, an accepted one exactly once.

// uris counts the backend's requests by URI.
func uris(b *proxytest.Backend) map[string]int {
	m := map[string]int{}
	for _, r := range b.Requests() {
		m[r.URI]++
	}
	return m
}

// TestBodyBudgetSmallShare: with a budget of 2 MiB, three clients announce
// 500,000-byte bodies and trickle them (1,000 bytes sent): each holds
// its 500,000 bytes (524,288 before left17: the buffer's power of two). A fourth is refused: large
// bodies may hold 1,966,080 (the budget less the sixteenth, 131,072, kept
// for bodies up to 64 KiB), with words that say so. Then 40 concurrent
// 1 KiB POSTs all get 200 and each reaches the backend once; the three
// slow bodies then finish, each executed once, the fourth never. On main
// (first come, first served) the fourth large body fitted, the budget was
// full, and every small POST got the 503.
func TestBodyBudgetSmallShare(t *testing.T) {
	const (
		max   = 2 << 20
		large = 500000
		held  = 500000
		small = 1024
		posts = 40
	)
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := proxytest.NewBackend(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				_, _ = io.WriteString(w, strconv.Itoa(len(body)))
			})
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max))
			body := strings.Repeat("L", large)
			slow := make([]*proxytest.Conn, 3)
			for i := range slow {
				slow[i] = proxytest.Dial(t, p.Addr())
				slow[i].Send(postHead("/large"+strconv.Itoa(i), large) + body[:1000])
				proxytest.Eventually(t, "the slow body reserved", func() bool { return p.fw.Bodies.InUse() == int64(held*(i+1)) })
			}
			c := proxytest.Dial(t, p.Addr())
			c.Send(postHead("/large3", large))
			want := string(forward.BudgetAnswer(fmt.Sprintf("retrycap-proxy: request body of %d bytes refused: %d of the proxy's %d buffered-body bytes (--max-buffered-body-bytes) are in use; bodies over 65536 bytes may hold %d (the rest is kept for smaller ones)\n",
				large, 3*held, max, max-max/16)))
			if got := c.Rest(); got != want {
				t.Fatalf("answer to the fourth large body:\n%q\nwant\n%q", got, want)
			}

			var wg sync.WaitGroup
			answers := make([]string, posts)
			for i := range posts {
				wg.Go(func() {
					resp, err := proxytest.Client(p.Addr()).Post("http://backend/small"+strconv.Itoa(i), "application/json", strings.NewReader(strings.Repeat("s", small)))
					if err != nil {
						answers[i] = err.Error()
						return
					}
					raw, _ := io.ReadAll(resp.Body)
					_ = resp.Body.Close()
					answers[i] = strconv.Itoa(resp.StatusCode) + " " + string(raw)
				})
			}
			wg.Wait()
			for i, a := range answers {
				if a != "200 1024" {
					t.Errorf("small POST %d: %q, want 200 1024", i, a)
				}
			}
			for _, s := range slow {
				s.Send(body[1000:])
				s.Expect("POST", http.StatusOK, strconv.Itoa(large))
			}
			proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
			got := uris(b)
			for i := range posts {
				if n := got["/small"+strconv.Itoa(i)]; n != 1 {
					t.Errorf("/small%d executed %d times, want 1", i, n)
				}
			}
			for i := range 3 {
				if n := got["/large"+strconv.Itoa(i)]; n != 1 {
					t.Errorf("/large%d executed %d times, want 1", i, n)
				}
			}
			if n := got["/large3"]; n != 0 {
				t.Errorf("the refused /large3 executed %d times, want 0", n)
			}
			if n := b.Hits.Load(); n != posts+3 {
				t.Errorf("the backend executed %d requests, want %d", n, posts+3)
			}
			if n := p.fw.Bodies.Refused(); n != 1 {
				t.Errorf("refusals: %d, want 1", n)
			}
		})
	}
}

// chunk50k is one chunk of 50,000 bytes.
var chunk50k = fmt.Sprintf("%x\r\n%s\r\n", 50000, strings.Repeat("k", 50000))

func chunkedHead(path string) string {
	return "POST http://backend" + path + " HTTP/1.1\r\nHost: backend\r\nTransfer-Encoding: chunked\r\n\r\n"
}

// TestBodyBudgetChunkedWaits: with a budget of 1 MiB (large bodies may hold
// 983,040), chunked bodies A and B of five 50,000-byte chunks each hold
// 262,144 (their buffers; the ones outgrown released). A's sixth chunk
// needs a 524,288-byte buffer: it does not fit, and A waits, where on main
// (twice the buffer reserved) it was refused at once.
//
//   - B ends and is answered: its bytes come back, A's wait ends, and A is
//     answered too (both executed once).
//   - B's sixth chunk comes while A waits: every byte held is a waiting
//     body's, so none could ever fit; B, the younger, is refused (the 503
//     naming its 300,000 bytes), never executed, and A, the earlier, gets
//     B's room and is answered (executed once).
func TestBodyBudgetChunkedWaits(t *testing.T) {
	const max = 1 << 20
	five := strings.Repeat(chunk50k, 5)
	for _, engine := range []string{"loop", "goroutine"} {
		for _, youngerGrows := range []bool{false, true} {
			name := engine + "/the-younger-ends"
			if youngerGrows {
				name = engine + "/the-younger-grows"
			}
			t.Run(name, func(t *testing.T) {
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
					"--max-buffered-body-bytes", strconv.Itoa(max))
				a := proxytest.Dial(t, p.Addr())
				a.Send(chunkedHead("/a") + five)
				proxytest.Eventually(t, "A holds its buffer", func() bool { return p.fw.Bodies.InUse() == 262144 })
				c := proxytest.Dial(t, p.Addr())
				if youngerGrows {
					c.Send(chunkedHead("/b") + five)
				} else {
					c.Send(chunkedHead("/b") + five + "0\r\n\r\n")
				}
				proxytest.Eventually(t, "B holds its buffer", func() bool { return p.fw.Bodies.InUse() == 2*262144 })
				a.Send(chunk50k)
				proxytest.Eventually(t, "A waits", func() bool { return p.fw.Bodies.Waiting() == 1 })
				if m := metricsText(t, p); !strings.Contains(m, "\nretrycap_proxy_body_budget_waiting 1\n") {
					t.Errorf("metrics lack retrycap_proxy_body_budget_waiting 1")
				}
				if youngerGrows {
					_, _ = io.WriteString(c.C, chunk50k+"0\r\n\r\n") // may meet the close
					want := string(forward.BudgetAnswer(budgetWords(300000, 2*262144, max, 524288)))
					if got := c.Rest(); got != want {
						t.Fatalf("answer to B:\n%q\nwant\n%q", got, want)
					}
				} else {
					close(release)
					c.Expect("POST", http.StatusOK, "250000")
				}
				a.Send("0\r\n\r\n")
				a.Expect("POST", http.StatusOK, "300000")
				proxytest.Eventually(t, "the budget back to 0", func() bool { return p.fw.Bodies.InUse() == 0 })
				got, wantB := uris(b), 1
				if youngerGrows {
					wantB = 0
				}
				if got["/a"] != 1 || got["/b"] != wantB || b.Hits.Load() != int64(1+wantB) {
					t.Errorf("executed %v (%d in all), want /a once, /b %d times", got, b.Hits.Load(), wantB)
				}
				if n, want := p.fw.Bodies.Refused(), int64(1-wantB); n != want {
					t.Errorf("refusals: %d, want %d", n, want)
				}
			})
		}
	}
}
