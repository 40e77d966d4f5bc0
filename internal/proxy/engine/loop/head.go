package loop

import (
	"bytes"
	"io"
	"strconv"

	"github.com/valyala/fasthttp"
)

// The answer heads the loop writes itself.
//
// An upstream's answer must pass on its own Date (or none) and add none of
// the proxy's. fasthttp writes a Date of its own unless the header carries
// its server's NoDefaultDate, a flag its parser clears and no exported
// method sets; the goroutine engine's server sets it on the answers it
// writes. So for an upstream's answer the loop writes the head itself, byte
// for byte what fasthttp writes with that flag (ResponseHeader.AppendBytes
// and Response.Write in fasthttp 1.78: the status line, Server,
// Content-Type, Content-Encoding, Content-Length, the other fields in their
// order, Trailer, Set-Cookie, Connection: close), from the header's exported
// accessors. The answers the proxy makes itself (its 502/503/504s) carry
// its Date and are written by fasthttp. TestEnginesAnswerAlike and the
// random and fuzz tests compare the result with the goroutine engine's.

// Header names fasthttp keeps outside its list of fields (and yields first
// from All); an upstream's field of one of these names is never in the list.
const (
	hContentLength   = "Content-Length"
	hContentType     = "Content-Type"
	hContentEncoding = "Content-Encoding"
	hServer          = "Server"
	hSetCookie       = "Set-Cookie"
	hTrailer         = "Trailer"
	hConnection      = "Connection"
)

// appendAnswer appends an upstream's answer with a buffered body to dst, as
// fasthttp's Response.Write writes it (the framing set from the body, a
// body with trailers chunked), with appendAnswerHead's head.
func appendAnswer(dst []byte, resp *fasthttp.Response) []byte {
	h := &resp.Header
	sendBody := !resp.SkipBody && !skipsBody(h.StatusCode())
	body := resp.Body()
	if sendBody || len(body) > 0 {
		h.SetContentLength(len(body))
	}
	if sendBody && len(h.PeekTrailerKeys()) > 0 && h.IsHTTP11() {
		h.SetContentLength(-1)
		dst = appendAnswerHead(dst, h)
		if len(body) > 0 {
			dst = strconv.AppendUint(dst, uint64(len(body)), 16)
			dst = append(dst, "\r\n"...)
			dst = append(dst, body...)
			dst = append(dst, "\r\n"...)
		}
		dst = append(dst, "0\r\n"...)
		return append(dst, h.TrailerHeader()...)
	}
	dst = appendAnswerHead(dst, h)
	if sendBody {
		dst = append(dst, body...)
	}
	return dst
}

// skipsBody: the status forbids a body (1xx, 204, 304).
func skipsBody(st int) bool {
	if st < 100 || st == fasthttp.StatusOK {
		return false
	}
	return st == fasthttp.StatusNotModified || st == fasthttp.StatusNoContent || st < 200
}

// skipsLengthOnWire: the status forbids Content-Length and
// Transfer-Encoding on the wire (1xx, 204; a 304 may describe its 200).
func skipsLengthOnWire(st int) bool { return st < 200 || st == fasthttp.StatusNoContent }

