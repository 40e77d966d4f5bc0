package observe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The fuzz targets below feed the access-log readers arbitrary lines. go test runs their seeds
// (lines of testdata/*.log) and testdata/fuzz; go test -run '^$' -fuzz '^FuzzX$'
// ./internal/observe fuzzes one.

// seedLines adds the first lines of each testdata log (and of the gateway and mixed ones) as
// seeds: each format's real shape, for the fuzzer to mutate.
func seedLines(f *testing.F, add func(line []byte)) {
	f.Helper()
	files, _ := filepath.Glob("testdata/*.log")
	more, _ := filepath.Glob("testdata/*/*.log")
	for _, name := range append(files, more...) {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 1<<20)
		for n := 0; n < 4 && sc.Scan(); n++ {
			add(bytes.Clone(sc.Bytes()))
		}
	}
}

// member is one member of a JSON object as a reader saw it.
type member struct {
	key, val string
	kind     valKind
}

// stdMembers reads line with encoding/json, member by member (duplicates kept, in order): ok
// false when encoding/json refuses it or it is no object.
func stdMembers(line []byte) ([]member, bool) {
	if !json.Valid(line) {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, false
		}
		m := member{key: key}
		switch raw[0] {
		case '"':
			if err := json.Unmarshal(raw, &m.val); err != nil {
				return nil, false
			}
		case '{', '[':
			m.kind = valNested
		default:
			m.val, m.kind = string(raw), valLiteral
		}
		ms = append(ms, m)
	}
	return ms, true
}

// asStd is a string value as encoding/json gives it: each byte of invalid UTF-8 (and each lone
// surrogate) is U+FFFD there, where observe keeps the bytes as written (a key is a key).
func asStd(s string) string { return string([]rune(s)) }

// escapeControls writes the raw control characters inside the line's strings as \u escapes:
// observe reads them as data (a log writer that does not escape them is no reason to drop a
// line: TestHostileLinesAddUp), encoding/json refuses them; with them escaped both must agree.
func escapeControls(line []byte) []byte {
	var out []byte
	in := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case in && c == '\\' && i+1 < len(line):
			out = append(out, c, line[i+1])
			i++
			continue
		case c == '"':
			in = !in
		case in && c < 0x20:
			out = fmt.Appendf(out, `\u%04x`, c)
			continue
		}
		out = append(out, c)
	}
	return out
}

// FuzzScanJSONObject: the hand-written JSON scanner (the hot path of the JSON formats) reads
// every line as encoding/json does: the same members in the same order, of the same kinds and
// values, or both refuse the line.
func FuzzScanJSONObject(f *testing.F) {
	seedLines(f, func(line []byte) { f.Add(line) })
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":-0.5e+3}`, `{"a":01}`, `{"a":1-2}`, `{"a":[1,{"b":"]"}]}`, `{"a":[,]}`, `{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":1\r}", `{"a":tru}`, `{"a":"x"} x`, `{"a":"x\"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var got []member
		var scratch []byte
		err := scanJSONObject(line, &scratch, func(k, v []byte, kind valKind) {
			got = append(got, member{asStd(string(k)), asStd(string(v)), kind})
		})
		want, ok := stdMembers(escapeControls(line))
		if (err == nil) != ok {
			t.Fatalf("%q: observe's scanner says %v, encoding/json says ok %v (%v)", line, err, ok, want)
		}
		if !ok {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: observe read %d members %q, encoding/json %d %q", line, len(got), got, len(want), want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%q: member %d: observe %+q, encoding/json %+q", line, i, got[i], want[i])
			}
		}
	})
}

// FuzzParseTime: the fast RFC 3339 reader agrees with time.Parse (RFC3339Nano, years 1970 to
// 2200) on every input.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-11-24T14:02:11.118Z", "2026-11-24T14:02:11Z", "2026-11-24T14:02:11.118123456789+05:30", "2026-02-31T00:00:00Z", "2026-11-24T14:02:60Z", "2026-11-24T14:02:11+99:00", "2026-11-24t14:02:11z", "1969-12-31T23:59:59Z", "2200-12-31T23:59:59.999999999-23:59", "2026-11-24T14:02:11.Z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseTime(b)
		var want int64
		// RFC 3339 allows a lower-case t and z (section 5.6), time.Parse does not.
		std := string(b)
		if len(std) > 10 && std[10] == 't' {
			std = std[:10] + "T" + std[11:]
		}
		if strings.HasSuffix(std, "z") {
			std = strings.TrimSuffix(std, "z") + "Z"
		}
		tm, err := time.Parse(time.RFC3339Nano, std)
		wantOK := err == nil && tm.Year() >= 1970 && tm.Year() <= 2200
		if wantOK {
			want = tm.UnixNano()
		}
		if ok != wantOK || got != want {
			t.Fatalf("parseTime(%q) = %d, %v; time.Parse: %d, %v (%v)", b, got, ok, want, wantOK, err)
		}
	})
}

