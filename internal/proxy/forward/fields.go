package forward

import (
	"bufio"
	"bytes"
	"sync"

	"github.com/valyala/fasthttp"
)

// Deleting header fields without moving the others.
//
// fasthttp's Del fills the hole a deleted field leaves with the last field
// (delAllArgs swaps): deleting Proxy-Connection from
// "X-A: 1, Proxy-Connection, X-A: 2" sent "X-A: 2" before "X-A: 1". The
// order of the field lines of one name is their meaning (RFC 9110 5.3), so
// the data path never deletes with Del alone: removeRequestFields and
// removeResponseFields snapshot the fields as fasthttp would write them,
// delete every name concerned, and add the fields kept back in their order.
// The fields fasthttp keeps outside its list (Host, User-Agent,
// Content-Type, Content-Length; a response's Server, Date, Content-Encoding,
// Set-Cookie, Trailer, and Transfer-Encoding, which fasthttp manages) are
// not touched: they are written first, or last, wherever they came, as
// before. It allocates nothing once the scratch buffers have grown.

// field is a header line of a snapshot: name and value, as offsets.
type field struct{ k0, k1, v0, v1 int }

// snapshot writes h's head into sc.head and lists its header lines in
// sc.fields (the first line, the status or request line, is skipped).
func snapshot(head []byte, sc *Scratch) {
	sc.fields = sc.fields[:0]
	i := bytes.IndexByte(head, '\n') + 1
	for i > 0 && i < len(head) {
		j := bytes.IndexByte(head[i:], '\n')
		if j < 0 {
			break
		}
		line := head[i : i+j]
		start := i
		i += j + 1
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		c := bytes.IndexByte(line, ':')
		if c < 0 {
			continue
		}
		v0 := start + c + 1
		for v0 < start+len(line) && (head[v0] == ' ' || head[v0] == '\t') {
			v0++
		}
		sc.fields = append(sc.fields, field{start, start + c, v0, start + len(line)})
	}
}

// requestUntouched: the names removeRequestFields leaves alone (never in
// fasthttp's field list, or managed by it).
func requestUntouched(k []byte) bool {
	switch len(k) {
	case 4:
		return string(k) == fasthttp.HeaderHost
	case 10:
		return string(k) == fasthttp.HeaderUserAgent
	case 12:
		return string(k) == fasthttp.HeaderContentType
	case 14:
		return string(k) == fasthttp.HeaderContentLength
	}
	return false
}

func responseUntouched(k []byte) bool {
	switch string(k) {
	case fasthttp.HeaderServer, fasthttp.HeaderDate, fasthttp.HeaderContentType, fasthttp.HeaderContentEncoding,
		fasthttp.HeaderContentLength, fasthttp.HeaderSetCookie, fasthttp.HeaderTrailer:
		return true
	}
	return bytes.EqualFold(k, []byte(fasthttp.HeaderTransferEncoding))
}

// removeRequestFields deletes the request's fields whose names drop
// reports, and its trailer fields (trailers never become header fields,
// and fasthttp's Del of Trailer would move them into the header), keeping
// every other field in its place.
func removeRequestFields(h *fasthttp.RequestHeader, drop func(k []byte, sc *Scratch) bool, sc *Scratch) {
	sc.head = h.AppendBytes(sc.head[:0])
	snapshot(sc.head, sc)
	delTrailers(h, sc)
	head := sc.head
	for _, f := range sc.fields {
		if k := head[f.k0:f.k1]; !requestUntouched(k) {
			h.DelBytes(k)
		}
	}
	// Added back as plain fields: the special handling of Add would parse
	// a Cookie into fasthttp's cookie list (written last, merged) and turn
	// a kept Connection: close into a flag.
	special := h.DisableSpecialHeader()
	for _, f := range sc.fields {
		k := head[f.k0:f.k1]
		if requestUntouched(k) || drop(k, sc) {
			continue
		}
		h.AddBytesKV(k, head[f.v0:f.v1])
	}
	if !special {
		h.EnableSpecialHeader()
	}
}

// delTrailers deletes the trailer fields (and the fields of their names:
// the caller adds those it keeps back from its snapshot). fasthttp's Del of
// Trailer moves the trailer fields into the header.
func delTrailers(h *fasthttp.RequestHeader, sc *Scratch) {
	sc.trailers = sc.trailers[:0]
	for _, k := range h.PeekTrailerKeys() {
		sc.trailers = append(sc.trailers, k...)
		sc.trailers = append(sc.trailers, 0)
	}
	if len(sc.trailers) == 0 {
		return
	}
	h.Del(fasthttp.HeaderTrailer)
	for rest := sc.trailers; len(rest) > 0; {
		i := bytes.IndexByte(rest, 0)
		h.DelBytes(rest[:i])
		rest = rest[i+1:]
	}
}

