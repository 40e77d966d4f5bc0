package graph

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// TestTimeDifferentialDump writes AnalyzeTime's whole result (chains, inversions with their
// texts, violations, counts) as one JSON line per graph to the file named by RETRYCAP_TIME_DUMP,
// and is skipped without it. It is the A/B check for changes to the time pass's speed that must
// not change a single result: build the test binary of the old tree with this file copied in and
// of the new one, run both with the variable set, and compare the files byte for byte (see
// docs/benchmarks.md, "Cycle and time cost, third session"). The graphs: random DAGs and graphs
// with call loops whose hops have 0 to 5 layers (so every padding the compiled layers use, 1, 2
// and 3, and the unpadded layout), hops declared twice, entry hops, huge tries and timeouts (the
// saturating arithmetic), and the benchmark graphs with one and two layers per hop.
func TestTimeDifferentialDump(t *testing.T) {
	path := os.Getenv("RETRYCAP_TIME_DUMP")
	if path == "" {
		t.Skip("RETRYCAP_TIME_DUMP not set: nothing to write")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	n := 0
	dump := func(g *Graph, maxT time.Duration) {
		n++
		if err := enc.Encode(AnalyzeTime(g, maxT)); err != nil {
			t.Fatalf("graph %d: encode: %v", n, err)
		}
	}
	r := rand.New(rand.NewPCG(29, 2026))
	layer := func() TimeLayer {
		l := randomLayer(r)
		switch r.IntN(20) {
		case 0:
			l.Tries = 1 << (20 + r.IntN(40)) // past the fast multiply's bound, up to saturation
		case 1:
			l.PerTry = time.Duration(1+r.IntN(1000)) * time.Hour
		case 2:
			l.Timeout = time.Duration(1+r.IntN(3)) * time.Millisecond
		}
		return l
	}
	for iter := range 3000 {
		var g *Graph
		if iter%3 == 2 {
			g = randomTimedCyclic(r)
		} else {
			g = randomDAG(r, 2+r.IntN(12), 4)
		}
		// Most layers a hop of this graph may have: 1 and 2 take the written-out fast paths,
		// 3 the padded loop, 5 the unpadded one.
		most := []int{1, 2, 3, 5}[iter%4]
		for _, ed := range g.Edges() {
			if r.IntN(6) == 0 {
				continue
			}
			h := make(Hop, r.IntN(most+1))
			for i := range h {
				h[i] = layer()
			}
			if iter%2 == 1 && len(h) > 0 && h[len(h)-1].PerTry == 0 {
				// Half the graphs bound every timed hop's innermost try: fewer unbounded chains.
				h[len(h)-1].PerTry = time.Duration(1+r.IntN(50)) * 10 * ms
			}
			g.SetHop(ed.From, ed.To, h)
			if r.IntN(6) == 0 {
				g.AddHop(ed.From, ed.To, Hop{layer()})
			}
		}
		for _, ep := range g.Entrypoints() {
			if r.IntN(3) == 0 {
				g.SetEntryHop(ep.Service, Hop{layer()})
			}
		}
		dump(g, time.Duration(r.IntN(3))*time.Second)
	}
	for _, size := range []int{1000, 10000} {
		g := timedGraph(size)
		dump(g, 5*time.Second)
		one := benchGraph(size) // one layer per hop
		for _, ed := range one.Edges() {
			one.SetHop(ed.From, ed.To, Hop{{Name: "retrycap", Tries: ed.Attempts, PerTry: time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}})
		}
		dump(one, 5*time.Second)
		_, cyc := cyclicLayered(size)
		for i, ed := range cyc.Edges() {
			h := Hop{{Name: "retrycap", Tries: ed.Attempts, PerTry: time.Duration(200+i%5*100) * time.Millisecond}}
			if i%3 == 0 {
				h = append(h, TimeLayer{Name: "Istio", Tries: 3, BackoffBase: 25 * time.Millisecond, BackoffMax: 250 * time.Millisecond})
			}
			cyc.SetHop(ed.From, ed.To, h)
		}
		dump(cyc, 5*time.Second)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s: %v", path, err)
	}
	t.Logf("%d analyses written to %s", n, path)
}
