package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/retrycap/retrycap/internal/labapp"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Deadlines on the h2 relay, with real processes: three retrycap-proxy
// binaries in a row, a grpc-go client with a context deadline, a grpc-go
// server at the bottom that never answers, and a tap in front of every
// tier below the entry that records the grpc-timeout each hop forwards.

// silentServer is a grpc-go server that answers no call: each call is
// counted, its arrival and the deadline it carried recorded, and noted as
// ended when its context is done (the caller reset it, or its deadline
// passed). Its handler then still answers nothing until the test ends: a
// grpc-go handler that returned at its own deadline would answer
// DEADLINE_EXCEEDED a moment before the tier above cuts the attempt, and
// the tests are about the proxies' answer.
type silentServer struct {
	addr    string
	calls   atomic.Int64
	mu      sync.Mutex
	at      []time.Time     // arrival of each call
	left    []time.Duration // its context's time left on arrival
	ended   chan struct{}   // one per call that ended
	release chan struct{}   // closed when the test ends: the handlers return
}

func startSilent(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &silentServer{addr: ln.Addr().String(), ended: make(chan struct{}, 64), release: make(chan struct{})}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		ctx := stream.Context()
		now := time.Now()
		s.calls.Add(1)
		dl, ok := ctx.Deadline()
		s.mu.Lock()
		s.at = append(s.at, now)
		if ok {
			s.left = append(s.left, dl.Sub(now))
		} else {
			s.left = append(s.left, -1)
		}
		s.mu.Unlock()
		_ = stream.RecvMsg(new(emptypb.Empty))
		<-ctx.Done()
		s.ended <- struct{}{}
		<-s.release
		return grpcstatus.FromContextError(ctx.Err()).Err()
	}))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	t.Cleanup(func() { close(s.release) }) // before Stop (cleanups run last first)
	return s
}

// h2Tap relays TCP to next and decodes the HTTP/2 frames the caller sends
// (after the preface), recording every grpc-timeout and retrycap-deadline
// field of a request's headers: what the tier above forwarded.
type h2Tap struct {
	addr string
	mu   sync.Mutex
	seen []map[string]string // per request header block: grpc-timeout, retrycap-deadline
	rsts []http2.ErrCode     // the RST_STREAM frames the caller sent, in order
}

func startTap(t *testing.T, next string) *h2Tap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &h2Tap{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var conns sync.Map
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				conns.Store(c, true)
				defer c.Close()
				up, err := net.Dial("tcp", next)
				if err != nil {
					return
				}
				conns.Store(up, true)
				defer up.Close()
				go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
				tp.read(io.TeeReader(c, up))
				_, _ = io.Copy(up, c) // after a frame the tap could not read: relay the rest
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		conns.Range(func(k, _ any) bool { _ = k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return tp
}

func (tp *h2Tap) read(r io.Reader) {
	var preface [24]byte
	if _, err := io.ReadFull(r, preface[:]); err != nil {
		return
	}
	fr := http2.NewFramer(nil, r)
	fr.SetMaxReadFrameSize(1 << 24)
	fr.ReadMetaHeaders = hpack.NewDecoder(1<<16, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		if rst, ok := f.(*http2.RSTStreamFrame); ok {
			tp.mu.Lock()
			tp.rsts = append(tp.rsts, rst.ErrCode)
			tp.mu.Unlock()
			continue
		}
		mh, ok := f.(*http2.MetaHeadersFrame)
		if !ok || mh.PseudoValue("method") == "" {
			continue
		}
		got := map[string]string{}
		for _, hf := range mh.RegularFields() {
			if hf.Name == "grpc-timeout" || hf.Name == "retrycap-deadline" {
				got[hf.Name] = hf.Value
			}
		}
		tp.mu.Lock()
		tp.seen = append(tp.seen, got)
		tp.mu.Unlock()
	}
}

// resets are the RST_STREAM codes the caller sent so far.
func (tp *h2Tap) resets() []http2.ErrCode {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]http2.ErrCode(nil), tp.rsts...)
}

