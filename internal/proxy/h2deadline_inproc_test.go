package proxy

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Deadlines on plain HTTP/2 (h2c with prior knowledge), and the rules a
// gRPC call shares with HTTP/1.1: no retry without room, the per-upstream
// per-try timeout of --upstreams ("svc=3/200ms") on every path.

// grpcDirect is a grpc-go client of svc through p, h2c with prior knowledge.
func grpcDirect(t *testing.T, p *Proxy) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///svc",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", p.Addr())
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Three proxies in a row over plain HTTP/2, entry --max-time-to-answer
// 1200ms, per-try 2s x 3 attempts, a bottom that never answers: 504
// Retrycap-Exhausted: deadline within one per-try timeout, one attempt at
// the bottom carrying a Retrycap-Deadline lowered by each hop (at most
// 1197), no retry at any tier.
func TestH2DeadlinePlainThreeTiers(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	done := make(chan struct{}, 16)
	bottom, _ := newDualBackend(t, func(_ int64, _ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Retrycap-Deadline"))
		mu.Unlock()
		<-r.Context().Done()
		done <- struct{}{}
	})
	p3 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+bottom.addr())
	p2 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+p3.Addr())
	p1 := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+p2.Addr(), "--entrypoint", "--max-time-to-answer", "1200ms")
	start := time.Now()
	resp, body := doBody(t, h2Client(t, p1), "GET", "http://svc/", nil)
	took := time.Since(start)
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" {
		t.Fatalf("answer HTTP/%d %d Retrycap-Exhausted %q (%s), want HTTP/2 504 deadline", resp.ProtoMajor, resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body)
	}
	if took >= 2*time.Second {
		t.Fatalf("answered after %v: the deadline (1200ms) did not bound the attempts (per-try 2s)", took)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the bottom's attempt was never cancelled")
	}
	for i, p := range []*Proxy{p1, p2, p3} {
		if n := counterValue(t, p, "retrycap_proxy_h2_retries_total", map[string]string{"upstream": "svc"}); n != 0 {
			t.Errorf("tier %d retried %v times", i+1, n)
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

// Plain HTTP/2 reads Retrycap-Deadline by HTTP/1.1's rules: 0 is no time
// left (504 at once, nothing forwarded, counted); a caller lowers the
// entry's bound, never raises it; the smallest of repeated values wins;
// malformed ones count as absent; the baggage member counts and is
// forwarded lowered too.
func TestH2DeadlinePlainValues(t *testing.T) {
	var mu sync.Mutex
	var bags []string
	b, _ := newDualBackend(t, func(_ int64, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		bags = append(bags, r.Header.Get("Baggage"))
		mu.Unlock()
		_, _ = w.Write([]byte(r.Header.Get("Retrycap-Deadline")))
	})
	// Chain budgeting on: the baggage is read (and rewritten) only then,
	// as on the HTTP/1.1 path.
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr(), "--entrypoint", "--max-time-to-answer", "5s", "--chain-cap", "8")
	c := h2Client(t, p)
	resp, body := doBody(t, c, "GET", "http://svc/", map[string]string{"Retrycap-Deadline": "0"})
	if resp.StatusCode != http.StatusGatewayTimeout || resp.Header.Get("Retrycap-Exhausted") != "deadline" || b.hits.Load() != 0 ||
		body != "retrycap-proxy: upstream svc: no time left (Retrycap-Deadline: 0): nothing forwarded\n" {
		t.Fatalf("deadline 0: %d %q %q, %d forwarded; want 504 deadline, 0", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body, b.hits.Load())
	}
	if n := counterValue(t, p, "retrycap_proxy_h2_retries_denied_total", map[string]string{"upstream": "svc", "reason": "deadline"}); n != 1 {
		t.Fatalf("denied{deadline} = %v, want 1", n)
	}
	for _, tc := range []struct {
		name   string
		hdr    []string
		bag    string
		lo, hi int
	}{
		{"absent: the entry's bound", nil, "", 4000, 4999},
		{"caller lowers", []string{"800"}, "", 500, 799},
		{"caller cannot raise", []string{"90000"}, "", 4000, 4999},
		{"repeated: smallest", []string{"3000", "junk, 700", "-1"}, "", 400, 699},
		{"malformed only: the entry's bound", []string{"soon"}, "", 4000, 4999},
		{"baggage lowers", []string{"3000"}, "user=a,retrycap-deadline=600", 300, 599},
	} {
		req, _ := http.NewRequest("GET", "http://svc/", nil)
		for _, v := range tc.hdr {
			req.Header.Add("Retrycap-Deadline", v)
		}
		if tc.bag != "" {
			req.Header.Set("Baggage", tc.bag)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ms, err := strconv.Atoi(string(got))
		if err != nil || ms < tc.lo || ms > tc.hi {
			t.Errorf("%s: upstream saw %q, want %d..%d", tc.name, got, tc.lo, tc.hi)
		}
		if tc.bag != "" {
			mu.Lock()
			bag := bags[len(bags)-1]
			mu.Unlock()
			// The member replaced in place, the chain budget's appended
			// (cap 8 over 3 attempts: the first carries 6).
			if want := "user=a,retrycap-deadline=" + string(got) + ",retrycap-budget=6"; bag != want {
				t.Errorf("%s: upstream saw baggage %q, want %q", tc.name, bag, want)
			}
		}
	}
}

// A retry starts only with half a try's timeout left after its backoff,
// on HTTP/2 as on HTTP/1.1: with 800ms left and a 2s per-try timeout a
// failure is not retried (one attempt, Retrycap-Exhausted: deadline,
// counted as denied); with 5s left it is (three attempts). Plain (503)
// and gRPC (UNAVAILABLE; the deadline from retrycap-deadline or from the
// client's own context, grpc-timeout).
func TestH2DeadlineDeniesRetryWithoutRoom(t *testing.T) {
	for _, tc := range []struct {
		deadline  string
		hits      int64
		exhausted string
		denied    float64
	}{
		{"800", 1, "deadline", 1},
		{"5000", 3, "attempts", 0},
	} {
		t.Run("plain "+tc.deadline, func(t *testing.T) {
			b, _ := newDualBackend(t, status(503))
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+b.addr())
			resp, _ := doBody(t, h2Client(t, p), "GET", "http://svc/", map[string]string{"Retrycap-Deadline": tc.deadline})
			denied := counterValue(t, p, "retrycap_proxy_h2_retries_denied_total", map[string]string{"upstream": "svc", "reason": "deadline"})
			if resp.StatusCode != 503 || resp.Header.Get("Retrycap-Exhausted") != tc.exhausted || b.hits.Load() != tc.hits || denied != tc.denied {
				t.Errorf("%d %q, %d attempts, %v denied; want 503 %q, %d, %v",
					resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), b.hits.Load(), denied, tc.exhausted, tc.hits, tc.denied)
			}
		})
		for _, how := range []string{"metadata", "grpc-timeout"} {
			t.Run("grpc "+how+" "+tc.deadline, func(t *testing.T) {
				f, addr := startFailing(t)
				p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+addr, "--retry-on", "unavailable")
				ms, _ := strconv.Atoi(tc.deadline)
				ctx := context.Background()
				if how == "metadata" {
					ctx = metadata.AppendToOutgoingContext(ctx, "retrycap-deadline", tc.deadline)
				} else {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
					defer cancel()
				}
				var tr metadata.MD
				err := grpcDirect(t, p).Invoke(ctx, "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
				denied := counterValue(t, p, "retrycap_proxy_h2_retries_denied_total", map[string]string{"upstream": "svc", "reason": "deadline"})
				if grpcstatus.Code(err) != codes.Unavailable || !slices.Equal(tr.Get("retrycap-exhausted"), []string{tc.exhausted}) || f.calls.Load() != tc.hits || denied != tc.denied {
					t.Errorf("%v %q, %d attempts, %v denied; want UNAVAILABLE %q, %d, %v", err, tr.Get("retrycap-exhausted"), f.calls.Load(), denied, tc.exhausted, tc.hits, tc.denied)
				}
			})
		}
	}
}

