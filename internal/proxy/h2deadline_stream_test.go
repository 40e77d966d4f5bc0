package proxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// A gRPC answer still streaming when the call's deadline passes (issue
// 29): a server-streaming call through one retrycap-proxy process whose
// --max-time-to-answer is the call's deadline; a grpc-go server that
// sends three messages at once and then one every streamGap (longer than
// the deadline: it is still streaming, slowly, when the time is gone).

const (
	streamDeadline = 800 * time.Millisecond
	streamGap      = 2 * streamDeadline
	// streamBefore messages go out at once, within the deadline.
	streamBefore = 3
)

// streamServer is the grpc-go handler of the streaming call, with what
// it saw: each call counted, the deadline its context carried on arrival
// (-1: none), the messages its Send accepted, and how its context ended.
type streamServer struct {
	calls atomic.Int64
	mu    sync.Mutex
	left  []time.Duration
	sent  []int
	errs  []error
	ended chan struct{} // one per call whose context ended
}

func newStreamServer() *streamServer { return &streamServer{ended: make(chan struct{}, 16)} }

func (s *streamServer) handle(_ any, stream grpc.ServerStream) error {
	ctx := stream.Context()
	s.calls.Add(1)
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	sent := 0
	defer func() {
		s.mu.Lock()
		s.left, s.sent, s.errs = append(s.left, left), append(s.sent, sent), append(s.errs, ctx.Err())
		s.mu.Unlock()
		s.ended <- struct{}{}
	}()
	if err := stream.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		return err
	}
	for i := 1; ; i++ {
		if i > streamBefore {
			select {
			case <-ctx.Done():
				return grpcstatus.FromContextError(ctx.Err()).Err()
			case <-time.After(streamGap):
			}
		}
		if err := stream.SendMsg(wrapperspb.String("m" + strconv.Itoa(i))); err != nil {
			<-ctx.Done()
			return err
		}
		sent++
	}
}

// startStreamServer serves handle with grpc-go's own transport (which
// honours the grpc-timeout it is forwarded: at that deadline it cancels
// the handler's context and resets the stream itself).
func startStreamServer(t *testing.T, s *streamServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(s.handle))
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// startDeafStreamServer serves handle with grpc-go's ServeHTTP behind
// net/http's h2c server, the grpc-timeout field removed first: a server
// that ignores the deadline (as one whose framework reads none), so the
// only thing that can end its call at the deadline is the proxy's reset.
func startDeafStreamServer(t *testing.T, s *streamServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.UnknownServiceHandler(s.handle))
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	hs := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("Grpc-Timeout")
		g.ServeHTTP(w, r)
	})}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close(); g.Stop() })
	return ln.Addr().String()
}

