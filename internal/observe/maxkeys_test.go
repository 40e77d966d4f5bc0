package observe

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// TestMaxKeys: a stream of 10,000,000 distinct keys against a bound of 10,000 stops at the
// 10,001st key's line, counts the 10,000 lines before it exactly, names the line, the key and
// the bound, reads nothing more (the writer is left with 9,989,999 lines unread), and the heap
// stays under 16 MiB; before, every key was held (about 230 bytes each: 10,000,000 keys, 2.3
// GB) and there was no bound to name.
func TestMaxKeys(t *testing.T) {
	const bound, offered = 10_000, 10_000_000
	pr, pw := io.Pipe()
	written := make(chan int, 1)
	go func() {
		n := 0
		for ; n < offered; n++ {
			if _, err := fmt.Fprintf(pw, "%s\n", rline(okTime, fmt.Sprintf(`,"idempotency_key":"key-%08d"`, n))); err != nil {
				break
			}
		}
		pw.Close()
		written <- n
	}()
	g := NewGrouper()
	g.SetMaxKeys(bound)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	st, err := g.Consume(pr, Source{Name: "keys.log"}, DefaultMaxLine)
	pr.CloseWithError(errors.New("the reader stopped"))
	runtime.GC()
	runtime.ReadMemStats(&after)
	want := `keys.log: line 10001: "key-00010000" would be one of more than 10,000 distinct keys, over --max-keys 10000 (memory is per key: about 1 GiB per 4,000,000); ` +
		`aggregate in the log store (-o csv to load it, -o sql or --postgres to query it), read fewer lines, or raise --max-keys where the memory is`
	var le *LimitError
	if !errors.As(err, &le) || err.Error() != want {
		t.Fatalf("error\n got %v\nwant %s", err, want)
	}
	if want := (Stats{Lines: bound, Attempts: bound}); st != want || g.Stats() != want || g.Err() == nil || g.Err().Error() != err.Error() {
		t.Fatalf("stats %+v (grouper's %+v), want %+v; Err %v", st, g.Stats(), want, g.Err())
	}
	if n := <-written; n >= offered {
		t.Fatalf("the writer wrote all %d lines: the run did not stop", n)
	}
	// A second stream is not read at all: the run stopped.
	st2, err2 := g.Consume(strings.NewReader(rline(okTime, `,"idempotency_key":"late"`)+"\n"), Source{Name: "late.log"}, DefaultMaxLine)
	if st2 != (Stats{}) || err2 == nil || err2.Error() != want {
		t.Fatalf("after the bound: %+v %v", st2, err2)
	}
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew %d bytes for %d keys", grew, bound)
	if grew > 16<<20 {
		t.Fatalf("heap grew %d bytes over %d keys, bound 16 MiB", grew, bound)
	}
	runtime.KeepAlive(g)
}

// TestMaxKeysTraceIDs: the bound also holds the distinct trace ids over all keys (one key with
// a new trace per request would otherwise grow without bound on a fixed number of keys), and
// a line whose key and trace id are known goes on being read at the bound.
func TestMaxKeysTraceIDs(t *testing.T) {
	var in strings.Builder
	for i := range 3 {
		fmt.Fprintf(&in, "%s\n", rline(okTime, fmt.Sprintf(`,"trace_id":"%032x","idempotency_key":"same"`, i+1)))
	}
	fmt.Fprintf(&in, "%s\n", rline(okTime, fmt.Sprintf(`,"trace_id":"%032x","idempotency_key":"same"`, 2))) // known: read
	fmt.Fprintf(&in, "%s\n", rline(okTime, `,"idempotency_key":"other"`))                                   // a 2nd key, no trace: read
	fmt.Fprintf(&in, "%s\n", rline(okTime, fmt.Sprintf(`,"trace_id":"%032x","idempotency_key":"same"`, 4))) // a 4th trace id: the bound
	g := NewGrouper()
	g.SetMaxKeys(3)
	st, err := g.Consume(strings.NewReader(in.String()), Source{Name: "t.log"}, DefaultMaxLine)
	want := `t.log: line 6: "00000000000000000000000000000004" would be one of more than 3 distinct trace ids, over --max-keys 3 (memory is per key: about 1 GiB per 4,000,000); ` +
		`aggregate in the log store (-o csv to load it, -o sql or --postgres to query it), read fewer lines, or raise --max-keys where the memory is`
	if err == nil || err.Error() != want || st != (Stats{Lines: 5, Attempts: 5}) {
		t.Fatalf("%+v\n got %v\nwant %s", st, err, want)
	}
	if kr, _ := g.Key("same"); kr.Attempts != 4 || kr.ChainLinks != 3 {
		t.Fatalf("same: %d attempts, %d chain links; want 4, 3 (the refused line not counted)", kr.Attempts, kr.ChainLinks)
	}
}

// TestMaxKeysIngressNginx: an ingress-nginx line lists its tries under one key: over the
// bound, none of them is counted (not the first try alone).
func TestMaxKeysIngressNginx(t *testing.T) {
	in := ingressLine("10.0.0.1:8080, 10.0.0.2:8080", "0, 157", "0.004, 0.008", "502, 200", "a1") + "\n" +
		ingressLine("10.0.0.1:8080, 10.0.0.2:8080", "0, 157", "0.004, 0.008", "502, 200", "b2") + "\n"
	g := NewGrouper()
	g.SetMaxKeys(1)
	st, err := g.Consume(strings.NewReader(in), Source{Name: "n.log"}, DefaultMaxLine)
	if want := (Stats{Lines: 1, Attempts: 2, ListedRetries: 1}); st != want || err == nil || !strings.HasPrefix(err.Error(), `n.log: line 2: "b2" would be one of more than 1 distinct keys`) {
		t.Fatalf("%+v %v", st, err)
	}
}

// TestMaxKeysServiceNames: the bound also holds the distinct service names, which come from
// hosts a client chose (Envoy's default format names a line by its :authority): a scanner's
// Host headers under one key were as many names, and service nodes, as lines.
func TestMaxKeysServiceNames(t *testing.T) {
	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, `[2026-11-24T14:06:00.000Z] "GET / HTTP/1.1" 404 NR 0 0 0 - "-" "scanner" "same-rid" "h%d.example.com" "-"`+"\n", i)
	}
	g := NewGrouper()
	g.SetMaxKeys(3)
	st, err := g.Consume(strings.NewReader(in.String()), Source{Name: "s.log"}, DefaultMaxLine)
	want := `s.log: line 4: "h3" would be one of more than 3 distinct service names, over --max-keys 3 (memory is per key: about 1 GiB per 4,000,000); ` +
		`aggregate in the log store (-o csv to load it, -o sql or --postgres to query it), read fewer lines, or raise --max-keys where the memory is`
	if err == nil || err.Error() != want || st != (Stats{Lines: 3, Attempts: 3}) {
		t.Fatalf("%+v\n got %v\nwant %s", st, err, want)
	}
	if kr, _ := g.Key("same-rid"); kr.Attempts != 3 || len(kr.Services) != 3 {
		t.Fatalf("same-rid: %d attempts at %d services; want 3 at 3 (the refused line not counted)", kr.Attempts, len(kr.Services))
	}
}
