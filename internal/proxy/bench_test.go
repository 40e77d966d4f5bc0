package proxy

import (
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// BenchmarkForward drives the proxy's handler directly (no client socket)
// against a fasthttp backend on loopback: the cost and allocations of the
// whole per-request path, policy included, minus the client-side I/O.
func BenchmarkForward(b *testing.B) {
	benchForward(b, []byte("ok"))
}

// BenchmarkForwardDeadline is BenchmarkForward with Retrycap-Deadline on
// every request (read, and forwarded reduced on the attempt): its cost
// beside BenchmarkForward in the same run is the deadline's (docs/benchmarks.md).
func BenchmarkForwardDeadline(b *testing.B) {
	benchForward(b, []byte("ok"), "Retrycap-Deadline", "30000")
}

// BenchmarkForwardStreamed is the same with a 256 KiB body, over
// forward.BufferedBodyMax, so that it streams from the backend through the response
// (written to io.Discard here, as the server would write it to the client).
func BenchmarkForwardStreamed(b *testing.B) {
	benchForward(b, make([]byte, 256<<10))
}

func benchForward(b *testing.B, body []byte, extra ...string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { ctx.SetBody(body) }}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Shutdown()
	cfg, err := ParseFlags([]string{"--upstreams", "backend=3", "--resolve", "backend=" + ln.Addr().String(), "--chain-cap", "4"}, io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	p, err := New(cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	b.ResetTimer()
	cpu := startCPU()
	for i := 0; i < b.N; i++ {
		ctx.Request.Reset()
		ctx.Request.SetRequestURI("http://backend/")
		ctx.Request.Header.Set("Retrycap-Budget", "3")
		for j := 0; j+1 < len(extra); j += 2 {
			ctx.Request.Header.Set(extra[j], extra[j+1])
		}
		ctx.Response.Reset()
		p.gor.Handler(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("status %d", ctx.Response.StatusCode())
		}
		if err := ctx.Response.BodyWriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
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
