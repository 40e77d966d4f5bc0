package forward

import "testing"

// TestCheckHeadLeadingEmptyLines: empty lines before a request line are
// skipped (as fasthttp's parser skips them), so the head CheckHead finds
// is the request's; before, "\r\n\r\n" was a head of its own (end 4), which
// fasthttp refused to parse, and the goroutine engine's pre-parser stopped
// following the connection.
func TestCheckHeadLeadingEmptyLines(t *testing.T) {
	const req = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
	for _, c := range []struct {
		in     string
		end    int
		refuse string
	}{
		{req + "5\r\nhello", len(req), ""},
		{"\r\n" + req, 2 + len(req), ""},
		{"\r\n\r\n" + req + "0\r\n\r\n", 4 + len(req), ""},
		{"\r\n\r\n\r\n", -1, ""},
		{"\r\n\r\n\r", -1, ""},
		{"\r\n\r\nGET / HTTP/1.1\r\nHost: a\n\r\n", 4 + len("GET / HTTP/1.1\r\nHost: a\n\r\n"), "a line ends in a bare LF"},
		{"\n\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 2, "a line ends in a bare LF"},
		{"\r\n\r\nPOST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 4 + len("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), ReasonTooManyTE},
	} {
		end, refuse := CheckHead([]byte(c.in))
		if end != c.end || refuse != c.refuse {
			t.Errorf("CheckHead(%q) = %d, %q; want %d, %q", c.in, end, refuse, c.end, c.refuse)
		}
	}
}
