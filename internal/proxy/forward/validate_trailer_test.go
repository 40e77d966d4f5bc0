package forward

import "testing"

// TestBadTrailerLines: a trailer section (the last chunk's line, then the
// field lines through the empty line) by the head's field-line rules; a
// value's bytes, a line without a colon and a first line that starts
// with a blank are left to fasthttp's parser ("").
func TestBadTrailerLines(t *testing.T) {
	const token = "a header name with a byte that is not a token character in the trailer section"
	for _, tc := range []struct{ section, want string }{
		{"0\r\n\r\n", ""},
		{"0;ext=1\r\nX-T: v\r\nX-U:\tw \r\n\r\n", ""},
		{"0\r\nX-T: a\r\n folded\r\n\r\n", "a folded header line (obs-fold) in the trailer section"},
		{"0\r\nX-T: a\r\n\tfolded: x\r\n\r\n", token},
		{"0\r\nBad Name: x\r\n\r\n", token},
		{"0\r\nX-T : v\r\n\r\n", token},
		{"0\r\nX-T: v\r\nX(U): w\r\n\r\n", token},
		{"0\r\n: v\r\n\r\n", "a header line without a name in the trailer section"},
		{"0\r\nTransfer_Encoding: chunked\r\n\r\n", ReasonUnderscoreFraming + " in the trailer section"},
		{"0\r\nX-T: a\x00b\r\n\r\n", ""},
		{"0\r\nnocolon\r\nBad Name: x\r\n\r\n", ""},
		{"0\r\n lead: v\r\n\r\n", ""},
		{"0\r\nX-T: v\r\n\r\nBad Name: after the end\r\n", ""},
	} {
		if got := BadTrailerLines([]byte(tc.section)); got != tc.want {
			t.Errorf("BadTrailerLines(%q) = %q, want %q", tc.section, got, tc.want)
		}
	}
}
