package forward

import (
	"strings"
	"testing"
)

func TestOwnAnswerBytes(t *testing.T) {
	cases := []struct {
		code   int
		body   string
		closes bool
		want   string
	}{
		{400, "retrycap-proxy: malformed request: x\n", true, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 37\r\nConnection: close\r\n\r\nretrycap-proxy: malformed request: x\n"},
		{508, "retrycap-proxy: loop\n", false, "HTTP/1.1 508 Loop Detected\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 21\r\n\r\nretrycap-proxy: loop\n"},
		{505, "v\n", true, "HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\nConnection: close\r\n\r\nv\n"},
	}
	for _, tc := range cases {
		if got := string(OwnAnswer(tc.code, tc.body, tc.closes)); got != tc.want {
			t.Errorf("OwnAnswer(%d, %q, %v) = %q, want %q", tc.code, tc.body, tc.closes, got, tc.want)
		}
	}
	if got, want := string(MalformedAnswer("x")), cases[0].want; got != want {
		t.Errorf("MalformedAnswer = %q, want %q", got, want)
	}
}

// A value an answer names is quoted, its control bytes escaped, and cut
// at 64 bytes.
func TestQuoteValue(t *testing.T) {
	cases := []struct{ in, want string }{
		{"backend", `"backend"`},
		{"HTTP/1.1\r\nX: y", `"HTTP/1.1\r\nX: y"`},
		{"", `""`},
		{strings.Repeat("a", 64), `"` + strings.Repeat("a", 64) + `"`},
		{strings.Repeat("a", 65), `"` + strings.Repeat("a", 64) + `"...`},
	}
	for _, tc := range cases {
		if got := QuoteValue([]byte(tc.in)); got != tc.want {
			t.Errorf("QuoteValue(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