// TestH2DeadlineStreamingGRPC: the client (its own deadline 10 s) opens a
// server-streaming call; the entry proxy's --max-time-to-answer 800ms is
// the call's deadline; the server sends 3 messages at once, then one every
// 1.6 s. The client gets exactly those 3 messages, in order, then
// DEADLINE_EXCEEDED (code 4) with retrycap-exhausted: deadline in the
// trailers and the proxy's grpc-message, at least 800ms and less than the
// 2 s per-try timeout after it started; the server saw exactly one call,
// whose context ended, sent 3 messages and no fourth; the tap below the
// proxy saw one request (no second attempt); the proxy counted 1 attempt,
// 0 retries and the answer as DEADLINE_EXCEEDED. With a server that
// honours its deadline (grpc-go's transport resets the stream at the
// deadline it was forwarded, a moment after the proxy's), and with one
// that ignores it: then its context ends by the proxy's reset alone
// (context.Canceled, RST_STREAM CANCEL on the wire).
func TestH2DeadlineStreamingGRPC(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(*testing.T, *streamServer) string
		deaf  bool
	}{
		{"server honours the deadline", startStreamServer, false},
		{"server ignores the deadline", startDeafStreamServer, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newStreamServer()
			tap := startTap(t, tc.start(t, srv))
			p := startProxy(t, "--upstreams", "svc=3", "--resolve", "svc="+tap.addr, "--per-try-timeout", "2s",
				"--backoff-base", "1ms", "--backoff-max", "5ms", "--breaker-failures", "0",
				"--budget-percent", "100", "--budget-min-per-second", "1000",
				"--entrypoint", "--max-time-to-answer", streamDeadline.String())
			cc := grpcTo(t, p.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			st := proxytest.OpenWatch(ctx, t, cc, "/lab.Svc/Watch")
			var (
				got []string
				err error
			)
			for {
				m := new(wrapperspb.StringValue)
				if err = st.RecvMsg(m); err != nil {
					break
				}
				got = append(got, m.GetValue())
			}
			took := time.Since(start)
			if errors.Is(err, io.EOF) {
				t.Fatalf("the stream ended OK after %v with %q: the deadline did not end it", took, got)
			}
			if want := []string{"m1", "m2", "m3"}; !slices.Equal(got, want) {
				t.Fatalf("messages %q, want %q (those sent before the deadline)", got, want)
			}
			s := grpcstatus.Convert(err)
			if s.Code() != codes.DeadlineExceeded {
				t.Fatalf("status %v, want DeadlineExceeded (code 4)", err)
			}
			if want := "retrycap-proxy: upstream svc (" + tap.addr + "): deadline exceeded while the answer streamed"; s.Message() != want {
				t.Fatalf("grpc-message %q, want %q", s.Message(), want)
			}
			if ex := st.Trailer().Get("retrycap-exhausted"); !slices.Equal(ex, []string{"deadline"}) {
				t.Fatalf("trailers retrycap-exhausted %q, want [deadline] (trailers %v)", ex, st.Trailer())
			}
			if took < streamDeadline || took >= 2*time.Second {
				t.Fatalf("answered after %v, want within [%v, 2s): the proxy's deadline, not the per-try timeout or the client's", took, streamDeadline)
			}
			select {
			case <-srv.ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the server's call never saw its context end: the upstream stream was not reset")
			}
			srv.mu.Lock()
			left, sent, cerr := srv.left[0], srv.sent[0], srv.errs[0]
			srv.mu.Unlock()
			if n := srv.calls.Load(); n != 1 {
				t.Fatalf("the server saw %d calls, want 1", n)
			}
			if sent != streamBefore {
				t.Fatalf("the server sent %d messages, want %d (the next was due after the deadline)", sent, streamBefore)
			}
			if tc.deaf {
				if left != -1 || !errors.Is(cerr, context.Canceled) {
					t.Fatalf("deaf server: deadline on arrival %v, context ended with %v; want none and context.Canceled (the proxy's reset)", left, cerr)
				}
				if rst := waitResets(t, tap, 1); !slices.Equal(rst, []http2.ErrCode{http2.ErrCodeCancel}) {
					t.Fatalf("the proxy sent RST_STREAM %v upstream, want [CANCEL]", rst)
				}
			} else {
				if left <= 0 || left >= streamDeadline {
					t.Fatalf("the server's deadline on arrival %v, want within (0, %v): the proxy forwards the time left", left, streamDeadline)
				}
				if cerr == nil {
					t.Fatal("the server's context ended without an error")
				}
				// Whichever reset came first (the proxy's at its
				// deadline, or grpc-go's own a moment after), the proxy
				// sends at most one.
				if rst := tap.resets(); len(rst) > 1 || len(rst) == 1 && rst[0] != http2.ErrCodeCancel {
					t.Fatalf("the proxy sent RST_STREAM %v upstream, want at most one CANCEL", rst)
				}
			}
			if reqs := tap.requests(); len(reqs) != 1 {
				t.Fatalf("the upstream saw %d requests, want 1 (no second attempt): %v", len(reqs), reqs)
			}
			if n := scrapeUntil(t, p, seriesAttempts, func(v float64) bool { return v >= 1 }); n != 1 {
				t.Errorf("attempts %v, want 1", n)
			}
			if n := scrapeUntil(t, p, seriesRetries, func(float64) bool { return true }); n != 0 {
				t.Errorf("retries %v, want 0", n)
			}
			const answered = `retrycap_proxy_h2_requests_total{code="DEADLINE_EXCEEDED",protocol="grpc",upstream="svc"}`
			if n := scrapeUntil(t, p, answered, func(v float64) bool { return v >= 1 }); n != 1 {
				t.Errorf("answers counted DEADLINE_EXCEEDED %v, want 1", n)
			}
			t.Logf("%d messages, then %v after %v; the server's context: %v", len(got), s.Code(), took, cerr)
		})
	}
}

// waitResets polls the tap until it saw n RST_STREAM frames (10 s at most).
func waitResets(t *testing.T, tap *h2Tap, n int) []http2.ErrCode {
	t.Helper()
	var rst []http2.ErrCode
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if rst = tap.resets(); len(rst) >= n {
			break
		}
	}
	return rst
}
