package forward

import "bytes"

// What a request head must be for the proxy to read it at all (HAProxy
// answers 400 to the same): each header line a token name, then ':' with
// no whitespace between (RFC 9112 5.1), no obs-fold continuation lines,
// and CRLF line ends (a bare LF is refused here: fasthttp's parser never
// finds the end of a head ended by bare LFs, and would wait).

// tchar is RFC 9110 5.6.2's token characters.
var tchar = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = true
		t[c-'a'+'A'] = true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// BadHeaderLines reports the first problem in a raw header block (the
// lines after the request line, through the empty line or to its end):
// "" when there is none. A request's block only: a Transfer-Encoding of
// "identity" without a Content-Length is one (ReasonTransferEncoding).
func BadHeaderLines(raw []byte) string {
	var identity, length bool
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		line := raw
		if i >= 0 {
			line, raw = raw[:i], raw[i+1:]
			if len(line) == 0 || line[len(line)-1] != '\r' {
				return "a line ends in a bare LF"
			}
			line = line[:len(line)-1]
		} else {
			raw = nil
		}
		if len(line) == 0 {
			break
		}
		c := bytes.IndexByte(line, ':')
		if msg := badHeaderLine(line, c); msg != "" {
			return msg
		}
		// A name of a framing field's length is compared, no other.
		switch c {
		case len("Transfer-Encoding"):
			identity = identity || bytes.EqualFold(line[:c], []byte("Transfer-Encoding")) && bytes.EqualFold(trimSpace(line[c+1:]), []byte("identity"))
		case len("Content-Length"):
			length = length || bytes.EqualFold(line[:c], []byte("Content-Length"))
		}
	}
	if identity && !length {
		return ReasonTransferEncoding
	}
	return ""
}

// BadTrailerLines reports the first problem in a chunked request body's
// trailer section (end: the last chunk's line, then the field lines
// through the empty line; CRLF line ends, checked before) by the head's rules for
// a field line: a folded line (obs-fold), a line without a name, a name
// with a byte that is no token character ("X T: v", "X-T : v"), a framing
// field's name with an underscore. "" when there is none; else the
// problem, said to be in the trailer section. The proxy drops trailers
// (RFC 9110 6.5.1 lets a recipient), so nothing of them reaches the
// upstream; but a message whose field lines the proxy refuses in its
// head is as malformed when they come after its body: HAProxy 2.6
// answers such a name 400 there too, and Go's server (textproto) refuses
// it. An obs-fold passes HAProxy (unfolded) and Go, nginx 1.22 drops the
// whole section; the proxy refuses it, as in the head (RFC 9112 5.2 lets
// a server answer 400). Values are fasthttp's parser's to judge (a bare
// CR, a NUL: "invalid trailer value"), and so are the names it forbids in
// trailers (Content-Length, Transfer-Encoding, Host...: "forbidden
// trailer key").
func BadTrailerLines(end []byte) string {
	_, raw := cutLine(end) // the last chunk's line
	for first := true; len(raw) > 0; first = false {
		var line []byte
		line, raw = cutLine(raw)
		line = bytes.TrimSuffix(line, crlf)
		if len(line) == 0 {
			break
		}
		c := bytes.IndexByte(line, ':')
		blank := line[0] == ' ' || line[0] == '\t'
		if first && blank || c < 0 && !blank {
			// fasthttp's parser's, in its words, as in a head: "a header
			// line starts with a blank", "a header line without a colon".
			return ""
		}
		if msg := badHeaderLine(line, c); msg != "" {
			return msg + " in the trailer section"
		}
	}
	return ""
}

// ReasonTransferEncoding is the refusal of a request whose
// Transfer-Encoding does not end in chunked, in fasthttp's parser's words
// for the codings it does not know. BadHeaderLines gives it for
// "identity" without a Content-Length, which fasthttp's parser skips: the
// request had no body, and the bytes after its head were served as the
// next request. RFC 9112 6.1: a request whose Transfer-Encoding does not
// end in chunked has no reliable length, and the server MUST answer 400
// and close; HAProxy 2.6 answers 400, nginx 1.22 501. A front end that
// reads such a body otherwise (to its close) and the proxy framed the
// connection differently: the shape of a smuggled request. "identity" with
// a Content-Length is framed by the length, and the connection closes
// after its answer (nothing after it is read).
const ReasonTransferEncoding = "unsupported transfer-encoding"

// badHeaderLine judges one field line whose first ':' is at c (-1: none).
func badHeaderLine(line []byte, c int) string {
	if c <= 0 {
		if line[0] == ' ' || line[0] == '\t' {
			return "a folded header line (obs-fold)"
		}
		return "a header line without a name"
	}
	for _, b := range line[:c] {
		if !tchar[b] {
			return "a header name with a byte that is not a token character"
		}
	}
	if framingLookalike(line[:c]) {
		return ReasonUnderscoreFraming
	}
	return ""
}

