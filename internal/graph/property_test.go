package graph

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomDAG returns a DAG over n services s0..s(n-1) (edges only from lower to higher index),
// with attempts 1..maxA and calls 1..3, and sometimes explicit entrypoints.
func randomDAG(r *rand.Rand, n int, maxA int64) *Graph {
	g := New()
	for i := range n {
		g.AddService(name(i))
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			if r.IntN(100) < 30 {
				g.AddEdge(name(i), name(j), 1+r.Int64N(maxA), 1+r.Int64N(3))
			}
		}
	}
	if r.IntN(2) == 0 {
		for i := range n {
			if r.IntN(4) == 0 {
				g.SetEntrypoint(name(i), 1+r.Int64N(3))
			}
		}
	}
	return g
}

func name(i int) string { return "s" + FormatInt(int64(i)) }

// brute enumerates every path from every effective entrypoint.
func brute(g *Graph, ents []Entrypoint) (amp int64, load map[string]int64) {
	load = map[string]int64{}
	var walk func(v string, prod, ld int64)
	walk = func(v string, prod, ld int64) {
		amp = max(amp, prod)
		load[v] = add(load[v], ld)
		for _, e := range g.OutEdges(v) {
			walk(e.To, mul(prod, e.Attempts), mul(ld, mul(e.Attempts, e.Calls)))
		}
	}
	for _, e := range ents {
		walk(e.Service, e.ClientAttempts, e.ClientAttempts)
	}
	return amp, load
}

func withAttempts(g *Graph, att map[EdgeKey]int64) *Graph {
	h := New()
	for _, s := range g.Services() {
		if s.Selected {
			h.AddService(s.Name)
		}
	}
	for _, e := range g.Edges() {
		a := e.Attempts
		if v, ok := att[EdgeKey{e.From, e.To}]; ok {
			a = v
		}
		h.AddEdge(e.From, e.To, a, e.Calls)
	}
	for _, ep := range g.Entrypoints() {
		h.SetEntrypoint(ep.Service, ep.ClientAttempts)
	}
	return h
}

func TestPropertyAnalyzeMatchesBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		g := randomDAG(r, 2+r.IntN(9), 4)
		a := Analyze(g, 4)
		amp, _ := brute(g, a.Entrypoints)
		if a.Amplification != amp {
			t.Fatalf("graph %d: amplification %d, brute force %d", i, a.Amplification, amp)
		}
		// The load is one entrypoint's (the largest), never a sum over entrypoints.
		// Ties: the service named first, then the entrypoint listed first.
		var best int64
		var at ServiceLoad
		var atEntry string
		order := map[string]int{}
		for j, s := range g.Services() {
			order[s.Name] = j
		}
		for _, ep := range a.Entrypoints {
			_, load := brute(g, []Entrypoint{ep})
			for s, l := range load {
				if l > best || (l == best && order[s] < order[at.Service]) {
					best, at, atEntry = l, ServiceLoad{Service: s, Requests: l}, ep.Service
				}
			}
		}
		if a.WorstCaseLoad != at || a.LoadEntrypoint != atEntry || a.LoadIsBound {
			t.Fatalf("graph %d: load %+v at %s, brute force %+v at %s", i, a.WorstCaseLoad, a.LoadEntrypoint, at, atEntry)
		}
		if len(a.WorstPath) > 0 {
			f := []int64{a.Chains[0].ClientAttempts}
			for j := 0; j+1 < len(a.WorstPath); j++ {
				e, _ := g.Edge(a.WorstPath[j], a.WorstPath[j+1])
				f = append(f, e.Attempts)
			}
			if Product(f) != amp {
				t.Fatalf("graph %d: worst path %v multiplies to %d, not %d", i, a.WorstPath, Product(f), amp)
			}
		}
		for _, v := range a.Violations {
			if v.Amplification <= 4 || Product(v.Factors) != v.Amplification {
				t.Fatalf("graph %d: violation %+v", i, v)
			}
		}
		if (len(a.Violations) > 0) == a.WithinCap() {
			t.Fatalf("graph %d: %d violations, within cap %v", i, len(a.Violations), a.WithinCap())
		}
	}
}

