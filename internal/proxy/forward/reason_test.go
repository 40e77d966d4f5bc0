package forward

import (
	"bufio"
	"errors"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// Reason words the errors fasthttp's parsers return for real bytes: the
// messages as fasthttp makes them (quoting the refused value and, without
// SecureErrorLogMessage, up to 400 bytes of the head), with the bytes
// chosen to hold other phrases of the list, which must not be picked.
func TestReason(t *testing.T) {
	const decoy = "duplicate content-length header"
	cases := []struct {
		name, raw string
		answer    bool // a response head, else a request (head and body)
		want      string
	}{
		{"request: value with a control byte and a decoy", "GET /a HTTP/1.1\r\nHost: b\r\nX-A: " + decoy + "\x01\r\n\r\n", false, "invalid header value"},
		{"request: CR in a value", "GET /a HTTP/1.1\r\nHost: b\r\nX-A: a\rb\r\n\r\n", false, "invalid header value"},
		{"request: two Content-Lengths", "POST /a HTTP/1.1\r\nHost: b\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", false, decoy},
		{"request: Content-Length +1", "POST /a HTTP/1.1\r\nHost: b\r\nContent-Length: +1\r\n\r\na", false, "cannot parse content-length"},
		{"request: version with markup", "GET /a HTTP/<b>\r\nHost: b\r\n\r\n", false, "unsupported http version"},
		{"request: no Host", "GET /a HTTP/1.1\r\nX-A: " + decoy + "\r\n\r\n", false, "missing required host header"},
		{"request: a line without a colon", "GET /a HTTP/1.1\r\nHost: b\r\nbad " + decoy + "\r\n\r\n", false, "a header line without a colon"},
		{"request: NUL in a name", "GET /a HTTP/1.1\r\nHost: b\r\nX\x00A: 1\r\n\r\n", false, "malformed header line"},
		{"request: two Hosts", "GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", false, "too many host headers"},
		{"request: gzip, chunked", "POST /a HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false, "unsupported transfer-encoding"},
		{"request: no method", "GET\r\nHost: b\r\n\r\n", false, "cannot find http request method"},
		{"request: no blank before the version", "GET /a\r\nHost: b\r\n\r\n", false, "cannot find whitespace in the first line of request"},
		{"request: chunk size with markup", "POST /a HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\n\r\n5<b>\r\nhello\r\n0\r\n\r\n", false, "invalid character after chunk size"},
		{"request: chunk size 2^68", "POST /a HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff1\r\nhello\r\n0\r\n\r\n", false, "too large hex number"},
		{"request: chunk data too long", "POST /a HTTP/1.1\r\nHost: b\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", false, "cannot find crlf at the end of chunk"},
		{"answer: two Content-Lengths", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 4\r\n\r\n", true, decoy},
		{"answer: status abc", "HTTP/1.1 abc OK\r\nX-A: " + decoy + "\r\n\r\n", true, "invalid response status code"},
		{"answer: no blank in the status line", "HTTP/1.1<b>200</b>\r\n\r\n", true, "cannot find whitespace in the status line"},
		{"answer: NUL in a value", "HTTP/1.1 200 OK\r\nX-A: a\x00" + decoy + "\r\n\r\n", true, "invalid header value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReader(strings.NewReader(tc.raw))
			var err error
			if tc.answer {
				var h fasthttp.ResponseHeader
				err = h.Read(br)
			} else {
				var r fasthttp.Request
				err = r.Read(br)
				if err == nil {
					err = r.URI().Parse(nil, nil) // never: the table's requests are all refused
				}
			}
			if err == nil {
				t.Fatalf("fasthttp accepted %q", tc.raw)
			}
			if got := Reason(err, "fallback"); got != tc.want {
				t.Errorf("Reason(%q) = %q, want %q", err, got, tc.want)
			}
		})
	}
	if got := Reason(errors.New("read: connection reset by peer"), "fallback"); got != "fallback" {
		t.Errorf("an error no parser made: %q, want the fallback", got)
	}
	if got := Reason(nil, "fallback"); got != "fallback" {
		t.Errorf("nil: %q, want the fallback", got)
	}
}

func TestLogExcerpt(t *testing.T) {
	long := errors.New("error when reading request headers: invalid header value \"" + strings.Repeat("v", 300) + "\x01\n\": buffer size=400")
	got := LogExcerpt(long)
	if !strings.HasPrefix(got, "invalid header value (\"error when reading request headers: invalid header value \\\"vvv") ||
		!strings.HasSuffix(got, "...\")") || strings.ContainsAny(got, "\x01\n") || len(got) > 200 {
		t.Errorf("LogExcerpt = %q: want the reason, then fasthttp's message bounded to 160 bytes and quoted", got)
	}
}
