package graph

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestJudgeTime(t *testing.T) {
	// gateway -> order: 3 x min(1s, T(order)) + 300ms; order -> payment: 3 x 200ms + 300ms =
	// 900ms; two client tries. gateway -> search: 1 x 20s (its own chain, not order's).
	base := []e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}}
	baseHops := []hopDecl{{"gateway", "order", Hop{rc(3, time.Second)}}, {"order", "payment", Hop{rc(3, 200*ms)}}}
	tests := []struct {
		name    string
		edges   []e
		eps     []ep
		hops    []hopDecl
		service string
		max     time.Duration
		over    bool
		chain   string // Explain, or the chain's time when not over
		plan    string // PlanSuffix at service
	}{
		{
			// 2 x (3 x 900ms + 300ms) = 6s; payment=2: order 2 x 200ms + 100ms = 500ms, the
			// chain 2 x (1.5s + 300ms) = 3.6s; payment=3 is 6s.
			name: "order's edge over, payment=2 fits", edges: base, eps: []ep{{"gateway", 2}}, hops: baseHops,
			service: "order", max: 5 * time.Second, over: true,
			chain: "client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s",
			plan:  "; order may keep payment=2",
		},
		{
			// order=2: 2 x 900ms + 100ms = 1.9s, the chain 3.8s.
			name: "the entry's edge over, order=2 fits", edges: base, eps: []ep{{"gateway", 2}}, hops: baseHops,
			service: "gateway", max: 5 * time.Second, over: true,
			chain: "client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s",
			plan:  "; gateway may keep order=2",
		},
		{
			// payment=1: order 200ms, gateway 3 x 200ms + 300ms = 900ms, 1.8s > 1s.
			name: "no attempt count fits", edges: base, eps: []ep{{"gateway", 2}}, hops: baseHops,
			service: "order", max: time.Second, over: true,
			chain: "client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s",
			plan:  "; no rewrite fits: even with order: payment=1, client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s",
		},
		{
			// An Istio layer under order's: its 100ms timeout, then + 300ms held before it
			// (fault.delay), 400ms a call. order 3 x 400ms + 300ms = 1.5s, gateway 3 x 1s +
			// 300ms = 3.3s, 6.6s. payment=2: 900ms, gateway 3s, 6s, still over; payment=1: 3s
			// (payment=2 would fit, 2.4s, with the delay left out of the plan's hops).
			name: "a fault delay in the plan's hops", edges: base, eps: []ep{{"gateway", 2}},
			hops:    []hopDecl{{"gateway", "order", Hop{rc(3, time.Second)}}, {"order", "payment", Hop{rc(3, 2*time.Second), delayed(istio(1, 0, 100*ms), 300*ms)}}},
			service: "order", max: 5 * time.Second, over: true,
			chain: "client -x2-> gateway 3.3s -> order 1.5s -> payment ? = 6.6s > maxTimeToAnswer 5s",
			plan:  "; order may keep payment=1",
		},
		{
			name: "within", edges: base, eps: []ep{{"gateway", 2}}, hops: baseHops,
			service: "order", max: 6 * time.Second, chain: "6s",
		},
		{
			// The slow search chain (20s) does not take part in order's: order's is judged on
			// its own (6s), and search's edges are not the request's.
			name:    "only the chains through the service",
			edges:   append(slices.Clone(base), e{"gateway", "search", 1, 1}),
			eps:     []ep{{"gateway", 2}},
			hops:    append(slices.Clone(baseHops), hopDecl{"gateway", "search", Hop{rc(1, 20*time.Second)}}),
			service: "order", max: 10 * time.Second, chain: "6s",
		},
		{
			// No timeout on order -> payment, nor on gateway -> order: unbounded, and no count
			// of attempts bounds it.
			name:    "unbounded",
			edges:   base,
			eps:     []ep{{"gateway", 1}},
			hops:    []hopDecl{{"gateway", "order", Hop{{Name: "app", Tries: 2}}}, {"order", "payment", Hop{{Name: "app", Tries: 3}}}},
			service: "order", max: 5 * time.Second, over: true,
			chain: "gateway unbounded -> order unbounded -> payment ? = unbounded > maxTimeToAnswer 5s (no timeout on gateway -> order -> payment, and payment's own time is unknown)",
			plan:  "; no rewrite fits: even with order: payment=1, gateway unbounded -> order unbounded -> payment ? = unbounded > maxTimeToAnswer 5s (no timeout on gateway -> order -> payment, and payment's own time is unknown)",
		},
		{
			// No entrypoint reaches worker.
			name:    "unreached",
			edges:   append(slices.Clone(base), e{"worker", "payment", 3, 1}),
			eps:     []ep{{"gateway", 1}},
			hops:    append(slices.Clone(baseHops), hopDecl{"worker", "payment", Hop{rc(3, 10*time.Second)}}),
			service: "worker", max: time.Second, chain: "0s",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var callers []string
			for _, x := range tc.edges {
				callers = append(callers, x.from)
			}
			g := build(callers, tc.edges, tc.eps)
			tt := NewTiming(g)
			for _, h := range tc.hops {
				if !tt.SetHop(h.from, h.to, h.hop) {
					t.Fatalf("no edge %s -> %s", h.from, h.to)
				}
			}
			j, plan := JudgeTime(g, tt, tc.service, tc.max)
			if j.Over != tc.over {
				t.Fatalf("over %t, want %t (%v)", j.Over, tc.over, j)
			}
			got := j.Explain()
			if !tc.over {
				got = FormatTime(j.Chain.Time)
			}
			if got != tc.chain {
				t.Errorf("chain\n got %q\nwant %q", got, tc.chain)
			}
			if s := PlanSuffix(tc.service, plan); s != tc.plan {
				t.Errorf("plan\n got %q\nwant %q", s, tc.plan)
			}
			if !tc.over && plan != nil {
				t.Errorf("a plan when within: %+v", plan)
			}
		})
	}
}

