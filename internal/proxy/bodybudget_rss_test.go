package proxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestBodyBudgetBoundsRSS: eight concurrent 15 MiB uploads (Content-Length,
// then chunked) through a real proxy process with the default
// --max-buffered-body-bytes (32 MiB): each client gets 200 or the proxy's
// 503, the backend executes exactly the 200s, the budget is back to 0 and
// the proxy's peak resident set (VmHWM) stays under the sidecar's 64 MiB
// memory limit. On main, with no budget, the same load peaked at ~150 MB
// (Content-Length) and ~205 MB (chunked) on both engines: an OOM kill.
// At least two Content-Length uploads are served (each holds its 15 MiB:
// two are the 30 MiB large bodies may hold; with fasthttp's buffer rounded
// up to 16 MiB only one was, left17), at least one chunked upload (a
// growing body holds the power of two, 16 MiB: a second fits only once the
// first is answered; with twice the buffer reserved and no waiting, all
// eight chunked ones were refused, session 15).
func TestBodyBudgetBoundsRSS(t *testing.T) {
	const (
		uploads = 8
		size    = 15 << 20
		bound   = 64 << 10 // KiB: the injected sidecar's memory limit, 64Mi
	)
	for _, engine := range []string{"loop", "goroutine"} {
		for _, chunked := range []bool{false, true} {
			name := engine + "/content-length"
			if chunked {
				name = engine + "/chunked"
			}
			t.Run(name, func(t *testing.T) {
				var execs atomic.Int64
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					n, err := io.Copy(io.Discard, r.Body)
					if err != nil || n != size {
						w.WriteHeader(http.StatusBadRequest)
						return
					}
					execs.Add(1)
					_, _ = io.WriteString(w, "ok")
				}), ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = srv.Serve(ln) }()
				t.Cleanup(func() { _ = srv.Close() })
				p := startProxy(t, "--engine", engine, "--upstreams", "big=1", "--resolve", "big="+ln.Addr().String())

				chunk := strings.Repeat("u", 64<<10)
				var wg sync.WaitGroup
				codes := make([]int, uploads)
				errs := make([]error, uploads)
				for i := range uploads {
					wg.Go(func() { codes[i], errs[i] = upload(p.Addr, size, chunked, chunk) })
				}
				wg.Wait()
				n200, n503 := 0, 0
				for i, code := range codes {
					switch {
					case errs[i] != nil:
						t.Errorf("upload %d: %v", i, errs[i])
					case code == http.StatusOK:
						n200++
					case code == http.StatusServiceUnavailable:
						n503++
					default:
						t.Errorf("upload %d: status %d", i, code)
					}
				}
				if n := execs.Load(); n != int64(n200) {
					t.Errorf("the backend executed %d uploads, the clients got %d 200s", n, n200)
				}
				// Released once the buffers are collected (forward.BodyBudget.ReleaseFreed).
				if v := scrapeUntil(t, p, "retrycap_proxy_buffered_body_bytes", func(v float64) bool { return v == 0 }); v != 0 {
					t.Errorf("buffered body bytes after the uploads: %v, want 0", v)
				}
				if v := scrapeUntil(t, p, "retrycap_proxy_body_budget_refused_total", func(v float64) bool { return v == float64(n503) }); v != float64(n503) {
					t.Errorf("refusals counted: %v, want %d", v, n503)
				}
				peak := vmStatus(t, p.Cmd.Process.Pid, "VmHWM")
				t.Logf("%d concurrent 15 MiB uploads: %d answered 200, %d refused 503; proxy peak RSS %.1f MiB", uploads, n200, n503, float64(peak)/1024)
				if peak >= bound {
					t.Errorf("proxy peak RSS %d KiB, want < %d KiB (64 MiB)", peak, bound)
				}
				if least := map[bool]int{false: 2, true: 1}[chunked]; n200 < least {
					t.Errorf("%d uploads served, want at least %d", n200, least)
				}
			})
		}
	}
}

// upload POSTs size bytes to http://big/ through the proxy at addr (chunked:
// in chunks of chunk) while it reads the answer, and returns its status: a
// proxy that refuses the body answers before the client has sent it all.
func upload(addr string, size int, chunked bool, chunk string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	go func() {
		w := bufio.NewWriterSize(c, 256<<10)
		head := "POST http://big/ HTTP/1.1\r\nHost: big\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
		if chunked {
			head = "POST http://big/ HTTP/1.1\r\nHost: big\r\nTransfer-Encoding: chunked\r\n\r\n"
		}
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		for left := size; left > 0; left -= len(chunk) {
			if chunked {
				_, _ = fmt.Fprintf(w, "%x\r\n", len(chunk))
			}
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the proxy refused and closed
			}
			if chunked {
				_, _ = io.WriteString(w, "\r\n")
			}
		}
		if chunked {
			_, _ = io.WriteString(w, "0\r\n\r\n")
		}
		_ = w.Flush()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodPost})
	if err != nil {
		return 0, fmt.Errorf("reading the answer: %w", err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, fmt.Errorf("reading the answer's body: %w", err)
	}
	if resp.StatusCode == http.StatusServiceUnavailable && !strings.HasPrefix(string(body), "retrycap-proxy: request body of ") {
		return 0, fmt.Errorf("503 not the budget's: %q", body)
	}
	return resp.StatusCode, nil
}
