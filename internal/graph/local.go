package graph

// The admission gate judges one service at a time: the worst path through each of its outgoing
// edges is the worst path into the service, the edge, and the worst path below the edge's
// target (Judge), and the largest attempts that keep it within the cap follow from the same two
// products (PlanLocal). judgeOut and planOut are that judgement, written once, over what an
// analysed graph says about the service (into) and its edges (localEdge). Judge and PlanLocal
// feed them from a core built on the whole graph; Prepared feeds them from a core built once,
// with the service's edges replaced by the incoming ones, so that a request does not rebuild
// and re-analyse a namespace of thousands of services.

// into is the worst path into the judged service.
type into struct {
	c       *core
	service string
	s       int32 // the service's node in c; -1 when c does not have it
	h       int64 // worst product into the service; 0 when no entrypoint reaches it
	// start: the path starts at the service (an entrypoint whose own client attempts are the
	// worst), not at c's worst path into s.
	start bool
}

// localEdge is one of the judged service's outgoing edges.
type localEdge struct {
	to      string
	t       int32 // the target's node in c; -1 for a service c does not have (a new leaf)
	att     int64 // attempts judged
	orig    int64 // attempts declared (PlanLocal reports a change against these)
	inCycle bool  // the edge stays inside the service's cycle (PlanLocal sets it to 1)
}

// into returns the worst path into s according to c's forward pass.
func (c *core) into(s int32) into {
	return into{c: c, service: c.g.names[s], s: s, h: c.v[s].h}
}

// outEdges lists s's outgoing edges in declaration order, except those skip reports.
func (c *core) outEdges(s int32, skip func(t int32) bool) []localEdge {
	lo, hi := c.out(s)
	es := make([]localEdge, 0, hi-lo)
	for e := lo; e < hi; e++ {
		t := c.adj.to[e]
		if skip != nil && skip(t) {
			continue
		}
		es = append(es, localEdge{to: c.g.names[t], t: t, att: c.att[e], orig: c.adj.att[e]})
	}
	return es
}

// d is the worst product below e's target (1 for a new leaf).
func (e localEdge) d(c *core) int64 {
	if e.t < 0 {
		return 1
	}
	return c.v[e.t].d
}

// through is the worst path through e with att attempts on it: the worst path into the service,
// the edge, the worst path below its target. Factors are the start's product then each edge's
// attempts.
func (in into) through(e localEdge, att int64) (path []string, factors []int64) {
	c := in.c
	var pn, ps []int32
	if in.start || in.s < 0 {
		factors = append(factors, in.h)
		path = append(path, in.service)
	} else {
		pn, ps = c.prefix(in.s)
		factors = append(factors, c.v[pn[0]].h)
		for _, x := range ps {
			factors = append(factors, c.att[x])
		}
		path = c.names(pn)
	}
	factors = append(factors, att)
	if e.t < 0 {
		return append(path, e.to), factors
	}
	sn, ss := c.suffix(e.t)
	for _, x := range ss {
		factors = append(factors, c.att[x])
	}
	return append(path, c.names(sn)...), factors
}

// judgeOut is Judge's verdict on the service's edges es (none of which closes a retry cycle):
// the edge with the worst path through it, the first declared on a tie.
func judgeOut(in into, es []localEdge, cap int64) *Judgement {
	j := &Judgement{Service: in.service, Cap: cap}
	if in.h == 0 {
		return j
	}
	best := -1
	for i, e := range es {
		amp := mul(mul(in.h, e.att), e.d(in.c))
		if best < 0 || amp > j.Amplification {
			best, j.Amplification = i, amp
		}
	}
	if best < 0 {
		return j
	}
	j.Path, j.Factors = in.through(es[best], es[best].att)
	j.Over = j.Amplification > cap
	return j
}

