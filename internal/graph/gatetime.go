package graph

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// The admission gate's time (DESIGN.md, "Time along the chain"; issue #29): a workload is judged
// on the chains it takes part in, as for the cap. A chain through one of service s's edges
// s -> t runs from an entrypoint down to s by the slowest way there, takes the edge, and goes on
// as t's worst time says. Every hop's time is non-decreasing in its callee's, so the worst such
// chain is found by one more backward pass, over the nodes that reach s only, with s's time
// fixed at its edge's: V(s) = hop(s -> t)(T(t)); V(u) = max over u -> w, w reaching s, of
// hop(u -> w)(V(w)); the chain's time is the entry's client's over V(entry). The same
// monotonicity gives the plan: each edge's own attempts (the first layer of its hop: the
// caller's annotation) drop to the largest count whose chains fit, found by bisection.

// TimeJudgement is the admission gate's view of the time through one service's outgoing edges.
type TimeJudgement struct {
	Service string
	// Max is the maximum time to answer judged against (the policy's spec.maxTimeToAnswer).
	Max time.Duration
	// Over is true when some chain from an entrypoint through one of the service's edges may
	// take longer than Max.
	Over bool
	// Chain is the worst such chain: its Path runs from the entrypoint through the service to
	// the end of the callee's worst continuation; Chain.Time is its worst time (Forever:
	// unbounded, Chain.Unbounded says why). Empty when no entrypoint reaches the service, or the
	// service calls nothing.
	Chain TimeChain
	// UpperBound is true when a call loop's times did not settle (see AnalyzeTime).
	UpperBound bool
}

// Explain renders the worst chain against the maximum, as the status's time violations do:
// "client -x2-> gateway 3.2s -> order 1.05s -> payment ? = 6.4s > maxTimeToAnswer 5s".
func (j *TimeJudgement) Explain() string {
	if len(j.Chain.Path) == 0 {
		return ""
	}
	if !j.Over {
		return ""
	}
	return explainTime(j.Chain, j.Max)
}