// The per-upstream per-try timeout of --upstreams ("svc=3/200ms") bounds
// each attempt to that upstream on both HTTP/1.1 engines and on HTTP/2,
// below or above --per-try-timeout: a silent upstream with svc=3/200ms
// and --per-try-timeout 5s is tried three times and answered 504 in well
// under one global per-try timeout; an upstream answering after 600ms
// with svc=2/3s and --per-try-timeout 300ms answers the first attempt.
// --check shows it.
func TestPerUpstreamTryTimeout(t *testing.T) {
	silent := func(_ int64, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	slow := func(_ int64, w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(600 * time.Millisecond):
			_, _ = w.Write([]byte("late"))
		case <-r.Context().Done():
		}
	}
	for _, proto := range []string{"HTTP/1.1", "HTTP/2"} {
		t.Run(proto+" shorter", func(t *testing.T) {
			b, _ := newDualBackend(t, silent)
			p := startProxy(t, "--upstreams", "svc=3/200ms", "--resolve", "svc="+b.addr(), "--per-try-timeout", "5s", "--retry-on", "timeout")
			c := clientFor(p)
			if proto == "HTTP/2" {
				c = h2Client(t, p)
			}
			start := time.Now()
			resp, body := doBody(t, c, "GET", "http://svc/", nil)
			took := time.Since(start)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retrycap-Exhausted") != "attempts" || !strings.Contains(body, "3 attempt(s), last failed with timeout") {
				t.Fatalf("%d %q %q, want 503 attempts after 3 timeouts", resp.StatusCode, resp.Header.Get("Retrycap-Exhausted"), body)
			}
			if took >= 5*time.Second {
				t.Fatalf("answered after %v: the upstream's 200ms did not bound the attempts", took)
			}
			if waitHits(b, 3) != 3 {
				t.Fatalf("upstream saw %d attempts, want 3", b.hits.Load())
			}
		})
		t.Run(proto+" longer", func(t *testing.T) {
			b, _ := newDualBackend(t, slow)
			p := startProxy(t, "--upstreams", "svc=2/3s", "--resolve", "svc="+b.addr(), "--per-try-timeout", "300ms", "--retry-on", "timeout")
			c := clientFor(p)
			if proto == "HTTP/2" {
				c = h2Client(t, p)
			}
			resp, body := doBody(t, c, "GET", "http://svc/", nil)
			if resp.StatusCode != 200 || body != "late" || b.hits.Load() != 1 {
				t.Fatalf("%d %q after %d attempts, want 200 late after 1", resp.StatusCode, body, b.hits.Load())
			}
		})
	}
	t.Run("gRPC", func(t *testing.T) {
		b := &silentGRPC{}
		addr := b.start(t)
		p := startProxy(t, "--upstreams", "svc=3/200ms", "--resolve", "svc="+addr, "--per-try-timeout", "5s", "--retry-on", "timeout")
		start := time.Now()
		var tr metadata.MD
		err := grpcDirect(t, p).Invoke(context.Background(), "/seam.Test/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
		if grpcstatus.Code(err) != codes.Unavailable || !slices.Equal(tr.Get("retrycap-exhausted"), []string{"attempts"}) || time.Since(start) >= 5*time.Second {
			t.Fatalf("%v %q after %v, want UNAVAILABLE attempts within 5s", err, tr.Get("retrycap-exhausted"), time.Since(start))
		}
		if n := b.calls(); n != 3 {
			t.Fatalf("upstream saw %d calls, want 3", n)
		}
	})
	cfg, err := ParseFlags([]string{"--upstreams", "svc=3/200ms,other=2"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cfg.Describe(&buf)
	if !strings.Contains(buf.String(), "\nupstreams svc=3/200ms*1,other=2*1\n") {
		t.Fatalf("--check:\n%s", buf.String())
	}
}

// waitHits polls until b saw n requests (the proxy may answer before the
// upstream's handler counted the last), up to 5 s; it returns the count.
func waitHits(b *backend, n int64) int64 {
	for end := time.Now().Add(5 * time.Second); b.hits.Load() < n && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	return b.hits.Load()
}

// silentGRPC answers no call; it counts them.
type silentGRPC struct {
	mu sync.Mutex
	n  int
}

func (s *silentGRPC) start(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		s.mu.Lock()
		s.n++
		s.mu.Unlock()
		<-stream.Context().Done()
		return nil
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

func (s *silentGRPC) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
