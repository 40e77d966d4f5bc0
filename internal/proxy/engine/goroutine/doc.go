// Package goroutine is the goroutine engine (--engine=goroutine, and what
// the event loops hand over to): fasthttp's server, a goroutine per
// connection, and fasthttp's clients with a transport that streams
// response bodies (stream.go). It serves everything, including what the
// event loops do not: CONNECT and upgrade tunnels (tunnel.go), chunked or
// large request bodies, Expect, HTTP/1.0, hosts no upstream names. The
// policy is the forwarding core's (package forward), so the engines differ
// in I/O only. Every connection is read through a pre-parser (preparse.go)
// that gives each request head the loop's verdict before fasthttp parses
// it, so that a head fasthttp would wait on (a bare LF) gets the loop's 400
// at once; it also reserves each request body's bytes in the proxy-wide
// budget (forward.BodyBudget) as they pass, with headerReceived for a
// Content-Length body over 64 KiB (before fasthttp allocates its buffer,
// which it is handed at exactly the body's length: requestOf), and a body
// that does not fit is refused with the budget's 503 (a chunked body's
// growth waits for room first, forward.BodyBudget.Grow, unless it was
// pipelined behind another request, and until its client's reset at the
// latest: headConn.mayWait, headConn.grow; a wait its connection's end cut
// short is answered nothing and counted as gone, not refused). A request
// with Expect: 100-continue whose head decides its refusal (the budget's
// 503, the 413 over 16 MiB) gets it at once, with no 100 (Engine.expect).
// An answer whose next pipelined request is still arriving is flushed, not
// held for that request's body (nextWaits). Each
// call's client socket is watched for its reset while the
// call runs (cut.go): a client that went away has its attempt's upstream
// connection closed and its pending retry dropped. A drain that runs out
// of time cuts the answers whose bodies still stream (fasthttp leaves its
// connections be), as the proxy's cut, and waits for their lines. A
// streamed answer's writes to its client are bounded as its reads from the
// upstream are (upstreamBody.client). A refusal's close lingers
// (headConn.lingerClose: a write shutdown, the client's bytes read and
// dropped for a bounded while), so that it is no reset under a client
// still uploading, which could lose the answer.
package goroutine