// removeResponseFields is removeRequestFields for a response; its trailers
// (announced by Trailer, end to end) stay.
func removeResponseFields(h *fasthttp.ResponseHeader, drop func(k []byte, sc *Scratch) bool, sc *Scratch) {
	sc.head = h.AppendBytes(sc.head[:0])
	snapshot(sc.head, sc)
	head := sc.head
	for _, f := range sc.fields {
		if k := head[f.k0:f.k1]; !responseUntouched(k) {
			h.DelBytes(k)
		}
	}
	for _, f := range sc.fields {
		k := head[f.k0:f.k1]
		if responseUntouched(k) || drop(k, sc) {
			continue
		}
		h.AddBytesKV(k, head[f.v0:f.v1])
	}
}

// SetContentLength frames a request by Content-Length n, its
// Transfer-Encoding deleted in place (fasthttp's SetContentLength deletes it
// by moving the last field into its place).
func SetContentLength(h *fasthttp.RequestHeader, n int, sc *Scratch) {
	if h.ContentLength() == -1 {
		removeRequestFields(h, func(k []byte, _ *Scratch) bool {
			return bytes.EqualFold(k, []byte(fasthttp.HeaderTransferEncoding))
		}, sc)
	}
	h.SetContentLength(n)
}

// restoreRawOrder puts a chunked request's fields back as its raw header
// block has them (as the client sent them). fasthttp's server, before the
// handler runs, deletes the Transfer-Encoding of a chunked request whose
// body is empty by moving the last field into its place, and appends the
// fields of an unannounced trailer section to the header: those, in no
// line of the raw block, are dropped (trailers never promote).
func restoreRawOrder(h *fasthttp.RequestHeader, sc *Scratch) {
	sc.head = h.AppendBytes(sc.head[:0])
	snapshot(sc.head, sc)
	head := sc.head
	sc.used = append(sc.used[:0], make([]bool, len(sc.fields))...)
	sc.order = sc.order[:0]
	// Each raw line's field: the same name and value, else (a value
	// fasthttp rewrote) the first unused one of the same name.
	for pass := 0; pass < 2; pass++ {
		line := 0
		for raw := h.RawHeaders(); len(raw) > 0; line++ {
			l := raw
			if i := bytes.IndexByte(raw, '\n'); i >= 0 {
				l, raw = raw[:i], raw[i+1:]
			} else {
				raw = nil
			}
			if len(l) == 0 || (len(l) == 1 && l[0] == '\r') {
				break // the end of the header section: trailers may follow
			}
			if pass == 0 {
				sc.order = append(sc.order, -1)
			}
			c := bytes.IndexByte(l, ':')
			if c <= 0 || sc.order[line] >= 0 {
				continue
			}
			name, value := trimSpace(l[:c]), bytes.TrimSpace(l[c+1:])
			for i, f := range sc.fields {
				k := head[f.k0:f.k1]
				if sc.used[i] || requestUntouched(k) || !bytes.EqualFold(k, name) || (pass == 0 && !bytes.Equal(head[f.v0:f.v1], value)) {
					continue
				}
				sc.used[i] = true
				sc.order[line] = i
				break
			}
		}
	}
	delTrailers(h, sc)
	for _, f := range sc.fields {
		if k := head[f.k0:f.k1]; !requestUntouched(k) {
			h.DelBytes(k)
		}
	}
	special := h.DisableSpecialHeader()
	for _, i := range sc.order {
		if i >= 0 {
			f := sc.fields[i]
			h.AddBytesKV(head[f.k0:f.k1], head[f.v0:f.v1])
		}
	}
	if !special {
		h.EnableSpecialHeader()
	}
}

// WriteRequest writes req upstream as fasthttp's Request.Write does, but
// without the "Content-Length: 0" fasthttp's writer adds to every request
// without content but a GET or HEAD. Go's Transport (and so
// httputil.ReverseProxy) adds it only to a POST, PUT or PATCH ("many
// servers expect a Content-Length for these methods"), and RFC 9110 8.6
// says a user agent should not send it when the method does not anticipate
// content; a request without framing has no content (RFC 9112 6.3), so
// nothing is lost. A client's own "Content-Length: 0" goes as sent, but on
// a TRACE (RFC 9110 9.3.8: never content; Go drops it there too). Both
// engines write their requests through it (RequestWriter for the loop's).
func WriteRequest(req *fasthttp.Request, w *bufio.Writer) error {
	keepTarget(req)
	if len(req.Body()) > 0 || req.IsBodyStream() || !zeroLengthAdded(&req.Header) {
		return req.Write(w)
	}
	// Rendered apart, the one line fasthttp added taken out (a field's
	// value holds no CRLF, so the line is the framing's). Pooled: a CORS
	// preflight is an OPTIONS without content.
	r := renders.Get().(*render)
	defer renders.Put(r)
	r.b.Reset()
	r.w.Reset(&r.b)
	if err := req.Write(r.w); err != nil {
		return err
	}
	if err := r.w.Flush(); err != nil {
		return err
	}
	out := r.b.Bytes()
	if i := bytes.Index(out, zeroLengthLine); i >= 0 {
		out = append(out[:i+2], out[i+len(zeroLengthLine):]...)
	}
	_, err := w.Write(out)
	return err
}

