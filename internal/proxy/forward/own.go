package forward

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// The proxy's own answers outside an exchange (a request it refuses or
// cannot carry: 400, 408, 413, 431, 505, 508, a CONNECT's or an upgrade's
// 502) have one form on both engines: the status line, Content-Type
// text/plain; charset=utf-8, Content-Length, Connection: close when the
// connection ends with it, and a body "retrycap-proxy: ...\n". No Date:
// the event loop writes them whole (OwnAnswer), the goroutine engine's
// server from the response it prepared (SetOwnAnswer), whose NoDefaultDate
// fasthttp's ctx.Error would reset (the 505, 508s and the CONNECT and
// upgrade refusals carried a Date the others have not). The exchange's
// answers (a call that failed or was refused: 502, 503, 504) are the
// exchange's, with the proxy's Date.

// OwnAnswer is the proxy's own answer with status code and body (one
// ending in "\n"), byte for byte as the goroutine engine's server writes
// SetOwnAnswer's; closes adds Connection: close.
func OwnAnswer(code int, body string, closes bool) []byte {
	return ownAnswer(code, body, closes, false)
}

// OwnAnswerRetryAfter is OwnAnswer with "Retry-After: 1" after the
// Content-Length, where the goroutine engine's server writes it.
func OwnAnswerRetryAfter(code int, body string, closes bool) []byte {
	return ownAnswer(code, body, closes, true)
}

func ownAnswer(code int, body string, closes, retryAfter bool) []byte {
	b := make([]byte, 0, 128+len(body))
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	b = append(b, fasthttp.StatusMessage(code)...)
	b = append(b, "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	if retryAfter {
		b = append(b, "\r\nRetry-After: 1"...)
	}
	if closes {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	return append(b, body...)
}

// SetOwnAnswer makes resp the proxy's own answer with code and body, for a
// server that writes resp (the goroutine engine): the bytes OwnAnswer
// writes, provided resp's header is the one the server prepared (its
// NoDefaultDate: resp.Reset clears it; copy the server's template back).
// closes closes the connection after it.
func SetOwnAnswer(resp *fasthttp.Response, code int, body string, closes bool) {
	resp.SetStatusCode(code)
	resp.Header.SetContentType("text/plain; charset=utf-8")
	resp.SetBodyString(body)
	if closes {
		resp.SetConnectionClose()
	}
}

// MalformedBody is the body of the 400 to a head the proxy does not read.
func MalformedBody(why string) string { return "retrycap-proxy: malformed request: " + why + "\n" }

// maxQuoted bounds a value an answer names (QuoteValue).
const maxQuoted = 64

// QuoteValue is a value a client sent, as an answer names it: quoted, its
// control bytes escaped (a refusal never reflects raw bytes), at most
// maxQuoted bytes of it ("..." after the quote when it was longer).
func QuoteValue(v []byte) string {
	if len(v) > maxQuoted {
		return strconv.Quote(string(v[:maxQuoted])) + "..."
	}
	return strconv.Quote(string(v))
}

// SelfAddressedBody is the body of the 508 to a request addressed to the
// proxy itself (hostPort: the host no --upstreams entry names, at the
// proxy's own port), on both protocols: the HTTP/2 relay's lacked the
// advice and named the catch-all upstream, as if one had been tried.
func SelfAddressedBody(hostPort string) string {
	return "retrycap-proxy: request addressed to the proxy itself (" + hostPort + "): loop refused; send requests for upstreams through HTTP_PROXY in absolute form\n"
}

// UpstreamNamed names an upstream in an answer: its --upstreams name (the
// host, for one no entry names) and the address its attempts went to.
func UpstreamNamed(name, addr string) string {
	if addr == "" {
		return "upstream " + name
	}
	return "upstream " + name + " (" + addr + ")"
}

// GaveUpBody is the body of the answer to a call whose last attempt (of
// attempts) failed without an answer, on both protocols: the upstream by
// name and address, the condition as the access log names it, why in the
// proxy's words (AttemptWords), and the limit that stopped the call, if
// one did.
func GaveUpBody(name, addr string, attempts int, cond, why string, reason policy.Reason) string {
	msg := "retrycap-proxy: " + UpstreamNamed(name, addr) + ": " + strconv.Itoa(attempts) + " attempt(s), last failed with " + cond + " (" + why + ")"
	if reason != policy.ReasonNone {
		msg += "; not retried: " + reason.String()
	}
	return msg + "\n"
}

// AttemptWords is why an attempt failed, as an answer says it: a timeout in
// the proxy's words, naming the limit that ended it (the per-try timeout
// perTry, or the call's deadline when cut: it bounded the attempt), never
// a library's ("fasthttp: timeout", "context deadline exceeded"); any other
// error as it reads (a dial's names what was dialled).
func AttemptWords(err error, perTry time.Duration, cut bool) string {
	limit := "within the per-try timeout " + perTry.String()
	if cut {
		limit = "before the call's deadline"
	}
	var de *DialError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &de) && (de.Err == fasthttp.ErrDialTimeout || isTimeout(de.Err)):
		// The loop's connect cut by the attempt's timer, the goroutine
		// engine's dial timing out ("dial tcp ...: i/o timeout"): one
		// wording on both engines.
		return "dial: not connected " + limit
	case err == fasthttp.ErrTimeout, errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		// isTimeout: the goroutine engine's read of a small body within
		// the attempt's deadline ("read tcp ...: i/o timeout"), which the
		// loop's timer words as no answer.
		return "no answer " + limit
	}
	return err.Error()
}

// isTimeout reports a net error that is a timeout.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// BadAnswerError is the failure of an attempt whose answer the HTTP/2
// relay refuses as malformed (why: the rule it broke): a bad answer
// (BadAnswer), in the HTTP/1.1 path's words, "the upstream's answer is
// malformed: why", its condition reset and its access-log error
// "bad-answer". The relay's read "retrycap-proxy: malformed answer from
// upstream: why", a reset in its answer and its log.
func BadAnswerError(why string) error { return &answerParseError{why: why} }
