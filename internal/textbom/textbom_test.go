package textbom

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

func TestBytesAndReader(t *testing.T) {
	const text = "kind: Deployment\r\nmetadata: {name: é}\r\n"
	cases := []struct {
		name, in, want string
		skipped        int64
	}{
		{"no mark", text, text, 0},
		{"UTF-8 mark", "\xef\xbb\xbf" + text, text, 3},
		{"UTF-16LE", "\xff\xfe" + utf16le(text), text, 0},
		{"UTF-16BE", "\xfe\xff" + utf16be(text), text, 0},
		{"invalid UTF-8 passes as it is", "\xff\x00abc", "\xff\x00abc", 0},
		{"a mark only in the middle stays", "a\xef\xbb\xbfb", "a\xef\xbb\xbfb", 0},
		{"empty", "", "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Bytes([]byte(c.in))
			if err != nil || string(got) != c.want {
				t.Errorf("Bytes: %q, %v; want %q", got, err, c.want)
			}
			r, skipped := Reader(bufio.NewReaderSize(strings.NewReader(c.in), 16))
			all, err := io.ReadAll(r)
			if err != nil || string(all) != c.want || skipped != c.skipped {
				t.Errorf("Reader: %q, skipped %d, %v; want %q, %d", all, skipped, err, c.want, c.skipped)
			}
		})
	}
}

// utf16le and utf16be encode ASCII and Latin-1 text (all the test uses) by hand, so that the
// test does not check the decoder against itself.
func utf16le(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteByte(byte(r))
		b.WriteByte(byte(r >> 8))
	}
	return b.String()
}

func utf16be(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteByte(byte(r >> 8))
		b.WriteByte(byte(r))
	}
	return b.String()
}
