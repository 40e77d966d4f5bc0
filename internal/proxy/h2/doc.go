// Package h2 is retrycap-proxy's HTTP/2 path: it terminates h2c (HTTP/2
// without TLS) that clients speak inside a CONNECT tunnel (grpc-go with
// HTTPS_PROXY) or with prior knowledge on the listener, and proxies it
// stream by stream to the upstream over h2c with the same policy as the
// HTTP/1.1 path (package policy): attempts, the chain budget and its split,
// the retry budget, the breaker, full-jitter backoff.
//
// A gRPC call (content-type application/grpc) follows gRPC A6: it is
// retried by its gRPC code alone (read as grpc-go's client reads the
// answer: grpcRead in grpc.go), only before the answer is committed
// (the response headers are held back until the first message or the
// trailers arrive), with grpc-retry-pushback-ms honoured,
// grpc-previous-rpc-attempts set on retries, the request messages replayed
// up to --max-replay-bytes and grpc-timeout taken as the deadline and
// forwarded reduced by the time spent. Any other HTTP/2 request gets the
// HTTP/1.1 rules (status-based retry-on, methods or Idempotency-Key; at
// an entrypoint a keyless POST or PATCH gets a generated key, and keys are
// charged in the HTTP/1.1 path's ledger, Config.Ledger).
//
// One engine carries the HTTP/2, the frame relay (the stdlib engine, on
// net/http's server and transport, was removed in issue 25: half the
// throughput, and no way to bound what a client opening no window makes
// an upstream push into the proxy). callState (decide.go) is the policy:
// it reads a request's policy inputs, sets each attempt's headers, judges
// each attempt's result (breaker, retry decision, metrics, access-log
// line) and writes the proxy's own answers; the relay only moves frames.
// The line of the answer passed on waits for its stream's end, and says
// who cut it (upstream, client, proxy) when the stream ended short after
// its headers (callState.endRelayed, retrycap_proxy_responses_cut_total).
//
// The frame relay, one file per type (cconn.go: a client connection,
// its reader and its streams' RFC 9113 states; rstream.go: a stream,
// rstream, and its attempts, ratt; rpool.go: an upstream address's pool;
// upconn.go: an upstream connection; batchconn.go: a connection's
// batched writes and its writer; window.go: flow-control windows,
// outflow and inflow, as x/net keeps them; flow.go: the per-client
// budget the upstream stream windows come from) is built on
// golang.org/x/net/http2's Framer (ReadFrame, Write*Frame; padding and
// frame order are the library's), header blocks decoded by hblock.go
// with http2/hpack's Decoder and every check of the Framer's
// ReadMetaHeaders (CONTINUATION, header-list limits, field validity), and
// http2/hpack's Encoder. Around it: handler.go (Config, Upstream, New,
// Handler.ServeConn and Shutdown), attstate.go (an attempt's request
// lifecycle on its upstream stream), grpc.go (grpc-status, pushback and
// grpc-message), metrics.go (the series), sockio_linux.go (the sockets
// read and written through netpoll's raw calls), cloop.go and
// cloop_linux.go (the event loops that read client connections).
// Ended streams are reused per connection. A client connection whose
// socket can be read directly is read by one of the Handler's event
// loops (GOMAXPROCS of them, each an epoll set parked in Go's poller:
// whole frames handled at once, one flush of every connection written
// to per turn), any other (TLS, a wrapper that keeps its bytes, not
// Linux) by a reader goroutine of its own, with the same frame handling;
// its streams are state machines in a
// map under the connection's mutex (no goroutine per stream); per
// upstream address a pool of at most Config.MaxUpstreamConns h2c
// connections (prior knowledge, SETTINGS read before the first stream),
// each with one reader goroutine handing frames to the attempts they
// belong to; client stream ids map to
// upstream ids per attempt. Every connection's writes are batched; the
// goroutine that produced them makes one non-blocking write(2) of the
// batch when the connection's writer is idle (or leaves it to such a
// write under way), whatever the number of connections and of Ps, and
// only the connection's
// own writer goroutine, with a write timeout, waits on its socket for the
// rest: a client that stops reading blocks nobody else. The timers every
// call would touch are one per connection: a client connection's per-try
// timeouts (its attempts in due order; each counted from the end of its
// request, as Envoy's per_try_timeout),
// its keepalive PING and idle close, an upstream connection's idle close;
// backoff, re-send and grpc-timeout are time.AfterFunc. A client that
// resets a stream (or goes) with an attempt under way has it judged as
// its own cancellation (judgeGone: counted and logged, the breaker not
// charged, an abandoned half-open probe's place given back, no retry
// decision). A client's FIN is probed with a PING: a socket closed whole
// answers with a RST, which clientgone_linux.go waits for (POLLHUP or
// POLLERR; a half-closed socket shows only POLLRDHUP) to end the
// connection at once, its attempts cancelled and no retry sent after a
// backoff; a client that only shut its write side is still served.
//
// As an intermediary it honours SETTINGS both ways (MAX_CONCURRENT_STREAMS,
// INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE,
// HEADER_TABLE_SIZE; a value RFC 9113 6.5.2 or RFC 9218 2.1 forbids is
// a connection error, GOAWAY; a request over an upstream's
// MAX_HEADER_LIST_SIZE is the request's fault, answered 431 or INTERNAL
// without an attempt), credits WINDOW_UPDATEs as the other side consumes,
// answers PING (and pings a client quiet for Config.PingInterval, as
// net/http's server), passes RST_STREAM both ways, sends GOAWAY on
// shutdown and on protocol errors (the reason in the debug data), ignores
// PRIORITY, refuses malformed requests (connection-specific fields, TE
// other than "trailers", missing pseudo-headers, a content-length the
// body disagrees with, bad trailers, :authority, Host, :path, :scheme
// and :protocol as x/net's server checks them, and stricter than it a
// :method that is no token and a :path with a space or a "#"; lower-case
// names and pseudo-headers first are the Framer's checks) with
// RST_STREAM(PROTOCOL_ERROR), never forwarded whole, and reads answers as
// x/net's Transport does (connection-specific fields and bad
// content-length values dropped, a body disagreeing with its
// content-length, or in an answer to HEAD or a 204 or 304, not passed
// on); an answer that breaks the protocol on its stream is a bad answer
// as on HTTP/1.1 (forward.BadAnswerError), and one whose header block does
// not decode ends its connection, the other streams on it lost. A stream an upstream GOAWAY or
// REFUSED_STREAM shows was never processed (one it answered first, a 1xx
// or a header block begun and never ended included, was) is re-sent on another
// connection after a small jittered backoff, without counting an
// attempt, or, its body over the replay buffer, refused to its client with
// REFUSED_STREAM (refuse, rstream.go); a stream that was written is never
// re-sent but by the policy, and one that may not go twice is not opened
// on a pooled connection whose upstream close arrived unread (peerClosed).
//
// Its limits are modelled on x/net's server (docs/grpc.md has the table):
// frames above 16 KiB are FRAME_SIZE_ERROR and none larger is written;
// what a connection may have pending on its socket is bounded (a peer
// flooding PING or SETTINGS without reading is closed); the upstreams
// may send at most relayClientBudget on one client's behalf before it
// took it (their stream windows are granted from that budget); more than
// resetLimit client resets a second (its own, or stream errors it caused)
// is GOAWAY ENHANCE_YOUR_CALM (rapid reset), as are more than
// winChangeLimit SETTINGS_INITIAL_WINDOW_SIZE changes a second (stream
// windows are kept relative to the setting: a change is O(1));
// malformed-request log lines are at most logLimit a second per
// connection; Config.RequestTimeout bounds the preface, the first SETTINGS
// and every frame from its first byte (slowloris), and an upstream's
// header block from its HEADERS; a block's frames count their headers
// against twice the header-list bound (empty CONTINUATION floods); a
// connection's open streams hold at most maxHeldFields request header
// fields (HPACK bombs of one-byte fields; a stream past it is refused),
// and at most as many fields of their upstreams' answers (an answer past
// it is a bad answer, holdAnswer), and a reader keeps no large decoding
// buffer while it waits.
//
// The package depends on policy, forward (the HTTP/1.1 path's words for
// the proxy's own answers), accesslog, netpoll (RecvRaw, SendRaw),
// the standard library, golang.org/x/net/http2 (and its http/httpguts),
// golang.org/x/sys/unix and prometheus only; the proxy hands it
// connections through Handler.ServeConn.
package h2
