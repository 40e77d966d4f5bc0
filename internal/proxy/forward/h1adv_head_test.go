package forward

import "testing"

// The checks the h1adv round added to every request and answer head:
// CheckAnswerHead's field-name and version pass and CheckTarget, on heads
// of the size BenchmarkForward's carry.
func BenchmarkCheckAnswerHead(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 03 Dec 2026 11:00:00 GMT\r\nX-Request-Id: 0123456789abcdef\r\nContent-Length: 128\r\n\r\n")
	b.ReportAllocs()
	for b.Loop() {
		if end, err := CheckAnswerHead(head); end != len(head) || err != nil {
			b.Fatal(end, err)
		}
	}
}

func BenchmarkCheckTarget(b *testing.B) {
	host, target := []byte("backend:8080"), []byte("http://backend:8080/api/v1/orders?id=42")
	b.ReportAllocs()
	for b.Loop() {
		if CheckTarget(host, target) != "" {
			b.Fatal("refused")
		}
	}
}

// TestCheckAnswerHeadLines: what CheckAnswerHead refuses in a whole
// answer head beyond a bare LF (badAnswerLines), and what it leaves to
// fasthttp's parser (a folded line, a line without a colon).
func TestCheckAnswerHeadLines(t *testing.T) {
	const name, ctl = "a header name with a byte that is not a token character", "a control byte in the status line"
	for _, tc := range []struct{ head, want string }{
		{"HTTP/1.1 200 OK\r\nX-A: b\r\nContent-Length: 2\r\n\r\n", ""},
		{"HTTP/1.0 200 OK\r\n\r\n", ""},
		{"HTTP/1.2 200 OK\r\n\r\n", ""},
		{"HTTP/2.0 200 OK\r\n\r\n", ""}, // under the proxy's own version (Exchange.finish)
		{"HTTP/1.1 200 O\x00K\r\n\r\n", ctl},
		{"HTTP/1.1 200 OK\rX-A: b\r\n\r\n", ctl},
		{"HTTP/1.1 200 O\x7fK\r\n\r\n", ctl},
		{"HTTP/1.1 200 O\tK \xe9\r\n\r\n", ""},
		{"\r\n\r\n", ""},
		{"\r\nHTTP/1.1 200 O\x00K\r\n\r\n", ctl},
		{"\r\nHTTP/1.1 200 O\x01K\r\n\r\n", ctl},
		{"HTTP/1.1 200 OK\r\nX A: b\r\n\r\n", name},
		{"HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\n", name},
		{"HTTP/1.1 200 OK\r\nX-A\t: b\r\n\r\n", name},
		{"HTTP/1.1 200 OK\r\nX-A: a\r\nX\"B: b\r\n\r\n", name},
		{"HTTP/1.1 200 OK\r\nX\x7fB: b\r\n\r\n", name},
		{"HTTP/1.1 200 OK\r\nX-A: a\r\n b:c\r\n\r\n", ""},  // obs-fold: the parser unfolds it
		{"HTTP/1.1 200 OK\r\nX-A: a\r\n\tb:c\r\n\r\n", ""}, // obs-fold with a tab
		{"HTTP/1.1 200 OK\r\nX-No-Colon\r\n\r\n", ""},      // the parser's refusal
		{"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", ""},   // the parser's refusal
		{"HTTP/1.1 200 OK\r\nX-A: a b (c) \"d\"\r\n\r\n", ""},
	} {
		end, err := CheckAnswerHead([]byte(tc.head))
		got := ""
		if err != nil {
			got = err.Error()
		}
		want := tc.want
		if want != "" {
			want = "the upstream's answer is malformed: " + want
		}
		if end != len(tc.head) || got != want || (err != nil && !BadAnswer(err)) {
			t.Errorf("CheckAnswerHead(%q) = %d, %q; want %d, %q (a bad answer)", tc.head, end, got, len(tc.head), want)
		}
	}
}
