package labapp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The gRPC chain service, registered by hand (no protoc, no generated
// code): retrycap.lab.Chain with two unary methods on
// google.protobuf.StringValue, a well-known type grpc-go's own module
// ships, so the messages are real protobuf on the wire. Get is a read; Buy
// a charge (the side effect the lab's payment books). grpc-go's health
// service was the other candidate, but it has one method and no room for a
// read/write pair, and interop's TestService drags in its generated code
// for nothing the proxy reads: it never looks into messages.
const (
	GRPCService = "retrycap.lab.Chain"
	GRPCGet     = "/" + GRPCService + "/Get"
	GRPCBuy     = "/" + GRPCService + "/Buy"
)

// GRPCHandler serves one call of the Chain service: method is GRPCGet or
// GRPCBuy, ctx carries the incoming metadata. It returns nil for OK or a
// status error.
type GRPCHandler func(ctx context.Context, method string) error

// RegisterGRPC registers the Chain service on s, served by h.
func RegisterGRPC(s *grpc.Server, h GRPCHandler) {
	method := func(full string) grpc.MethodDesc {
		return grpc.MethodDesc{
			MethodName: full[strings.LastIndexByte(full, '/')+1:],
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				if err := h(ctx, full); err != nil {
					return nil, err
				}
				return wrapperspb.String("ok"), nil
			},
		}
	}
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: GRPCService,
		HandlerType: (*any)(nil),
		Methods:     []grpc.MethodDesc{method(GRPCGet), method(GRPCBuy)},
	}, struct{}{})
}

// InvokeGRPC makes one Chain call on cc.
func InvokeGRPC(ctx context.Context, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) error {
	return cc.Invoke(ctx, method, wrapperspb.String("lab"), new(wrapperspb.StringValue), opts...)
}

// propagated are the metadata keys a gRPC chain app copies from its
// inbound call onto its outbound one, as an app propagating its request
// context (OpenTelemetry's traceparent and baggage, the chain budget, the
// idempotency key) would.
var propagated = []string{"retrycap-budget", "baggage", "traceparent", "idempotency-key"}

// GRPCConfig configures a GRPCApp.
type GRPCConfig struct {
	// Name is the service name (errors and logs).
	Name string `json:"name"`
	// Listen is the address to serve on; default "127.0.0.1:0".
	Listen string `json:"listen,omitempty"`
	// Upstream is the target called, with the same method, for every
	// inbound call: a name and port ("order:50051"), dialed as
	// dns:///order:50051 so that grpc-go sends it to HTTPS_PROXY (the
	// process's: grpc-go reads it once per process). Empty: a leaf that
	// answers OK.
	Upstream string `json:"upstream,omitempty"`
	// Timeout bounds one outbound call beyond the inbound deadline; default 30s.
	Timeout time.Duration `json:"timeout,omitempty"`
	// Fail makes the app answer UNAVAILABLE to every call without calling its upstream (a
	// failing payment).
	Fail bool `json:"fail,omitempty"`
	// Attempts is how many times the app itself makes an upstream call answered UNAVAILABLE
	// (the app's own retries, under whatever a proxy does), a Get, or a Buy with an
	// idempotency-key, as the HTTP app retries a GET or a keyed request. Default 1.
	Attempts int `json:"attempts,omitempty"`
}

// GRPCApp is a running gRPC chain app.
type GRPCApp struct {
	cfg      GRPCConfig
	ln       net.Listener
	srv      *grpc.Server
	cc       *grpc.ClientConn
	received atomic.Int64
	failed   atomic.Int64
}

// StartGRPC starts a gRPC chain app serving in the background. The
// outbound client has grpc-go's own retries off: every retry in the chain
// is a proxy's.
func StartGRPC(cfg GRPCConfig) (*GRPCApp, error) {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	a := &GRPCApp{cfg: cfg}
	if cfg.Upstream != "" {
		cc, err := grpc.NewClient("dns:///"+cfg.Upstream,
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
		if err != nil {
			return nil, fmt.Errorf("gRPC app %s: client of %s: %w", cfg.Name, cfg.Upstream, err)
		}
		a.cc = cc
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		if a.cc != nil {
			_ = a.cc.Close()
		}
		return nil, fmt.Errorf("gRPC app %s: listen: %w", cfg.Name, err)
	}
	a.ln = ln
	a.srv = grpc.NewServer()
	RegisterGRPC(a.srv, a.serve)
	// grpc.health.v1 too: the kubelet's gRPC probes call it (SERVING for the whole server, "").
	healthpb.RegisterHealthServer(a.srv, health.NewServer())
	go func() { _ = a.srv.Serve(ln) }()
	return a, nil
}

// Addr is the app's listen address, host:port.
func (a *GRPCApp) Addr() string { return a.ln.Addr().String() }

// Received counts inbound calls; Failed those answered with an error.
func (a *GRPCApp) Received() int64 { return a.received.Load() }

// Failed counts inbound calls answered with an error.
func (a *GRPCApp) Failed() int64 { return a.failed.Load() }

// Close stops the app: in-flight calls end, the client closes.
func (a *GRPCApp) Close() {
	a.srv.Stop()
	if a.cc != nil {
		_ = a.cc.Close()
	}
}

// serve is the app: a leaf answers OK; otherwise the same method goes
// upstream with the propagated metadata, and any failure there is answered
// UNAVAILABLE (as the HTTP app answers 502 for any failed call: the caller
// may retry it).
func (a *GRPCApp) serve(ctx context.Context, method string) error {
	a.received.Add(1)
	if a.cfg.Fail {
		a.failed.Add(1)
		return status.Error(codes.Unavailable, a.cfg.Name+": failing")
	}
	if a.cc == nil {
		return nil
	}
	in, _ := metadata.FromIncomingContext(ctx)
	out := metadata.MD{}
	for _, k := range propagated {
		if vs := in.Get(k); len(vs) > 0 {
			out.Set(k, vs...)
		}
	}
	cctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(ctx, out), a.cfg.Timeout)
	defer cancel()
	tries := 1
	if a.cfg.Attempts > 1 && (method == GRPCGet || len(out.Get("idempotency-key")) > 0) {
		tries = a.cfg.Attempts
	}
	err := InvokeGRPC(cctx, a.cc, method)
	for i := 1; i < tries && status.Code(err) == codes.Unavailable && cctx.Err() == nil; i++ {
		err = InvokeGRPC(cctx, a.cc, method)
	}
	if err != nil {
		a.failed.Add(1)
		if errors.Is(ctx.Err(), context.Canceled) {
			return status.Error(codes.Canceled, a.cfg.Name+": caller went away")
		}
		return status.Error(codes.Unavailable, a.cfg.Name+": call "+a.cfg.Upstream+": "+status.Convert(err).Message())
	}
	return nil
}
