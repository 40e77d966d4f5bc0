package forward

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// Finding the data path's headers in one pass.
//
// The handler looks up about a dozen header names per call: the hop-by-hop
// list it deletes on the request and on the response, the chain budget and
// baggage, Idempotency-Key, Retrycap-Exhausted, Retry-After, Retrycap-Deadline. fasthttp's
// Del, Peek and PeekAll copy the name and validate and normalize it on every
// call before they search; for names that are almost never there that was
// about 4 % of the proxy's CPU under load, more than the whole retry
// decision. So one pass over the header first notes which of those names
// are present (Seen), and the lookups run only for those. A lookup that is
// skipped is one that would have found nothing: the set errs only on the
// side of a name present (any line whose name matches case-insensitively,
// whatever fasthttp would make of it), and when the pass cannot see every
// field it reports all of them present, so the handler does exactly what it
// did before.

// Seen is a set of the names below, one bit each.
type Seen uint32

const (
	seenConnection Seen = 1 << iota
	seenProxyConnection
	seenKeepAlive
	seenProxyAuthorization
	seenProxyAuthenticate
	seenTe
	seenTrailer
	SeenUpgrade
	seenBudget
	seenBaggage
	seenIdempotencyKey
	seenExhausted
	seenRetryAfter
	seenDeadline
	SeenTransferEncoding
	SeenExpect
	// Read only for the access log.
	seenTraceparent
	seenRequestID
	seenGRPCStatus

	// SeenAll is every name: the answer when a pass cannot be sure.
	SeenAll Seen = 1<<iota - 1
)

// nameBit is the bit of a header name, matched case-insensitively; 0 for
// a name the data path does not look up.
func nameBit(k []byte) Seen {
	eq := func(s string) bool { return bytes.EqualFold(k, []byte(s)) }
	switch len(k) {
	case 2:
		if eq("Te") {
			return seenTe
		}
	case 6:
		if eq("Expect") {
			return SeenExpect
		}
	case 7:
		switch {
		case eq("Trailer"):
			return seenTrailer
		case eq("Upgrade"):
			return SeenUpgrade
		case eq(headerBaggage):
			return seenBaggage
		}
	case 10:
		switch {
		case eq("Connection"):
			return seenConnection
		case eq("Keep-Alive"):
			return seenKeepAlive
		}
	case 11:
		switch {
		case eq(headerRetryAfter):
			return seenRetryAfter
		case eq("Traceparent"):
			return seenTraceparent
		case eq("Grpc-Status"):
			return seenGRPCStatus
		}
	case 12:
		if eq("X-Request-Id") {
			return seenRequestID
		}
	case 15:
		switch {
		case eq(policy.HeaderBudget):
			return seenBudget
		case eq(headerIdempotencyKey):
			return seenIdempotencyKey
		}
	case 16:
		if eq("Proxy-Connection") {
			return seenProxyConnection
		}
	case 17:
		switch {
		case eq("Transfer-Encoding"):
			return SeenTransferEncoding
		case eq(policy.HeaderDeadline):
			return seenDeadline
		}
	case 18:
		switch {
		case eq("Proxy-Authenticate"):
			return seenProxyAuthenticate
		case eq(policy.HeaderExhausted):
			return seenExhausted
		}
	case 19:
		if eq("Proxy-Authorization") {
			return seenProxyAuthorization
		}
	}
	return 0
}

// ScanRequestHeaders finds the names in a request header as the server read
// it, from its raw block (the fields as they came over the wire): iterating
// the parsed fields instead (All) would parse the cookies as a side effect,
// which changes how they are written upstream. A header without a raw block
// (built by hand, not read) or with a chunked body, whose trailer section
// may add fields after the block, counts as having every name.
func ScanRequestHeaders(h *fasthttp.RequestHeader) Seen {
	raw := h.RawHeaders()
	if len(raw) == 0 || len(h.PeekTrailerKeys()) > 0 {
		return SeenAll
	}
	var s Seen
	if h.ConnectionClose() {
		// Set without a Connection field too (HTTP/1.0): the delete of
		// Connection is what resets it for the upstream request.
		s |= seenConnection
	}
	// Each line: the name is what precedes the first ':' (spaces trimmed);
	// a line without one (a folded continuation, the final CRLF) names
	// nothing. The names are short: a byte loop finds their end faster
	// than IndexByte's call; the value, which may be long, is skipped with it.
	for i := 0; i < len(raw); {
		start := i
		for i < len(raw) && raw[i] != ':' && raw[i] != '\n' {
			i++
		}
		if i < len(raw) && raw[i] == ':' {
			s |= nameBit(trimSpace(raw[start:i]))
		}
		if j := bytes.IndexByte(raw[i:], '\n'); j >= 0 {
			i += j + 1
		} else {
			break
		}
	}
	if s&SeenTransferEncoding != 0 || h.ContentLength() == -1 {
		return SeenAll
	}
	return s
}

// ScanResponseHeaders finds the names in an upstream response header, from
// its parsed fields (a response header has no raw block; iterating it has
// no side effect). A chunked response, whose trailers may add fields, or one
// announcing trailers (whose iteration would build the Trailer value)
// counts as having every name.
func ScanResponseHeaders(h *fasthttp.ResponseHeader) Seen {
	if h.ContentLength() == -1 || len(h.PeekTrailerKeys()) > 0 {
		return SeenAll
	}
	var s Seen
	if h.ConnectionClose() {
		s |= seenConnection
	}
	for k := range h.All() {
		s |= nameBit(k)
	}
	return s
}

// trimSpace is bytes.TrimSpace for the common case of nothing to trim.
func trimSpace(b []byte) []byte {
	if len(b) > 0 && (b[0] <= ' ' || b[len(b)-1] <= ' ') {
		return bytes.TrimSpace(b)
	}
	return b
}

// rawHasField reports whether a raw header block has a field line named
// name (any case), up to the blank line ending the head: what the client
// sent, where fasthttp's parsed header no longer says (a Transfer-Encoding
// it dropped, a Content-Length it would add).
func rawHasField(raw []byte, name string) bool {
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			return false
		}
		if c := bytes.IndexByte(line, ':'); c > 0 && bytes.EqualFold(trimSpace(line[:c]), []byte(name)) {
			return true
		}
	}
	return false
}