// TestJudgeTimeProperty checks JudgeTime against brute force on random graphs, half with cycles
// (the chains visit a service once), with random layers:
// the judged time is the worst over every path from an entrypoint through one of the service's
// edges, the chain named takes it, and the plan's counts are the largest that fit (with them
// every such path is within the maximum; one more on a lowered edge is over), or Fits is false
// only when 1 does not fit.
func TestJudgeTimeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 2))
	checked, checkedCyclic := 0, 0
	for iter := range 400 {
		var g *Graph
		if iter%2 == 0 {
			g = randomTimedCyclic(r)
		} else {
			g = randomDAG(r, 2+r.IntN(8), 3)
			for _, ed := range g.Edges() {
				if r.IntN(6) == 0 {
					continue
				}
				h := Hop{randomLayer(r)}
				if r.IntN(3) == 0 {
					h = append(h, randomLayer(r))
				}
				g.SetHop(ed.From, ed.To, h)
			}
		}
		c := newCore(g, nil)
		var ents []Entrypoint
		for _, en := range c.ents {
			ents = append(ents, Entrypoint{Service: g.names[en.node], ClientAttempts: en.k})
		}
		c.release()
		svc := name(r.IntN(g.Len()))
		if len(g.OutEdges(svc)) == 0 {
			continue
		}
		// through is the worst time over paths through svc -> to (to "" : any of svc's edges).
		through := func(to string) int64 {
			worst := int64(-1)
			for _, en := range ents {
				// The chains that visit a service once, to where every call would return.
				var walk func(path []string, via bool)
				walk = func(path []string, via bool) {
					v := path[len(path)-1]
					ended := true
					for _, ed := range g.OutEdges(v) {
						if slices.Contains(path, ed.To) {
							continue
						}
						ended = false
						walk(append(slices.Clone(path), ed.To), via || v == svc && (to == "" || ed.To == to))
					}
					if ended && via {
						worst = max(worst, pathTime(g, path, en.ClientAttempts))
					}
				}
				walk([]string{en.Service}, false)
			}
			return worst
		}
		want := through("")
		maxT := time.Duration(1+r.IntN(300)) * 10 * ms
		j, plan := JudgeTime(g, nil, svc, maxT)
		if want < 0 {
			if j.Over || len(j.Chain.Path) > 0 {
				t.Fatalf("iter %d: %s: judged %v where no entrypoint reaches it", iter, svc, j)
			}
			continue
		}
		checked++
		if int64(j.Chain.Time) != want {
			t.Fatalf("iter %d: %s: %v, brute force %v", iter, svc, j.Chain.Time, time.Duration(want))
		}
		if got := pathTime(g, j.Chain.Path, j.Chain.ClientAttempts); got != want || !slices.Contains(j.Chain.Path, svc) {
			t.Fatalf("iter %d: %s: chain %v takes %v, judged %v", iter, svc, j.Chain.Path, time.Duration(got), time.Duration(want))
		}
		for k, v := range j.Chain.Path {
			if slices.Contains(j.Chain.Path[:k], v) {
				t.Fatalf("iter %d: chain %v visits %s twice", iter, j.Chain.Path, v)
			}
		}
		if g.adjacency().order == nil {
			checkedCyclic++
		}
		for _, ed := range g.OutEdges(svc) {
			// The mesh gate's judgement of one edge: the worst chain through it.
			je := JudgeTimeEdge(g, nil, svc, ed.To, maxT)
			if w := through(ed.To); (w >= 0) != (len(je.Chain.Path) > 0) || w >= 0 && (int64(je.Chain.Time) != w || je.Over != (w > int64(maxT))) {
				t.Fatalf("iter %d: JudgeTimeEdge(%s -> %s) = %v over %v, brute force %v", iter, svc, ed.To, je.Chain.Time, je.Over, time.Duration(w))
			}
		}
		if j.Over != (want > int64(maxT)) {
			t.Fatalf("iter %d: over %t for %v against %v", iter, j.Over, time.Duration(want), maxT)
		}
		if !j.Over {
			continue
		}
		for _, ed := range g.OutEdges(svc) {
			n, ok := plan.New(svc, ed.To)
			if !ok {
				t.Fatalf("iter %d: the plan misses %s -> %s", iter, svc, ed.To)
			}
			eid, _ := g.EdgeIndex(svc, ed.To)
			r := g.time.hopOf(int32(eid))
			setFirst := func(k int64) {
				if r < 0 {
					g.SetEdge(svc, ed.To, k, ed.Calls)
					return
				}
				g.time.hops[r].hop[0].Tries = k
				g.time.flat[g.time.hops[r].lo] = reduce(g.time.hops[r].hop[0])
			}
			orig := ed.Attempts
			if r >= 0 {
				orig = g.time.hops[r].hop[0].Tries
			}
			setFirst(n)
			fits := through(ed.To) <= int64(maxT)
			if !fits && (n > 1 || plan.Fits) {
				t.Fatalf("iter %d: %s -> %s at %d: fits %t, plan %+v", iter, svc, ed.To, n, fits, plan)
			}
			if n < orig && fits {
				setFirst(n + 1)
				if through(ed.To) <= int64(maxT) {
					t.Fatalf("iter %d: %s -> %s: %d fits too, the plan says %d", iter, svc, ed.To, n+1, n)
				}
			}
			setFirst(orig)
		}
	}
	if checked < 100 || checkedCyclic < 40 {
		t.Fatalf("only %d judgements checked, %d on graphs with a cycle", checked, checkedCyclic)
	}
}

