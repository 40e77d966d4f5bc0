package forward

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestWriteRequestTrace: a request without content is written with no
// Content-Length when the client sent none (fasthttp's writer added
// "Content-Length: 0" to all but a GET or HEAD), every time it is written
// (a retry), but a POST, PUT or PATCH, framed "Content-Length: 0" as Go's
// Transport frames them; a client's own "Content-Length: 0" goes as sent,
// but on a TRACE (never content); a request with content as fasthttp
// writes it.
func TestWriteRequestTrace(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"TRACE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n", "TRACE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n"},
		{"TRACE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nX-A: 1\r\n\r\n", "TRACE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n"},
		{"TRACE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 2\r\n\r\nhi", "TRACE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 2\r\n\r\nhi"},
		{"OPTIONS /a HTTP/1.1\r\nHost: b\r\n\r\n", "OPTIONS /a HTTP/1.1\r\nHost: b\r\n\r\n"},
		{"OPTIONS * HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n", "OPTIONS * HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n"},
		{"DELETE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n", "DELETE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n"},
		{"PROPFIND /a HTTP/1.1\r\nHost: b\r\n\r\n", "PROPFIND /a HTTP/1.1\r\nHost: b\r\n\r\n"},
		{"DELETE /a HTTP/1.1\r\nHost: b\r\ncontent-length: 0\r\nX-A: 1\r\n\r\n", "DELETE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nX-A: 1\r\n\r\n"},
		{"OPTIONS /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n", "OPTIONS /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
		{"DELETE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 3\r\n\r\nabc", "DELETE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 3\r\n\r\nabc"},
		{"POST /a HTTP/1.1\r\nHost: b\r\n\r\n", "POST /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
		{"PUT /a HTTP/1.1\r\nHost: b\r\n\r\n", "PUT /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
		{"PATCH /a HTTP/1.1\r\nHost: b\r\n\r\n", "PATCH /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
		{"GET /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n", "GET /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
		{"GET /a HTTP/1.1\r\nHost: b\r\n\r\n", "GET /a HTTP/1.1\r\nHost: b\r\n\r\n"},
	} {
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(bytes.NewReader([]byte(c.in)))); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		req.Header.SetNoDefaultContentType(true) // as Exchange.Begin sets it
		for try := 1; try <= 2; try++ {
			var out bytes.Buffer
			w := bufio.NewWriter(&out)
			if err := (RequestWriter{R: &req}).Write(w); err != nil {
				t.Fatalf("%q: %v", c.in, err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			if out.String() != c.want {
				t.Errorf("write %d of %q: %q, want %q", try, c.in, out.String(), c.want)
			}
		}
	}
}
