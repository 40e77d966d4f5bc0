package h2

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
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
		b.Run("conns="+strconv.Itoa(shape[0]), func(b *testing.B) { benchUnary(b, shape[0], shape[1]) })
	}
}

func benchUnary(b *testing.B, conns, conc int) {
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
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := ccs[w%conns]
			for left.Add(-1) >= 0 {
				if _, err := callUnary(context.Background(), cc, "hello"); err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d calls failed", n)
	}
}
