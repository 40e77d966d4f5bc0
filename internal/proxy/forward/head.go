package forward

import (
	"bufio"
	"bytes"
	"errors"

	"github.com/valyala/fasthttp"
)

// The part of reading a request head that comes before fasthttp's parser,
// shared by both engines: where a head ends, what is refused before it is
// parsed, and the answer to a refused head. The event loop applies it to
// every head it reads; the goroutine engine's pre-parser (headConn in
// package goroutine) to every head its connections bring, before fasthttp
// sees it, so that both answer alike.

// HeadEnd returns the length of the message head at the start of b (the
// request or status line and the headers, through the empty line), or -1
// if b does not hold all of it. Lines end in CRLF or a bare LF, as
// fasthttp's parser accepts.
func HeadEnd(b []byte) int {
	end, _, _ := scanHead(b)
	return end
}

// CheckHead finds the request head at the start of b (end: HeadEnd's) and
// gives the verdict on it before it is parsed: refuse is "" to parse it,
// else why it is refused (400, then the close). A bare LF is refused here
// because fasthttp's parser never finds the end of a head ended by bare
// LFs: it would wait for the head timeout. More than one
// Transfer-Encoding field is refused here (ReasonTooManyTE) because
// fasthttp's parser, which refuses it too, words it by the value of the
// first field and by its SecureErrorLogMessage ("unsupported
// transfer-encoding" for two "chunked"). The rules that need the parsed
// head (BadHeaderLines, CheckVersion) come after the parse, on either
// engine. One pass finds the end, the bare LFs and the
// Transfer-Encoding fields.
//
// Empty lines (CRLF) before the request line are skipped, as fasthttp's
// parser skips them (RFC 9112 2.2: a server ignores at least one): read as
// a head, "\r\n\r\n" ended there, fasthttp refused to parse it, and the
// goroutine engine's pre-parser stopped following the connection, so that
// Go's chunk bounds no longer held for it (a 5 KiB chunk extension after
// two CRLFs was read and its body forwarded).
func CheckHead(b []byte) (end int, refuse string) {
	skip := leadingCRLFs(b)
	end, bare, te := scanHead(b[skip:])
	if end >= 0 {
		end += skip
	}
	switch {
	case end < 0:
	case bare:
		refuse = "a line ends in a bare LF"
	case te > 1:
		refuse = ReasonTooManyTE
	}
	return end, refuse
}

// leadingCRLFs is the length of the empty lines (CRLF) at the start of b.
func leadingCRLFs(b []byte) int {
	skip := 0
	for skip+1 < len(b) && b[skip] == '\r' && b[skip+1] == '\n' {
		skip += 2
	}
	return skip
}

// CheckAnswerHead is CheckHead for an upstream's answer head: a bare LF
// is refused before the parse (ErrAnswerBareLF), and so are what
// fasthttp's parser would pass on (badAnswerLines). Several
// Transfer-Encoding fields in an HTTP/1.1 answer are the parser's to
// judge; AnswerParseError words its refusal.
//
// A Transfer-Encoding field in an answer that is not HTTP/1.1 is refused
// too (ReasonOldAnswerTE): RFC 9112 6.1 has a recipient treat an HTTP/1.0
// message with one as faultily framed, even with a Content-Length, and
// fasthttp's parser ignored the field in every answer not HTTP/1.1, so
// the body was read by the Content-Length (5 bytes sent, 2 passed on) or
// to the close, a chunked body's framing passed on as its content.
// HAProxy 2.6 answers the "identity" of such an answer 502.
func CheckAnswerHead(b []byte) (end int, err error) {
	end, bare, te := scanHead(b)
	switch {
	case end < 0:
	case bare:
		err = ErrAnswerBareLF
	default:
		err = badAnswerLines(b[:end])
		// te > 0 is the cheap gate; the status line comes after any empty
		// lines (scanHead counted the first as a field).
		if skip := leadingCRLFs(b); err == nil && te > 0 && !bytes.HasPrefix(b[skip:], []byte("HTTP/1.1 ")) &&
			TransferEncodingFields(b[skip:end]) > 0 {
			err = &answerParseError{why: ReasonOldAnswerTE}
		}
	}
	return end, err
}

// ReasonOldAnswerTE is the refusal of an answer that is not HTTP/1.1 (an
// HTTP/1.0 one) with a Transfer-Encoding field (CheckAnswerHead).
const ReasonOldAnswerTE = "a Transfer-Encoding field in an answer that is not HTTP/1.1"