// keepTarget keeps in req's URI what fasthttp's writer, which rebuilds
// the target from the URI, would drop:
//   - an OPTIONS request sent in absolute form with an empty path and no
//     query ("OPTIONS http://svc HTTP/1.1") gets the target "*": RFC 9112
//     3.2.4 has the last proxy before the origin send "OPTIONS *", and the
//     proxy is that last one. The writer made it "/", a request about the
//     server turned into one about its root resource;
//   - an empty query ("/x?", "http://svc?") keeps its "?": the writer
//     left it out, so the origin got another URI than the client's (RFC
//     3986 6.2.3: a delimiter of an empty component is not removed unless
//     the scheme says so, and RFC 9110 4.2.3's http normalisation does
//     not). So "OPTIONS http://svc?" has a query, empty, and goes as "/?"
//     (3.2.4's "*" is for a URI with no query component), as Go's
//     net/http sends it; nginx and HAProxy pass "/x?" on as it came.
//
// A retry's target is kept already: the first write's target is the URI's.
func keepTarget(req *fasthttp.Request) {
	// The target as the client sent it (a retry's: as the first write
	// set it): fasthttp's URI holds "/" for an empty path, and no query
	// for an empty one.
	target := req.Header.RequestURI()
	if req.Header.IsOptions() && EmptyAbsolutePath(target) {
		req.URI().SetPath("*")
		return
	}
	if q := bytes.IndexByte(target, '?'); q < 0 || q != len(target)-1 {
		return
	}
	u := req.URI()
	if len(u.QueryString()) > 0 {
		return
	}
	path := u.PathOriginal()
	if bytes.HasSuffix(path, []byte("?")) {
		return // a retry: kept by the first write (a path holds no '?' of its own)
	}
	if len(path) == 0 {
		path = []byte("/") // RFC 9112 3.2.1: an empty path goes as "/"
	}
	// Set as the path: the writer, without normalising (both engines'
	// clients), writes the original path as it is, and the query only
	// when it is not empty.
	u.SetPath(string(path) + "?")
}

// UpstreamTarget is the request-target req goes upstream with, as
// WriteRequest writes it (keepTarget, the path not normalised), for a
// writer that renders the head itself: the upgrade path. It rendered the
// URI's normalised target: "/a/../b//c%2Fd" went as "/b/c/d", "/chat?"
// as "/chat", a different resource than the client named.
func UpstreamTarget(req *fasthttp.Request) []byte {
	keepTarget(req)
	u := req.URI()
	u.DisablePathNormalizing = true // as both engines' clients set it
	return u.RequestURI()
}

// EmptyAbsolutePath reports whether target is in absolute form with an
// empty path and no query ("http://svc", "http://svc:8080").
func EmptyAbsolutePath(target []byte) bool {
	i := bytes.Index(target, []byte("://"))
	return i > 0 && !bytes.ContainsAny(target[:i], "/?#") && !bytes.ContainsAny(target[i+3:], "/?#")
}

// UpgradeHead is the head of req, sent without content, as WriteRequest
// writes it, for the upgrade path, which writes the head itself: without
// the "Content-Length: 0" fasthttp's rendering adds (zeroLengthAdded). An
// OPTIONS or DELETE upgrade went with it, a field its client never sent.
// The bytes are h's own buffer's when nothing is taken out.
func UpgradeHead(h *fasthttp.RequestHeader, noContent bool) []byte {
	out := h.Header()
	if !noContent || !zeroLengthAdded(h) {
		return out
	}
	if i := bytes.Index(out, zeroLengthLine); i >= 0 {
		out = append(out[:i+2:i+2], out[i+len(zeroLengthLine):]...)
	}
	return out
}

// zeroLengthAdded: whether fasthttp's writer would frame h's request, sent
// without content, by a "Content-Length: 0" that the proxy leaves out:
// every method but a GET or HEAD (fasthttp adds none) or a POST, PUT or
// PATCH (Go adds it too), unless the client sent one itself (the raw head,
// since a first attempt's write sets it for a retry's). A TRACE goes
// without it even then.
func zeroLengthAdded(h *fasthttp.RequestHeader) bool {
	switch string(h.Method()) {
	case fasthttp.MethodGet, fasthttp.MethodHead, fasthttp.MethodPost, fasthttp.MethodPut, fasthttp.MethodPatch:
		return false
	case fasthttp.MethodTrace:
		return true
	}
	return !rawHasField(h.RawHeaders(), fasthttp.HeaderContentLength)
}

type render struct {
	b bytes.Buffer
	w *bufio.Writer
}

var renders = sync.Pool{New: func() any {
	r := &render{}
	r.w = bufio.NewWriterSize(&r.b, 1024)
	return r
}}

// RequestWriter writes R with WriteRequest (the loop renders a message
// through its Write method).
type RequestWriter struct{ R *fasthttp.Request }

func (r RequestWriter) Write(w *bufio.Writer) error { return WriteRequest(r.R, w) }

var zeroLengthLine = []byte("\r\nContent-Length: 0\r\n")
