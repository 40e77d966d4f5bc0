// Package proxy is retrycap-proxy, the sidecar that enforces the retry
// policy at run time: a forward HTTP proxy (apps reach it through
// HTTP_PROXY) that matches each request to an upstream, retries within the
// upstream's attempts, the chain budget, the retry budget and the circuit
// breaker, and tunnels upgrades and CONNECT untouched (but a CONNECT to a
// host --upstreams names, whose first bytes decide: h2c goes to package h2,
// HTTP/1.x gets the policy; h2_seam.go).
//
// This package is the assembly: the flags (config.go), the engine
// selection and the listeners, the admin endpoints and the drain (proxy.go,
// run.go; spareproc.go: the one P more than the event loops while they
// carry HTTP/1.1 traffic). The parts, one idea each:
//
//   - forward: the forwarding core both engines drive (the upstream table,
//     the exchange state machine, the header scan, the metrics);
//   - policy: every retry decision (budgets, breaker, backoff, keys);
//   - engine/loop: the event loops (the default on Linux), on netpoll;
//   - engine/goroutine: fasthttp's server and clients, a goroutine per
//     connection (--engine=goroutine, and what the loops hand over);
//   - netpoll: epoll, the eventfd wake-up and the timer heap, the hang-up
//     watch and the raw socket calls the h2 relay makes (no HTTP);
//   - h2: HTTP/2 and gRPC, the frame relay (h2_seam.go hands it connections);
//   - accesslog: the per-attempt access log.
//
// The engines differ in I/O only.
package proxy