func TestPropertyPlanRewrite(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 500 {
		g := randomDAG(r, 2+r.IntN(12), 5)
		cap := 1 + r.Int64N(12)
		p, err := PlanRewrite(g, cap)
		fits := true
		for _, ep := range Analyze(g, cap).Entrypoints {
			if ep.ClientAttempts > cap {
				fits = false
			}
		}
		if p.Fits != fits || (err == nil) != fits {
			t.Fatalf("graph %d cap %d: fits %v err %v, want fits %v", i, cap, p.Fits, err, fits)
		}
		for _, e := range g.Edges() {
			if v, _ := p.New(e.From, e.To); v > e.Attempts || v < 1 {
				t.Fatalf("graph %d: %s>%s raised or zeroed: %d -> %d", i, e.From, e.To, e.Attempts, v)
			}
		}
		after := withAttempts(g, p.Attempts)
		if a := Analyze(after, cap); fits && !a.WithinCap() {
			t.Fatalf("graph %d cap %d: after the plan amplification %d", i, cap, a.Amplification)
		}
		if !fits {
			continue
		}
		// Retries stay nearest the entrypoints: every lowered edge is as high as the planned
		// values above it allow, so raising it by one puts some path over the cap.
		ents := Analyze(g, cap).Entrypoints
		for _, ch := range p.Changes {
			if !reachable(g, ents, ch.From) {
				// Planned as if called once (the design's "at least 1"): nothing to maximise.
				continue
			}
			att := map[EdgeKey]int64{}
			for k, v := range p.Attempts {
				att[k] = v
			}
			att[EdgeKey{ch.From, ch.To}] = ch.New + 1
			if Analyze(withAttempts(g, att), cap).WithinCap() {
				t.Fatalf("graph %d cap %d: %s>%s lowered to %d but %d fits", i, cap, ch.From, ch.To, ch.New, ch.New+1)
			}
		}
	}
}

func TestPropertyPlanLocal(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 300 {
		g := randomDAG(r, 2+r.IntN(10), 4)
		cap := 1 + r.Int64N(10)
		s := name(r.IntN(g.Len()))
		p, err := PlanLocal(g, cap, s)
		if p == nil {
			t.Fatal(err)
		}
		after := withAttempts(g, p.Attempts)
		j := Judge(after, cap, s)
		if p.Fits && j.Over {
			t.Fatalf("graph %d: local plan for %s fits but judge says %s", i, s, j.Explain())
		}
		for _, e := range g.OutEdges(s) {
			v, _ := p.New(e.From, e.To)
			if v > e.Attempts || v < 1 {
				t.Fatalf("graph %d: raised %v to %d", i, e, v)
			}
			if p.Fits && v < e.Attempts {
				att := map[EdgeKey]int64{}
				for k, x := range p.Attempts {
					att[k] = x
				}
				att[EdgeKey{e.From, e.To}] = v + 1
				if !Judge(withAttempts(g, att), cap, s).Over {
					t.Fatalf("graph %d: %s>%s planned %d but %d fits", i, e.From, e.To, v, v+1)
				}
			}
		}
		// Other services' edges are never touched.
		for k := range p.Attempts {
			if k.From != s {
				t.Fatalf("local plan for %s covers %v", s, k)
			}
		}
	}
}

func TestPropertyAmplificationMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for i := range 300 {
		g := randomDAG(r, 2+r.IntN(10), 3)
		edges := g.Edges()
		if len(edges) == 0 {
			continue
		}
		base := Analyze(g, 4)
		e := edges[r.IntN(len(edges))]
		up := withAttempts(g, map[EdgeKey]int64{{e.From, e.To}: e.Attempts + 1 + r.Int64N(3)})
		a := Analyze(up, 4)
		if a.Amplification < base.Amplification || a.WorstCaseLoad.Requests < base.WorstCaseLoad.Requests {
			t.Fatalf("graph %d: raising %s>%s lowered amplification %d -> %d or load %d -> %d",
				i, e.From, e.To, base.Amplification, a.Amplification, base.WorstCaseLoad.Requests, a.WorstCaseLoad.Requests)
		}
	}
}

