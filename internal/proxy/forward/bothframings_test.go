package forward

import "testing"

// TestBothFramings: a head with a Transfer-Encoding and a Content-Length
// field, in any case and order; the first line is no field.
func TestBothFramings(t *testing.T) {
	for _, tc := range []struct {
		head string
		want bool
	}{
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 60\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\ncontent-length: 60\r\nX: 1\r\ntransfer-encoding: chunked\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Location: /a\r\nTransfer-Encoding: chunked\r\nTrailer: Content-Length\r\n\r\n", false},
		{"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", false}, // the first line is no field
		{"", false},
	} {
		if got := BothFramings([]byte(tc.head)); got != tc.want {
			t.Errorf("BothFramings(%q) = %v, want %v", tc.head, got, tc.want)
		}
	}
}
