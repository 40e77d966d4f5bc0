// Command gnetprobe is a measurement probe, not product code: a bare
// HTTP/1.1 forward proxy on an event-loop engine (gnet v2) instead of
// fasthttp's goroutine per connection, run by hack/bench-proxy.sh as the
// optional contender "gnet" next to hack/loadgen/bareproxy ("bare"). Its
// throughput over HAProxy's answers one question: would an event-loop
// engine close the gap that the goroutine engine leaves?
//
// It does what bareproxy does for the bench's traffic and nothing more:
// an absolute-form request (GET http://host/path) becomes origin-form and
// goes over a kept-alive connection to -backend; the response (with a
// Content-Length, chunked, or delimited by the close) goes back. One
// request in flight per client connection (no pipelining); request bodies
// need a Content-Length. Each event loop has its own pool of idle backend
// connections, registered on that loop, so a request and its backend
// connection never leave the loop's goroutine. Event loops = GOMAXPROCS.
// Like bareproxy it makes one attempt per request; unlike it, it has no
// per-try or idle timeout (gnet has no per-connection timers).
//
//	gnetprobe -listen 127.0.0.1:18085 -backend 127.0.0.1:18080
//
// It is a module of its own (hack/gnetprobe/go.mod), so the root module's
// build, tests and lint never see gnet.
package main
