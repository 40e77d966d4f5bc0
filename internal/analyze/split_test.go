package analyze

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSplitDocumentsSlices: splitDocuments gives documents as slices of its input (before, a copy
// built line by line: 50 MB of allocations for an 8.6 MB file) with the same bytes and first
// lines as the copying splitter, on random streams of separators, blank lines and content.
func TestSplitDocumentsSlices(t *testing.T) {
	copying := func(data []byte) []document {
		var docs []document
		var cur []byte
		start, line := 1, 0
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			var l []byte
			if i < 0 {
				l, data = data, nil
			} else {
				l, data = data[:i+1], data[i+1:]
			}
			line++
			if bytes.HasPrefix(l, []byte("---")) {
				rest := bytes.TrimSpace(l[3:])
				if len(rest) == 0 || rest[0] == '#' {
					docs = append(docs, document{raw: cur, line: start})
					cur, start = nil, line+1
					continue
				}
			}
			if len(bytes.TrimSpace(cur)) == 0 && len(bytes.TrimSpace(l)) == 0 {
				start = line + 1
			}
			cur = append(cur, l...)
		}
		return append(docs, document{raw: cur, line: start})
	}
	pieces := []string{"---\n", "--- # c\n", "--- x\n", "\n", "  \n", "\r\n", "a: 1\n", "b: [2]\n", "# c\n", "---", "c: 3", "..."}
	rng := rand.New(rand.NewPCG(18, 1))
	for c := range 5000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		in := []byte(b.String())
		got, want := splitDocuments(in), copying(in)
		if len(got) != len(want) {
			t.Fatalf("case %d %q: %d documents, want %d", c, in, len(got), len(want))
		}
		for i := range got {
			if string(got[i].raw) != string(want[i].raw) || got[i].line != want[i].line {
				t.Fatalf("case %d %q: document %d %q line %d, want %q line %d", c, in, i, got[i].raw, got[i].line, want[i].raw, want[i].line)
			}
			if cap(got[i].raw) != len(got[i].raw) {
				t.Fatalf("case %d: document %d can be appended to over the next: cap %d, len %d", c, i, cap(got[i].raw), len(got[i].raw))
			}
		}
	}
}
