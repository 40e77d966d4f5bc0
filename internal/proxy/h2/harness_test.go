package h2

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// The tests' HTTPS_PROXY. grpc-go reads it through net/http's
// ProxyFromEnvironment, which reads the environment once per process, so
// every test shares one CONNECT front (set up in TestMain); a test routes
// the names it uses to its own Handlers (one per simulated sidecar).
var theFront *front

func TestMain(m *testing.M) {
	// An attempt's illegal state move panics in every test (attstate.go).
	strictStates = true
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	theFront = &front{ln: ln, routes: map[string]*Handler{}, addrs: map[string]string{}}
	go theFront.acceptLoop()
	// As the injector sets it. The targets the tests dial are names
	// (echo, svc1, ...), not loopback addresses, so grpc-go does not bypass
	// the proxy for them.
	os.Setenv("HTTPS_PROXY", "http://"+ln.Addr().String())
	os.Unsetenv("NO_PROXY")
	os.Unsetenv("no_proxy")
	code := m.Run()
	_ = ln.Close()
	os.Exit(code)
}

// front is what the proxy's CONNECT seam does, for the package's own
// tests: answer CONNECT with 200, peek at the first bytes, hand h2c to the
// Handler the target's host is routed to, tunnel anything else blind to
// addrs[host]. "PRI * HTTP/2.0" first (prior knowledge) goes to the
// Handler routed as "" with the preface unread.
type front struct {
	ln      net.Listener
	mu      sync.Mutex
	routes  map[string]*Handler
	addrs   map[string]string
	conns   atomic.Int64 // connections accepted
	h2c     atomic.Int64 // handed to a Handler
	tunnels atomic.Int64 // tunnelled blind
}

func (f *front) route(t testing.TB, host string, h *Handler, addr string) {
	f.mu.Lock()
	f.routes[host], f.addrs[host] = h, addr
	f.mu.Unlock()
	t.Cleanup(func() {
		f.mu.Lock()
		delete(f.routes, host)
		delete(f.addrs, host)
		f.mu.Unlock()
	})
}

func (f *front) acceptLoop() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.conns.Add(1)
		go f.serve(c)
	}
}

type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// NetConn is the socket (the relay writes to it without waiting: batchConn.tryWrite).
func (c *bufConn) NetConn() net.Conn { return c.Conn }

func (f *front) lookup(host string) (*Handler, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.routes[host], f.addrs[host]
}

func (f *front) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	if p, err := br.Peek(3); err == nil && string(p) == "PRI" {
		h, _ := f.lookup("")
		if h == nil {
			return
		}
		f.h2c.Add(1)
		h.ServeConn(&bufConn{Conn: c, r: br}, "")
		return
	}
	req, err := http.ReadRequest(br)
	if err != nil || req.Method != http.MethodConnect {
		return
	}
	target := req.Host
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	h, addr := f.lookup(hostOf(target))
	if h != nil {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		p, _ := br.Peek(len(ClientPreface))
		_ = c.SetReadDeadline(time.Time{})
		if bytes.Equal(p, []byte(ClientPreface)) {
			f.h2c.Add(1)
			h.ServeConn(&bufConn{Conn: c, r: br}, target)
			return
		}
	}
	if addr == "" {
		addr = target
	}
	up, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer up.Close()
	f.tunnels.Add(1)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// proxyOpts configures a test Handler: one upstream named name at addr.
type proxyOpts struct {
	name     string
	addr     string
	attempts int
	chainCap int
	retryOn  string
	perTry   time.Duration
	replay   int
	breaker  *policy.Breaker
	budget   *policy.RetryBudget
	// accessLog and entrypoint: Config.AccessLog and Config.Entrypoint.
	accessLog  *accesslog.Writer
	entrypoint bool
	// Config.PingInterval, PingTimeout, IdleTimeout (0: the defaults).
	pingInterval, pingTimeout, idle time.Duration
	// Config.RequestTimeout, WriteTimeout (0: the defaults).
	requestTimeout, writeTimeout time.Duration
	// now: Config.Now (nil: the clock).
	now func() int64
	// passInterim: Config.PassInterim.
	passInterim bool
	// streamIdle: Config.StreamIdleTimeout (0: the default).
	streamIdle time.Duration
}