func TestMergePlans(t *testing.T) {
	a := &Plan{Fits: true, Attempts: map[EdgeKey]int64{{"o", "p"}: 2, {"o", "q"}: 3}, Changes: []Change{{"o", "p", 3, 2}}}
	b := &Plan{Fits: false, Reason: "no rewrite fits: x", Attempts: map[EdgeKey]int64{{"o", "p"}: 1, {"o", "q"}: 2}, Changes: []Change{{"o", "p", 3, 1}, {"o", "q", 3, 2}}}
	m := MergePlans(a, b)
	if got := PlanSuffix("o", m); got != "; no rewrite fits: x" {
		t.Errorf("suffix %q", got)
	}
	m.Fits = true
	if got := PlanSuffix("o", m); got != "; o may keep p=1, q=2" {
		t.Errorf("suffix %q", got)
	}
	if m.Attempts[EdgeKey{"o", "p"}] != 1 || m.Attempts[EdgeKey{"o", "q"}] != 2 || len(a.Changes) != 1 || a.Changes[0].New != 2 {
		t.Errorf("merged %+v, a %+v", m, a)
	}
	if MergePlans(nil, b) != b || MergePlans(a, nil) != a || !strings.HasPrefix(b.Reason, "no rewrite") {
		t.Error("nil sides")
	}
}