// A graph is unbounded exactly when a service calls itself with attempts > 1 (a chain that
// returns to its service with retries on the way; other cycles are not call loops), and the
// reported cycle is that self-loop.
func TestPropertyCycles(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	unbounded := 0
	for i := range 500 {
		g := randomDAG(r, 3+r.IntN(8), 2)
		for range 1 + r.IntN(2) {
			from := 1 + r.IntN(g.Len()-1)
			g.AddEdge(name(from), name(r.IntN(from+1)), 1+r.Int64N(2), 1)
		}
		want := true
		for _, e := range g.Edges() {
			if e.Attempts > 1 && e.From == e.To {
				want = false
			}
		}
		a := Analyze(g, 4)
		if a.Bounded != want {
			t.Fatalf("graph %d: bounded %v, want %v", i, a.Bounded, want)
		}
		if want {
			continue
		}
		unbounded++
		c := a.Cycle
		if len(c) < 2 || c[0] != c[len(c)-1] || a.Amplification != Saturated {
			t.Fatalf("graph %d: cycle %v amplification %d", i, c, a.Amplification)
		}
		retry := false
		for k := 0; k+1 < len(c); k++ {
			e, ok := g.Edge(c[k], c[k+1])
			if !ok {
				t.Fatalf("graph %d: cycle %v uses a missing edge", i, c)
			}
			retry = retry || e.Attempts > 1
		}
		if !retry {
			t.Fatalf("graph %d: cycle %v has no retry", i, c)
		}
	}
	if unbounded < 20 {
		t.Fatalf("only %d unbounded graphs generated", unbounded)
	}
}

func pathExists(g *Graph, a, b string) bool {
	seen := map[string]bool{a: true}
	q := []string{a}
	for len(q) > 0 {
		v := q[0]
		q = q[1:]
		if v == b {
			return true
		}
		for _, e := range g.OutEdges(v) {
			if !seen[e.To] {
				seen[e.To] = true
				q = append(q, e.To)
			}
		}
	}
	return false
}

func reachable(g *Graph, ents []Entrypoint, v string) bool {
	for _, e := range ents {
		if pathExists(g, e.Service, v) {
			return true
		}
	}
	return false
}

// The count of over-cap paths matches the paths themselves, built and compared; the first
// violation is the worst path (one tie-break rule); the listed violations are the count's first
// MaxViolations.
func TestPropertyViolationsTotal(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	for i := range 1500 {
		n := 2 + r.IntN(14)
		if i%10 == 0 {
			n = 40 + r.IntN(40)
		}
		g := shuffledDAG(r, n, int64(1+r.IntN(3)))
		cap := 1 + r.Int64N(10)
		a := Analyze(g, cap)
		c := newCore(g, nil)
		c.backward()
		c.forward(false)
		seen := map[string]bool{}
		for s := range c.adj.to {
			if mul(mul(c.v[c.adj.from[s]].h, c.att[s]), c.v[c.adj.to[s]].d) > cap {
				p, _, _ := c.throughEdge(int32(s))
				seen[pathKey(p)] = true
			}
		}
		for _, en := range c.ents {
			if mul(en.k, c.v[en.node].d) > cap {
				p, _ := c.suffix(en.node)
				seen[pathKey(p)] = true
			}
		}
		c.release()
		if a.ViolationsTotal != len(seen) {
			t.Fatalf("graph %d (cap %d): ViolationsTotal %d, %d distinct paths", i, cap, a.ViolationsTotal, len(seen))
		}
		if len(a.Violations) != min(len(seen), MaxViolations) {
			t.Fatalf("graph %d: %d violations listed of %d", i, len(a.Violations), len(seen))
		}
		if len(a.Violations) > 0 && !slices.Equal(a.Violations[0].Path, a.WorstPath) {
			t.Fatalf("graph %d: first violation %v, worst path %v", i, a.Violations[0].Path, a.WorstPath)
		}
	}
}