// planOut is PlanLocal's plan for the service's edges es: each gets the largest value, at most
// its own, that keeps every path through it within the cap; an edge inside the service's cycle
// gets 1. fail records why no rewrite fits.
func planOut(in into, es []localEdge, cap int64, p *Plan, fail func(string)) {
	for _, e := range es {
		newA := e.att
		switch {
		case e.inCycle:
			newA = 1
		case in.h == 0:
			// Not reachable from any entrypoint: no path through this edge to judge.
		default:
			rest := mul(in.h, e.d(in.c))
			if rest > cap {
				newA = 1
				path, factors := in.through(e, 1)
				fail("even with " + in.service + ": " + e.to + "=1, " + explain(path, factors, rest, cap, factors[0] > 1))
			} else {
				newA = min(e.att, cap/rest)
			}
		}
		p.Attempts[EdgeKey{in.service, e.to}] = newA
		if newA < e.orig {
			p.Changes = append(p.Changes, Change{From: in.service, To: e.to, Old: e.orig, New: newA})
		}
	}
}

// Prepared is a graph analysed once (its order, entrypoints, and worst products into and below
// every service), against which the admission gate judges one service with its outgoing edges
// replaced: JudgeWith costs the length of the paths it reports, not the size of the graph.
// A Prepared is read-only and safe for concurrent use; the graph must not change afterwards.
type Prepared struct {
	g      *Graph
	c      *core
	called []bool // node -> some selected service calls it (default entrypoints are the others)
	// With a retry cycle in the graph: the nodes that reach a component with a retry inside
	// (below) and those it reaches (above). Their worst paths are over chains that visit a
	// service once (judgesimple.go), which the prepared products do not hold; elsewhere they
	// are the same. nil without a retry cycle.
	retryBelow, retryAbove []bool
}

// Prepare analyses g for JudgeWith. O(V+E), like Judge.
func Prepare(g *Graph) *Prepared {
	c := newCore(g, nil)
	// The core stays in use for the Prepared's lifetime: its buffers are never released to
	// the pool.
	c.forward(false)
	c.backward()
	called := make([]bool, c.n)
	for s, f := range c.adj.from {
		if g.selected[f] {
			called[c.adj.to[s]] = true
		}
	}
	for v := range g.calledOutside {
		called[v] = true
	}
	pg := &Prepared{g: g, c: c, called: called}
	if c.anyRetry {
		pg.retryBelow, pg.retryAbove = make([]bool, c.n), make([]bool, c.n)
		retrying := func(v int32) bool { return c.isCyc(c.comp[v]) && c.retry[c.comp[v]] }
		for i := c.n - 1; i >= 0; i-- {
			v := c.order[i]
			below := retrying(v)
			lo, hi := c.out(v)
			for e := lo; e < hi && !below; e++ {
				below = pg.retryBelow[c.adj.to[e]]
			}
			pg.retryBelow[v] = below
		}
		// A component's nodes are contiguous in the order: one more pass over the cyclic ones
		// makes the flag whole within each (a node reaches what its component reaches).
		for i := 0; i < c.n; {
			_, nodes := c.compAt(i)
			i += len(nodes)
			any := false
			for _, v := range nodes {
				any = any || pg.retryBelow[v]
			}
			for _, v := range nodes {
				pg.retryBelow[v] = any
			}
		}
		for i := 0; i < c.n; {
			_, nodes := c.compAt(i)
			i += len(nodes)
			above := false
			for _, v := range nodes {
				above = above || retrying(v) || pg.retryAbove[v]
			}
			for _, v := range nodes {
				pg.retryAbove[v] = above
				lo, hi := c.out(v)
				for e := lo; e < hi; e++ {
					if above {
						pg.retryAbove[c.adj.to[e]] = true
					}
				}
			}
		}
	}
	return pg
}

