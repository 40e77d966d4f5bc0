package forward

import (
	"strconv"
	"strings"
)

// The proxy's own words for what fasthttp's parser refuses, in requests
// (the 400) and in upstream answers (the 502). fasthttp's messages quote
// what they refused ("invalid header value \"<script>...\""), and without
// SecureErrorLogMessage add up to 400 bytes of the head ("contents: ..."):
// echoed, they reflect a client's bytes (cookies, tokens of the same head,
// markup) into its answer and the proxy's log, and an upstream's bytes
// into the client's 502. The answers say which rule was broken, from a
// fixed list, and never repeat the bytes.

// ReasonTooManyTE is the proxy's one wording of a head with more than one
// Transfer-Encoding field, a request's (CheckHead: 400) or an answer's
// (AnswerParseError: 502), on both engines. fasthttp's parser words it
// "too many transfer-encoding headers", or "unsupported transfer-encoding"
// when the first field is not "chunked" or with its
// SecureErrorLogMessage (the goroutine engine's): the same upstream
// answer read "too many ..." on the loop and "unsupported ..." on the
// goroutine engine, and two "chunked" fields from a client "unsupported".
const ReasonTooManyTE = "too many transfer-encoding headers"

// parseReasons are the phrases fasthttp 1.78's parsers open their
// messages with (header.go, headerscanner.go, http.go, uri.go, ipv6.go), each with the
// proxy's wording. A phrase is looked for only before the first quoted
// part of the message (quoted parts are the refused bytes), and the one
// found first wins (an outer message wraps an inner one after it:
// "cannot parse content-length: ... non-numeric chars found").
var parseReasons = [...]struct{ phrase, reason string }{
	{"cannot find whitespace in the first line of request", "cannot find whitespace in the first line of request"},
	{"cannot find whitespace in the first line of response", "cannot find whitespace in the status line"},
	{"cannot find http request method", "cannot find http request method"},
	{"unsupported http request method", "unsupported http request method"},
	{"extra whitespace in request line", "extra whitespace in request line"},
	{"request uri cannot be empty", "request uri cannot be empty"},
	{"requesturi cannot be empty", "request uri cannot be empty"},
	{"invalid request uri", "invalid request uri"},
	{"unsupported http version", "unsupported http version"},
	{"invalid response status code", "invalid response status code"},
	{"unexpected char at the end of status code", "invalid response status code"},
	{"invalid header key", "invalid header name"},
	{"invalid header value", "invalid header value"},
	{"too many transfer-encoding headers", ReasonTooManyTE},
	{"too many host headers", "too many host headers"},
	{"unsupported transfer-encoding", "unsupported transfer-encoding"},
	{"duplicate content-length header", "duplicate content-length header"},
	{"cannot parse content-length", "cannot parse content-length"},
	{"missing required host header", "missing required host header"},
	{"request content-length and transfer-encoding conflict", "content-length and transfer-encoding conflict"},
	{"contain forbidden trailer", "forbidden trailer key"},
	{"forbidden trailer key", "forbidden trailer key"},
	{"invalid trailer value", "invalid trailer value"},
	{"too large hex number", "too large hex number"},
	{"empty hex number", "empty hex number"},
	{"cannot find crlf at the end of chunk", "cannot find crlf at the end of chunk"},
	{"unexpected char ", "invalid character at the end of chunk size"},
	{"malformed mime header: missing colon", "a header line without a colon"},
	{"malformed mime header line", "malformed header line"},
	{"headers cannot start with space or tab", "a header line starts with a blank"},
	{"invalid ipv6", "invalid host"},
	{"invalid scheme", "invalid scheme"},
	{"missing ']' in host", "invalid host"},
	{"invalid host", "invalid host"},
	{"invalid port", "invalid port"},
}

// Reason is the proxy's wording of the parse error err (one of a fixed
// list), or fallback when err is none fasthttp's parsers make.
func Reason(err error, fallback string) string {
	if err == nil {
		return fallback
	}
	msg := err.Error()
	head, rest := msg, ""
	if i := strings.IndexAny(msg, "\"'`"); i >= 0 {
		head, rest = msg[:i], msg[i:]
	}
	best, bestAt := "", -1
	for _, p := range parseReasons {
		if i := strings.Index(head, p.phrase); i >= 0 && (bestAt < 0 || i < bestAt) {
			best, bestAt = p.reason, i
		}
	}
	// "invalid character %q after chunk size" and "invalid character %q
	// in host name": the phrase goes on after the quoted byte.
	if i := strings.LastIndex(head, "invalid character "); i >= 0 && i+len("invalid character ") == len(head) && (bestAt < 0 || i < bestAt) {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			switch after := rest[len(q):]; {
			case strings.HasPrefix(after, " after chunk size"):
				best = "invalid character after chunk size"
			case strings.HasPrefix(after, " in host name"):
				best = "invalid character in host name"
			}
		}
	}
	if best == "" {
		return fallback
	}
	return best
}

// LogExcerpt is what the proxy's log says of a parse error: the proxy's
// wording, then fasthttp's message bounded to 160 bytes and quoted (its
// control characters escaped, so that a refused head never writes lines
// of its own into the log).
func LogExcerpt(err error) string {
	msg := err.Error()
	if len(msg) > 160 {
		msg = msg[:160] + "..."
	}
	return Reason(err, "unrecognised error") + " (" + strconv.Quote(msg) + ")"
}
