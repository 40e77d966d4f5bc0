package observe

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// rline is a retrycap access-log line with these fields after the log marker and the time.
func rline(time, fields string) string {
	return `{"log":"retrycap-access","time":"` + time + `","service":"web","upstream":"order","attempt":1,"status":503` + fields + `}`
}

// rbare is a retrycap access-log line with only the marker, the time and these fields.
func rbare(time, fields string) string {
	return `{"log":"retrycap-access","time":"` + time + `"` + fields + `}`
}

const okTime = "2026-12-01T11:38:39.490502Z"

// TestHostileLinesAddUp: each kind of hostile line lands in exactly one counter, the counters
// add up to the lines of the input, and the first bad line is named with its file, line number,
// field and value (before: a nested object where a string belongs read as absent, a second
// "status" silently won, "attempt":"x" read as attempt 0, a year-0 time overflowed Unix
// nanoseconds, an all-zero trace id merged every request that sent it into one key).
func TestHostileLinesAddUp(t *testing.T) {
	type want int
	const (
		attempt want = iota
		skipped
		bad
		tooLong
	)
	cri := rline(okTime, `,"idempotency_key":"cri-split"`)
	var parts []string
	for i := 0; i < len(cri); i += 7 { // one line split into 7-byte P parts, F last
		end, tag := min(i+7, len(cri)), "P"
		if end == len(cri) {
			tag = "F"
		}
		parts = append(parts, "2026-12-01T11:38:39.490502123Z stdout "+tag+" "+cri[i:end])
	}
	lines := []struct {
		text string
		is   want
	}{
		{rline(okTime, `,"idempotency_key":"k1"`), attempt},
		{"", skipped},
		{"   \t", skipped},
		{rline(okTime, `,"idempotency_key":"k\u0000nul"`), attempt}, // NUL escaped in JSON: data
		{"{\"log\":\"retrycap-access\",\"time\":\"" + okTime + "\",\"service\":\"w\x00eb\",\"status\":503,\"idempotency_key\":\"k2\"}", attempt},
		{"\xff\xfe{not utf-8 \xc3\x28", skipped},
		{rline(okTime, `,"idempotency_key":"k`+"\xff\xfe"+`"`), attempt}, // invalid UTF-8 inside a key: its bytes, as written
		{rline(okTime, `,"status":200,"idempotency_key":"dup"`), bad},
		{rline(okTime, `,"idempotency_key":"numstr","duration_us":"1500","grpc_status":"14"`), attempt},
		{rbare(okTime, `,"attempt":"x","idempotency_key":"k3"`), bad},
		{rbare(okTime, `,"service":{"name":"web"},"idempotency_key":"k4"`), bad},
		{rbare(okTime, `,"upstream":["order"],"idempotency_key":"k5"`), bad},
		{rline(okTime, `,"method":true,"idempotency_key":"k6"`), bad},
		{rline("0000-01-01T00:00:00Z", `,"idempotency_key":"k7"`), bad},
		{rline("9999-12-31T23:59:59Z", `,"idempotency_key":"k8"`), bad},
		{rline("2199-01-01T00:00:00Z", `,"idempotency_key":"future"`), attempt},
		{rline("2026-12-01T11:38:39Z", `,"idempotency_key":"order"`), attempt},
		{rline("2026-12-01T11:38:38Z", `,"idempotency_key":"order"`), attempt}, // out of order
		{rline(okTime, `,"trace_id":"00000000000000000000000000000000","request_id":"r-zero"`), attempt},
		{rline(okTime, `,"trace_id":"4bf92f3577b34da6a3ce929d0e0e473","request_id":"r-31"`), attempt},
		{rline(okTime, `,"trace_id":"4bf92f3577b34da6a3ce929d0e0e47366","request_id":"r-33"`), attempt},
		{rline(okTime, `,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`), attempt},
		{rline(okTime, `,"idempotency_key":"`+strings.Repeat("x", 300)+`"`), bad},
		{rline(okTime, `,"duration_us":999999999999999999,"idempotency_key":"k9"`), bad},
		{"[pod/web-7d9f8b-x.y_z-0/retrycap-proxy] 2026-12-01T11:38:39.490502123Z " + rline(okTime, `,"idempotency_key":"prefixed"`), attempt},
		{"[pod/[weird]]/c] " + rline(okTime, `,"idempotency_key":"odd-prefix"`), attempt}, // the prefix ends at the first "] "
		{`[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "curl/8.5.0" "envoy-1" "catalog.shop:8080" "10.44.4.2:8080"`, attempt},
		{`[2026-11-24T14:06:00.000Z] "GET /catalog HTTP/1.1" 503 UF 0 91 12 - "-" "curl/8.5.0" "envoy-1" "catalog.shop:8080"`, bad},
		{strings.Join(parts, "\n"), attempt},
		{strings.Repeat("y", 5000), tooLong},
		{"2026-12-01T11:38:39.490502123Z stdout P " + rline(okTime, ""), bad}, // a P part whose F never comes (the last line)
	}
	var in strings.Builder
	var wantSt Stats
	for _, l := range lines {
		in.WriteString(l.text + "\n")
		wantSt.Lines++
		switch l.is {
		case attempt:
			wantSt.Attempts++
		case skipped:
			wantSt.Skipped++
		case bad:
			wantSt.Bad++
		case tooLong:
			wantSt.TooLong++
		}
	}
	wantSt.FirstBad = `hostile.log: line 8: field "status" twice in the line (which one counts is ambiguous)`
	g := NewGrouper()
	st, err := g.Consume(strings.NewReader(in.String()), Source{Name: "hostile.log"}, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if st != wantSt {
		t.Fatalf("stats\n got %+v\nwant %+v", st, wantSt)
	}
	if st.Attempts+st.Skipped+st.Bad+st.TooLong != st.Lines {
		t.Fatalf("the counters do not add up: %+v", st)
	}
	// Each bad line's reason, as the first bad of a stream of its own.
	for _, tc := range []struct{ line, why string }{
		{rbare(okTime, `,"attempt":"x"`), `field "attempt": "x" is not a whole number >= 0`},
		{rbare(okTime, `,"service":{"name":"web"}`), `field "service": an object or array where a string belongs`},
		{rline(okTime, `,"method":true`), `field "method": true where a string belongs`},
		{rline("0000-01-01T00:00:00Z", ""), `time "0000-01-01T00:00:00Z": want an RFC 3339 time from 1970 to 2200`},
		{rline(okTime, `,"idempotency_key":"`+strings.Repeat("x", 300)+`"`), `idempotency key of 300 bytes, over the bound of 256: "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" (cut)`},
		{rline(okTime, `,"duration_us":999999999999999999`), `duration_us 999999999999999999: over 10 years`},
		{rline(okTime, `,"cut":"sideways","body_bytes":10`), `field "cut": "sideways" is not upstream, client or proxy`},
		{rline(okTime, `,"cut":"","body_bytes":10`), `field "cut": "" is not upstream, client or proxy`},
		{rline(okTime, `,"cut":"UPSTREAM","body_bytes":10`), `field "cut": "UPSTREAM" is not upstream, client or proxy`},
		{rline(okTime, `,"cut":7,"body_bytes":10`), `field "cut": 7 where a string belongs`},
		{rline(okTime, `,"cut":"upstream","body_bytes":"many"`), `field "body_bytes": "many" is not a whole number >= 0`},
		{rline(okTime, `,"cut":"upstream","body_bytes":-1`), `field "body_bytes": "-1" is not a whole number >= 0`},
		{rline(okTime, `,"cut":"upstream","body_bytes":"-"`), `field "body_bytes": "-" is not a whole number >= 0`},
		{rline(okTime, `,"cut":"client"`), `field "cut" "client" without "body_bytes" (the proxy writes both, on a cut answer's line)`},
		{rline(okTime, `,"body_bytes":10`), `field "body_bytes" "10" without "cut" (the proxy writes both, on a cut answer's line)`},
		{rline(okTime, `,"cut":"upstream","body_bytes":1,"cut":"client"`), `field "cut" twice in the line (which one counts is ambiguous)`},
	} {
		st, err := NewGrouper().Consume(strings.NewReader("\n"+tc.line+"\n"), Source{Name: "f"}, DefaultMaxLine)
		if want := "f: line 2: " + tc.why; err != nil || st.Bad != 1 || st.FirstBad != want {
			t.Errorf("%s:\n got %q (%v)\nwant %q", tc.line, st.FirstBad, err, want)
		}
	}
	// The ignored trace ids fall back to the request id; the valid one keys its attempt.
	for k, kind := range map[string]string{"r-zero": "request-id", "r-31": "request-id", "r-33": "request-id", "4bf92f3577b34da6a3ce929d0e0e4736": "trace-id", "cri-split": "idempotency-key", "prefixed": "idempotency-key"} {
		if kr, ok := g.Key(k); !ok || kr.Kind != kind || kr.Attempts != 1 {
			t.Errorf("key %s: %+v %v, want 1 attempt of kind %s", k, kr, ok, kind)
		}
	}
	if kr, ok := g.Key("order"); !ok || kr.Attempts != 2 || kr.First.Format("15:04:05") != "11:38:38" {
		t.Errorf("out-of-order key: %+v", kr)
	}
}

// TestOnlyBlankLines: a file of blank lines is read (counted) and has no attempt: the command
// makes that exit 2 (internal/cli).
func TestOnlyBlankLines(t *testing.T) {
	st, err := NewGrouper().Consume(strings.NewReader("\n\n \r\n\t\n"), Source{Name: "blank"}, DefaultMaxLine)
	if err != nil || st != (Stats{Lines: 4, Skipped: 4}) {
		t.Fatalf("%+v %v", st, err)
	}
}

func gz(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestTruncatedGzip: a rotation cut short is read up to the cut: the whole lines before it are
// counted and folded, the line it cut is counted bad (never parsed: its end is unknown), and
// the error names the file, the line, the offset in the decompressed stream and in the file.
func TestTruncatedGzip(t *testing.T) {
	var plain strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&plain, "%s\n", rline(okTime, fmt.Sprintf(`,"idempotency_key":"order-%05d"`, i)))
	}
	z := gz(t, []byte(plain.String()))
	path := filepath.Join(t.TempDir(), "proxy.log.1.gz")
	if err := os.WriteFile(path, z[:len(z)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := Open(path, func(n string) (io.ReadCloser, error) { return os.Open(n) })
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	g := NewGrouper()
	st, err := g.Consume(fh, Source{Name: path}, DefaultMaxLine)
	if err == nil {
		t.Fatal("no error for a truncated gzip")
	}
	lineLen := len(rline(okTime, `,"idempotency_key":"order-00000"`)) + 1
	whole := st.Attempts
	if st.Lines != whole+1 || st.Bad != 1 || whole < 100 || whole >= 2000 {
		t.Fatalf("stats %+v", st)
	}
	want := fmt.Sprintf("%s: read error at line %d, byte %d of the stream (the lines before it are counted): gzip: the compressed stream breaks after byte %d of the file: unexpected EOF",
		path, whole+1, whole*lineLen, len(z)/2)
	if err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
	if !strings.HasPrefix(st.FirstBad, fmt.Sprintf("%s: line %d: cut by the read error (", path, whole+1)) {
		t.Fatalf("first bad %q", st.FirstBad)
	}
	if _, ok := g.Key(fmt.Sprintf("order-%05d", whole-1)); !ok {
		t.Fatalf("the last whole line's key is not in the report")
	}
}

// TestGzipBomb: 256 MiB that compress to a few hundred KiB (one line without a newline, then
// lines of an access log) are read in bounded memory: the long line is counted over the limit
// (or, all NULs, skipped as a file's hole: TestCopytruncateHole) and the run goes on; what the
// run allocated in all is far below the input (the read buffer and one line, not the stream).
func TestGzipBomb(t *testing.T) {
	if testing.Short() {
		t.Skip("decompresses 256 MiB")
	}
	for _, tc := range []struct {
		fill byte
		want Stats
	}{{'x', Stats{Lines: 2, Attempts: 1, TooLong: 1}}, {0, Stats{Lines: 2, Attempts: 1, Skipped: 1}}} {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		fill := bytes.Repeat([]byte{tc.fill}, 1<<20)
		for range 256 {
			zw.Write(fill)
		}
		fmt.Fprintf(zw, "\n%s\n", rline(okTime, `,"idempotency_key":"after-the-bomb"`))
		zw.Close()
		t.Logf("%d compressed bytes", b.Len())
		zr, err := gzip.NewReader(&b)
		if err != nil {
			t.Fatal(err)
		}
		g := NewGrouper()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		st, err := g.Consume(zr, Source{Name: "bomb.gz"}, DefaultMaxLine)
		runtime.ReadMemStats(&after)
		if err != nil || st != tc.want {
			t.Fatalf("fill %q: %+v %v, want %+v", tc.fill, st, err, tc.want)
		}
		alloc := after.TotalAlloc - before.TotalAlloc
		t.Logf("fill %q: allocated %d bytes in all for 256 MiB decompressed", tc.fill, alloc)
		if alloc > 8<<20 {
			t.Fatalf("fill %q: allocated %d bytes reading 256 MiB: the read is not bounded", tc.fill, alloc)
		}
	}
}

// TestManyLongKeysBounded: keys are bounded (MaxKeyBytes), so a log of lines near --max-line
// with a new key each does not keep each line: 2,000 lines of 64 KiB keys are bad lines, and
// the heap after the run holds no more than a few MiB.
func TestManyLongKeysBounded(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		for i := range 2000 {
			fmt.Fprintf(pw, "%s\n", rline(okTime, fmt.Sprintf(`,"idempotency_key":"%05d%s"`, i, strings.Repeat("k", 64<<10))))
		}
		pw.Close()
	}()
	g := NewGrouper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st, err := g.Consume(pr, Source{Name: "keys"}, DefaultMaxLine)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if err != nil || st.Bad != 2000 || st.Lines != 2000 {
		t.Fatalf("%+v %v", st, err)
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew %d bytes over 128 MiB of keys", grew)
	if grew > 4<<20 {
		t.Fatalf("heap grew %d bytes", grew)
	}
	runtime.KeepAlive(g)
}

// TestHalfGzip: a file that is a gzip member and then text (a log appended to after it was
// compressed) and concatenated members (rotations joined with cat): the members are read, and
// the break names where the gzip data ends in the file (before: "breaks after byte 326", the
// file's end, where gzip's own read-ahead had got to; the data ended at byte 158), from a file
// and from stdin alike.
func TestHalfGzip(t *testing.T) {
	line := rline(okTime, `,"idempotency_key":"half"`) + "\n"
	member := gz(t, []byte(line))
	half := append(append(append([]byte{}, member...), member...), line...)
	path := filepath.Join(t.TempDir(), "proxy.log.1") // no .gz: sniffed
	if err := os.WriteFile(path, half, 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%s: read error at line 3, byte %d of the stream (the lines before it are counted): gzip: the gzip data ends at byte %d of the file, and what follows is no gzip member: gzip: invalid header",
		path, 2*len(line), 2*len(member))
	fh, err := Open(path, func(n string) (io.ReadCloser, error) { return os.Open(n) })
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	g := NewGrouper()
	st, err := g.Consume(fh, Source{Name: path}, DefaultMaxLine)
	if err == nil || err.Error() != want || st != (Stats{Lines: 2, Attempts: 2}) {
		t.Fatalf("%+v\n got %v\nwant %s", st, err, want)
	}
	zr, err := Gunzip(bytes.NewReader(half))
	if err != nil {
		t.Fatal(err)
	}
	st, err = NewGrouper().Consume(zr, Source{Name: path}, DefaultMaxLine)
	if err == nil || err.Error() != want || st != (Stats{Lines: 2, Attempts: 2}) {
		t.Fatalf("stdin: %+v\n got %v\nwant %s", st, err, want)
	}
	// Three members and an empty one: every line, no error.
	joined := append(append(append(gz(t, nil), member...), member...), member...)
	zr, err = Gunzip(bytes.NewReader(joined))
	if err != nil {
		t.Fatal(err)
	}
	g = NewGrouper()
	if st, err := g.Consume(zr, Source{Name: "joined"}, DefaultMaxLine); err != nil || st != (Stats{Lines: 3, Attempts: 3}) {
		t.Fatalf("joined: %+v %v", st, err)
	}
	if kr, _ := g.Key("half"); kr.Attempts != 3 {
		t.Fatalf("joined: %d attempts of key half, want 3", kr.Attempts)
	}
}
