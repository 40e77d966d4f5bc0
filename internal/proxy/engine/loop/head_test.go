package loop

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// appendAnswer against fasthttp's own Response.Write: the same bytes, less
// the Date line fasthttp adds of its own, with the upstream's Date fields
// where they came (fasthttp without its server's NoDefaultDate drops them;
// here they are written as Xdat and renamed).
func TestAppendAnswerMatchesFasthttp(t *testing.T) {
	answers := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Mon, 30 Nov 2026 05:00:00 GMT\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 202 Accepted\r\nX-B: 1\r\nSet-Cookie: a=1\r\nx-lower: v\r\nSet-Cookie: b=2\r\nDate: d1\r\nX-C: 2\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nX-Kind: 204\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 10\r\n\r\n",
		"HTTP/1.1 503 Busy Now\r\nRetry-After: 1\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\ndown",
		"HTTP/1.1 299 \r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nDate: a\r\nDate: b\r\n\r\nabc",
	}
	for _, raw := range answers {
		for _, closeIt := range []bool{false, true} {
			for _, head := range []bool{false, true} {
				got := render(t, raw, closeIt, head, func(r *fasthttp.Response) []byte { return appendAnswer(nil, r) })
				want := render(t, strings.ReplaceAll(raw, "Date:", "Xdat:"), closeIt, head, func(r *fasthttp.Response) []byte {
					var b bytes.Buffer
					w := bufio.NewWriter(&b)
					if err := r.Write(w); err != nil {
						t.Fatal(err)
					}
					_ = w.Flush()
					return dropDefaultDate(b.Bytes())
				})
				want = bytes.ReplaceAll(want, []byte("Xdat: "), []byte("Date: "))
				if !bytes.Equal(got, want) {
					t.Errorf("%q (close %v, HEAD %v):\ngot  %q\nwant %q", raw, closeIt, head, got, want)
				}
			}
		}
	}
}

// render parses raw as the loop does, marks it as the exchange and the
// answer do, and serialises it with write.
func render(t *testing.T, raw string, closeIt, head bool, write func(*fasthttp.Response) []byte) []byte {
	t.Helper()
	var r fasthttp.Response
	r.SkipBody = head
	if err := r.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	r.Header.SetNoDefaultContentType(true)
	r.Header.ResetConnectionClose()
	if closeIt {
		r.SetConnectionClose()
	}
	return write(&r)
}

// dropDefaultDate removes the Date line fasthttp writes after the status
// line (and Server).
func dropDefaultDate(b []byte) []byte {
	i := bytes.Index(b, []byte("\r\n")) + 2
	if bytes.HasPrefix(b[i:], []byte("Server: ")) {
		i += bytes.Index(b[i:], []byte("\r\n")) + 2
	}
	if !bytes.HasPrefix(b[i:], []byte("Date: ")) {
		return b
	}
	j := i + bytes.Index(b[i:], []byte("\r\n")) + 2
	return append(append([]byte(nil), b[:i]...), b[j:]...)
}
