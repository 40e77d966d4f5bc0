package goroutine

import (
	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// headAnswer is the proxy's refusal of a request by its head alone.
type headAnswer struct {
	code int
	// why is a malformed head's reason (forward.MalformedAnswer's words);
	// body, when why is empty, the answer's whole body.
	why, body string
}

// set writes a on ctx's response, as the handler answers it.
func (a *headAnswer) set(ctx *fasthttp.RequestCtx) {
	if a.why != "" {
		refuseParsed(ctx, a.why)
		return
	}
	forward.SetOwnAnswer(&ctx.Response, a.code, a.body, true)
}

// headRefusal is the refusal the handler gives h's request by its head
// alone, in the handler's order (the event loop's: it refuses the first
// two itself and hands the others over): a head line the proxy does not
// read (or a Transfer-Encoding it cannot frame by) or a target it
// refuses, a URI fasthttp's parser refuses (a port that is no number: the
// loop hands it over, fasthttp's server refuses it), an HTTP version it
// does not speak, no host. ok false: none. Such a request is refused
// before its body is read or its size judged: a malformed request is
// malformed whatever its body (nginx answers 400 or 505 before a body's
// 413).
func headRefusal(h *fasthttp.RequestHeader) (a headAnswer, ok bool) {
	why := forward.BadHeaderLines(h.RawHeaders())
	if why == "" {
		why = forward.CheckTarget(h.Host(), h.RequestURI())
	}
	if why != "" {
		return headAnswer{code: fasthttp.StatusBadRequest, why: why}, true
	}
	u := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(u)
	if err := u.Parse(h.Host(), h.RequestURI()); err != nil {
		return headAnswer{code: fasthttp.StatusBadRequest, why: forward.Reason(err, "the request cannot be parsed")}, true
	}
	if forward.CheckVersion(h.Protocol()) == forward.VersionUnsupported {
		return headAnswer{code: fasthttp.StatusHTTPVersionNotSupported, body: versionRefusal(h.Protocol())}, true
	}
	if !h.IsConnect() && len(forward.SplitHostPort(u.Host())) == 0 {
		return headAnswer{code: fasthttp.StatusBadRequest, body: noHostRefusal}, true
	}
	return headAnswer{}, false
}

// The handler's refusals of a version and of a request without a host.
const noHostRefusal = "retrycap-proxy: request has no host\n"

func versionRefusal(p []byte) string {
	return "retrycap-proxy: HTTP version not supported: " + forward.QuoteValue(p) + "\n"
}
