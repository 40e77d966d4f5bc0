package accesslog

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/observe"
)

func fill(e *Entry, i int) {
	e.TimeNanos = time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC).UnixNano()
	e.DurationNanos = 1520 * int64(time.Microsecond)
	e.Upstream = "payment"
	e.Attempt, e.BudgetIn, e.BudgetOut, e.Status, e.GRPCStatus = i, 4, 1, 503, -1
	e.Exhausted, e.Error = "attempts", ""
	e.SetMethod([]byte("POST"))
	e.SetAuthority([]byte("payment.shop:8080"))
	e.SetPath([]byte("http://payment.shop:8080/charge?card=4242"))
	e.SetTraceparent([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
	e.SetKey([]byte("key-\"7\""))
	e.SetRequestID([]byte("r-1"))
	e.SetStormOp([]byte("userid=9, storm-op = 17;p=1,other=2"))
}

// The line is what observe reads: every field back as it was set.
func TestLineRoundTrip(t *testing.T) {
	var e Entry
	fill(&e, 2)
	line := AppendLine(nil, "order", &e.Record)
	want := `{"log":"retrycap-access","time":"2026-12-01T10:00:00.123456Z","service":"order","upstream":"payment","method":"POST","authority":"payment.shop:8080","path":"/charge","attempt":2,"budget_in":4,"budget_out":1,"status":503,"duration_us":1520,"exhausted":"attempts","trace_id":"4bf92f3577b34da6a3ce929d0e0e4736","idempotency_key":"key-\"7\"","request_id":"r-1","storm_op":"17"}` + "\n"
	if string(line) != want {
		t.Fatalf("line\n%s\nwant\n%s", line, want)
	}
	a, ok, err := observe.ParseLine(bytes.TrimSpace(line), observe.Source{})
	if err != nil || !ok {
		t.Fatalf("observe: %v %v", ok, err)
	}
	if a.Caller != "order" || a.Target != "payment" || a.Method != "POST" || a.Path != "/charge" || a.Number != 2 ||
		a.BudgetIn != 4 || a.BudgetOut != 1 || a.Status != 503 || a.GRPCStatus != -1 || a.Duration != 1520*time.Microsecond ||
		a.Exhausted != "attempts" || a.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" || a.IdemKey != `key-"7"` ||
		a.RequestID != "r-1" || a.StormOp != "17" || !a.Time.Equal(time.Unix(0, e.TimeNanos)) {
		t.Fatalf("observe read %+v", a)
	}
}

// The writer formats a line's date and time of day once per second: its lines are
// AppendLine's, within a second, across a change of second, day and year, and back.
func TestWriterTimePrefix(t *testing.T) {
	var out syncBuffer
	w := New("order", &out, 16)
	base := time.Date(2026, 12, 31, 23, 59, 59, 999998000, time.UTC).UnixNano()
	offsets := []int64{0, 1000, 2000, 3000, 1e9, 1e9 + 5000, -2e9, 0}
	var want []byte
	for i, d := range offsets {
		e := w.Begin()
		if e == nil {
			t.Fatal("ring full")
		}
		fill(e, i+1)
		e.TimeNanos = base + d
		want = AppendLine(want, "order", &e.Record)
		w.Commit(e)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Fatalf("writer wrote\n%s\nwant\n%s", got, want)
	}
	if !strings.Contains(string(want), `"time":"2027-01-01T00:00:00.000000Z"`) {
		t.Fatalf("the offsets miss the change of year:\n%s", want)
	}
	if w.Written() != uint64(len(offsets)) {
		t.Fatalf("Written %d, want %d", w.Written(), len(offsets))
	}
}

func TestPathOf(t *testing.T) {
	for in, want := range map[string]string{"http://order/buy?x=1": "/buy", "/buy?x": "/buy", "/a#f": "/a",
		"http://order": "/", "http://order?x": "/", "*": "*", "https://h:1/p/q": "/p/q"} {
		if got := string(PathOf([]byte(in))); got != want {
			t.Errorf("PathOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// The data path's half allocates nothing: Begin, the setters, Commit.
func TestBeginCommitAllocs(t *testing.T) {
	w := New("order", &bytes.Buffer{}, 1<<16)
	defer w.Close()
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	uri := []byte("http://payment/charge?x=1")
	allocs := testing.AllocsPerRun(1000, func() {
		if e := w.Begin(); e != nil {
			e.Upstream, e.Attempt, e.Status = "payment", 1, 200
			e.SetPath(uri)
			e.SetTraceparent(tp)
			w.Commit(e)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per logged attempt", allocs)
	}
}

// At a moderate rate (4 producers, 20k lines/s in all, half a second) against a ring of 4096,
// no line is lost: every one is written, in full, none dropped.
func TestNoLossAtModerateRate(t *testing.T) {
	var out syncBuffer
	w := New("order", &out, DefaultSlots)
	const producers, perProducer = 4, 2500
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Microsecond) // pacing: 5k lines/s per producer
			defer tick.Stop()
			for i := range perProducer {
				<-tick.C
				e := w.Begin()
				if e == nil {
					continue
				}
				fill(e, p*perProducer+i)
				w.Commit(e)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	seen := map[int]bool{}
	for _, l := range lines {
		a, ok, err := observe.ParseLine([]byte(l), observe.Source{})
		if err != nil || !ok {
			t.Fatalf("line %q: %v %v", l, ok, err)
		}
		seen[a.Number] = true
	}
	if w.Dropped() != 0 || w.Written() != producers*perProducer || len(lines) != producers*perProducer || len(seen) != producers*perProducer {
		t.Fatalf("dropped %d, written %d, lines %d, distinct %d; want 0, %d", w.Dropped(), w.Written(), len(lines), len(seen), producers*perProducer)
	}
}

// Under overload (the output blocks), the data path never waits: once the ring is full every
// further line is dropped and counted, exactly.
func TestDropsCountedWhenTheWriterFallsBehind(t *testing.T) {
	out := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	const slots, extra = 64, 100
	w := New("order", out, slots)
	// One line, and wait until the background writer is stuck writing it.
	e := w.Begin()
	fill(e, 0)
	w.Commit(e)
	<-out.entered
	// The ring holds slots lines; the extra ones are dropped, at once.
	for i := 1; i <= slots+extra; i++ {
		if e := w.Begin(); e != nil {
			fill(e, i)
			w.Commit(e)
		}
	}
	if w.Dropped() != extra {
		t.Fatalf("dropped %d, want %d", w.Dropped(), extra)
	}
	close(out.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 1+slots || out.lines() != 1+slots {
		t.Fatalf("written %d (%d lines out), want %d", w.Written(), out.lines(), 1+slots)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	mu      sync.Mutex
	b       bytes.Buffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	select {
	case b.entered <- struct{}{}:
	default:
	}
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *blockingWriter) lines() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Count(b.b.Bytes(), []byte("\n"))
}

func BenchmarkBeginCommit(b *testing.B) {
	w := New("order", discard{}, 1<<16)
	defer w.Close()
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	uri := []byte("http://payment/charge?x=1")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if e := w.Begin(); e != nil {
				e.Upstream, e.Attempt, e.Status = "payment", 1, 200
				e.SetMethod([]byte("GET"))
				e.SetPath(uri)
				e.SetTraceparent(tp)
				w.Commit(e)
			}
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkAppendLine is the background writer's cost per line (formatting only).
func BenchmarkAppendLine(b *testing.B) {
	var e Entry
	fill(&e, 2)
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendLine(buf[:0], "order", &e.Record)
	}
}

// Long values are cut at their field's maximum; setting fields again (which the data path
// does not) never overflows the record: the values past its area are empty.
func TestLongValuesCut(t *testing.T) {
	var e Entry
	long := bytes.Repeat([]byte("a"), 1000)
	e.SetPath(append([]byte("/"), long...))
	e.SetKey(long)
	e.SetAuthority(long)
	if len(e.get(fPath)) != 256 || len(e.get(fKey)) != 96 || len(e.get(fAuthority)) != 128 {
		t.Fatalf("path %d, key %d, authority %d bytes", len(e.get(fPath)), len(e.get(fKey)), len(e.get(fAuthority)))
	}
	for range 10 {
		e.SetPath(append([]byte("/"), long...))
		e.SetStormOp([]byte("storm-op=" + string(long)))
	}
	e.reset()
	e.SetMethod([]byte("GET"))
	if string(e.get(fMethod)) != "GET" || len(e.get(fPath)) != 0 {
		t.Fatalf("after reset: method %q, path %q", e.get(fMethod), e.get(fPath))
	}
}

// A loop's ring writes exactly AppendLine's lines, in commit order, for every record Begin took:
// records of every size (the longest values, cut; empty ones; escapes; no chain budget or
// grpc status; long strings), through many laps of the smallest ring (the skip at its end).
func TestRingLinesAreAppendLines(t *testing.T) {
	var out syncBuffer
	w := New("order", &out, 16)
	r := w.NewRing(1)
	if r.lines != 128 {
		t.Fatalf("smallest ring: %d lines, want 128", r.lines)
	}
	long := strings.Repeat("x", 1000)
	var want []byte
	taken, dropped := 0, 0
	for i := range 3000 {
		e := r.Begin()
		if e == nil {
			dropped++
			continue
		}
		fill(e, i%70000)
		switch i % 5 {
		case 1:
			e.reset()
			e.Upstream, e.BudgetIn, e.BudgetOut, e.GRPCStatus, e.Status = "unknown", -1, -1, 14, 0
			e.Error = "connect-failure"
		case 2:
			e.reset()
			e.Upstream = long
			e.Exhausted, e.Error = long, "e\"\x01\xff"
			e.SetMethod([]byte(long))
			e.SetAuthority([]byte(long))
			e.SetPath([]byte("/" + long))
			e.SetTraceparent([]byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"))
			e.SetKey([]byte(long))
			e.SetRequestID([]byte(long))
			e.SetStormOp([]byte("storm-op=" + long))
		case 3:
			e.SetPath([]byte("/" + strings.Repeat("p", i%300)))
		}
		rec := e.Record
		rec.Upstream, rec.Exhausted, rec.Error = rec.Upstream[:min(len(rec.Upstream), strMax)],
			rec.Exhausted[:min(len(rec.Exhausted), strMax)], rec.Error[:min(len(rec.Error), strMax)]
		want = AppendLine(want, "order", &rec)
		w.Commit(e) // the Writer's Commit takes a ring's record too
		taken++
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != string(want) {
		t.Fatalf("ring wrote %d bytes, want %d; first difference at %d", len(got), len(want), firstDiff(got, string(want)))
	}
	if w.Written() != uint64(taken) || w.Dropped() != uint64(dropped) || r.Dropped() != uint64(dropped) {
		t.Fatalf("written %d dropped %d (ring %d), want %d, %d", w.Written(), w.Dropped(), r.Dropped(), taken, dropped)
	}
}

func firstDiff(a, b string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// The loop's half allocates nothing either.
func TestRingBeginCommitAllocs(t *testing.T) {
	w := New("order", &bytes.Buffer{}, 16)
	defer w.Close()
	r := w.NewRing(0)
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	uri := []byte("http://payment/charge?x=1")
	allocs := testing.AllocsPerRun(1000, func() {
		if e := w.BeginOn(r); e != nil {
			e.Upstream, e.Attempt, e.Status, e.Exhausted = "payment", 1, 200, "attempts"
			e.SetPath(uri)
			e.SetTraceparent(tp)
			w.Commit(e)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per logged attempt", allocs)
	}
}

// Two loops' rings at a moderate rate (5k lines/s each, half a second) beside the shared ring:
// no line lost, and each producer's lines in the order it committed them.
func TestRingsNoLossInOrder(t *testing.T) {
	var out syncBuffer
	w := New("order", &out, DefaultSlots)
	const producers, perProducer = 3, 2500
	var wg sync.WaitGroup
	for p := range producers {
		var r *Ring
		if p < 2 {
			r = w.NewRing(0)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Microsecond)
			defer tick.Stop()
			for i := range perProducer {
				<-tick.C
				e := w.BeginOn(r) // the third producer: the shared ring
				if e == nil {
					continue
				}
				fill(e, i+1)
				e.Upstream = [producers]string{"loop0", "loop1", "shared"}[p]
				w.Commit(e)
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	for _, l := range lines {
		a, ok, err := observe.ParseLine([]byte(l), observe.Source{})
		if err != nil || !ok {
			t.Fatalf("line %q: %v %v", l, ok, err)
		}
		if a.Number != last[a.Target]+1 {
			t.Fatalf("%s: attempt %d after %d", a.Target, a.Number, last[a.Target])
		}
		last[a.Target] = a.Number
	}
	if w.Dropped() != 0 || w.Written() != producers*perProducer || len(lines) != producers*perProducer ||
		last["loop0"] != perProducer || last["loop1"] != perProducer || last["shared"] != perProducer {
		t.Fatalf("dropped %d, written %d, lines %d, last %v; want 0, %d", w.Dropped(), w.Written(), len(lines), last, producers*perProducer)
	}
}

// Under overload a loop's ring drops and counts, exactly: the smallest ring (128 lines) takes
// records while it has room for two of the longest (2 x 24 lines); fill's record is 3 lines, so
// it holds 27 (81 lines) and drops the rest.
func TestRingDropsCounted(t *testing.T) {
	out := &blockingWriter{entered: make(chan struct{}, 1), release: make(chan struct{})}
	w := New("order", out, 16)
	r := w.NewRing(1)
	if maxRecordLines != 24 {
		t.Fatalf("longest record %d lines, want 24", maxRecordLines)
	}
	e := r.Begin()
	fill(e, 0)
	r.Commit(e)
	<-out.entered // the writer took it (the ring is empty) and is stuck writing it
	const held, extra = 27, 100
	for i := 1; i <= held+extra; i++ {
		if e := r.Begin(); e != nil {
			fill(e, i)
			r.Commit(e)
		}
	}
	if r.pos != 3*(1+held) {
		t.Fatalf("ring at line %d, want %d (records of 3 lines)", r.pos, 3*(1+held))
	}
	if w.Dropped() != extra || r.Dropped() != extra {
		t.Fatalf("dropped %d (ring %d), want %d", w.Dropped(), r.Dropped(), extra)
	}
	close(out.release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Written() != 1+held || out.lines() != 1+held {
		t.Fatalf("written %d (%d lines out), want %d", w.Written(), out.lines(), 1+held)
	}
}

// BenchmarkRingBeginCommit is BenchmarkBeginCommit with a ring per producer (an event loop's):
// the A/B of the layouts.
func BenchmarkRingBeginCommit(b *testing.B) {
	w := New("order", discard{}, 16)
	defer w.Close()
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	uri := []byte("http://payment/charge?x=1")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := w.NewRing(0)
		for pb.Next() {
			if e := r.Begin(); e != nil {
				e.Upstream, e.Attempt, e.Status = "payment", 1, 200
				e.SetMethod([]byte("GET"))
				e.SetPath(uri)
				e.SetTraceparent(tp)
				r.Commit(e)
			}
		}
	})
	b.ReportMetric(float64(w.Dropped())/float64(b.N), "dropped/op")
}

// A streamed body's cut (Cut, BodyBytes) follows error on the line, written through
// CommitRecord from a record filled outside the rings; observe reads the line as any other.
// A slot reset for its next record carries no cut.
func TestCutLine(t *testing.T) {
	var out syncBuffer
	w := New("order", &out, 4)
	var r Record
	r.TimeNanos = time.Date(2026, 12, 1, 10, 0, 0, 5000, time.UTC).UnixNano()
	r.DurationNanos = 412 * int64(time.Microsecond)
	r.Upstream, r.Attempt, r.BudgetIn, r.Status, r.GRPCStatus = "payment", 1, -1, 200, -1
	r.SetMethod([]byte("GET"))
	r.SetAuthority([]byte("payment"))
	r.SetPath([]byte("/big"))
	r.Cut, r.BodyBytes = "upstream", 50000
	if !w.CommitRecord(&r) {
		t.Fatal("ring full")
	}
	e := w.Begin()
	fill(e, 2)
	w.Commit(e)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(out.String(), "\n")
	want := `{"log":"retrycap-access","time":"2026-12-01T10:00:00.000005Z","service":"order","upstream":"payment","method":"GET","authority":"payment","path":"/big","attempt":1,"status":200,"duration_us":412,"cut":"upstream","body_bytes":50000}` + "\n"
	if len(lines) != 3 || lines[0] != want || strings.Contains(lines[1], `"cut"`) {
		t.Fatalf("writer wrote\n%s\nwant first\n%s\nthen a line without a cut", out.String(), want)
	}
	a, ok, err := observe.ParseLine(bytes.TrimSpace([]byte(lines[0])), observe.Source{})
	if err != nil || !ok || a.Status != 200 || a.Path != "/big" || a.Number != 1 {
		t.Fatalf("observe read %+v, %v, %v", a, ok, err)
	}
	r.reset()
	if r.Cut != "" || r.BodyBytes != 0 {
		t.Fatalf("reset left cut %q, body_bytes %d", r.Cut, r.BodyBytes)
	}
}

// An upstream's grpc-status is any uint32 (grpc-go reads "-1" as 4294967295):
// the line carries it whole, through the writer's slots and through an event
// loop's ring, which packs records (it kept 16 bits, and 99999 was logged as
// no status).
func TestEveryGRPCStatusLogged(t *testing.T) {
	codes := []int{-1, 0, 14, 32767, 32768, 65535, 99999, 4294967295}
	for _, via := range []string{"writer", "ring"} {
		t.Run(via, func(t *testing.T) {
			var out syncBuffer
			w := New("order", &out, 16)
			begin, commit := w.Begin, w.Commit
			if via == "ring" {
				r := w.NewRing(0)
				begin, commit = r.Begin, r.Commit
			}
			for i, c := range codes {
				e := begin()
				if e == nil {
					t.Fatal("ring full")
				}
				fill(e, i+1)
				e.GRPCStatus = c
				commit(e)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
			if len(lines) != len(codes) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(codes), out.String())
			}
			for i, c := range codes {
				has := strings.Contains(lines[i], `"grpc_status"`)
				want := fmt.Sprintf(`"grpc_status":%d,`, c)
				if c < 0 && has || c >= 0 && !strings.Contains(lines[i], want) {
					t.Errorf("line %d for code %d: %s", i, c, lines[i])
				}
			}
		})
	}
}
