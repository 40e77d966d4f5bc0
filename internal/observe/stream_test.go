package observe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// expected is testdata/expected.json, written by testdata/make_logs.py from the events it
// modelled (not by reading the lines back).
type expected map[string]struct {
	Stats Stats `json:"stats"`
	Keys  map[string]struct {
		Kind       string         `json:"kind"`
		Attempts   int            `json:"attempts"`
		ChainLinks int            `json:"chain_links"`
		Failures   int            `json:"failures"`
		Services   map[string]int `json:"services"`
		First      string         `json:"first"`
		SpanUS     int64          `json:"span_us"`
	} `json:"keys"`
}

func loadExpected(t *testing.T) expected {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// consumeDir reads every file under testdata/dir into g (through gzip for *.gz), with the
// source service service(path).
func consumeDir(t *testing.T, g *Grouper, dir string, service func(string) string, wrap func(io.Reader) io.Reader) Stats {
	t.Helper()
	var total Stats
	err := filepath.WalkDir(filepath.Join("testdata", dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := Open(p, func(n string) (io.ReadCloser, error) { return os.Open(n) })
		if err != nil {
			return err
		}
		defer f.Close()
		var r io.Reader = f
		if wrap != nil {
			r = wrap(r)
		}
		st, err := g.Consume(r, Source{Name: p, Service: service(p)}, DefaultMaxLine)
		total.Add(st)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

func checkAgainst(t *testing.T, g *Grouper, st Stats, e expected, set string) {
	t.Helper()
	want := e[set]
	// expected.json (make_logs.py) has the counts; the first bad line is each test's.
	st.FirstBad = ""
	if st != want.Stats {
		t.Errorf("%s: stats %+v, want %+v", set, st, want.Stats)
	}
	r := g.Report(0, 0)
	if r.Keys != len(want.Keys) || r.OverCount != len(want.Keys) {
		t.Errorf("%s: %d keys (%d over 0), want %d", set, r.Keys, r.OverCount, len(want.Keys))
	}
	for k, w := range want.Keys {
		kr, ok := g.Key(k)
		if !ok {
			t.Errorf("%s: key %s missing", set, k)
			continue
		}
		svcs := map[string]int{}
		for _, s := range kr.Services {
			svcs[s.Service] = s.Attempts
		}
		first := kr.First.Format("2006-01-02T15:04:05.000000Z")
		if kr.Kind != w.Kind || kr.Attempts != w.Attempts || kr.ChainLinks != w.ChainLinks || kr.Failures != w.Failures ||
			!mapsEqual(svcs, w.Services) || first != w.First || kr.Span != time.Duration(w.SpanUS)*time.Microsecond {
			t.Errorf("%s: key %s: %s attempts %d links %d failures %d services %v first %s span %v;\nwant %s %d %d %d %v %s %v",
				set, k, kr.Kind, kr.Attempts, kr.ChainLinks, kr.Failures, svcs, first, kr.Span,
				w.Kind, w.Attempts, w.ChainLinks, w.Failures, w.Services, w.First, time.Duration(w.SpanUS)*time.Microsecond)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Behind an Istio ingress gateway: the gateway's Istio text lines, frontend's Istio JSON lines
// in the kubelet's CRI file (one split into P, P, F parts), checkout's Istio text lines as
// kubectl logs --prefix --timestamps prints them, half of them in a gzip'd rotation, the last
// cut by --limit-bytes after exactly 13 fields. Every key, every count as make_logs.py modelled
// them: frontend named by its SNI, not by the browser's Host (shop.example.com).
func TestGatewayExact(t *testing.T) {
	e := loadExpected(t)
	g := NewGrouper()
	st := consumeDir(t, g, "gateway", func(string) string { return "" }, nil)
	checkAgainst(t, g, st, e, "gateway")
	if want := "testdata/gateway/checkout.log: line 41: envoy text line: 12 fields, want exactly 13 (Envoy's default format) or 22 (Istio's)"; st.FirstBad != want {
		t.Errorf("first bad %q, want %q", st.FirstBad, want)
	}
	if _, ok := g.Key("cut-line-rid"); ok {
		t.Error("the truncated line became a key")
	}
	for _, s := range g.svcName {
		if s == "shop" {
			t.Error(`a service "shop" (the browser's Host) was reported`)
		}
	}
	var tab bytes.Buffer
	if err := g.Report(5, 0).WriteTable(&tab); err != nil {
		t.Fatal(err)
	}
	golden(t, "gateway.table.golden", tab.Bytes())
}

// The same logs as --from-cluster reads them (each stream's pod service known): the counts do
// not move, the gateway becomes the entry caller, and the depths come from the edges.
func TestGatewayFromCluster(t *testing.T) {
	e := loadExpected(t)
	g := NewGrouper()
	st := consumeDir(t, g, "gateway", func(p string) string {
		switch {
		case strings.Contains(p, "ingressgateway"):
			return "istio-ingressgateway"
		case strings.Contains(p, "frontend"):
			return "frontend"
		}
		return "checkout"
	}, nil)
	checkAgainst(t, g, st, e, "gateway")
	for k := range e["gateway"].Keys {
		kr, _ := g.Key(k)
		if len(kr.Callers) != 1 || kr.Callers[0] != "istio-ingressgateway" || kr.Services[0].Service != "frontend" ||
			kr.Services[0].Depth != 1 || kr.Services[1].Service != "checkout" || kr.Services[1].Depth != 2 ||
			kr.Deepest != "checkout" || kr.Amplification != e["gateway"].Keys[k].Services["checkout"] {
			t.Errorf("key %s: %+v", k, kr)
		}
	}
}

// retrycap's log (chain links: the user's retries under one Idempotency-Key), Envoy's default
// format, an Istio JSON line and the proxy's own lines, interleaved; a JSON line cut in a
// string, an Istio line one field short, an Envoy line one field short: bad, and nothing else.
func TestMixedExact(t *testing.T) {
	e := loadExpected(t)
	g := NewGrouper()
	st := consumeDir(t, g, "mixed", func(string) string { return "" }, nil)
	checkAgainst(t, g, st, e, "mixed")
	if want := "testdata/mixed/mixed.log: line 44: not a complete JSON object (truncated?)"; st.FirstBad != want {
		t.Errorf("first bad %q, want %q", st.FirstBad, want)
	}
	kr, _ := g.Key("slow-1")
	if got := Span(kr.Span); got != "195.6 s" {
		t.Errorf("slow-1 span %q, want 195.6 s", got)
	}
}

// A 5 MiB line in the middle (a stack trace, a runaway header) is counted and skipped; the
// run goes on and every other count is the same; with --max-line above it, it is read (a
// skipped line: not an access-log line).
func TestLongLine(t *testing.T) {
	e := loadExpected(t)
	long := append([]byte(`{"log":"retrycap-access","path":"`), bytes.Repeat([]byte("a"), 5<<20)...)
	long = append(long, "\"}\n"...)
	inject := func(r io.Reader) io.Reader {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		i := bytes.IndexByte(b, '\n') + 1
		return io.MultiReader(bytes.NewReader(b[:i]), bytes.NewReader(long), bytes.NewReader(b[i:]))
	}
	g := NewGrouper()
	st := consumeDir(t, g, "mixed", func(string) string { return "" }, inject)
	want := e["mixed"].Stats
	want.Lines++
	want.TooLong++
	want.FirstBad = "testdata/mixed/mixed.log: line 45: not a complete JSON object (truncated?)" // one line further down
	if st != want {
		t.Fatalf("stats %+v, want %+v", st, want)
	}
	want.FirstBad = ""
	e["mixed"] = struct {
		Stats Stats `json:"stats"`
		Keys  map[string]struct {
			Kind       string         `json:"kind"`
			Attempts   int            `json:"attempts"`
			ChainLinks int            `json:"chain_links"`
			Failures   int            `json:"failures"`
			Services   map[string]int `json:"services"`
			First      string         `json:"first"`
			SpanUS     int64          `json:"span_us"`
		} `json:"keys"`
	}{want, e["mixed"].Keys}
	checkAgainst(t, g, st, e, "mixed")

	// A limit above the line: parsed (bad: its time is missing), not too long.
	g2 := NewGrouper()
	st2, err := g2.Consume(bytes.NewReader(long), Source{}, 6<<20)
	if err != nil || st2 != (Stats{Lines: 1, Bad: 1, FirstBad: `: line 1: time "": want an RFC 3339 time from 1970 to 2200`}) {
		t.Fatalf("%+v %v", st2, err)
	}
}

// Exact field counts: an Istio line cut at any field boundary is bad, never an Envoy line.
func TestTruncatedNeverShorter(t *testing.T) {
	line := `[2026-11-24T14:02:11.119Z] "POST /checkout HTTP/1.1" 503 - via_upstream - "-" 412 91 48 48 "-" "Go-http-client/1.1" "7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a30" "checkout:8080" "10.44.2.17:8080" inbound|8080|| 127.0.0.6:43611 10.44.2.17:8080 10.44.1.23:37943 outbound_.8080_._.checkout.shop.svc.cluster.local default`
	if _, ok, err := ParseLine([]byte(line), Source{}); !ok || err != nil {
		t.Fatalf("whole line: %v %v", ok, err)
	}
	for i := 1; i < len(line)-len(" default"); i++ {
		if _, ok, _ := ParseLine([]byte(line[:i]), Source{}); ok {
			t.Errorf("cut at %d read as an attempt: %q", i, line[:i])
		}
	}
	js := `{"log":"retrycap-access","time":"2026-12-01T11:38:39.490502Z","service":"client","upstream":"gateway","attempt":1,"status":200,"duration_us":52183,"storm_op":"0"}`
	for i := 1; i < len(js); i++ {
		_, ok, err := ParseLine([]byte(js[:i]), Source{})
		if ok {
			t.Errorf("JSON cut at %d read as an attempt", i)
		}
		if i > len(`{"log":"retrycap-access"`) && err == nil {
			t.Errorf("JSON cut at %d not bad", i)
		}
	}
}

// The hot path folds without allocating once its key and names were seen.
func TestConsumeAllocs(t *testing.T) {
	line := []byte(`[2026-11-24T14:02:11.119Z] "POST /checkout HTTP/1.1" 503 - via_upstream - "-" 412 91 48 48 "-" "Go-http-client/1.1" "7c1a4b2e-93d0-9b41-a1f5-2f0d6e1c8a30" "shop.example.com" "10.44.2.17:8080" inbound|8080|| 127.0.0.6:43611 10.44.2.17:8080 10.44.1.23:37943 outbound_.8080_._.checkout.shop.svc.cluster.local default` + "\n" +
		`{"log":"retrycap-access","time":"2026-12-01T11:38:39.490502Z","service":"Client","upstream":"gateway","method":"GET","attempt":1,"status":200,"duration_us":52183,"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","idempotency_key":"k\"1"}` + "\n")
	g := NewGrouper()
	p := &parser{}
	lines := bytes.Split(bytes.TrimSpace(line), []byte("\n"))
	fold := func() {
		for _, l := range lines {
			if k, err := p.parse(l); k != lineAttempt {
				t.Fatalf("%v %v", k, err)
			}
			g.fold(&p.r)
		}
	}
	fold()
	if n := testing.AllocsPerRun(100, fold); n != 0 {
		t.Fatalf("%v allocs per fold of two lines", n)
	}
}

// BenchmarkConsume folds the file $OBSERVE_BENCH_FILE (hack/observe-bench/gen writes one), else
// the gateway and mixed test logs, per line.
func BenchmarkConsume(b *testing.B) {
	var data []byte
	if f := os.Getenv("OBSERVE_BENCH_FILE"); f != "" {
		d, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		data = d
	} else {
		for _, f := range []string{"gateway/istio-ingressgateway.log", "gateway/frontend/0.log", "gateway/checkout.log", "mixed/mixed.log"} {
			d, err := os.ReadFile(filepath.Join("testdata", f))
			if err != nil {
				b.Fatal(err)
			}
			data = append(data, d...)
			if data[len(data)-1] != '\n' {
				data = append(data, '\n')
			}
		}
	}
	lines := bytes.Count(data, []byte("\n"))
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		g := NewGrouper()
		if _, err := g.Consume(bytes.NewReader(data), Source{}, DefaultMaxLine); err != nil {
			b.Fatal(err)
		}
		g.Report(5, 20)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}

// BenchmarkBytesPerKey is the memory a key costs once folded (a key with 3 services, 2 call
// edges, 2 trace ids: retrycap's log of web -> order -> payment and a user retry): the heap
// in use after folding 200,000 such keys, per key (docs/observe.md).
func BenchmarkBytesPerKey(b *testing.B) {
	const keys = 200_000
	var lines [][]byte
	for i := range keys {
		for _, l := range []struct{ svc, up, tr string }{{"web", "order", "a"}, {"order", "payment", "a"}, {"order", "catalog", "b"}} {
			lines = append(lines, fmt.Appendf(nil, `{"log":"retrycap-access","time":"2026-12-01T11:38:39.490502Z","service":%q,"upstream":%q,"method":"POST","attempt":1,"status":503,"duration_us":100,"trace_id":"%031x%s","idempotency_key":"order-%08d"}`,
				l.svc, l.up, i, l.tr, i))
		}
	}
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g := NewGrouper()
		p := &parser{}
		for _, l := range lines {
			if k, err := p.parse(l); k != lineAttempt {
				b.Fatal(err)
			}
			g.fold(&p.r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/keys, "B/key")
		runtime.KeepAlive(g)
	}
}

// CRI shapes: parts joined, a part-only tail counted bad, stderr and stdout parts apart.
func TestCRIParts(t *testing.T) {
	line := `{"log":"retrycap-access","time":"2026-12-01T11:38:39.490502Z","service":"web","upstream":"order","attempt":1,"status":503,"duration_us":100,"idempotency_key":"k1"}`
	in := "2026-12-01T11:38:39.490502123Z stdout P " + line[:40] + "\n" +
		"2026-12-01T11:38:39.490502123Z stderr F some warning\n" +
		"2026-12-01T11:38:39.490502123Z stdout F " + line[40:] + "\n" +
		"2026-12-01T11:38:39.490502123Z stdout P " + line[:70] + "\n"
	g := NewGrouper()
	st, err := g.Consume(strings.NewReader(in), Source{}, DefaultMaxLine)
	if err != nil || st != (Stats{Lines: 3, Attempts: 1, Skipped: 1, Bad: 1, FirstBad: ": line 4: a CRI partial line (P) whose final part (F) never came"}) {
		t.Fatalf("%+v %v", st, err)
	}
	if kr, ok := g.Key("k1"); !ok || kr.Attempts != 1 {
		t.Fatalf("%+v", kr)
	}
}

// The aggregate keeps the key's arena place and its kind in one word: every kind, keys across
// arena chunks and a key longer than a chunk come back exact, and a later line of a stronger
// kind (an Idempotency-Key over a request id) lowers the kind.
func TestKeyRefAndKind(t *testing.T) {
	g := NewGrouper()
	at := time.Date(2026, 12, 1, 11, 38, 39, 0, time.UTC)
	add := func(a Attempt) {
		a.Direction, a.Target, a.Time, a.Status, a.GRPCStatus = Outbound, "payment", at, 503, -1
		g.Add(a)
	}
	const n = 30_000 // 30,000 keys of 39 bytes: 1.17 MB, over one 1 MiB chunk
	for i := range n {
		k := fmt.Sprintf("key-%035d", i)
		switch i % 4 {
		case 0:
			add(Attempt{IdemKey: k})
		case 1:
			add(Attempt{TraceID: k})
		case 2:
			add(Attempt{RequestID: k})
		case 3:
			add(Attempt{StormOp: k})
		}
	}
	long := strings.Repeat("x", 3<<20)
	add(Attempt{RequestID: long})
	add(Attempt{IdemKey: long})
	add(Attempt{RequestID: "after-long"})
	if len(g.keys.chunks) != 4 {
		t.Fatalf("arena chunks %d, want 4 (1 MiB of 39-byte keys, their rest, the 3 MiB key's own, after-long)", len(g.keys.chunks))
	}
	kinds := []string{"idempotency-key", "trace-id", "request-id", "storm-op"}
	for i := range n {
		k := fmt.Sprintf("key-%035d", i)
		kr, ok := g.Key(k)
		if !ok || kr.Key != k || kr.Kind != kinds[i%4] || kr.Attempts != 1 {
			t.Fatalf("key %d: %v %q %q %d", i, ok, kr.Key, kr.Kind, kr.Attempts)
		}
	}
	if kr, ok := g.Key(long); !ok || kr.Key != long || kr.Kind != "idempotency-key" || kr.Attempts != 2 {
		t.Fatalf("the 3 MiB key: %v, len %d, %q, %d attempts", ok, len(kr.Key), kr.Kind, kr.Attempts)
	}
	if kr, ok := g.Key("after-long"); !ok || kr.Kind != "request-id" || kr.Attempts != 1 {
		t.Fatalf("after-long: %v %q %d", ok, kr.Kind, kr.Attempts)
	}
}

// Two keys with one hash: the second goes to the collision map and both stay exact (the
// collision is made by pointing the second key's hash at the first key's aggregate, as a
// colliding hash function would).
func TestHashCollision(t *testing.T) {
	g := NewGrouper()
	at := time.Date(2026, 12, 1, 11, 38, 39, 0, time.UTC)
	add := func(k string, status int) {
		g.Add(Attempt{Direction: Outbound, Target: "payment", Time: at, Status: status, GRPCStatus: -1, IdemKey: k})
	}
	add("first", 503)
	g.index[g.hash([]byte("second"))] = g.index[g.hash([]byte("first"))]
	add("second", 200)
	add("second", 503)
	add("first", 503)
	if len(g.collide) != 1 || g.aggs.n != 2 {
		t.Fatalf("collide %v, %d aggregates; want the second key in the collision map", g.collide, g.aggs.n)
	}
	for k, want := range map[string][2]int{"first": {2, 2}, "second": {2, 1}} {
		kr, ok := g.Key(k)
		if !ok || kr.Key != k || kr.Attempts != want[0] || kr.Failures != want[1] {
			t.Fatalf("%s: %v %q attempts %d failures %d, want %v", k, ok, kr.Key, kr.Attempts, kr.Failures, want)
		}
	}
}
