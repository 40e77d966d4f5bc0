package forward

import "testing"

// TestBadHeaderLinesUnderscoreFraming: a Transfer-Encoding or
// Content-Length field name with '_' for '-' is refused; other names with
// underscores, and the real names, are not.
func TestBadHeaderLinesUnderscoreFraming(t *testing.T) {
	for raw, want := range map[string]string{
		"Transfer_Encoding: chunked\r\n\r\n":  ReasonUnderscoreFraming,
		"transfer_encoding: chunked\r\n\r\n":  ReasonUnderscoreFraming,
		"Content_Length: 5\r\n\r\n":           ReasonUnderscoreFraming,
		"CONTENT_LENGTH: 5\r\n\r\n":           ReasonUnderscoreFraming,
		"X-A: 1\r\nContent_length: 5\r\n\r\n": ReasonUnderscoreFraming,
		"Transfer-Encoding: chunked\r\n\r\n":  "",
		"Content-Length: 5\r\n\r\n":           "",
		"X_Forwarded_For: a\r\n\r\n":          "",
		"Content_Lengthy: 5\r\n\r\n":          "",
		"Content_Type: a\r\n\r\n":             "",
		"Contentxlength: 5\r\n\r\n":           "",
		"Content\x7fLength: 5\r\n\r\n":        "a header name with a byte that is not a token character",
	} {
		if got := BadHeaderLines([]byte(raw)); got != want {
			t.Errorf("BadHeaderLines(%q) = %q, want %q", raw, got, want)
		}
	}
}
