package h2

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var diffSeed = flag.Uint64("diff.seed", 0, "seed of TestEnginesDifferential (0: random)")

// planBackend answers each attempt of a call as the call's plan says
// (metadata x-plan, one letter per attempt; x-call names the call):
//
//	O ok (a unary answer, or two messages)   U UNAVAILABLE   I INVALID_ARGUMENT
//	X INTERNAL   P UNAVAILABLE with pushback -1   Z UNAVAILABLE with pushback 0
//	M one message, then UNAVAILABLE (unary: UNAVAILABLE)
//	S silent: no answer until the proxy's per-try timeout (400 ms) ends the attempt
//
// and records what each attempt carried.
type planBackend struct {
	mu   sync.Mutex
	seen map[string][]string // call -> per attempt "prev=<grpc-previous-rpc-attempts> budget=<retrycap-budget>"
}

func (p *planBackend) attempt(ctx context.Context) (byte, func(string) error) {
	md, _ := metadata.FromIncomingContext(ctx)
	call, plan := strings.Join(md.Get("x-call"), ""), strings.Join(md.Get("x-plan"), "")
	p.mu.Lock()
	n := len(p.seen[call])
	p.seen[call] = append(p.seen[call], "prev="+strings.Join(md.Get("grpc-previous-rpc-attempts"), ",")+" budget="+strings.Join(md.Get("retrycap-budget"), ","))
	p.mu.Unlock()
	b := byte('O')
	if n < len(plan) {
		b = plan[n]
	}
	if b == 'S' {
		<-ctx.Done() // no answer: the proxy's per-try timeout ends the attempt
		return 'X', func(string) error { return status.Error(codes.DeadlineExceeded, "never seen") }
	}
	fail := func(string) error {
		switch b {
		case 'U', 'M':
			return status.Error(codes.Unavailable, "plan says U")
		case 'I':
			return status.Error(codes.InvalidArgument, "plan says I")
		case 'X':
			return status.Error(codes.Internal, "plan says X")
		case 'P', 'Z':
			v := "-1"
			if b == 'Z' {
				v = "0"
			}
			_ = grpc.SetTrailer(ctx, metadata.Pairs("grpc-retry-pushback-ms", v))
			return status.Error(codes.Unavailable, "plan says "+string(b))
		}
		return nil
	}
	return b, fail
}

var planDesc = grpc.ServiceDesc{
	ServiceName: "retrycap.test.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			b, fail := srv.(*planBackend).attempt(ctx)
			if err := fail(""); err != nil || b != 'O' {
				if err == nil {
					err = status.Error(codes.Unavailable, "plan says M")
				}
				return nil, err
			}
			return wrapperspb.String("ok:" + in.GetValue()), nil
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName: "Stream", ServerStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			in := new(wrapperspb.StringValue)
			if err := stream.RecvMsg(in); err != nil {
				return err
			}
			b, fail := srv.(*planBackend).attempt(stream.Context())
			if b == 'M' {
				if err := stream.SendMsg(wrapperspb.String("m:" + in.GetValue())); err != nil {
					return err
				}
			}
			if err := fail(""); err != nil {
				return err
			}
			for i := range 2 {
				if err := stream.SendMsg(wrapperspb.String(fmt.Sprintf("%s%d", in.GetValue(), i))); err != nil {
					return err
				}
			}
			return nil
		},
	}, {
		StreamName: "Collect", ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			ins, err := recvAll(stream)
			if err != nil {
				return err
			}
			_, fail := srv.(*planBackend).attempt(stream.Context())
			if err := fail(""); err != nil {
				return err
			}
			return stream.SendMsg(wrapperspb.String(strings.Join(ins, "+")))
		},
	}},
}

// TestEnginesDifferential sends the same random calls (unary, server
// streaming, client streaming; a random plan of answers per attempt,
// per-try timeouts among them)
// through a Handler on each engine: the client's results (code, message,
// messages received), the attempts the server saw and what each carried
// (grpc-previous-rpc-attempts, retrycap-budget) must be equal.
// -diff.seed repeats a run.
func TestEnginesDifferential(t *testing.T) {
	seed := *diffSeed
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (-diff.seed=%d to repeat)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	be := &planBackend{seen: map[string][]string{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&planDesc, be)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	addr := ln.Addr().String()
	ccs := map[string]*grpc.ClientConn{}
	for _, e := range engines {
		h, _ := newHandlerEngine(t, proxyOpts{name: "diff-" + e, addr: addr, attempts: 3, chainCap: 4,
			perTry: 400 * time.Millisecond, retryOn: "connect-failure,reset,timeout,502,503,504,unavailable"}, e)
		theFront.route(t, "diff-"+e, h, addr)
		ccs[e] = dialName(t, "diff-"+e)
	}
	// S (a per-try timeout) in one call of ten, each costs 400 ms; not
	// under the race detector, which makes an ordinary attempt that slow.
	letters, slow := "OUIXPZMO", "OUIXPZMOS"
	ctx := ctxT(t)
	for i := range 120 {
		var plan []byte
		for range 1 + rng.IntN(4) {
			l := letters
			if i%10 == 0 && !raceEnabled {
				l = slow
			}
			plan = append(plan, l[rng.IntN(len(l))])
		}
		kind := rng.IntN(3)
		results := map[string]string{}
		for _, e := range engines {
			call := fmt.Sprintf("%d-%s", i, e)
			cctx := metadata.AppendToOutgoingContext(ctx, "x-call", call, "x-plan", string(plan))
			results[e] = strings.ReplaceAll(diffCall(cctx, ccs[e], kind), "diff-"+e, "diff-*")
		}
		be.mu.Lock()
		seenS, seenR := be.seen[fmt.Sprintf("%d-stdlib", i)], be.seen[fmt.Sprintf("%d-relay", i)]
		be.mu.Unlock()
		if results["stdlib"] != results["relay"] || !reflect.DeepEqual(seenS, seenR) {
			t.Fatalf("call %d (kind %d, plan %s): stdlib %q, server saw %q; relay %q, server saw %q",
				i, kind, plan, results["stdlib"], seenS, results["relay"], seenR)
		}
	}
}

// diffCall makes one call of a kind and sums up what the client got.
func diffCall(ctx context.Context, cc *grpc.ClientConn, kind int) string {
	var got []string
	var err error
	switch kind {
	case 0:
		var out string
		out, err = callUnary(ctx, cc, "x")
		got = append(got, out)
	case 1:
		var s grpc.ClientStream
		s, err = cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, methodStream)
		if err == nil {
			if err = s.SendMsg(wrapperspb.String("s")); err == nil {
				_ = s.CloseSend()
				for {
					m := new(wrapperspb.StringValue)
					if err = s.RecvMsg(m); err != nil {
						break
					}
					got = append(got, m.GetValue())
				}
			}
		}
		if err == io.EOF {
			err = nil
		}
	case 2:
		var s grpc.ClientStream
		s, err = cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true}, methodCollect)
		if err == nil {
			for _, m := range []string{"a", "b"} {
				_ = s.SendMsg(wrapperspb.String(m))
			}
			_ = s.CloseSend()
			m := new(wrapperspb.StringValue)
			err = s.RecvMsg(m)
			got = append(got, m.GetValue())
		}
	}
	st := status.Convert(err)
	return fmt.Sprintf("%s %q %q", st.Code(), st.Message(), got)
}
