package forward

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestWriteRequestTrace: a TRACE without content is written with no
// Content-Length (fasthttp's writer added "Content-Length: 0"), whether the
// client sent one or not, every time it is written (a retry); any other
// request, and a TRACE with content, as fasthttp writes it.
func TestWriteRequestTrace(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"TRACE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n", "TRACE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n"},
		{"TRACE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\nX-A: 1\r\n\r\n", "TRACE /a HTTP/1.1\r\nHost: b\r\nX-A: 1\r\n\r\n"},
		{"TRACE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 2\r\n\r\nhi", "TRACE /a HTTP/1.1\r\nHost: b\r\nContent-Length: 2\r\n\r\nhi"},
		{"OPTIONS /a HTTP/1.1\r\nHost: b\r\n\r\n", "OPTIONS /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
		{"POST /a HTTP/1.1\r\nHost: b\r\n\r\n", "POST /a HTTP/1.1\r\nHost: b\r\nContent-Length: 0\r\n\r\n"},
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
