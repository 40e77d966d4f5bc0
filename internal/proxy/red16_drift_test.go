package proxy

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// TestRed16BudgetNoDrift: 12 rounds, each of 9 concurrent clients of every
// kind the budget sees (a small Content-Length POST, one of 65,536 bytes and
// one of 65,537 with Expect: 100-continue, a 200,000-byte one, a chunked one
// that grows past 64 KiB, a chunked one and a Content-Length one whose
// clients reset part way, a GET), on a budget of 1 MiB that they overflow:
// every answer is a 200 with the body's length or the budget's 503 (never
// anything else, never a request executed twice), and when all are done
// the budget holds exactly 0 bytes with 0 waiting, on both engines.
func TestRed16BudgetNoDrift(t *testing.T) {
	const (
		max    = 1 << 20
		rounds = 12
	)
	chunked := strings.Repeat(chunk50k, 3) + "0\r\n\r\n"
	for _, engine := range []string{"loop", "goroutine"} {
		t.Run(engine, func(t *testing.T) {
			b := lenBackend(t)
			p := startProxyOn(t, engine, "--upstreams", "backend=1", "--resolve", "backend="+b.Addr(),
				"--max-buffered-body-bytes", strconv.Itoa(max), "--client-timeout", "10m")
			var mu sync.Mutex
			ok := map[string]int{}
			for r := range rounds {
				var wg sync.WaitGroup
				post := func(path, head, body string, size int) {
					wg.Go(func() {
						c := proxytest.Dial(t, p.Addr())
						defer c.C.Close()
						if _, err := c.C.Write([]byte(head + body)); err != nil {
							return // refused and closed while it wrote
						}
						resp, err := http.ReadResponse(c.BR, &http.Request{Method: "POST"})
						for err == nil && resp.StatusCode == http.StatusContinue {
							resp, err = http.ReadResponse(c.BR, &http.Request{Method: "POST"})
						}
						if err != nil {
							t.Errorf("%s: reading the answer: %v", path, err)
							return
						}
						raw := make([]byte, 300)
						n, _ := resp.Body.Read(raw)
						switch {
						case resp.StatusCode == http.StatusOK && string(raw[:n]) == strconv.Itoa(size):
							mu.Lock()
							ok[path]++
							mu.Unlock()
						case resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(raw[:n]), "(--max-buffered-body-bytes) are in use"):
						default:
							t.Errorf("%s: answer %d %q", path, resp.StatusCode, raw[:n])
						}
					})
				}
				cl := func(path string, n int, extra string) string {
					return "POST http://backend" + path + " HTTP/1.1\r\nHost: backend\r\n" + extra + "Content-Length: " + strconv.Itoa(n) + "\r\n\r\n"
				}
				p1 := fmt.Sprintf("/r%d", r)
				post(p1+"/small", cl(p1+"/small", 1000, ""), strings.Repeat("s", 1000), 1000)
				post(p1+"/64k", cl(p1+"/64k", 65536, ""), strings.Repeat("a", 65536), 65536)
				post(p1+"/64k1", cl(p1+"/64k1", 65537, "Expect: 100-continue\r\n"), strings.Repeat("b", 65537), 65537)
				post(p1+"/200k", cl(p1+"/200k", 200000, ""), strings.Repeat("c", 200000), 200000)
				post(p1+"/chunked", chunkedHead(p1+"/chunked"), chunked, 150000)
				for _, cut := range []string{chunkedHead(p1+"/cutc") + strings.Repeat(chunk50k, 2) + chunk50k[:100], cl(p1+"/cutl", 300000, "") + strings.Repeat("d", 5000), cl(p1+"/cuts", 40000, "") + strings.Repeat("e", 5000)} {
					wg.Go(func() {
						c, err := net.Dial("tcp", p.Addr())
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = c.Write([]byte(cut))
						_ = c.(*net.TCPConn).SetLinger(0)
						_ = c.Close()
					})
				}
				wg.Go(func() {
					c := proxytest.Dial(t, p.Addr())
					defer c.C.Close()
					c.Send("GET http://backend" + p1 + "/get HTTP/1.1\r\nHost: backend\r\n\r\n")
					c.Expect("GET", http.StatusOK, "0")
				})
				wg.Wait()
			}
			proxytest.Eventually(t, "the budget back to exactly 0, none waiting", func() bool {
				return p.fw.Bodies.InUse() == 0 && p.fw.Bodies.Waiting() == 0
			})
			got := uris(b)
			for path, n := range got {
				if strings.Contains(path, "/cut") {
					t.Errorf("%s executed %d times, want 0 (its client reset part way)", path, n)
				} else if n != 1 || ok[path] != 1 {
					if !strings.HasSuffix(path, "/get") {
						t.Errorf("%s executed %d times, answered 200 %d times, want 1 and 1", path, n, ok[path])
					}
				}
			}
			for path, n := range ok {
				if got[path] != n {
					t.Errorf("%s answered 200 %d times, executed %d times", path, n, got[path])
				}
			}
			t.Logf("%d executed, %d refused", b.Hits.Load(), p.fw.Bodies.Refused())
		})
	}
}
