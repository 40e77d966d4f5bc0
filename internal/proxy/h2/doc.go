// Package h2 is retrycap-proxy's HTTP/2 path: it terminates h2c (HTTP/2
// without TLS) that clients speak inside a CONNECT tunnel (grpc-go with
// HTTPS_PROXY) or with prior knowledge on the listener, and proxies it
// stream by stream to the upstream over h2c with the same policy as the
// HTTP/1.1 path (package policy): attempts, the chain budget and its split,
// the retry budget, the breaker, full-jitter backoff.
//
// A gRPC call (content-type application/grpc) follows gRPC A6: it is
// retried by its grpc-status alone, only before the answer is committed
// (the response headers are held back until the first message or the
// trailers arrive), with grpc-retry-pushback-ms honoured,
// grpc-previous-rpc-attempts set on retries, the request messages replayed
// up to --max-replay-bytes and grpc-timeout taken as the deadline and
// forwarded reduced by the time spent. Any other HTTP/2 request gets the
// HTTP/1.1 rules (status-based retry-on, methods or Idempotency-Key; at
// an entrypoint a keyless POST or PATCH gets a generated key, and keys are
// charged in the HTTP/1.1 path's ledger, Config.Ledger).
//
// Two engines carry the HTTP/2 itself (Config.Engine, --h2-engine), with
// one policy: callState (decide.go) reads a request's policy inputs, sets
// each attempt's headers, judges each attempt's result (breaker, retry
// decision, metrics, access-log line) and writes the proxy's own answers;
// an engine only moves frames or bytes, so nothing of the policy is
// written twice (TestEnginesDifferential compares them).
//
// The frame relay (relay, the default; relay_conn.go, relay_stream.go,
// relay_up.go, relay_write.go) is built on golang.org/x/net/http2's Framer
// (ReadFrame, Write*Frame, ReadMetaHeaders with an hpack.Decoder, so
// CONTINUATION, padding and header-list limits are the library's) and
// http2/hpack's Encoder. Per client connection one reader goroutine, its
// streams state machines in a map under the connection's mutex (no
// goroutine per stream); per upstream address a pool of h2c connections
// (prior knowledge, SETTINGS read before the first stream), each with one
// reader goroutine handing frames to the attempts they belong to; client
// stream ids map to upstream ids per attempt. The timers every call would
// touch are one per connection: a client connection's per-try timeouts
// (its attempts in start order), its keepalive PING and idle close, an
// upstream connection's idle close; backoff, re-send and grpc-timeout are
// time.AfterFunc. A client that resets a stream (or goes) with an
// attempt under way has it judged as the stdlib engine does (judgeGone:
// a reset failure, no retry decision). Writes are batched per
// connection and flushed by the goroutine that wrote once its reader has
// drained what the socket had (relay_write.go). As an intermediary it
// honours SETTINGS both ways (MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE,
// MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE, HEADER_TABLE_SIZE), credits
// WINDOW_UPDATEs as the other side consumes (request bytes when they went
// up, answer bytes when they went to the client: what it buffers is
// bounded by the windows it advertises, 256 KiB a stream and 1 MiB a
// connection, plus the replay buffer), answers PING (and pings a client
// quiet for Config.PingInterval, as net/http's server), passes RST_STREAM
// both ways, sends GOAWAY on shutdown and on protocol errors (the reason in
// the debug data), ignores PRIORITY, refuses malformed requests
// (connection-specific fields, TE other than "trailers", missing
// pseudo-headers; lower-case names and pseudo-headers first are the
// Framer's checks) with RST_STREAM(PROTOCOL_ERROR). A stream an upstream
// GOAWAY or REFUSED_STREAM shows was never processed is re-sent on another
// connection after a small jittered backoff, without counting an attempt.
//
// The stdlib engine is net/http's own HTTP/2 on both sides: an http.Server
// with Protocols.UnencryptedHTTP2 terminates the client connections
// handed to ServeConn, and h2c with prior knowledge carries the attempts:
// to a known upstream on http.ClientConns this package pools per address
// (upconn.go, Transport.NewClientConn), to any other host through an
// http.Transport with the same protocols; both sides' connections batch
// their writes (coalesce.go). It stays selectable and tested.
//
// The package depends on policy, accesslog, the standard library,
// golang.org/x/net/http2 and prometheus only; the proxy hands it connections through ServeConn.
package h2
