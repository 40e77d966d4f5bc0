package proxy

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Three proxies in a row on loopback (entry --max-time-to-answer 1200ms,
// every per-try timeout 2s, 3 attempts each) and a bottom that never
// answers: the client's answer is 504 Retrycap-Exhausted: deadline, before
// one per-try timeout (without the deadline: 3 x 2s at the entry alone),
// the bottom saw exactly one attempt carrying a Retrycap-Deadline lowered
// by each of the three hops (rounded down: at most 1197), and no attempt
// started after it at any tier.
func TestDeadlineThreeTiers(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{}, 16)
	bottom := newBackend(t, func(_ int64, _ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Retrycap-Deadline"))
		mu.Unlock()
		<-r.Context().Done() // the tier above gave up: the connection is closed
		done <- struct{}{}
	})
	p3 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+bottom.addr())
	p2 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+p3.Addr())
	p1 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+p2.Addr(), "--entrypoint", "--max-time-to-answer", "1200ms")
	start := time.Now()
	resp := do(t, clientFor(p1), "GET", "http://svc/", nil)
	took := time.Since(start)
	if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" {
		t.Fatalf("answer %d Retrycap-Exhausted %q, want 504 deadline", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"))
	}
	if took >= 2*time.Second {
		t.Fatalf("answered after %v: the deadline (1200ms) did not bound the attempts (per-try 2s)", took)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the bottom's attempt was never cancelled")
	}
	for _, p := range []*Proxy{p1, p2, p3} {
		if n := testutil.ToFloat64(p.upstreamByName("svc").M.Retries); n != 0 {
			t.Fatalf("a tier retried %v times after the deadline", n)
		}
	}
	if h := bottom.hits.Load(); h != 1 {
		t.Fatalf("bottom saw %d attempts, want 1", h)
	}
	mu.Lock()
	defer mu.Unlock()
	ms, err := strconv.Atoi(seen[0])
	if err != nil || ms > 1197 || ms < 200 {
		t.Fatalf("bottom saw Retrycap-Deadline %q, want 200..1197 (1200 lowered by three hops)", seen[0])
	}
}

// Retrycap-Deadline: 0 is no time left: 504 at once, nothing forwarded. A
// caller can lower the entry's bound (the upstream sees at most its value)
// but never raise it; the smallest of repeated values wins, malformed
// ones count as absent.
func TestDeadlineHeaderValues(t *testing.T) {
	b := newBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Header.Get("Retrycap-Deadline")))
	})
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--entrypoint", "--max-time-to-answer", "5s")
	c := clientFor(p)
	resp := do(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "0"})
	if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" || b.hits.Load() != 0 {
		t.Fatalf("deadline 0: %d %q, %d forwarded; want 504 deadline, 0", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), b.hits.Load())
	}
	for _, tc := range []struct {
		name   string
		hdr    []string
		lo, hi int
	}{
		{"absent: the entry's bound", nil, 4000, 4999},
		{"caller lowers", []string{"800"}, 500, 799},
		{"caller cannot raise", []string{"90000"}, 4000, 4999},
		{"repeated: smallest", []string{"3000", "junk, 700", "-1"}, 400, 699},
		{"malformed only: the entry's bound", []string{"soon"}, 4000, 4999},
	} {
		req, _ := http.NewRequest("GET", "http://svc/", nil)
		for _, v := range tc.hdr {
			req.Header.Add("Retrycap-Deadline", v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var buf [32]byte
		n, _ := resp.Body.Read(buf[:])
		resp.Body.Close()
		got, err := strconv.Atoi(string(buf[:n]))
		if err != nil || got < tc.lo || got > tc.hi {
			t.Errorf("%s: upstream saw %q, want %d..%d", tc.name, buf[:n], tc.lo, tc.hi)
		}
	}
}

// A retry starts only with half a try's timeout left after its backoff:
// with 800ms left and a 2s per-try timeout, a 503 is not retried (one
// attempt, answered 503 Retrycap-Exhausted: deadline, counted as denied);
// with 5s left it is (three attempts).
func TestDeadlineDeniesRetryWithoutRoom(t *testing.T) {
	for _, tc := range []struct {
		deadline  string
		hits      int64
		exhausted string
		denied    float64
	}{
		{"800", 1, "deadline", 1},
		{"5000", 3, "attempts", 0},
	} {
		b := newBackend(t, status(503))
		p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
		resp := do(t, clientFor(p), "GET", "http://svc/", map[string]string{"Retrycap-Deadline": tc.deadline})
		denied := testutil.ToFloat64(p.upstreamByName("svc").M.Denied[policy.ReasonDeadline])
		if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != tc.exhausted || b.hits.Load() != tc.hits || denied != tc.denied {
			t.Errorf("deadline %s: %d %q, %d attempts, %v denied; want 503 %q, %d, %v",
				tc.deadline, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), b.hits.Load(), denied, tc.exhausted, tc.hits, tc.denied)
		}
	}
}