// appendAnswerHead appends h's head (through the empty line) to dst, with
// no Date of the proxy's own and no default Content-Type.
func appendAnswerHead(dst []byte, h *fasthttp.ResponseHeader) []byte {
	st := h.StatusCode()
	if st < 0 {
		st = fasthttp.StatusOK
	}
	dst = append(dst, h.Protocol()...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(st), 10)
	dst = append(dst, ' ')
	if msg := h.StatusMessage(); len(msg) > 0 {
		dst = append(dst, msg...)
	} else {
		dst = append(dst, fasthttp.StatusMessage(st)...)
	}
	dst = append(dst, "\r\n"...)
	noLength := skipsLengthOnWire(st)

	// All yields Content-Length, Content-Type, Content-Encoding, Server,
	// each Set-Cookie, Trailer (those present), then the other fields in
	// order, then a Connection: close the fields do not carry.
	var length, ctype, cenc, server, trailer []byte
	cookies := false
	for k, v := range h.All() {
		switch string(k) {
		case hSetCookie:
			cookies = true
		case hContentLength:
			length = v
		case hContentType:
			ctype = v
		case hContentEncoding:
			cenc = v
		case hServer:
			server = v
		case hTrailer:
			trailer = v
		}
	}
	if len(server) > 0 {
		dst = appendLine(dst, hServer, server)
	}
	if len(ctype) > 0 {
		dst = appendLine(dst, hContentType, ctype)
	}
	if len(cenc) > 0 {
		dst = appendLine(dst, hContentEncoding, cenc)
	}
	if len(length) > 0 && !noLength {
		dst = appendLine(dst, hContentLength, length)
	}
	closeField := false // a field says Connection: close
	lastClose := -1     // where the last field, a bare Connection: close, starts in dst
	for k, v := range h.All() {
		switch string(k) {
		case hContentLength, hContentType, hContentEncoding, hServer, hSetCookie, hTrailer:
			continue
		}
		lastClose = -1
		if noLength && bytes.EqualFold(k, []byte("Transfer-Encoding")) {
			continue
		}
		if bytes.EqualFold(k, []byte(hConnection)) && hasToken(v, "close") {
			if string(k) == hConnection && string(v) == "close" && !closeField {
				lastClose = len(dst) // perhaps not a field: see below
			}
			closeField = true
		}
		dst = appendLine(dst, k, v)
	}
	synthetic := false
	if lastClose >= 0 && h.ConnectionClose() {
		// The Connection: close All adds last, for a header whose fields do
		// not say it: fasthttp writes it after the cookies.
		dst = dst[:lastClose]
		synthetic = true
	}
	if len(trailer) > 0 {
		dst = appendLine(dst, hTrailer, trailer)
	}
	if cookies {
		for k, v := range h.All() {
			if string(k) == hSetCookie {
				dst = appendLine(dst, hSetCookie, v)
			}
		}
	}
	if synthetic {
		dst = appendLine(dst, hConnection, []byte("close"))
	}
	return append(dst, "\r\n"...)
}

func appendLine[K string | []byte](dst []byte, k K, v []byte) []byte {
	dst = append(dst, k...)
	dst = append(dst, ':', ' ')
	dst = append(dst, v...)
	return append(dst, '\r', '\n')
}

// hasToken reports whether the comma-separated list v holds tok
// (case-insensitively).
func hasToken(v []byte, tok string) bool {
	for len(v) > 0 {
		var t []byte
		if i := bytes.IndexByte(v, ','); i >= 0 {
			t, v = v[:i], v[i+1:]
		} else {
			t, v = v, nil
		}
		if bytes.EqualFold(bytes.TrimSpace(t), []byte(tok)) {
			return true
		}
	}
	return false
}

// headSwap is the writer under fasthttp's Response.Write for an answer
// whose body streams: it drops the head fasthttp writes (up to its empty
// line) and writes head() in its place, computed then (after Write has
// set the framing), and passes the body as fasthttp frames it.
type headSwap struct {
	w    io.Writer
	head func() []byte
	seen int // bytes of "\r\n\r\n" matched so far
	done bool
}

func (s *headSwap) Write(p []byte) (int, error) {
	if s.done {
		return s.w.Write(p)
	}
	const end = "\r\n\r\n"
	for i, c := range p {
		switch want := end[s.seen]; c {
		case want:
			s.seen++
		case '\r':
			s.seen = 1
		default:
			s.seen = 0
		}
		if s.seen == len(end) {
			s.done = true
			if _, err := s.w.Write(s.head()); err != nil {
				return 0, err
			}
			if _, err := s.w.Write(p[i+1:]); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return len(p), nil
}