// JudgeWith is Judge and PlanLocal (at cap) of service on the prepared graph with the service's
// outgoing edges replaced by edges (in declaration order; a repeated target keeps the larger
// attempts, as AddEdge does) and the service selected: what the admission gate decides for an
// incoming workload that alone provides the service's edges. ok is false when the answer would
// need the whole graph analysed again: the service lies on a cycle, or the new edges close one;
// the caller then builds the graph with the edges in place and calls Judge and PlanLocal. Cycles
// elsewhere are fine: off a cycle, the worst path into the service does not use its own edges,
// the worst path below a target that does not reach the service does not either, and the
// entrypoints that the new edges can change (closed groups they now call) lie below it.
//
// The numbers (Over, Amplification, the plan) are those Judge and PlanLocal give on that graph.
// When several paths tie for the worst, the one named may differ from theirs: node numbering
// differs between the two graphs, and ties go to the first found.
func (pg *Prepared) JudgeWith(cap int64, service string, edges []Edge) (j *Judgement, plan *Plan, ok bool) {
	c, g := pg.c, pg.g
	s, known := g.ids[service]
	if !known {
		s = -1
	}
	if s >= 0 && (c.isCyc(c.comp[s]) || pg.retryAbove != nil && (pg.retryAbove[s] || pg.retryBelow[s])) {
		// The paths into the service may run through its own edges; and with a retry cycle
		// before or below it the worst case is over chains that visit a service once
		// (judgesimple.go), which the prepared products do not hold.
		return nil, nil, false
	}
	es := make([]localEdge, 0, len(edges))
	for _, e := range edges {
		if e.To == service {
			return nil, nil, false // a self-loop: a cycle
		}
		a := max(e.Attempts, 1)
		dup := false
		for i := range es {
			if es[i].to == e.To {
				es[i].att, es[i].orig = max(es[i].att, a), max(es[i].orig, a)
				dup = true
			}
		}
		if dup {
			continue
		}
		t, ok := g.ids[e.To]
		if !ok {
			t = -1
		}
		if t >= 0 && s >= 0 && pg.reaches(t, s) || t >= 0 && pg.retryBelow != nil && pg.retryBelow[t] {
			return nil, nil, false
		}
		es = append(es, localEdge{to: e.To, t: t, att: a, orig: a})
	}
	// The worst path into the service does not depend on its outgoing edges (the graph stays
	// acyclic), only on whether it is now a default entrypoint.
	in := into{c: c, service: service, s: s}
	if s >= 0 {
		in.h = c.v[s].h
	}
	if len(g.entries) == 0 && (s < 0 || !pg.called[s]) {
		// Selected and called by no selected service: a default entrypoint, client attempts 1
		// (or AddDefaultEntrypoint's). forward keeps a caller's path only when it is strictly
		// worse.
		if k := max(g.extra[s], 1); in.h <= k {
			in.h, in.start = k, true
		}
	} else if k, ok := g.extra[s]; ok && len(g.entries) == 0 && in.h <= k {
		// Also called inside the graph, and reached from outside (AddDefaultEntrypoint).
		in.h, in.start = k, true
	}
	j = judgeOut(in, es, cap)
	cap = max(cap, 1)
	plan = &Plan{Cap: cap, Fits: true, Attempts: map[EdgeKey]int64{}}
	planOut(in, es, cap, plan, func(reason string) {
		if plan.Fits {
			plan.Fits, plan.Reason = false, "no rewrite fits: "+reason
		}
	})
	return j, plan, true
}

// reaches reports whether t reaches s in the prepared graph, s not on a cycle. Only services in
// components before s's in the topological order can; the walk stays among them.
func (pg *Prepared) reaches(t, s int32) bool {
	c := pg.c
	// comp counts the topological position from the end: a service that reaches s has a
	// larger one.
	if c.comp[t] <= c.comp[s] {
		return false
	}
	seen := map[int32]bool{t: true}
	stack := []int32{t}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		lo, hi := c.out(v)
		for e := lo; e < hi; e++ {
			w := c.adj.to[e]
			if w == s {
				return true
			}
			if c.comp[w] > c.comp[s] && !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	return false
}