func (tp *h2Tap) requests() []map[string]string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]map[string]string(nil), tp.seen...)
}

// grpcTimeout parses a recorded grpc-timeout, failing the test when it is
// not one.
func grpcTimeout(t *testing.T, where, v string) time.Duration {
	t.Helper()
	d, ok := policy.ParseGRPCTimeout([]byte(v))
	if !ok {
		t.Fatalf("%s: grpc-timeout %q is malformed", where, v)
	}
	return d
}

// grpcChain starts bottom <- tap3 <- p3 <- tap2 <- p2 <- tap1 <- p1, each
// proxy with svc=3 attempts and a 2 s per-try timeout; entryArgs go to p1.
func grpcChain(t *testing.T, bottom string, entryArgs ...string) (proxies []*labapp.ProxyProc, taps []*h2Tap) {
	t.Helper()
	common := []string{"--per-try-timeout", "2s", "--backoff-base", "1ms", "--backoff-max", "5ms",
		"--breaker-failures", "0", "--budget-percent", "100", "--budget-min-per-second", "1000"}
	next := bottom
	for i := 3; i >= 1; i-- {
		tp := startTap(t, next)
		args := append([]string{"--upstreams", "svc=3", "--resolve", "svc=" + tp.addr,
			"--access-log", filepath.Join(t.TempDir(), fmt.Sprintf("p%d.log", i))}, common...)
		if i == 1 {
			args = append(args, entryArgs...)
		}
		p := startProxy(t, args...)
		proxies = append([]*labapp.ProxyProc{p}, proxies...)
		taps = append([]*h2Tap{tp}, taps...)
		next = p.Addr
	}
	return proxies, taps
}

// grpcTo is a grpc-go client of svc through the proxy at addr, h2c with
// prior knowledge (the listener's "PRI *" path; :authority svc).
func grpcTo(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient("passthrough:///svc",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry(),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// scrape is one proxy's counter (-1 when absent), polled until want holds
// or 10 s pass; the last value is returned either way.
func scrapeUntil(t *testing.T, p *labapp.ProxyProc, series string, want func(float64) bool) float64 {
	t.Helper()
	v := -1.0
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		text, err := p.Metrics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if v = metricValue(text, series); want(v) {
			break
		}
	}
	return v
}

// accessLines polls a proxy's access log file until it holds n lines.
func accessLines(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	var out []map[string]any
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(path)
		out = out[:0]
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%s: line %q: %v", path, l, err)
			}
			out = append(out, m)
		}
		if len(out) >= n {
			break
		}
	}
	return out
}

const (
	seriesAttempts = `retrycap_proxy_h2_attempts_total{protocol="grpc",upstream="svc"}`
	seriesRetries  = `retrycap_proxy_h2_retries_total{protocol="grpc",upstream="svc"}`
	seriesDLDenied = `retrycap_proxy_h2_retries_denied_total{protocol="grpc",reason="deadline",upstream="svc"}`
)

