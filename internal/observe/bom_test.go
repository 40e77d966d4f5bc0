package observe

import (
	"strings"
	"testing"

	"golang.org/x/text/encoding/unicode"
)

// TestByteOrderMarks: a log saved with a byte-order mark (an editor's UTF-8 one; Windows
// PowerShell 5.1's `kubectl logs ... > f`, UTF-16 with CRLF line ends) reads as the same log
// without one: every attempt counted, its first line included (before: the first line of a
// UTF-8 BOM file was skipped as no access-log line, and a UTF-16 file had no line read at all).
func TestByteOrderMarks(t *testing.T) {
	lines := []string{
		cutLine("a", 503, ""),
		cutLine("a", 200, ""),
		cutLine("b", 200, `,"cut":"client","body_bytes":3`),
	}
	plain := strings.Join(lines, "\n") + "\n"
	crlf := strings.ReplaceAll(plain, "\n", "\r\n")
	utf16 := func(e unicode.Endianness, s string) string {
		out, err := unicode.UTF16(e, unicode.UseBOM).NewEncoder().String(s)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, tc := range []struct{ name, data string }{
		{"no mark", plain},
		{"UTF-8 mark", "\xef\xbb\xbf" + plain},
		{"UTF-8 mark, CRLF", "\xef\xbb\xbf" + crlf},
		{"UTF-16LE, CRLF", utf16(unicode.LittleEndian, crlf)},
		{"UTF-16BE", utf16(unicode.BigEndian, plain)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewGrouper()
			st, err := g.Consume(strings.NewReader(tc.data), Source{Name: "bom.log"}, DefaultMaxLine)
			if err != nil {
				t.Fatal(err)
			}
			if st != (Stats{Lines: 3, Attempts: 3}) {
				t.Fatalf("stats %+v, want 3 lines, 3 attempts", st)
			}
			a, _ := g.Key("a")
			b, _ := g.Key("b")
			if a.Attempts != 2 || a.Failures != 1 || b.Attempts != 1 || b.Failures != 1 {
				t.Fatalf("a: %d attempts %d failures; b: %d attempts %d failures", a.Attempts, a.Failures, b.Attempts, b.Failures)
			}
		})
	}
}

// TestByteOrderMarkMidStream: files joined with cat, the second saved with a UTF-8 byte-order
// mark (and a CRI file's line after it), read as the same lines without it: before, the line the
// mark started was skipped as no access-log line, its attempt lost (2 attempts of 3).
func TestByteOrderMarkMidStream(t *testing.T) {
	l := cutLine("a", 503, "")
	in := l + "\n\xef\xbb\xbf" + l + "\r\n\xef\xbb\xbf" + "2026-12-01T10:00:00.123456789Z stdout F " + l + "\n"
	g := NewGrouper()
	st, err := g.Consume(strings.NewReader(in), Source{Name: "joined"}, DefaultMaxLine)
	if err != nil || st != (Stats{Lines: 3, Attempts: 3}) {
		t.Fatalf("%+v %v", st, err)
	}
	if kr, _ := g.Key("a"); kr.Attempts != 3 {
		t.Fatalf("key a: %d attempts, want 3", kr.Attempts)
	}
}
