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
// The HTTP/2 framing, HPACK, flow control, SETTINGS (max concurrent
// streams, header list size), GOAWAY, RST_STREAM and pings are net/http's
// own HTTP/2 implementation (the x/net/http2 code, bundled; x/net/http2
// v0.62.0 deprecates its own API in favour of it), on both sides: an
// http.Server with Protocols.UnencryptedHTTP2 terminates the client
// connections handed to ServeConn, and h2c with prior knowledge carries
// the attempts: to a known upstream on http.ClientConns this package pools
// per address (upconn.go, Transport.NewClientConn), to any other host
// through an http.Transport with the same protocols. A stream an upstream
// GOAWAY or REFUSED_STREAM shows was never processed is re-sent (by the
// pool, or the Transport) without counting as an attempt; the request body
// it re-sends comes from the same replay buffer. Both sides' connections batch their writes
// (coalesce.go): the library flushes after nearly every frame.
//
// The package depends on policy, accesslog, the standard library and prometheus
// only; the proxy hands it connections through ServeConn.
package h2