// TestH2DeadlineThreeTiersGRPC: the client waits 5 s, the entry's
// --max-time-to-answer is 1200ms, every per-try timeout 2 s with 3
// attempts (without the deadline: 3 x 2 s at the entry alone, 27 tries
// at the bottom). The client gets DEADLINE_EXCEEDED from the proxies,
// marked retrycap-exhausted: deadline, within one per-try timeout; the
// bottom saw exactly one call, started within the deadline; every tier
// made exactly one attempt and no retry; the grpc-timeout each hop
// forwarded is at most 1200ms and strictly decreasing hop by hop, and the
// bottom's context deadline is below the last. A second run where the
// client's own deadline (800ms) is the smaller: the same, bounded by 800ms.
func TestH2DeadlineThreeTiersGRPC(t *testing.T) {
	for _, tc := range []struct {
		name      string
		clientDL  time.Duration
		entryMax  string
		bound     time.Duration
		exhausted bool // the proxies' answer reaches the client first (their bound is the smaller)
	}{
		{"entry bound", 5 * time.Second, "1200ms", 1200 * time.Millisecond, true},
		{"client bound", 800 * time.Millisecond, "5s", 800 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bottom := startSilent(t)
			proxies, taps := grpcChain(t, bottom.addr, "--entrypoint", "--max-time-to-answer", tc.entryMax)
			cc := grpcTo(t, proxies[0].Addr)
			ctx, cancel := context.WithTimeout(context.Background(), tc.clientDL)
			defer cancel()
			var hdr, tr metadata.MD
			start := time.Now()
			err := cc.Invoke(ctx, "/lab.Svc/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Header(&hdr), grpc.Trailer(&tr))
			took := time.Since(start)
			if grpcstatus.Code(err) != codes.DeadlineExceeded {
				t.Fatalf("err = %v, want DeadlineExceeded", err)
			}
			if took >= 2*time.Second {
				t.Fatalf("answered after %v: the deadline (%v) did not bound the attempts (per-try 2s)", took, tc.bound)
			}
			if tc.exhausted {
				// A trailers-only answer: its fields are the headers.
				got := append(hdr.Get("retrycap-exhausted"), tr.Get("retrycap-exhausted")...)
				if len(got) != 1 || got[0] != "deadline" {
					t.Fatalf("retrycap-exhausted = %q, want [deadline] (headers %v, trailers %v)", got, hdr, tr)
				}
				// The next hop's address is the chain's: the rest is exact.
				const end = "): 1 attempt(s), last failed with timeout (no answer before the call's deadline); not retried: deadline"
				if msg := grpcstatus.Convert(err).Message(); !strings.HasPrefix(msg, "retrycap-proxy: upstream svc (127.0.0.1:") || !strings.HasSuffix(msg, end) {
					t.Fatalf("grpc-message %q is not the proxy's: want \"retrycap-proxy: upstream svc (127.0.0.1:<port>%s\"", msg, end)
				}
			}
			select {
			case <-bottom.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the bottom's call was never cancelled")
			}
			for i, p := range proxies {
				if n := scrapeUntil(t, p, seriesAttempts, func(v float64) bool { return v >= 1 }); n != 1 {
					t.Errorf("tier %d made %v attempts, want 1", i+1, n)
				}
				if n := scrapeUntil(t, p, seriesRetries, func(float64) bool { return true }); n != 0 {
					t.Errorf("tier %d retried %v times, want 0", i+1, n)
				}
			}
			if n := bottom.calls.Load(); n != 1 {
				t.Fatalf("the bottom saw %d calls, want 1", n)
			}
			bottom.mu.Lock()
			at, left := bottom.at[0], bottom.left[0]
			bottom.mu.Unlock()
			if at.Sub(start) >= tc.bound {
				t.Fatalf("the bottom's call started %v after the client's, after the deadline %v", at.Sub(start), tc.bound)
			}
			prev := tc.bound
			var chain []string
			for i, tp := range taps {
				reqs := tp.requests()
				if len(reqs) != 1 {
					t.Fatalf("tap below tier %d saw %d requests, want 1: %v", i+1, len(reqs), reqs)
				}
				if _, ok := reqs[0]["retrycap-deadline"]; ok {
					t.Errorf("tier %d added retrycap-deadline to a gRPC call that carried none: %v", i+1, reqs[0])
				}
				d := grpcTimeout(t, fmt.Sprintf("below tier %d", i+1), reqs[0]["grpc-timeout"])
				if d >= prev || d < tc.bound/2 {
					t.Fatalf("grpc-timeout below tier %d = %v (%s), want below %v (the hop above) and above %v", i+1, d, reqs[0]["grpc-timeout"], prev, tc.bound/2)
				}
				prev = d
				chain = append(chain, reqs[0]["grpc-timeout"])
			}
			t.Logf("grpc-timeout below tiers 1, 2, 3: %v; the bottom's deadline on arrival %v; answered after %v", chain, left, took)
			if left <= 0 || left >= prev {
				t.Fatalf("the bottom's deadline on arrival %v, want within (0, %v): what the last tier forwarded", left, prev)
			}
		})
	}
}

