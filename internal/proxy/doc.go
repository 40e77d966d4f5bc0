// Package proxy is retrycap-proxy, the sidecar that enforces the retry
// policy at run time: a forward HTTP proxy (apps reach it through
// HTTP_PROXY) that matches each request to an upstream, retries within the
// upstream's attempts, the chain budget, the retry budget and the circuit
// breaker, and tunnels CONNECT and upgrades untouched.
//
// The data path runs on fasthttp because the engine decides whether the
// throughput target (at least HAProxy's) is reachable; every retry decision
// is delegated to the engine-independent package policy.
package proxy
