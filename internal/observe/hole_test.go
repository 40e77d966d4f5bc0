package observe

import (
	"strings"
	"testing"
)

// TestCopytruncateHole: logrotate's copytruncate empties a file that its writer keeps writing
// at its old offset (no O_APPEND): the file then starts with a hole, a run of NUL bytes, and the
// writer's next line follows it on the same "line". That line is read (before: skipped as no
// access-log line, 1 attempt of 3 lost without a word), whether the run is short or longer than
// --max-line (before: counted over the line limit). The counters still add up to the lines.
func TestCopytruncateHole(t *testing.T) {
	line := func(k string) string { return rline(okTime, `,"idempotency_key":"`+k+`"`) + "\n" }
	for _, hole := range []int{1, 4096, 3 << 20} {
		in := strings.Repeat("\x00", hole) + line("a") + line("b") + strings.Repeat("\x00", 10) + "\n" + line("c")
		g := NewGrouper()
		st, err := g.Consume(strings.NewReader(in), Source{Name: "envoy.log"}, 1<<20)
		if want := (Stats{Lines: 4, Attempts: 3, Skipped: 1}); err != nil || st != want {
			t.Errorf("a hole of %d bytes: %+v %v, want %+v", hole, st, err, want)
		}
		for _, k := range []string{"a", "b", "c"} {
			if _, ok := g.Key(k); !ok {
				t.Errorf("a hole of %d bytes: key %s not read", hole, k)
			}
		}
	}
	// A run of NULs after the start of a line is the line's: over the limit, it is too long.
	st, err := NewGrouper().Consume(strings.NewReader("x"+strings.Repeat("\x00", 2<<20)+line("d")), Source{Name: "f"}, 1<<20)
	if want := (Stats{Lines: 1, TooLong: 1}); err != nil || st != want {
		t.Errorf("NULs inside a line: %+v %v, want %+v", st, err, want)
	}
}