// TestEntryTimeBeyondMaxChains judges an entrypoint whose chain is not among AnalyzeTime's
// MaxChains worst: 60 entrypoints e00..e59, e<i> -> db with one try and a per-try timeout of
// (i+1) x 100ms, so e<i>'s chain takes (i+1) x 100ms and the 50 listed are e10..e59. Before the
// fix EntryTime looked e09 up among those and judged its 1s "not over" 500ms.
func TestEntryTimeBeyondMaxChains(t *testing.T) {
	g := New()
	tt := NewTiming(g)
	const n = 60
	for i := range n {
		name := fmt.Sprintf("e%02d", i)
		g.AddService(name)
		g.AddEdge(name, "db", 1, 1)
		g.SetEntrypoint(name, 1)
	}
	for i := range n {
		if !tt.SetHop(fmt.Sprintf("e%02d", i), "db", Hop{rc(1, time.Duration(i+1)*100*ms)}) {
			t.Fatal("no edge")
		}
	}
	ta := AnalyzeTimeWith(g, tt, 500*ms)
	if len(ta.Chains) != MaxChains || ta.Chains[MaxChains-1].Entrypoint != "e10" || ta.ViolationsTotal != 55 {
		t.Fatalf("chains %d, last %q, violations %d", len(ta.Chains), ta.Chains[len(ta.Chains)-1].Entrypoint, ta.ViolationsTotal)
	}
	tests := []struct {
		name  string
		entry string
		over  bool
		chain string // Explain, or the chain's time when not over
	}{
		{name: "below the listed chains, over", entry: "e09", over: true, chain: "e09 1s -> db ? = 1s > maxTimeToAnswer 500ms"},
		{name: "the first entrypoint, over", entry: "e05", over: true, chain: "e05 600ms -> db ? = 600ms > maxTimeToAnswer 500ms"},
		{name: "the worst, over", entry: "e59", over: true, chain: "e59 6s -> db ? = 6s > maxTimeToAnswer 500ms"},
		{name: "below the listed chains, within", entry: "e02", chain: "300ms"},
		{name: "at the maximum, within", entry: "e04", chain: "500ms"},
		{name: "not an entrypoint", entry: "db", chain: "0s"},
		{name: "not in the graph", entry: "web", chain: "0s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := EntryTime(g, tt, tc.entry, 500*ms)
			if j.Over != tc.over {
				t.Fatalf("over %t, want %t (%v)", j.Over, tc.over, j)
			}
			got := j.Explain()
			if !tc.over {
				got = FormatTime(j.Chain.Time)
			}
			if got != tc.chain {
				t.Errorf("chain\n got %q\nwant %q", got, tc.chain)
			}
		})
	}
	// Every listed chain is the one EntryTime computes alone.
	for _, ch := range ta.Chains {
		if j := EntryTime(g, tt, ch.Entrypoint, 500*ms); !reflect.DeepEqual(j.Chain, ch) || j.UpperBound {
			t.Errorf("%s: EntryTime %+v, AnalyzeTime %+v", ch.Entrypoint, j.Chain, ch)
		}
	}
}
