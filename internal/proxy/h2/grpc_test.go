package h2

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrycap/retrycap/internal/proxy/policy"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

func failWith(c codes.Code) func(context.Context, int, string) (string, error) {
	return func(context.Context, int, string) (string, error) {
		return "", status.Error(c, "test says "+c.String())
	}
}

func TestUnaryUnavailableRetriedToAttempts(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	var tr metadata.MD
	_, err := callUnary(ctxT(t), dialName(t, "echo"), "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := b.attempts.Load(); got != 3 {
		t.Fatalf("server saw %d attempts, want 3", got)
	}
	if got := tr.Get("retrycap-exhausted"); !reflect.DeepEqual(got, []string{"attempts"}) {
		t.Fatalf("retrycap-exhausted = %q (trailer %v)", got, tr)
	}
	if got := b.values("grpc-previous-rpc-attempts"); !reflect.DeepEqual(got, []string{"", "1", "2"}) {
		t.Fatalf("grpc-previous-rpc-attempts = %q", got)
	}
	if got := testutil.ToFloat64(h.m.requests.WithLabelValues("echo", "grpc", "UNAVAILABLE")); got != 1 {
		t.Fatalf("requests{code=UNAVAILABLE} = %v", got)
	}
	if got := testutil.ToFloat64(h.m.attempts.WithLabelValues("echo", "grpc")); got != 3 {
		t.Fatalf("attempts = %v", got)
	}
	if got := testutil.ToFloat64(h.m.denied.WithLabelValues("echo", "grpc", "attempts")); got != 1 {
		t.Fatalf("denied{attempts} = %v", got)
	}
}

