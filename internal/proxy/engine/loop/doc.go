// Package loop is the event-loop engine (--engine=loop, the default on
// Linux).
//
// Why: with a goroutine per connection, each request costs two parked
// goroutines (client and upstream side), two speculative reads that end in
// EAGAIN and the scheduler's hand-offs between them; on the 2-core bench
// that kept the proxy at 0.8-0.93x of HAProxy's throughput
// (docs/benchmarks/proxy.md). Here a fixed set of loops (GOMAXPROCS of
// them, each a goroutine that waits in epoll_wait, a netpoll.Poller) own
// non-blocking sockets through epoll: accepted connections are dealt out to
// the loops in turn, a request and its attempts stay on its connection's
// loop, upstream connections are pooled per loop, and a socket is read
// only when epoll says it is readable, as HAProxy does.
//
// What it handles: the common case, an HTTP/1.1 request to a known upstream
// (--upstreams) with no body or a body of known length up to 64 KiB, and
// the whole policy (forward.Exchange, shared with the other engine).
// Everything else is handed, with the connection, to the goroutine engine
// (package goroutine, through a Sink), which keeps that connection from
// then on: CONNECT, upgrades, chunked or large request bodies, Expect,
// HTTP/1.0, hosts no upstream names, heads the loop cannot parse (fasthttp
// answers them with its exact errors); HandoffReason says which. A
// response whose body must stream (chunked, close-delimited or over
// 64 KiB) is decided on the loop from its headers, then written by a
// goroutine that streams the body with the same idle timeout as the other
// engine, on its reads from the upstream and its writes to the client; the
// client connection goes on in the goroutine engine. So the
// loop never blocks and never buffers more than 64 KiB of body per
// request, and the uncommon protocol paths keep one implementation.
//
// Files: engine (start, drain), loop (one loop's run, panic containment,
// accept, idle sweep), client (a client connection: reading, pipelining,
// eligibility, hand-off, answers), call (one request's attempts), dns (the
// per-loop resolver cache), connect (non-blocking connects over a name's
// addresses), upconn (an upstream connection: the request out, the answer
// in), pool (idle upstream connections), stream (answers whose body
// streams), head (the answer heads the loop writes itself), parse (the
// loop's limits; where a head ends, what is refused before it is parsed
// and the parser over the loop's buffers are package forward's, head.go,
// shared with the goroutine engine's pre-parser).
//
// The loop writes an upstream's answer head itself (head.go): fasthttp
// writes a Date of its own unless its server's NoDefaultDate is set on the
// header, a flag fasthttp's parser clears and exports no setter for. The
// answers the proxy makes (its 502/503/504s) are written by fasthttp, Date
// included, as the goroutine engine's server writes them.
package loop
