package h2

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// BenchmarkRelayUnary: unary gRPC calls with a small message through the
// frame relay over real loopback sockets (grpc-go clients through the
// tests' CONNECT front, the relay, a grpc-go echo server), over 1
// connection with 16 in flight and over 64 with 256, the shapes of
// grpcbench. The client and the server run in the same process, so ns/op
// and allocs/op are the whole call's; profile it for the relay's share:
//
//	go test -run '^$' -bench RelayUnary/conns=64 -cpuprofile cpu.out -memprofile mem.out ./internal/proxy/h2/
//	go tool pprof -focus 'proxy/h2\.' -top cpu.out
func BenchmarkRelayUnary(b *testing.B) {
	for _, shape := range [][2]int{{1, 16}, {64, 256}} {
		b.Run("conns="+strconv.Itoa(shape[0]), func(b *testing.B) { benchUnary(b, shape[0], shape[1], nil) })
	}
}

// BenchmarkRelayUnaryDeadline is BenchmarkRelayUnary/conns=1 with the
// caller's deadline on every call, beside the same without it in one run
// (docs/benchmarks.md): "none", the caller's "grpc-timeout" (the client's
// context has a 30 s deadline: grpc-go sends grpc-timeout, the relay reads
// it, bounds the attempt by it and forwards it reduced, the server makes a
// context with it), and "retrycap-deadline" (metadata retrycap-deadline:
// 30000, which the relay reads and turns into a grpc-timeout upstream,
// also forwarding it reduced). The difference between "none" and the
// others is an upper bound of the relay's cost: it includes grpc-go's own
// work for a deadline at both ends.
func BenchmarkRelayUnaryDeadline(b *testing.B) {
	for _, how := range []string{"none", "grpc-timeout", "retrycap-deadline"} {
		b.Run(how, func(b *testing.B) {
			benchUnary(b, 1, 16, func(ctx context.Context) (context.Context, context.CancelFunc) {
				switch how {
				case "grpc-timeout":
					return context.WithTimeout(ctx, 30*time.Second)
				case "retrycap-deadline":
					return metadata.AppendToOutgoingContext(ctx, "retrycap-deadline", "30000"), func() {}
				}
				return ctx, func() {}
			})
		})
	}
}

// BenchmarkCallDeadline is the relay's own per-call policy work for a
// deadline, without sockets: a gRPC call's initCall and its first
// attempt's headers, with and without grpc-timeout (and plain HTTP/2 with
// and without Retrycap-Deadline), so that the added ns and allocations
// are the deadline's alone.
func BenchmarkCallDeadline(b *testing.B) {
	h, _ := newHandler(b, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 3, chainCap: 4})
	for _, tc := range []struct {
		name   string
		grpc   bool
		fields []hpack.HeaderField
	}{
		{"grpc/none", true, nil},
		{"grpc/grpc-timeout", true, []hpack.HeaderField{{Name: "grpc-timeout", Value: "29999830u"}}},
		{"h2/none", false, nil},
		{"h2/retrycap-deadline", false, []hpack.HeaderField{{Name: "retrycap-deadline", Value: "30000"}}},
	} {
		fields := append([]hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
			{Name: "user-agent", Value: "grpc-go/1.80.0"}, {Name: "retrycap-budget", Value: "3"}}, tc.fields...)
		b.Run(tc.name, func(b *testing.B) {
			var c callState
			var buf [6]hpack.HeaderField
			hdr := fieldHeaders(fields)
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				if a := h.initCall(&c, "echo:50051", "POST", "echo:50051", "/retrycap.test.Echo/Call", &hdr, -1, tc.grpc); a != nil {
					b.Fatal("answered without an attempt")
				}
				c.attemptStart = c.start
				if out := c.attemptHeaders(1, c.start, buf[:0]); len(out) == 0 {
					b.Fatal("no attempt headers")
				}
				if tt, _ := c.tryTimeout(c.start); tt <= 0 {
					b.Fatal("no try timeout")
				}
			}
			cpu.report(b)
		})
	}
}

func benchUnary(b *testing.B, conns, conc int, withCtx func(context.Context) (context.Context, context.CancelFunc)) {
	back := startBackend(b, &backend{})
	h, _ := newHandler(b, proxyOpts{name: "echo", addr: back.addr, attempts: 3, chainCap: 4})
	theFront.route(b, "echo", h, back.addr)
	ccs := make([]*grpc.ClientConn, conns)
	for i := range ccs {
		ccs[i] = dialName(b, "echo")
		if _, err := callUnary(context.Background(), ccs[i], "hello"); err != nil {
			b.Fatal(err)
		}
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	var failed atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := ccs[w%conns]
			for left.Add(-1) >= 0 {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if withCtx != nil {
					ctx, cancel = withCtx(ctx)
				}
				if _, err := callUnary(ctx, cc, "hello"); err != nil {
					failed.Add(1)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cpu.report(b)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d calls failed", n)
	}
}

// cpuMeter reports the process's CPU time (user + system, every thread:
// the GC's too) per op as "cpu-ns/op": on a loaded machine a benchmark's
// wall time per op is mostly the waits for a core, while the CPU it used
// is what the compared variants differ in.
type cpuMeter struct{ start time.Duration }

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuMeter { return cpuMeter{processCPU()} }

func (m cpuMeter) report(b *testing.B) {
	b.ReportMetric(float64(processCPU()-m.start)/float64(b.N), "cpu-ns/op")
}
