// Command grpcbench is the load generator and echo server of the gRPC
// benchmark in docs/grpc.md: unary calls with small messages, over a
// number of client connections, direct or through a proxy (retrycap-proxy
// through HTTPS_PROXY, or a reverse proxy such as HAProxy or nginx).
//
//	grpcbench -serve 127.0.0.1:19000
//	grpcbench -target dns:///echo:50051 -conns 64 -concurrency 256 -duration 10s
//	grpcbench -target 127.0.0.1:19001 -conns 1 -concurrency 16 -rate 2000
//
// With -rate the calls are paced (an open-loop schedule spread over the
// workers) to measure latency at a moderate load; without it every worker
// calls back to back (throughput).
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const method = "/retrycap.bench.Echo/Call"

var desc = grpc.ServiceDesc{
	ServiceName: "retrycap.bench.Echo",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Call", Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.StringValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		return in, nil
	}}},
}

func main() {
	serve := flag.String("serve", "", "run the echo server on this address")
	target := flag.String("target", "", "gRPC target to load")
	conns := flag.Int("conns", 1, "client connections")
	conc := flag.Int("concurrency", 16, "calls in flight")
	dur := flag.Duration("duration", 10*time.Second, "measured duration")
	warm := flag.Duration("warmup", 2*time.Second, "unmeasured warm-up")
	rate := flag.Int("rate", 0, "calls per second in total (0: closed loop, as fast as possible)")
	label := flag.String("label", "", "label of the output line")
	flag.Parse()
	if *serve != "" {
		ln, err := net.Listen("tcp", *serve)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s := grpc.NewServer()
		s.RegisterService(&desc, struct{}{})
		_ = s.Serve(ln)
		return
	}
	ccs := make([]*grpc.ClientConn, *conns)
	for i := range ccs {
		cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		cc.Connect()
		ccs[i] = cc
	}
	var measuring atomic.Bool
	var failed atomic.Int64
	lat := make([][]time.Duration, *conc)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var interval time.Duration
	if *rate > 0 {
		interval = time.Duration(int64(time.Second) * int64(*conc) / int64(*rate))
	}
	for w := range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := ccs[w%len(ccs)]
			in := wrapperspb.String("hello")
			out := new(wrapperspb.StringValue)
			next := time.Now().Add(time.Duration(w) * interval / time.Duration(*conc))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if interval > 0 {
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
					next = next.Add(interval)
				}
				t0 := time.Now()
				err := cc.Invoke(context.Background(), method, in, out)
				d := time.Since(t0)
				if measuring.Load() {
					if err != nil {
						failed.Add(1)
						continue
					}
					lat[w] = append(lat[w], d)
				}
			}
		}()
	}
	time.Sleep(*warm)
	measuring.Store(true)
	t0 := time.Now()
	time.Sleep(*dur)
	measuring.Store(false)
	el := time.Since(t0)
	close(stop)
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	q := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[min(len(all)-1, int(p*float64(len(all))))]
	}
	fmt.Printf("%s conns=%d concurrency=%d rate=%d calls=%d failed=%d req/s=%.0f p50=%v p99=%v\n",
		*label, *conns, *conc, *rate, len(all), failed.Load(), float64(len(all))/el.Seconds(), q(0.50), q(0.99))
}
