// Package forward is the forwarding core both engines drive: the upstream
// table (which --upstreams entry a request's host names, where it is
// reached), the exchange (exchange.go: one call's policy state machine,
// from the request to the answer, whatever moves the bytes), the one-pass
// header scan and the hop-by-hop and chain headers (headers.go,
// hopbyhop.go), the classification of transport errors, and the proxy's
// metrics. Every retry decision is delegated to package policy.
//
// An engine (package loop, package goroutine) moves bytes: it reads a
// request into a fasthttp.Request, runs an Exchange over it, sends each
// attempt and reads its answer head, and writes the answer the exchange
// leaves in its fasthttp.Response. A chunked answer body that streams is
// decoded for both by NewChunkedBody (chunked.go: Go's chunked reader and
// a bounded trailer section, discarded, so both drop the Trailer field
// that announces it: DropTrailerField); an answer whose one
// Transfer-Encoding is "identity" is read by both to the close
// (IdentityAnswer, head.go). Both reserve the request bodies they hold
// in one BodyBudget (bodybudget.go, --max-buffered-body-bytes).
package forward