func TestUnaryInvalidArgumentNotRetried(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.InvalidArgument)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	_, err := callUnary(ctxT(t), dialName(t, "echo"), "x")
	if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != "test says InvalidArgument" {
		t.Fatalf("err = %v", err)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

func pushback(v string) func(context.Context, int, string) (string, error) {
	return func(ctx context.Context, n int, _ string) (string, error) {
		if n == 1 {
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", v))
			return "", status.Error(codes.Unavailable, "push back")
		}
		return "ok", nil
	}
}

func TestPushbackNegativeStopsRetries(t *testing.T) {
	b := startBackend(t, &backend{unary: pushback("-1")})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	var tr metadata.MD
	_, err := callUnary(ctxT(t), dialName(t, "echo"), "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.denied.WithLabelValues("echo", "grpc", "retry-after")); got != 1 {
		t.Fatalf("denied{retry-after} = %v", got)
	}
	if len(tr.Get("retrycap-exhausted")) != 0 {
		t.Fatalf("a pushback stop is not exhaustion: %v", tr)
	}
}

func TestPushbackWaitHonoured(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	pb := pushback("200")
	b := startBackend(t, &backend{unary: func(ctx context.Context, n int, in string) (string, error) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		return pb(ctx, n, in)
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	out, err := callUnary(ctxT(t), dialName(t, "echo"), "x")
	if err != nil || out != "ok" {
		t.Fatalf("out %q err %v", out, err)
	}
	if got := b.attempts.Load(); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}
	if gap := at[1].Sub(at[0]); gap < 200*time.Millisecond {
		t.Fatalf("retry %v after the first attempt, pushback asked for 200ms", gap)
	}
}

func TestFailTwiceThenOK(t *testing.T) {
	b := startBackend(t, &backend{unary: func(_ context.Context, n int, in string) (string, error) {
		if n < 3 {
			return "", status.Error(codes.Unavailable, "not yet")
		}
		return "echo:" + in, nil
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	out, err := callUnary(ctxT(t), dialName(t, "echo"), "hello")
	if err != nil || out != "echo:hello" {
		t.Fatalf("out %q err %v", out, err)
	}
	if got := b.attempts.Load(); got != 3 {
		t.Fatalf("server saw %d attempts, want 3", got)
	}
	if got := b.values("grpc-previous-rpc-attempts"); !reflect.DeepEqual(got, []string{"", "1", "2"}) {
		t.Fatalf("grpc-previous-rpc-attempts = %q", got)
	}
	// The request message was replayed whole: every attempt read "hello"
	// (the answer echoes the third).
	if got := testutil.ToFloat64(h.m.requests.WithLabelValues("echo", "grpc", "OK")); got != 1 {
		t.Fatalf("requests{OK} = %v", got)
	}
}

func TestReplayLimitStopsRetries(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, replay: 100})
	theFront.route(t, "echo", h, b.addr)
	big := string(make([]byte, 1000))
	_, err := callUnary(ctxT(t), dialName(t, "echo"), big)
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d attempts, want 1 (message over --max-replay-bytes)", got)
	}
	if got := testutil.ToFloat64(h.m.denied.WithLabelValues("echo", "grpc", "not-retryable")); got != 1 {
		t.Fatalf("denied{not-retryable} = %v", got)
	}
}

func TestServerStreamNotRetriedAfterAMessage(t *testing.T) {
	b := startBackend(t, &backend{stream: func(n int, in string, send func(string) error) error {
		if err := send("first"); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "broke after one message")
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	s := proxytest.OpenWatch(ctxT(t), t, dialName(t, "echo"), methodStream)
	m := new(wrapperspb.StringValue)
	if err := s.RecvMsg(m); err != nil || m.GetValue() != "first" {
		t.Fatalf("first message %q err %v", m.GetValue(), err)
	}
	err := s.RecvMsg(m)
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "broke after one message" {
		t.Fatalf("end = %v", err)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
}

func TestServerStreamRetriedBeforeAnyMessage(t *testing.T) {
	b := startBackend(t, &backend{stream: func(n int, in string, send func(string) error) error {
		if n == 1 {
			return status.Error(codes.Unavailable, "no message yet")
		}
		for i := range 3 {
			if err := send(in + strconv.Itoa(i)); err != nil {
				return err
			}
		}
		return nil
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	s, err := dialName(t, "echo").NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, methodStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("m")); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseSend()
	var got []string
	for {
		m := new(wrapperspb.StringValue)
		err := s.RecvMsg(m)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.GetValue())
	}
	if !reflect.DeepEqual(got, []string{"m0", "m1", "m2"}) || b.attempts.Load() != 2 {
		t.Fatalf("got %q after %d attempts", got, b.attempts.Load())
	}
}

func TestDeadlineForwardedReduced(t *testing.T) {
	var left time.Duration
	b := startBackend(t, &backend{unary: func(ctx context.Context, n int, _ string) (string, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return "", status.Error(codes.Internal, "no deadline")
		}
		left = time.Until(dl)
		return "ok", nil
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := callUnary(ctx, dialName(t, "echo"), "x"); err != nil {
		t.Fatal(err)
	}
	if left <= 0 || left >= 10*time.Second {
		t.Fatalf("upstream deadline %v, want within (0, 10s)", left)
	}
}

func TestSpoofedBudgetClamped(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, chainCap: 4})
	theFront.route(t, "echo", h, b.addr)
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "retrycap-budget", "1000", "baggage", "user=alice,retrycap-budget=1000")
	_, err := callUnary(ctx, dialName(t, "echo"), "x")
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	// Cap 4 over 3 attempts: the first carries 2, each retry 1.
	if got := b.values("retrycap-budget"); !reflect.DeepEqual(got, []string{"2", "1", "1"}) {
		t.Fatalf("retrycap-budget per attempt = %q", got)
	}
	if got := b.values("baggage"); !reflect.DeepEqual(got, []string{"user=alice,retrycap-budget=2", "user=alice,retrycap-budget=1", "user=alice,retrycap-budget=1"}) {
		t.Fatalf("baggage per attempt = %q", got)
	}
}

// TestChainThreeTiers: client -> svc1 -> svc2 -> svc3, each call through
// its caller's own sidecar making 3 attempts; svc3 always answers
// UNAVAILABLE and the apps propagate retrycap-budget. With cap 4 the last
// tier sees at most 4 calls per client call; with the cap off, 27.

func TestChainThreeTiers(t *testing.T) {
	for _, tc := range []struct {
		cap, want int
	}{{4, 4}, {0, 27}} {
		t.Run("cap"+strconv.Itoa(tc.cap), func(t *testing.T) {
			svc3 := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
			mid := func(next string) *backend {
				var cc *grpc.ClientConn
				b := &backend{}
				b.unary = func(ctx context.Context, _ int, in string) (string, error) {
					md, _ := metadata.FromIncomingContext(ctx)
					out := ctx
					if v := md.Get("retrycap-budget"); len(v) > 0 {
						out = metadata.AppendToOutgoingContext(ctx, "retrycap-budget", v[0])
					}
					r, err := callUnary(out, cc, in)
					if err != nil {
						return "", status.Error(codes.Unavailable, "below: "+status.Convert(err).Message())
					}
					return r, nil
				}
				cc = dialName(t, next)
				return startBackend(t, b)
			}
			svc2 := mid("svc3")
			svc1 := mid("svc2")
			for _, hop := range []struct {
				name string
				b    *backend
			}{{"svc1", svc1}, {"svc2", svc2}, {"svc3", svc3}} {
				h, _ := newHandler(t, proxyOpts{name: hop.name, addr: hop.b.addr, attempts: 3, chainCap: tc.cap})
				theFront.route(t, hop.name, h, hop.b.addr)
			}
			_, err := callUnary(ctxT(t), dialName(t, "svc1"), "x")
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("err = %v", err)
			}
			if got := svc3.attempts.Load(); got != int64(tc.want) {
				t.Fatalf("last tier saw %d calls, want %d", got, tc.want)
			}
		})
	}
}

func TestHundredConcurrentStreamsOneConnection(t *testing.T) {
	const n = 100
	arrived := make(chan struct{}, n)
	release := make(chan struct{})
	b := startBackend(t, &backend{unary: func(ctx context.Context, _ int, in string) (string, error) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return in, nil
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	conns := theFront.h2c.Load()
	cc := dialName(t, "echo")
	ctx := ctxT(t)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			out, err := callUnary(ctx, cc, strconv.Itoa(i))
			if err == nil && out != strconv.Itoa(i) {
				err = errors.New("wrong answer " + out)
			}
			errs <- err
		}()
	}
	// All 100 are at the server at once before any is answered.
	for range n {
		select {
		case <-arrived:
		case <-ctx.Done():
			t.Fatal("not all calls arrived concurrently")
		}
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := theFront.h2c.Load() - conns; got != 1 {
		t.Fatalf("%d client connections, want 1", got)
	}
	if got := b.attempts.Load(); got != n {
		t.Fatalf("server saw %d, want %d", got, n)
	}
}

// TestUpstreamGoAwayLosesNoCall: the upstream ages its connections out
// (GOAWAY every 50ms) while calls flow; every call succeeds, and each
// reaches the server exactly once (a stream above the GOAWAY's last id is
// re-sent on a new connection, and it is not an attempt).

func TestUpstreamGoAwayLosesNoCall(t *testing.T) {
	b := startBackend(t, &backend{}, grpc.KeepaliveParams(keepalive.ServerParameters{
		MaxConnectionAge: 50 * time.Millisecond, MaxConnectionAgeGrace: 10 * time.Second,
	}))
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	ctx := ctxT(t)
	const workers, per = 16, 60
	var wg sync.WaitGroup
	errs := make(chan error, workers*per)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				if _, err := callUnary(ctx, cc, "x"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := b.attempts.Load(); got != workers*per {
		t.Fatalf("server saw %d calls, want %d", got, workers*per)
	}
	// Every re-send gave its window budget back (flow.go).
	waitFor(t, "the client connection's budget given back", func() bool {
		h.rmu.Lock()
		defer h.rmu.Unlock()
		for c := range h.rconns {
			c.mu.Lock()
			held, n := c.upHeld, len(c.streams)
			c.mu.Unlock()
			if held != 0 || n != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("re-sent after GOAWAY: %v", testutil.ToFloat64(h.m.resent.WithLabelValues("echo", "grpc")))
}

func selfSigned(t *testing.T, name string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// TestTLSThroughConnectUntouched: gRPC over TLS to a known upstream is
// tunnelled blind: the call reaches the server once (UNAVAILABLE is not
// retried) and the h2c path serves nothing.

func TestTLSThroughConnectUntouched(t *testing.T) {
	cert, pool := selfSigned(t, "secure")
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)},
		grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}})))
	h, _ := newHandler(t, proxyOpts{name: "secure", addr: b.addr, attempts: 3})
	theFront.route(t, "secure", h, b.addr)
	tunnels := theFront.tunnels.Load()
	cc, err := grpc.NewClient("dns:///secure:50051", grpc.WithDisableRetry(),
		grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "secure"})))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	_, err = callUnary(ctxT(t), cc, "x")
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "test says Unavailable" {
		t.Fatalf("err = %v", err)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
	if got := theFront.tunnels.Load() - tunnels; got != 1 {
		t.Fatalf("%d blind tunnels, want 1", got)
	}
	if got := testutil.ToFloat64(h.m.attempts.WithLabelValues("secure", "grpc")); got != 0 {
		t.Fatalf("h2c path made %v attempts", got)
	}
}

func TestDownUpstreamIsConnectFailure(t *testing.T) {
	// A port nothing listens on: every attempt is a connect failure.
	b := startBackend(t, &backend{})
	addr := b.addr
	b.srv.Stop()
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: addr, attempts: 3})
	theFront.route(t, "echo", h, addr)
	var tr metadata.MD
	_, err := callUnary(ctxT(t), dialName(t, "echo"), "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := testutil.ToFloat64(h.m.attempts.WithLabelValues("echo", "grpc")); got != 3 {
		t.Fatalf("attempts = %v", got)
	}
	if got := tr.Get("retrycap-exhausted"); !reflect.DeepEqual(got, []string{"attempts"}) {
		t.Fatalf("retrycap-exhausted = %q (%v)", got, err)
	}
}