// JudgeTime judges service's outgoing edges against maxTime with the hops of t (made for g;
// nil: g's own) and plans the largest own attempts of each edge that keep its chains within
// maxTime. The plan's attempts are the edge's first layer's tries (the caller's own attempts,
// what its annotation sets), not the edge's product of layers; an edge without a hop counts
// its attempts as one layer. When even 1 attempt leaves a chain over maxTime (the time is
// elsewhere: the path into the service, the callee's, or no timeout bounds it), the plan has
// Fits false, that edge 1, and Reason says why. The plan is nil when nothing is over.
func JudgeTime(g *Graph, t *Timing, service string, maxTime time.Duration) (*TimeJudgement, *Plan) {
	j := &TimeJudgement{Service: service, Max: maxTime}
	s, ok := g.ids[service]
	if !ok || maxTime <= 0 {
		return j, nil
	}
	var tm *timing
	if t != nil {
		tm = &t.t
	} else {
		tm = g.time
	}
	c := newCore(g, nil)
	defer c.release()
	buf := nodePool.Get().(*[]nodeT)
	defer nodePool.Put(buf)
	p := newTimePass(c, tm, buf)
	j.UpperBound = !p.settle(false)
	gt := newGateTime(p, s)
	lo, hi := c.out(s)
	if lo == hi || !gt.reached {
		return j, nil
	}
	// The worst chain through any of the edges.
	worst, ws, we := int64(-1), int32(-1), -1
	for e := lo; e < hi; e++ {
		x := gt.hop(e, 0)
		if y, en := gt.eval(x); y > worst {
			worst, ws, we = y, e, en
		}
	}
	if we < 0 {
		return j, nil
	}
	gt.eval(gt.hop(ws, 0)) // chain reads the pass of the worst edge
	j.Chain = gt.chain(we, ws, worst)
	j.Over = worst > int64(maxTime)
	if !j.Over {
		return j, nil
	}
	plan := &Plan{Fits: true, Attempts: map[EdgeKey]int64{}}
	slots := make([]int32, 0, hi-lo)
	for e := lo; e < hi; e++ {
		slots = append(slots, e)
	}
	// Declaration order, as PlanLocal's changes.
	slices.SortFunc(slots, func(a, b int32) int { return int(c.adj.edge[a] - c.adj.edge[b]) })
	limit := int64(maxTime)
	for _, e := range slots {
		to := g.names[c.adj.to[e]]
		cur := gt.tries(e)
		fits := func(n int64) bool { y, _ := gt.eval(gt.hop(e, n)); return y <= limit }
		n := cur
		if !fits(cur) {
			// The largest n in [1, cur) that fits: fits is monotone in n.
			lo, hi := int64(0), cur // fits(lo) (or lo = 0: none yet), !fits(hi)
			for hi-lo > 1 {
				mid := lo + (hi-lo)/2
				if fits(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			n = lo
			if n == 0 {
				n = 1
				if plan.Fits {
					y, en := gt.eval(gt.hop(e, 1))
					ch := gt.chain(en, e, y)
					plan.Fits = false
					plan.Reason = "no rewrite fits: even with " + service + ": " + to + "=1, " + explainTime(ch, maxTime)
				}
			}
		}
		plan.Attempts[EdgeKey{service, to}] = n
		if n < cur {
			plan.Changes = append(plan.Changes, Change{From: service, To: to, Old: cur, New: n})
		}
	}
	return j, plan
}

// gateTime is JudgeTime's restricted pass: the nodes that reach s, grouped by component in
// reverse topological order, and their times V with the slot giving each.
type gateTime struct {
	p       *timePass
	s       int32
	reach   []bool
	nodes   []int32 // the nodes reaching s (s excluded), sinks first
	groups  []int32 // nodes[groups[i]:groups[i+1]] is one component
	vv      []int64
	vs      []int32
	reached bool // some entrypoint reaches s (or is s)
}

func newGateTime(p *timePass, s int32) *gateTime {
	c := p.c
	gt := &gateTime{p: p, s: s, reach: make([]bool, c.n), vv: make([]int64, c.n), vs: make([]int32, c.n)}
	gt.reach[s] = true
	for i := c.n - 1; i >= 0; {
		v := c.order[i]
		size := c.size(c.comp[v])
		comp := c.order[i-size+1 : i+1]
		i -= size
		in := false
		for _, u := range comp {
			if u == s {
				in = true
				break
			}
			lo, hi := c.out(u)
			for e := lo; e < hi && !in; e++ {
				in = gt.reach[c.adj.to[e]]
			}
		}
		if !in {
			continue
		}
		gt.groups = append(gt.groups, int32(len(gt.nodes)))
		for _, u := range comp {
			// In a strongly connected component every node reaches every other.
			gt.reach[u] = true
			if u != s {
				gt.nodes = append(gt.nodes, u)
			}
		}
	}
	gt.groups = append(gt.groups, int32(len(gt.nodes)))
	for _, en := range c.ents {
		if gt.reach[en.node] {
			gt.reached = true
		}
	}
	return gt
}

// tries is the own attempts of slot e: the first layer's tries of its hop (the most over its
// records), else the edge's attempts.
func (gt *gateTime) tries(e int32) int64 {
	p := gt.p
	r := p.tm.hopOf(p.c.adj.edge[e])
	if r < 0 {
		return p.c.att[e]
	}
	n := int64(1)
	for ; r >= 0; r = p.tm.hops[r].next {
		if h := p.tm.hops[r].hop; len(h) > 0 {
			n = max(n, h[0].Tries)
		}
	}
	return n
}

// hop is slot e's time over its callee's worst time with its first layer at n tries (n <= 0:
// as declared).
func (gt *gateTime) hop(e int32, n int64) int64 {
	p := gt.p
	x := p.v[p.c.adj.to[e]].t
	if n <= 0 {
		return p.hopTime(e, x, false, false)
	}
	r := p.tm.hopOf(p.c.adj.edge[e])
	if r < 0 {
		return mul(n, x)
	}
	worst := int64(-1)
	for ; r >= 0; r = p.tm.hops[r].next {
		rec := &p.tm.hops[r]
		y := x
		for i := rec.hi - 1; i >= rec.lo; i-- {
			l := p.tm.flat[i]
			if i == rec.lo {
				first := rec.hop[0]
				first.Tries = n
				l = reduce(first)
			}
			if l.p > 0 && l.p < y {
				y = l.p
			}
			y = add(mul(l.a, y), l.b)
			if l.t > 0 && l.t < y {
				y = l.t
			}
		}
		worst = max(worst, y)
	}
	return worst
}

// eval is the worst chain time through s when s takes x, and the entrypoint (its index in the
// core's entrypoints) that waits it; -1 when none reaches s.
func (gt *gateTime) eval(x int64) (int64, int) {
	p, c := gt.p, gt.p.c
	gt.vv[gt.s], gt.vs[gt.s] = x, -1
	for g := 0; g+1 < len(gt.groups); g++ {
		nodes := gt.nodes[gt.groups[g]:gt.groups[g+1]]
		if len(nodes) == 0 {
			continue // s's own component, s alone
		}
		if !c.isCyc(c.comp[nodes[0]]) {
			gt.node(nodes[0])
			continue
		}
		// A call loop: from "unbounded" down, as AnalyzeTime's pass.
		for _, u := range nodes {
			gt.vv[u], gt.vs[u] = int64(Forever), -1
		}
		for round := 0; round < maxLoopRounds; round++ {
			changed := false
			for k := len(nodes) - 1; k >= 0; k-- {
				if gt.node(nodes[k]) {
					changed = true
				}
			}
			if !changed {
				break
			}
		}
	}
	worst, we := int64(-1), -1
	for i, en := range c.ents {
		if !gt.reach[en.node] {
			continue
		}
		if y := p.entryTimeAt(en.node, en.k, gt.vv[en.node], false); y > worst {
			worst, we = y, i
		}
	}
	return worst, we
}

// node computes V(u) from its callees that reach s; it reports whether it changed.
func (gt *gateTime) node(u int32) bool {
	p, c := gt.p, gt.p.c
	best, bs := int64(-1), int32(-1)
	lo, hi := c.out(u)
	for e := lo; e < hi; e++ {
		w := c.adj.to[e]
		if !gt.reach[w] {
			continue
		}
		if y := p.hopTime(e, gt.vv[w], false, false); y > best {
			best, bs = y, e
		}
	}
	changed := best != gt.vv[u]
	gt.vv[u], gt.vs[u] = best, bs
	return changed
}

// chain is the chain of entrypoint en (an index into the core's entrypoints) through slot e of
// s, taking time y: the restricted pass's way down to s, the edge, then the callee's worst
// continuation. eval must have run with e's time last.
func (gt *gateTime) chain(en int, e int32, y int64) TimeChain {
	p, c := gt.p, gt.p.c
	ent := c.ents[en]
	var nodes []int32
	var times []time.Duration
	seen := map[int32]bool{}
	for v := ent.node; v != gt.s; {
		nodes = append(nodes, v)
		times = append(times, time.Duration(gt.vv[v]))
		seen[v] = true
		sl := gt.vs[v]
		if sl < 0 {
			break // unreachable: every node reaching s has a slot towards it
		}
		v = c.adj.to[sl]
		if seen[v] {
			break // a loop with no timeout: the path stops where it returns
		}
	}
	nodes = append(nodes, gt.s)
	times = append(times, time.Duration(gt.vv[gt.s]))
	below, loop := p.path(c.adj.to[e])
	for _, v := range below {
		nodes = append(nodes, v)
		times = append(times, time.Duration(p.v[v].t))
	}
	ch := TimeChain{Entrypoint: c.g.names[ent.node], ClientAttempts: ent.k, Time: time.Duration(y), Path: c.names(nodes), Times: times}
	if y == int64(Forever) {
		ch.Unbounded = gt.why(nodes, times, loop)
	}
	return ch
}

// why is timePass.why over a chain with the given times (the restricted pass's down to s).
func (gt *gateTime) why(nodes []int32, times []time.Duration, loop bool) string {
	p := gt.p
	names := p.c.g.names
	first := len(nodes) - 1
	for i, v := range nodes {
		if times[i] == Forever && !p.v[v].leaf {
			first = i
			break
		}
	}
	tail := nodes[first:]
	if loop {
		return "no timeout bounds the call loop " + joinNames(names, tail, " -> ")
	}
	if len(tail) < 2 {
		return "no timeout between the client and " + names[nodes[0]] + ", and its own time is unknown"
	}
	return "no timeout on " + joinNames(names, tail, " -> ") + ", and " + names[tail[len(tail)-1]] + "'s own time is unknown"
}

// PlanSuffix is what AdmissionMessage appends for plan at service: "; order may keep
// payment=1, inventory=2", or "; " and the reason when nothing fits; "" for a nil plan or one
// that changes nothing.
func PlanSuffix(service string, plan *Plan) string {
	if plan == nil {
		return ""
	}
	if !plan.Fits {
		return "; " + plan.Reason
	}
	if len(plan.Changes) == 0 {
		return ""
	}
	b := []byte("; " + service + " may keep ")
	for i, ch := range plan.Changes {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, ch.To...)
		b = append(b, '=')
		b = strconv.AppendInt(b, ch.New, 10)
	}
	return string(b)
}

// MergePlans is the plan that keeps both a and b (either may be nil): each edge's attempts the
// lower of the two, the changes in a's order then b's new ones, Fits only when both fit (the
// first reason kept).
func MergePlans(a, b *Plan) *Plan {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	m := &Plan{Cap: a.Cap, Fits: a.Fits && b.Fits, Attempts: map[EdgeKey]int64{}}
	m.Reason = a.Reason
	if a.Fits {
		m.Reason = b.Reason
	}
	for k, v := range a.Attempts {
		m.Attempts[k] = v
	}
	for k, v := range b.Attempts {
		if old, ok := m.Attempts[k]; !ok || v < old {
			m.Attempts[k] = v
		}
	}
	m.Changes = slices.Clone(a.Changes)
	for _, ch := range b.Changes {
		i := slices.IndexFunc(m.Changes, func(x Change) bool { return x.From == ch.From && x.To == ch.To })
		switch {
		case i < 0:
			m.Changes = append(m.Changes, ch)
		case ch.New < m.Changes[i].New:
			m.Changes[i].New = ch.New
		}
	}
	return m
}

// String is the judgement for logs and tests.
func (j *TimeJudgement) String() string {
	return fmt.Sprintf("%s over=%t %s", j.Service, j.Over, FormatTime(j.Chain.Time))
}
