// Package proxy is retrycap-proxy, the sidecar that enforces the retry
// policy at run time: a forward HTTP proxy (apps reach it through
// HTTP_PROXY) that matches each request to an upstream, retries within the
// upstream's attempts, the chain budget, the retry budget and the circuit
// breaker, and tunnels CONNECT and upgrades untouched.
//
// Two engines move the bytes. The event loops (loop_*_linux.go, the default
// on Linux) own non-blocking sockets through epoll and serve the common
// request; everything else they hand, with its connection, to the goroutine
// engine (fasthttp's server and client, proxy.go and stream.go), which is
// also --engine=goroutine. Both drive one exchange per call (exchange.go),
// and every retry decision is delegated to the engine-independent package
// policy, so the engines differ in I/O only.
package proxy