func newHandler(t testing.TB, o proxyOpts) (*Handler, *prometheus.Registry) {
	t.Helper()
	if o.retryOn == "" {
		o.retryOn = "connect-failure,reset,502,503,504,unavailable"
	}
	if o.perTry == 0 {
		o.perTry = 5 * time.Second
	}
	if o.replay == 0 {
		o.replay = 64 << 10
	}
	ro, err := policy.ParseRetryOn(o.retryOn)
	if err != nil {
		t.Fatal(err)
	}
	if o.budget == nil {
		o.budget = policy.NewRetryBudget(100, 10000, 10*time.Second)
	}
	up := &Upstream{Name: o.name, Attempts: o.attempts, Addr: o.addr, Budget: o.budget, Breaker: o.breaker}
	reg := prometheus.NewRegistry()
	h, err := New(Config{
		Lookup: func(host string) *Upstream {
			if policy.MatchHost([]byte(host), up.Name) {
				return up
			}
			return nil
		},
		ChainCap:       o.chainCap,
		PerTryTimeout:  o.perTry,
		Policy:         policy.Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Jitter: true},
		RetryMethods:   []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"},
		MaxReplayBytes: o.replay,
		Registerer:     reg,
		AccessLog:      o.accessLog,
		Entrypoint:     o.entrypoint,
		PingInterval:   o.pingInterval,
		PingTimeout:    o.pingTimeout,
		IdleTimeout:    o.idle,
		RequestTimeout: o.requestTimeout,
		WriteTimeout:   o.writeTimeout,
		Now:            o.now,
		PassInterim:    o.passInterim,

		StreamIdleTimeout: o.streamIdle,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return h, reg
}

// --- a gRPC service without generated code: Echo.Call (unary) and
// Echo.Stream (server streaming), on wrapperspb.StringValue.

const (
	methodCall    = "/retrycap.test.Echo/Call"
	methodStream  = "/retrycap.test.Echo/Stream"
	methodCollect = "/retrycap.test.Echo/Collect"
)

// backend is a gRPC server that counts the attempts it sees and answers
// as its test wants.
type backend struct {
	addr     string
	srv      *grpc.Server
	attempts atomic.Int64
	mu       sync.Mutex
	seen     []metadata.MD // incoming metadata, per attempt
	unary    func(ctx context.Context, n int, in string) (string, error)
	collect  func(n int, ins []string) (string, error)
	stream   func(n int, in string, send func(string) error) error
}

func (b *backend) record(ctx context.Context) int {
	md, _ := metadata.FromIncomingContext(ctx)
	b.mu.Lock()
	b.seen = append(b.seen, md.Copy())
	b.mu.Unlock()
	return int(b.attempts.Add(1))
}

// values returns, per attempt, the incoming values of a metadata key
// ("" when absent).
func (b *backend) values(key string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.seen))
	for _, md := range b.seen {
		out = append(out, strings.Join(md.Get(key), ","))
	}
	return out
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "retrycap.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			b := srv.(*backend)
			n := b.record(ctx)
			out, err := b.unary(ctx, n, in.GetValue())
			if err != nil {
				return nil, err
			}
			return wrapperspb.String(out), nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Stream", ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(wrapperspb.StringValue)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			b := srv.(*backend)
			n := b.record(stream.Context())
			return b.stream(n, in.GetValue(), func(s string) error { return stream.SendMsg(wrapperspb.String(s)) })
		},
	}, {
		StreamName: "Collect", ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			b := srv.(*backend)
			n := b.record(stream.Context())
			ins, err := recvAll(stream)
			if err != nil {
				return err
			}
			out, err := b.collect(n, ins)
			if err != nil {
				return err
			}
			return stream.SendMsg(wrapperspb.String(out))
		},
	}},
}

func startBackend(t testing.TB, b *backend, opts ...grpc.ServerOption) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if b.unary == nil {
		b.unary = func(context.Context, int, string) (string, error) { return "ok", nil }
	}
	b.addr = ln.Addr().String()
	b.srv = grpc.NewServer(opts...)
	b.srv.RegisterService(&echoDesc, b)
	go func() { _ = b.srv.Serve(ln) }()
	t.Cleanup(b.srv.Stop)
	return b
}

// dialName is a grpc-go client of name:port through HTTPS_PROXY, as an app
// with the injected environment makes it (grpc-go's own retries off, so
// every retry seen is the proxy's).
func dialName(t testing.TB, name string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry()}, opts...)
	cc, err := grpc.NewClient("dns:///"+name+":50051", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

func callUnary(ctx context.Context, cc *grpc.ClientConn, in string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, methodCall, wrapperspb.String(in), out, opts...)
	return out.GetValue(), err
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// recvAll reads a client stream's messages up to its end.
func recvAll(stream grpc.ServerStream) ([]string, error) {
	var ins []string
	for {
		in := new(wrapperspb.StringValue)
		err := stream.RecvMsg(in)
		if err == io.EOF {
			return ins, nil
		}
		if err != nil {
			return nil, err
		}
		ins = append(ins, in.GetValue())
	}
}