// ReasonUnderscoreFraming is the refusal of a field named as
// Transfer-Encoding or Content-Length with an underscore for a dash
// ("Transfer_Encoding"). '_' is a token character, so the name is another
// field to the proxy (and to fasthttp, Go and HAProxy 2.6, which pass it
// on), but a server that maps names to CGI-style variables
// (HTTP_TRANSFER_ENCODING) reads the two spellings as one: it could frame
// the body by a field the proxy did not, the shape of a smuggled request.
// nginx drops such fields by default (underscores_in_headers off); the
// proxy refuses the request, which says why, rather than drop silently.
const ReasonUnderscoreFraming = "an underscore in a Transfer-Encoding or Content-Length field name"

// framingLookalike reports whether name is "transfer-encoding" or
// "content-length", in any case, with at least one '-' written '_'.
func framingLookalike(name []byte) bool {
	if len(name) != len("transfer-encoding") && len(name) != len("content-length") || bytes.IndexByte(name, '_') < 0 {
		return false
	}
	for _, want := range [...]string{"transfer-encoding", "content-length"} {
		if len(name) != len(want) {
			continue
		}
		same := true
		for i := range len(name) {
			c := name[i] | 0x20 // lower case for letters; '_' (0x5f) becomes 0x7f
			if c == 0x7f {
				c = '-'
			}
			if c != want[i] {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// BareLF reports whether a head (request line, headers, empty line) has a
// line that ends in LF alone.
func BareLF(head []byte) bool {
	for i, b := range head {
		if b == '\n' && (i == 0 || head[i-1] != '\r') {
			return true
		}
	}
	return false
}

// Version is what the proxy does with a request's HTTP version: HTTP/1.0
// and HTTP/1.1 go as they are; a later HTTP/1.x is read as HTTP/1.1, the
// highest minor version the proxy speaks (RFC 9110 2.5, as HAProxy does);
// anything else (HTTP/0.9, HTTP/2.0 in an HTTP/1 request line, junk) is
// 505.
type Version uint8

const (
	VersionOK Version = iota
	VersionAs11
	VersionUnsupported
)

// CheckVersion judges a request line's protocol.
func CheckVersion(p []byte) Version {
	if len(p) == 8 && bytes.HasPrefix(p, []byte("HTTP/1.")) {
		switch m := p[7]; {
		case m == '0' || m == '1':
			return VersionOK
		case m >= '2' && m <= '9':
			return VersionAs11
		}
	}
	return VersionUnsupported
}

// ReasonUserinfo is the refusal of a request whose target or Host carries
// userinfo ("user@"): RFC 9110 4.2.4 deprecates it in http URIs and has a
// recipient treat it as an error (it obscures the authority). Passed on,
// fasthttp's client turned it into an Authorization header the client
// never sent, and "http://backend@other/" went to other.
const ReasonUserinfo = "userinfo in the request target or Host"

// ReasonScheme is the refusal of an absolute-form target whose scheme is
// not http ("https://backend/a"): the proxy speaks plain HTTP to its
// upstreams and never downgrades a request its client meant for TLS
// (a client that wants TLS through the proxy uses CONNECT). Before, the
// attempt failed inside fasthttp's client as a reset: retried up to the
// attempt cap, a 503 in fasthttp's words, and counted by the upstream's
// circuit breaker as its failures, so that a client could open the
// breaker of an upstream it never reached.
const ReasonScheme = "a request target whose scheme is not http"

// ReasonFragment is the refusal of a request target holding a '#': the
// request-target grammar has no fragment (RFC 9112 3.2, 3.2.1, 3.2.2:
// origin-form and absolute-URI end at the query), and RFC 9112 3.2 has a
// recipient of an invalid request-line answer 400. Passed on, fasthttp's
// URI dropped the '#' and all after it, silently: "DELETE /users/1#/../2"
// ran as "DELETE /users/1". HAProxy (2.6.15, 2.8.2 on: CVE-2023-45539)
// refuses it alike; nginx passes it on as it came.
const ReasonFragment = "a fragment (#) in the request target"

// CheckTarget judges a parsed request head's target (absolute or
// authority form) and Host field: "" to forward it, else the reason of a
// 400 (ReasonUserinfo, ReasonScheme, ReasonFragment). Origin-form targets
// ("/a@b") and a path's or query's '@' are no userinfo.
func CheckTarget(host, target []byte) string {
	if bytes.IndexByte(host, '@') >= 0 {
		return ReasonUserinfo
	}
	if bytes.IndexByte(target, '#') >= 0 {
		return ReasonFragment
	}
	if len(target) == 0 || target[0] == '/' || target[0] == '*' {
		return ""
	}
	if i := bytes.Index(target, []byte("://")); i >= 0 {
		if !bytes.EqualFold(target[:i], []byte("http")) {
			return ReasonScheme
		}
		target = target[i+3:]
	}
	if i := bytes.IndexAny(target, "/?#"); i >= 0 {
		target = target[:i]
	}
	if bytes.IndexByte(target, '@') >= 0 {
		return ReasonUserinfo
	}
	return ""
}
