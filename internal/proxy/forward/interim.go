package forward

import (
	"bytes"

	"github.com/valyala/fasthttp"
)

// MaxInterimRelayed bounds the bytes of the interim (1xx) answers passed on
// to the client for one call, as the answer head is bounded
// (MaxResponseHead): those beyond it are skipped, as every 1xx was before.
const MaxInterimRelayed = MaxResponseHead

// relayedInterim reports whether an interim answer of status st is passed
// on to the client: every 1xx but 100 (the proxy answers a client's
// Expect: 100-continue itself and sends the whole body; the upstream's 100
// says nothing more) and 101 (final: an upgrade is tunnelled before
// forward, an unsolicited one is a bad answer).
func relayedInterim(st int) bool {
	return st > fasthttp.StatusContinue && st < 200 && st != fasthttp.StatusSwitchingProtocols
}

// Interim takes an interim answer of status st whose head is head (at
// least its whole head, as CheckAnswerHead passed it) read during the
// attempt under way, and returns the bytes to write to the client now, or
// nil when it is skipped (not passed on): --pass-interim-answers off
// (the default: Python's http.client takes a 103 for the final answer,
// and requests then hangs on the connection), a 100, a client that is not
// HTTP/1.1 (RFC 9110 15.2: no 1xx to an HTTP/1.0 client), a head that
// would take the call's interim bytes past MaxInterimRelayed, a head with
// a folded line. RFC 9110 15.2 asks a proxy to forward 1xx answers;
// HAProxy does, and so does Envoy's router, which then retries the
// attempt no more (its answer has begun): a failure of this attempt
// after a 1xx went out is not retried (AfterAttempt), and the client gets
// the upstream's final answer or the proxy's 502/504. The bytes are the
// exchange's scratch buffer, valid until the next call.
func (x *Exchange) Interim(st int, head []byte) []byte {
	if !x.f.Cfg.PassInterim || !relayedInterim(st) || !x.req.Header.IsHTTP11() {
		return nil
	}
	if end := HeadEnd(head); end >= 0 {
		head = head[:end]
	}
	if x.interimBytes+len(head) > MaxInterimRelayed {
		return nil
	}
	b, ok := AppendInterim(x.sc.interim[:0], head, x.sc)
	x.sc.interim = b
	if !ok {
		return nil
	}
	x.interimBytes += len(head)
	x.interimSent = true
	return b
}

// AppendInterim appends to dst the interim answer whose whole head is head
// as the proxy passes it on: its own HTTP/1.1 status line with the
// upstream's status and reason phrase, then the upstream's fields in their
// order, less those of its connection (the hop-by-hop fields, those its
// Connection field names, Upgrade) and of a body (Content-Length,
// Transfer-Encoding: an interim answer has none). ok=false for a head it
// does not pass on: a folded field line (obs-fold, which only the parser
// unfolds) or a status line that is not "HTTP/1.x NNN".
func AppendInterim(dst, head []byte, sc *Scratch) (out []byte, ok bool) {
	for bytes.HasPrefix(head, crlf) {
		head = head[2:]
	}
	line, rest := cutLine(head)
	line = bytes.TrimSuffix(line, crlf)
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return dst, false
	}
	dst = append(dst, "HTTP/1.1 "...)
	dst = append(dst, line[9:]...) // the status and the reason phrase (badAnswerLines: no control byte)
	dst = append(dst, crlf...)
	sc.conn = sc.conn[:0]
	for r := rest; len(r) > 0; {
		var l []byte
		l, r = cutLine(r)
		l = bytes.TrimSuffix(l, crlf)
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
			return dst, false
		}
		if k, v, found := bytes.Cut(l, []byte(":")); found && bytes.EqualFold(k, []byte(hConnection)) {
			sc.conn = append(append(sc.conn, v...), ',')
		}
	}
	for len(rest) > 0 {
		var l []byte
		l, rest = cutLine(rest)
		l = bytes.TrimSuffix(l, crlf)
		k, _, found := bytes.Cut(l, []byte(":"))
		if !found || isHop(k) || isNominated(k, sc) || bytes.EqualFold(k, []byte("Upgrade")) ||
			bytes.EqualFold(k, []byte(fasthttp.HeaderContentLength)) || bytes.EqualFold(k, []byte(fasthttp.HeaderTransferEncoding)) {
			continue
		}
		dst = append(dst, l...)
		dst = append(dst, crlf...)
	}
	return append(dst, crlf...), true
}