// badAnswerLines judges a whole answer head (CRLF lines) on what
// fasthttp's parser accepts and the engines wrote to the client as it
// came: a control byte in the status line (HAProxy 2.6 passes it on; Go's
// ReverseProxy writes a reason phrase of its own), a field name with a
// byte that is no token character ("X A: b", "X(A): b"; the request side
// refuses the same with 400). Each is a bad answer (502); HAProxy 2.6
// answers such a name 502 too. Go's transport refuses it (textproto's
// canonicalMIMEHeaderKey, "malformed MIME header line") but for a blank
// (go.dev/issue/34540), which the proxy refuses as well, as HAProxy does:
// fasthttp read "Content-Length : 4" as the Content-Length where Go reads
// another field. A folded line (obs-fold) is left to the parser, which
// unfolds it (RFC 9112 5.2), and a line without a colon to its refusal.
// A status line of another version ("HTTP/2.0 200 OK") is no refusal:
// the answer goes out under the proxy's own HTTP/1.1 (Exchange.finish),
// as HAProxy 2.6 and Go's ReverseProxy pass it.
func badAnswerLines(head []byte) error {
	for bytes.HasPrefix(head, crlf) {
		head = head[2:] // empty lines before the status line, as the parser skips them
	}
	i := bytes.IndexByte(head, '\n')
	if i < 1 {
		return nil // no status line: the parser's to refuse
	}
	line := head[:i-1] // without its CR (no bare LF: scanHead)
	head = head[i+1:]
	// The reason phrase is HTAB, SP, VCHAR and obs-text (RFC 9112 4):
	// fasthttp's parser took a NUL or another control byte in it, and a
	// bare CR, and the engines wrote them to the client (a NUL ends the
	// line for a C client; a bare CR, one lenient client's line end).
	for _, b := range line {
		if (b < ' ' && b != '\t') || b == 0x7f {
			return &answerParseError{why: "a control byte in the status line"}
		}
	}
	// One pass: a field line's name byte by byte up to its colon, then the
	// value skipped to the line's end (the head's lines end in CRLF:
	// scanHead found no bare LF).
	for len(head) > 0 {
		k := 0
		for k < len(head) && tchar[head[k]] {
			k++
		}
		nl := bytes.IndexByte(head[k:], '\n')
		if nl < 0 {
			return nil
		}
		if c := head[k]; c != ':' && nl > 1 { // nl 1: the line's CRLF
			// Not a token through the colon: a folded line or one
			// without a colon is the parser's; anything else is a name
			// with a byte no token has.
			if k > 0 || (c != ' ' && c != '\t') {
				if bytes.IndexByte(head[k:k+nl], ':') >= 0 {
					return &answerParseError{why: "a header name with a byte that is not a token character"}
				}
			}
		}
		head = head[k+nl+1:]
	}
	return nil
}

// scanHead is HeadEnd, whether a line of the head (through its end, or
// of what b holds of it) ends in a bare LF, and how many of its field
// lines are Transfer-Encoding fields (isTELine).
func scanHead(b []byte) (end int, bareLF bool, te int) {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1, bareLF, te
		}
		i += j
		if i == 0 || b[i-1] != '\r' {
			bareLF = true
		}
		i++
		if i < len(b) && b[i] == '\n' {
			return i + 1, true, te // the empty line is a bare LF
		}
		if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
			return i + 2, bareLF, te
		}
		if i+1 >= len(b) {
			return -1, bareLF, te
		}
		// One byte looked at per line; the name compared only for a 't'.
		if b[i]|0x20 == 't' && isTELine(b[i:]) {
			te++
		}
	}
}

// isTELine reports whether line (a field line, and what follows it) is a
// Transfer-Encoding field: the name, in any case, then the colon, as
// fasthttp's parser takes it (a blank before the colon is its "invalid
// header key", another refusal).
func isTELine(line []byte) bool {
	const name = "transfer-encoding:"
	return len(line) >= len(name) && bytes.EqualFold(line[:len(name)], []byte(name))
}

// cutLine splits a message head after its first line (through its '\n',
// or all of it when there is none): the field scans below walk a head
// line by line.
func cutLine(head []byte) (line, rest []byte) {
	if i := bytes.IndexByte(head, '\n'); i >= 0 {
		return head[:i+1], head[i+1:]
	}
	return head, nil
}