// A client-streaming call failed before any answer is retried with every
// message the client sent replayed, in order.

func TestClientStreamReplayed(t *testing.T) {
	b := startBackend(t, &backend{collect: func(n int, ins []string) (string, error) {
		if n == 1 {
			return "", status.Error(codes.Unavailable, "read them all, then failed")
		}
		return strings.Join(ins, "+"), nil
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3})
	theFront.route(t, "echo", h, b.addr)
	s, err := dialName(t, "echo").NewStream(ctxT(t), &grpc.StreamDesc{ClientStreams: true}, methodCollect)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"a", "b", "c"} {
		if err := s.SendMsg(wrapperspb.String(m)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.StringValue)
	if err := s.RecvMsg(out); err != nil || out.GetValue() != "a+b+c" {
		t.Fatalf("out %q err %v", out.GetValue(), err)
	}
	if got := b.attempts.Load(); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}
}

// The breaker (shared with the HTTP/1.1 path: the same object) opens after
// two failed attempts: the call's third attempt is refused and the last
// failure returned marked breaker; the next call is answered by the proxy.

func TestBreakerOpens(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	br := policy.NewBreaker(2, 10*time.Second, time.Minute)
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, breaker: br})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	var tr metadata.MD
	_, err := callUnary(ctxT(t), cc, "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "test says Unavailable" {
		t.Fatalf("first call: %v", err)
	}
	if got := tr.Get("retrycap-exhausted"); !reflect.DeepEqual(got, []string{"breaker"}) || b.attempts.Load() != 2 {
		t.Fatalf("first call: retrycap-exhausted %q after %d attempts", got, b.attempts.Load())
	}
	tr = nil
	_, err = callUnary(ctxT(t), cc, "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "retrycap-proxy: upstream echo: circuit breaker open" {
		t.Fatalf("second call: %v", err)
	}
	if got := tr.Get("retrycap-exhausted"); !reflect.DeepEqual(got, []string{"breaker"}) || b.attempts.Load() != 2 {
		t.Fatalf("second call: retrycap-exhausted %q, server at %d", got, b.attempts.Load())
	}
}