// FuzzParseLines: any stream of lines is read without a panic, each line lands in exactly one
// counter (Lines = Attempts - ListedRetries + Skipped + Unread + Bad + TooLong), every line given
// is counted (a CRI partial line with its final part), and emit is called once per attempt.
func FuzzParseLines(f *testing.F) {
	var all [][]byte
	seedLines(f, func(line []byte) { all = append(all, line) })
	for i := 0; i+3 <= len(all); i += 3 {
		f.Add(bytes.Join(all[i:i+3], []byte("\n")), uint16(64))
	}
	f.Add([]byte("2026-12-01T11:38:39.490502123Z stdout P {\"log\":\n2026-12-01T11:38:39.490502123Z stdout F \"retrycap-access\"}\n"), uint16(40))
	f.Fuzz(func(t *testing.T, data []byte, maxLine uint16) {
		emitted := 0
		st, err := ParseLimit(bytes.NewReader(data), Source{Name: "fuzz"}, int(maxLine)+1, func(a Attempt) {
			emitted++
			if a.Duration < 0 || a.Time.Year() < 1970 || a.Time.Year() > 2200 {
				t.Fatalf("attempt out of bounds: %+v", a)
			}
		})
		if err != nil {
			t.Fatalf("a byte reader has no read error: %v", err)
		}
		if sum := st.Attempts - st.ListedRetries + st.Skipped + st.Unread + st.Bad + st.TooLong; sum != st.Lines {
			t.Fatalf("%q: the counters add up to %d, not the %d lines read: %+v", data, sum, st.Lines, st)
		}
		if emitted != st.Attempts {
			t.Fatalf("%q: %d attempts emitted, %d counted", data, emitted, st.Attempts)
		}
		phys := bytes.Count(data, []byte("\n"))
		if len(data) > 0 && data[len(data)-1] != '\n' {
			phys++
		}
		if st.Lines > phys || (st.Lines < phys && !bytes.Contains(data, []byte(" P "))) {
			t.Fatalf("%q: %d lines counted of %d given: %+v", data, st.Lines, phys, st)
		}
		if (st.Bad > 0) != (st.FirstBad != "") || (st.Unread > 0) != (st.FirstUnread != "") {
			t.Fatalf("%q: a count without its first line, or the reverse: %+v", data, st)
		}
	})
}

// FuzzTruncatedLine: a line cut short is never read as an attempt of another format (a
// truncated Istio line as a shorter Envoy one), and a cut JSON line never as an attempt at all.
func FuzzTruncatedLine(f *testing.F) {
	seedLines(f, func(line []byte) {
		f.Add(line, uint16(len(line)/2))
		f.Add(line, uint16(len(line)*7/8))
	})
	f.Fuzz(func(t *testing.T, line []byte, cut uint16) {
		a, ok, _ := ParseLine(line, Source{Name: "fuzz"})
		if !ok {
			return
		}
		whole := bytes.TrimRight(line, " \t\r\n")
		if int(cut) >= len(whole) {
			return
		}
		short := whole[:cut]
		if len(bytes.TrimSpace(short)) == 0 || len(bytes.TrimSpace(short)) == len(bytes.TrimSpace(whole)) {
			return
		}
		b, ok, _ := ParseLine(short, Source{Name: "fuzz"})
		if !ok {
			return
		}
		if b.Format != a.Format {
			t.Fatalf("%q read as %s, cut to %q as %s", line, a.Format, short, b.Format)
		}
		if strings.HasPrefix(string(bytes.TrimSpace(whole)), "{") {
			t.Fatalf("%q read as %s, and cut to %q too", line, a.Format, short)
		}
	})
}
