package forward

import (
	"bytes"
	"testing"
)

// refHeadEnd is HeadEnd's specification: lines end in LF, optionally
// preceded by one CR; the head ends after the first empty line that
// follows at least one line (which may itself be empty); -1 while that
// empty line is not all there.
func refHeadEnd(b []byte) int {
	lines := 0
	for start := 0; ; {
		i := bytes.IndexByte(b[start:], '\n')
		if i < 0 {
			return -1
		}
		line := bytes.TrimSuffix(b[start:start+i], []byte("\r"))
		start += i + 1
		if len(line) == 0 && lines > 0 {
			return start
		}
		lines++
	}
}

// HeadEnd against its specification, and CheckHead against HeadEnd and
// BareLF.
func FuzzHeadEnd(f *testing.F) {
	for _, s := range []string{
		"",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r\nbody",
		"GET / HTTP/1.1\nHost: a\n\n",
		"GET / HTTP/1.1\r\nHost: a\r\n\r",
		"GET / HTTP/1.1\r\nHost: a\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
		"\r\n\r\n",
		"\n\n",
		"\r\n",
		"A\n\r\r\n\n",
		"A\r\r\n\r\n",
		"A\n\rB\n\n",
		"A\n\r",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"Transfer-Encoding: a\r\nTransfer-Encoding: b\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := HeadEnd(b), refHeadEnd(b); got != want {
			t.Fatalf("HeadEnd(%q) = %d, want %d", b, got, want)
		}
		// CheckHead: the same end, refused exactly when a line of that
		// head ends in a bare LF, or it has more than one
		// Transfer-Encoding field (and then in those words).
		end, refuse := CheckHead(b)
		bare := end >= 0 && BareLF(b[:end])
		te := end >= 0 && !bare && TransferEncodingFields(b[:end]) > 1
		if end != HeadEnd(b) || (refuse != "") != (bare || te) || te && refuse != ReasonTooManyTE {
			t.Fatalf("CheckHead(%q) = %d, %q; want %d, refused %t", b, end, refuse, HeadEnd(b), bare || te)
		}
		// CheckAnswerHead: the same end, refused for a bare LF only.
		aend, aerr := CheckAnswerHead(b)
		if aend != end || (aerr != nil) != bare || aerr != nil && aerr != ErrAnswerBareLF {
			t.Fatalf("CheckAnswerHead(%q) = %d, %v; want %d, refused %t", b, aend, aerr, end, bare)
		}
	})
}

// BenchmarkCheckHead: the pre-parse verdict on a typical proxied request head (the loop runs it
// on every head it reads): one pass finds the end, the bare LFs and the Transfer-Encoding fields.
func BenchmarkCheckHead(b *testing.B) {
	head := []byte("POST http://payment.shop:8080/charge?card=4242 HTTP/1.1\r\nHost: payment.shop:8080\r\n" +
		"User-Agent: Go-http-client/1.1\r\nContent-Length: 17\r\nContent-Type: application/json\r\n" +
		"Traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nX-Request-Id: 84961386-6d84-929d-98bd-c5aee93b5c88\r\n" +
		"Idempotency-Key: key-17\r\nRetrycap-Budget: 4\r\nAccept-Encoding: gzip\r\n\r\n{\"amount\":\"1.00\"}")
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if end, refuse := CheckHead(head); end < 0 || refuse != "" {
			b.Fatal(end, refuse)
		}
	}
}