// TestH2DeadlineAccessLogGRPC: the bottom tier's attempt cut by the
// deadline is logged as an attempt with "exhausted":"deadline" and counted
// in retries_denied_total{reason="deadline"}; a call that arrives with
// retrycap-deadline: 0 is answered at once, DEADLINE_EXCEEDED, nothing
// forwarded, counted.
func TestH2DeadlineAccessLogGRPC(t *testing.T) {
	bottom := startSilent(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "p.log")
	p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+bottom.addr, "--per-try-timeout", "2s",
		"--backoff-base", "1ms", "--backoff-max", "5ms", "--breaker-failures", "0", "--access-log", logPath,
		"--max-time-to-answer", "300ms")
	cc := grpcTo(t, p.Addr)
	// A trailers-only answer: grpc-go hands its fields over as trailers.
	var tr metadata.MD
	err := cc.Invoke(context.Background(), "/lab.Svc/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
	if grpcstatus.Code(err) != codes.DeadlineExceeded || !slices.Equal(tr.Get("retrycap-exhausted"), []string{"deadline"}) {
		t.Fatalf("err = %v, retrycap-exhausted %q; want DeadlineExceeded, deadline", err, tr.Get("retrycap-exhausted"))
	}
	// The attempt ends by the proxy's cut (error timeout) or, a moment
	// before it, by the grpc-go server resetting the stream at the
	// deadline it was forwarded (error reset): either way it is not
	// retried, for the deadline.
	lines := accessLines(t, logPath, 1)
	if len(lines) != 1 || lines[0]["exhausted"] != "deadline" || (lines[0]["error"] != "timeout" && lines[0]["error"] != "reset") || lines[0]["attempt"] != 1.0 {
		t.Fatalf("access log %v, want one attempt, error timeout or reset, exhausted deadline", lines)
	}
	if n := scrapeUntil(t, p, seriesDLDenied, func(v float64) bool { return v == 1 }); n != 1 {
		t.Fatalf("denied{deadline} = %v, want 1", n)
	}

	ctx := metadata.AppendToOutgoingContext(context.Background(), "retrycap-deadline", "0")
	tr = nil
	err = cc.Invoke(ctx, "/lab.Svc/Call", new(emptypb.Empty), new(emptypb.Empty), grpc.Trailer(&tr))
	if grpcstatus.Code(err) != codes.DeadlineExceeded || !slices.Equal(tr.Get("retrycap-exhausted"), []string{"deadline"}) ||
		!strings.Contains(grpcstatus.Convert(err).Message(), "no time left (Retrycap-Deadline: 0): nothing forwarded") {
		t.Fatalf("deadline 0: err = %v, retrycap-exhausted %q", err, tr.Get("retrycap-exhausted"))
	}
	if n := bottom.calls.Load(); n != 1 {
		t.Fatalf("the bottom saw %d calls, want 1 (the call with no time left forwarded)", n)
	}
	if n := scrapeUntil(t, p, seriesDLDenied, func(v float64) bool { return v == 2 }); n != 2 {
		t.Fatalf("denied{deadline} = %v, want 2", n)
	}
	if n := scrapeUntil(t, p, seriesAttempts, func(float64) bool { return true }); n != 1 {
		t.Fatalf("attempts = %v, want 1", n)
	}
	if got := scrapeUntil(t, p, `retrycap_proxy_h2_requests_total{code="DEADLINE_EXCEEDED",protocol="grpc",upstream="svc"}`, func(v float64) bool { return v == 2 }); got != 2 {
		t.Fatalf("requests{DEADLINE_EXCEEDED} = %v, want 2", got)
	}
}
