package forward

import (
	"bytes"
	"strings"
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

// refAnswerLines is badAnswerLines' specification on a whole head whose
// lines end in CRLF, line by line: empty lines before the status line
// skipped; any control byte but HTAB in the status line refused; then each field line that does not
// start with a blank (obs-fold) and has a colon is refused when its name,
// up to the first colon, has a byte that is no token character.
func refAnswerLines(head []byte) string {
	const why = "the upstream's answer is malformed: "
	lines := strings.Split(string(head), "\r\n")
	for len(lines) > 0 && lines[0] == "" {
		lines = lines[1:]
	}
	if len(lines) == 0 {
		return ""
	}
	status := lines[0]
	for i := 0; i < len(status); i++ {
		if c := status[i]; c < ' ' && c != '\t' || c == 0x7f {
			return why + "a control byte in the status line"
		}
	}
	for _, l := range lines[1:] {
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			continue
		}
		name, _, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		for i := 0; i < len(name); i++ {
			c := name[i]
			token := strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) || '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z'
			if !token {
				return why + "a header name with a byte that is not a token character"
			}
		}
	}
	// A Transfer-Encoding field in an answer whose status line is not
	// HTTP/1.1's.
	for _, l := range lines[1:] {
		if name, _, ok := strings.Cut(l, ":"); ok && strings.EqualFold(name, "Transfer-Encoding") && !strings.HasPrefix(status, "HTTP/1.1 ") {
			return why + ReasonOldAnswerTE
		}
	}
	return ""
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
		"HTTP/1.1 200 OK\r\nX A: b\r\nX\rY: c\r\n\r\n",
		"HTTP/2.0 200 O\x00K\r\n\r\n",
		"\r\nHTTP/1.1 200 OK\r\nX-A: a\r\n b:c\r\nX(: d\r\n\r\n",
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
		// Empty lines before the request line are skipped first.
		skip := leadingCRLFs(b)
		end, refuse := CheckHead(b)
		wantEnd := HeadEnd(b[skip:])
		if wantEnd >= 0 {
			wantEnd += skip
		}
		rbare := end >= 0 && BareLF(b[skip:end])
		rte := end >= 0 && !rbare && TransferEncodingFields(b[skip:end]) > 1
		if end != wantEnd || (refuse != "") != (rbare || rte) || rte && refuse != ReasonTooManyTE {
			t.Fatalf("CheckHead(%q) = %d, %q; want %d, refused %t", b, end, refuse, wantEnd, rbare || rte)
		}
		end = HeadEnd(b)
		bare := end >= 0 && BareLF(b[:end])
		// CheckAnswerHead: the same end, refused for a bare LF, else as
		// refAnswerLines says.
		aend, aerr := CheckAnswerHead(b)
		want := ""
		if bare {
			want = ErrAnswerBareLF.Error()
		} else if end >= 0 {
			want = refAnswerLines(b[:end])
		}
		got := ""
		if aerr != nil {
			got = aerr.Error()
		}
		if aend != end || got != want || aerr != nil && !BadAnswer(aerr) {
			t.Fatalf("CheckAnswerHead(%q) = %d, %q; want %d, %q", b, aend, got, end, want)
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