// An empty retry budget denies the retry: one attempt, marked budget.

func TestRetryBudgetDenies(t *testing.T) {
	b := startBackend(t, &backend{unary: failWith(codes.Unavailable)})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, budget: policy.NewRetryBudget(0, 0, time.Second)})
	theFront.route(t, "echo", h, b.addr)
	var tr metadata.MD
	_, err := callUnary(ctxT(t), dialName(t, "echo"), "x", grpc.Trailer(&tr))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v", err)
	}
	if got := tr.Get("retrycap-exhausted"); !reflect.DeepEqual(got, []string{"budget"}) || b.attempts.Load() != 1 {
		t.Fatalf("retrycap-exhausted %q after %d attempts", got, b.attempts.Load())
	}
}

// Shutdown sends GOAWAY and lets the calls under way finish: a call the
// server holds completes after Shutdown began (not before 100 ms, while
// the server holds it), and Shutdown returns nil once it did.

func TestShutdownDrains(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	b := startBackend(t, &backend{unary: func(ctx context.Context, _ int, in string) (string, error) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "late:" + in, nil
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo")
	ctx := ctxT(t)
	got := make(chan error, 1)
	go func() {
		out, err := callUnary(ctx, cc, "x")
		if err == nil && out != "late:x" {
			err = errors.New("answer " + out)
		}
		got <- err
	}()
	<-arrived
	down := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		down <- h.Shutdown(sctx)
	}()
	// Shutdown waits for the call.
	select {
	case err := <-down:
		t.Fatalf("Shutdown returned %v with a call under way", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-got; err != nil {
		t.Fatalf("the call under way: %v", err)
	}
	if err := <-down; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d calls, want 1", got)
	}
}

// TestServerStreamBrokenAfterDeadline: a server-streaming answer the
// upstream breaks (its connection lost) once the call's time is gone is
// ended as the deadline's (DEADLINE_EXCEEDED, retrycap-exhausted:
// deadline), not as an upstream failure (UNAVAILABLE): a grpc-go server
// resets the stream at the deadline it was forwarded, a moment after the
// relay's own timer, which a loaded machine may run late. The relay's
// clock (Config.Now) is moved past the 10 s deadline after the first
// message, so its timer has not fired when the stream breaks.
func TestServerStreamBrokenAfterDeadline(t *testing.T) {
	var skew atomic.Int64
	sent := make(chan struct{})
	b := startBackend(t, &backend{stream: func(_ int, _ string, send func(string) error) error {
		if err := send("first"); err != nil {
			return err
		}
		close(sent)
		select {} // until the server stops: the connection is lost under the stream
	}})
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3,
		now: func() int64 { return time.Now().UnixNano() + skew.Load() }})
	theFront.route(t, "echo", h, b.addr)
	ctx := metadata.AppendToOutgoingContext(ctxT(t), "retrycap-deadline", "10000")
	s := proxytest.OpenWatch(ctx, t, dialName(t, "echo"), methodStream)
	m := new(wrapperspb.StringValue)
	if err := s.RecvMsg(m); err != nil || m.GetValue() != "first" {
		t.Fatalf("first message %q err %v", m.GetValue(), err)
	}
	<-sent
	skew.Store(int64(11 * time.Second))
	go b.srv.Stop()
	err := s.RecvMsg(m)
	if status.Code(err) != codes.DeadlineExceeded || status.Convert(err).Message() != "retrycap-proxy: upstream echo ("+b.addr+"): deadline exceeded while the answer streamed" {
		t.Fatalf("end = %v, want DeadlineExceeded: deadline exceeded while the answer streamed", err)
	}
	if ex := s.Trailer().Get("retrycap-exhausted"); len(ex) != 1 || ex[0] != "deadline" {
		t.Fatalf("retrycap-exhausted %q, want [deadline]", ex)
	}
	if got := b.attempts.Load(); got != 1 {
		t.Fatalf("server saw %d attempts, want 1", got)
	}
	if n := testutil.ToFloat64(h.m.requests.WithLabelValues("echo", "grpc", "DEADLINE_EXCEEDED")); n != 1 {
		t.Fatalf("requests{code=DEADLINE_EXCEEDED} = %v, want 1", n)
	}
}