// TransferEncodingFields counts the Transfer-Encoding fields of a message
// head (its first line, which is no field, is skipped).
func TransferEncodingFields(head []byte) int {
	n := 0
	for first := true; len(head) > 0; first = false {
		var line []byte
		line, head = cutLine(head)
		if !first && isTELine(line) {
			n++
		}
	}
	return n
}

// BothFramings reports whether a message head (its first line, which is
// no field, skipped) has a Transfer-Encoding field and a Content-Length
// field: read by its Transfer-Encoding (RFC 9112 6.3), a message that
// "ought to be handled as an error", whose connection is not used again.
func BothFramings(head []byte) bool {
	te, cl := false, false
	for first := true; len(head) > 0 && (!te || !cl); first = false {
		var line []byte
		line, head = cutLine(head)
		if first || len(line) == 0 {
			continue
		}
		switch line[0] | 0x20 { // one byte looked at per line
		case 't':
			te = te || isTELine(line)
		case 'c':
			cl = cl || isCLLine(line)
		}
	}
	return te && cl
}

// isCLLine is isTELine for Content-Length.
func isCLLine(line []byte) bool {
	const name = "content-length:"
	return len(line) >= len(name) && bytes.EqualFold(line[:len(name)], []byte(name))
}

// MalformedAnswer is the answer to a head the proxy does not read, byte for
// byte on either engine (OwnAnswer): 400, and the close (what follows the
// head cannot be framed).
func MalformedAnswer(why string) []byte {
	return OwnAnswer(fasthttp.StatusBadRequest, MalformedBody(why), true)
}

// HeadParser feeds a head held in memory to fasthttp's header parsers,
// which read from a bufio.Reader: one reader over a slice, reset per head.
// The loops parse every head they read with one; the goroutine engine's
// pre-parser the few whose framing it must know before fasthttp has read
// them (bytes follow the head in the same read).
type HeadParser struct {
	sr sliceReader
	br *bufio.Reader
}

// Init sizes the reader for heads up to n bytes.
func (ps *HeadParser) Init(n int) { ps.br = bufio.NewReaderSize(&ps.sr, n) }

// Reader is a reader over b, and nothing after it.
func (ps *HeadParser) Reader(b []byte) *bufio.Reader {
	ps.sr.b = b
	ps.br.Reset(&ps.sr)
	return ps.br
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, errEndOfHead
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

var errEndOfHead = errors.New("end of head")

var crlf = []byte("\r\n")

// IdentityAnswer is the HTTP/1.1 answer head (status line through the
// empty line) without its Transfer-Encoding and Content-Length fields when
// its only Transfer-Encoding field is "identity" (in any case, blanks
// around it): RFC 9112 6.3 reads a response whose Transfer-Encoding does
// not end in chunked to the close (item 4), the Transfer-Encoding
// overriding any Content-Length (item 3), and fasthttp's parser, which
// refuses every coding but chunked, reads the rest of such a head as an
// answer without framing, hence to the close. Other heads come back as
// they are (ok false), left to the parser (another coding stays a bad
// answer: its body would reach the client still coded, the field gone).
func IdentityAnswer(head []byte) (out []byte, ok bool) {
	if !bytes.HasPrefix(head, []byte("HTTP/1.1 ")) || TransferEncodingFields(head) != 1 {
		return head, false
	}
	identity := false
	rest := head
	for first := true; len(rest) > 0; first = false {
		var line []byte
		line, rest = cutLine(rest)
		if !first && isTELine(line) {
			identity = bytes.EqualFold(bytes.TrimSpace(line[len("transfer-encoding:"):]), []byte("identity"))
		}
	}
	if !identity {
		return head, false
	}
	out = make([]byte, 0, len(head))
	for first := true; len(head) > 0; first = false {
		var line []byte
		line, head = cutLine(head)
		if !first && (isTELine(line) || isCLLine(line)) {
			continue
		}
		out = append(out, line...)
	}
	return out, true
}

// DropTrailerField deletes an upstream answer's Trailer field from h, just
// parsed: the proxy does not pass an answer's trailer section on (the
// chunked readers discard it), so it does not announce one either (RFC
// 9110 6.6.2 makes the field advisory), and an answer of known length
// that names one keeps its Content-Length (fasthttp writes an answer that
// announces trailers chunked).
func DropTrailerField(h *fasthttp.ResponseHeader) {
	if len(h.PeekTrailerKeys()) > 0 || h.Peek(fasthttp.HeaderTrailer) != nil {
		h.Del(fasthttp.HeaderTrailer)
	}
}