// The fix text is per chain (one entrypoint alone over the cap does not make every chain read
// "no rewrite fits"), and it agrees with PlanRewrite: every violation's fix is the plan's values
// on its path; one from an entrypoint whose client attempts alone exceed the cap then says so,
// naming that entrypoint, and the plan lists it in Unfit; any other is within the cap under the
// plan.
// Under the plan every chain from an entrypoint not in Unfit is within the cap, and an edge that
// no unfit entrypoint reaches is lowered no further than that needs. Graphs with cycles (but
// no retrying self-loop) take the chains-that-visit-a-service-once route (analyzeSimple).
func TestPropertyFixTextPerChain(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	mixed, unfitWithEdges := 0, 0
	for i := range 1500 {
		g := randomDAG(r, 2+r.IntN(10), 4)
		cyclic := i%3 == 2
		if cyclic {
			from := 1 + r.IntN(g.Len()-1)
			g.AddEdge(name(from), name(r.IntN(from)), 1+r.Int64N(2), 1)
		}
		// Entrypoints with client attempts up to 8, some over the cap, some not.
		for j := range g.Len() {
			if r.IntN(3) == 0 {
				g.SetEntrypoint(name(j), 1+r.Int64N(8))
			}
		}
		cap := 1 + r.Int64N(8)
		a := Analyze(g, cap)
		if !a.Bounded {
			t.Fatalf("graph %d: unbounded without a retrying self-loop", i)
		}
		p, err := PlanRewrite(g, cap)
		var unfit, fit []Entrypoint
		for _, ep := range a.Entrypoints {
			if ep.ClientAttempts > cap {
				unfit = append(unfit, ep)
			} else {
				fit = append(fit, ep)
			}
		}
		slices.SortStableFunc(unfit, func(x, y Entrypoint) int { return int(y.ClientAttempts - x.ClientAttempts) })
		if !slices.Equal(p.Unfit, unfit) || p.Fits != (len(unfit) == 0) || (err == nil) != p.Fits {
			t.Fatalf("graph %d cap %d: unfit %v fits %v err %v, want unfit %v", i, cap, p.Unfit, p.Fits, err, unfit)
		}
		if len(unfit) > 0 && len(fit) > 0 && len(a.Violations) > 1 {
			mixed++
		}
		for _, v := range a.Violations {
			k, entry := v.Factors[0], v.Path[0]
			var want []string
			prod := k
			for j := 0; j+1 < len(v.Path); j++ {
				e, _ := g.Edge(v.Path[j], v.Path[j+1])
				nv, _ := p.New(e.From, e.To)
				if nv < e.Attempts {
					want = append(want, e.From+": "+e.To+"="+FormatInt(nv))
				}
				prod = mul(prod, nv)
			}
			if k > cap {
				// The edges the plan lowers on it, then why that is not enough.
				unfitWithEdges += min(len(want), 1)
				want = append(want, "no rewrite fits: client attempts "+FormatInt(k)+" at entrypoint "+entry+" exceed cap "+FormatInt(cap))
				if got := strings.Join(want, "; "); v.Suggestion != got {
					t.Fatalf("graph %d cap %d: violation %s: fix %q, want %q", i, cap, v.Message, v.Suggestion, got)
				}
				continue
			}
			if got := strings.Join(want, "; "); v.Suggestion != got || prod > cap || got == "" {
				t.Fatalf("graph %d cap %d: violation %s: fix %q, the plan's %q (%d under the plan)", i, cap, v.Message, v.Suggestion, got, prod)
			}
		}
		// Every chain from an entrypoint within the cap fits the plan.
		onlyFit := func(att map[EdgeKey]int64) *Graph {
			h := New()
			for _, s := range g.Services() {
				if s.Selected {
					h.AddService(s.Name)
				}
			}
			for _, e := range g.Edges() {
				h.AddEdge(e.From, e.To, att[EdgeKey{e.From, e.To}], e.Calls)
			}
			for _, ep := range fit {
				h.SetEntrypoint(ep.Service, ep.ClientAttempts)
			}
			return h
		}
		if len(fit) == 0 {
			continue
		}
		if after := Analyze(onlyFit(p.Attempts), cap); !after.WithinCap() {
			t.Fatalf("graph %d cap %d: the chains from %v are over the cap after the plan: %d", i, cap, fit, after.Amplification)
		}
		if cyclic {
			continue
		}
		// Retries stay nearest the entrypoints for the chains that can fit: an edge no unfit
		// entrypoint reaches, raised by one, puts some chain over the cap.
		for _, ch := range p.Changes {
			if reachable(g, unfit, ch.From) || !reachable(g, fit, ch.From) {
				continue
			}
			att := maps.Clone(p.Attempts)
			att[EdgeKey{ch.From, ch.To}] = ch.New + 1
			if Analyze(onlyFit(att), cap).WithinCap() {
				t.Fatalf("graph %d cap %d: %s>%s lowered to %d but %d fits", i, cap, ch.From, ch.To, ch.New, ch.New+1)
			}
		}
	}
	if mixed < 100 || unfitWithEdges < 100 {
		t.Fatalf("only %d graphs with chains that fit and chains that cannot, %d chains from an unfit entrypoint with edges lowered", mixed, unfitWithEdges)
	}
	t.Logf("%d graphs with chains that fit and chains that cannot, %d chains from an unfit entrypoint with edges lowered", mixed, unfitWithEdges)
}
