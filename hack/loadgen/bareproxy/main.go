// Command bareproxy is the reference point for hack/bench-proxy.sh: a
// forward proxy on the same engine and with the same server and client
// options as retrycap-proxy (fasthttp Server, one keep-alive HostClient,
// per-try timeout, idle timeout) but no policy, chain budget, headers or
// metrics. retrycap-proxy's throughput over bareproxy's is what the retry
// logic costs; bareproxy's over HAProxy's is what the engine costs.
//
//	bareproxy -listen 127.0.0.1:18084 -backend 127.0.0.1:18080
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/valyala/fasthttp"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18084", "HOST:PORT to serve on")
	backend := flag.String("backend", "127.0.0.1:18080", "HOST:PORT every request goes to")
	flag.Parse()
	hc := &fasthttp.HostClient{
		Addr:                      *backend,
		NoDefaultUserAgentHeader:  true,
		DisablePathNormalizing:    true,
		MaxConns:                  4096,
		MaxIdemponentCallAttempts: 1,
		ReadBufferSize:            8192,
	}
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if err := hc.DoTimeout(&ctx.Request, &ctx.Response, 2*time.Second); err != nil {
				ctx.Error("bareproxy: "+err.Error(), fasthttp.StatusBadGateway)
			}
		},
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		NoDefaultDate:                true,
		DisablePreParseMultipartForm: true,
		LazyRequestTime:              true,
		IdleTimeout:                  90 * time.Second,
		ReadBufferSize:               8192,
	}
	if err := srv.ListenAndServe(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "bareproxy: %v\n", err)
		os.Exit(1)
	}
}
