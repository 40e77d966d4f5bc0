package forward

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestChunkedBody: the data, the end (the reader left after the trailer
// section), and each framing error exactly.
func TestChunkedBody(t *testing.T) {
	big := strings.Repeat("X-T: "+strings.Repeat("t", 93)+"\r\n", 170) // 17,000 bytes
	for _, tc := range []struct {
		name, in, data string
		err            error  // nil: io.EOF, the end
		errText        string // else, when err is nil
		after          string // what br holds after the end
	}{
		{"two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\nNEXT", "hello world", nil, "", "NEXT"},
		{"extensions and trailers dropped", "5;a=b\r\nhello\r\n0;x\r\nX-T: 1\r\nX-U: 2\r\n\r\nNEXT", "hello", nil, "", "NEXT"},
		{"the close inside a chunk", "a\r\nhello", "hello", io.ErrUnexpectedEOF, "", ""},
		{"the close before the trailer section's end", "5\r\nhello\r\n0\r\nX-T: 1\r\n", "hello", io.ErrUnexpectedEOF, "", ""},
		{"an invalid size", "5\r\nhello\r\nzz\r\n", "hello", nil, "invalid byte in chunk length", ""},
		{"17 hex digits", "10000000000000000\r\n", "", nil, "http chunk length too large", ""},
		{"a bare LF after the size", "5\nhello\r\n0\r\n\r\n", "", nil, "chunked line ends with bare LF", ""},
		{"no CRLF after the data", "5\r\nhelloXX0\r\n\r\n", "hello", nil, "malformed chunked encoding", ""},
		{"a 5 KiB chunk line", "5;" + strings.Repeat("e", 5<<10) + "\r\nhello\r\n0\r\n\r\n", "", nil, "header line too long", ""},
		{"trailers over 16 KiB", "0\r\n" + big + "\r\n", "", ErrTrailerTooLarge, "", ""},
		{"a trailer line over the reader's buffer", "0\r\nX-T: " + strings.Repeat("t", 9000) + "\r\n\r\n", "", ErrTrailerTooLarge, "", ""},
		{"a trailer ending in a bare LF", "0\r\nX-T: a\n\r\n", "", ErrTrailerBareLF, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tc.in), 8192)
			data, err := io.ReadAll(NewChunkedBody(br))
			if string(data) != tc.data {
				t.Errorf("data %q, want %q", data, tc.data)
			}
			switch {
			case tc.err == nil && tc.errText == "":
				if err != nil {
					t.Fatalf("error %v, want the end", err)
				}
				if rest, _ := io.ReadAll(br); string(rest) != tc.after {
					t.Errorf("after the body %q, want %q", rest, tc.after)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v, want %v", err, tc.err)
				}
			default:
				if err == nil || err.Error() != tc.errText {
					t.Errorf("error %v, want %q", err, tc.errText)
				}
			}
		})
	}
}
