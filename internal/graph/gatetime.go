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
	p, buf, upper := settledPass(g, t)
	defer p.release(buf)
	c := p.c
	j.UpperBound = upper
	gt := newGateTime(p, s)
	lo, hi := c.out(s)
	if lo == hi || !gt.reached {
		return j, nil
	}
	// The worst chain through any of the edges.
	worst, ws, we := int64(-1), int32(-1), -1
	for e := lo; e < hi; e++ {
		if y, en := gt.eval(e, 0); y > worst {
			worst, ws, we = y, e, en
		}
	}
	if we < 0 {
		return j, nil
	}
	gt.eval(ws, 0) // chain reads the pass of the worst edge
	j.Chain = gt.chain(we, ws, 0, worst)
	j.UpperBound = j.UpperBound || gt.upper
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
		fits := func(n int64) bool { y, _ := gt.eval(e, n); return y <= limit }
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
					y, en := gt.eval(e, 1)
					if en < 0 {
						continue // no chain through the edge at all
					}
					ch := gt.chain(en, e, 1, y)
					plan.Fits = false
					plan.Reason = "no rewrite fits: even with " + service + ": " + to + "=1, " + explainTime(ch, maxTime)
					plan.Floor = &ch
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

// JudgeTimeEdge is JudgeTime's judgement of the chains through the one edge from -> to (the mesh
// gate's: a mesh object's layer raised the tries of that edge), without a plan. Not over when
// the edge is not in g or no entrypoint reaches it.
func JudgeTimeEdge(g *Graph, t *Timing, from, to string, maxTime time.Duration) *TimeJudgement {
	j := &TimeJudgement{Service: from, Max: maxTime}
	s, ok := g.ids[from]
	tt, ok2 := g.ids[to]
	if !ok || !ok2 || maxTime <= 0 {
		return j
	}
	p, buf, upper := settledPass(g, t)
	defer p.release(buf)
	c := p.c
	j.UpperBound = upper
	e := c.slotBetween(s, tt)
	gt := newGateTime(p, s)
	if e < 0 || !gt.reached {
		return j
	}
	y, en := gt.eval(e, 0)
	if en < 0 {
		return j
	}
	j.Chain = gt.chain(en, e, 0, y)
	j.Over = y > int64(maxTime)
	j.UpperBound = j.UpperBound || gt.upper
	return j
}

// EntryTime is the time analysis's chain of entrypoint name against maxTime (the mesh gate's,
// for a layer on an entrypoint's route); not over when name is no entrypoint. The chain is
// computed for that entrypoint alone, not looked up among AnalyzeTime's Chains: those are only
// the MaxChains worst, and an entrypoint below them (a mesh with more than 50) would be judged
// "not over" whatever its time.
func EntryTime(g *Graph, t *Timing, name string, maxTime time.Duration) *TimeJudgement {
	j := &TimeJudgement{Service: name, Max: maxTime}
	id, ok := g.ids[name]
	if !ok || maxTime <= 0 {
		return j
	}
	p, buf, upper := settledPass(g, t)
	defer p.release(buf)
	for _, en := range p.c.ents {
		if en.node == id {
			j.Chain = p.chainOf(en, p.entryTime(en.node, en.k, false))
			j.Over, j.UpperBound = j.Chain.Time > maxTime, upper
			break
		}
	}
	return j
}

// settledPass is the set-up JudgeTime and JudgeTimeEdge share: a core over g and its time pass
// with the hops of t (nil: g's own), settled without the chains; upper says the pass stopped
// before its fixpoint (the times are upper bounds). The caller defers p.release(buf).
func settledPass(g *Graph, t *Timing) (p *timePass, buf *[]nodeT, upper bool) {
	tm := g.time
	if t != nil {
		tm = &t.t
	}
	buf = nodePool.Get().(*[]nodeT)
	p = newTimePass(newCore(g, nil), tm, buf)
	return p, buf, !p.settle(false)
}

// release gives the pass's core and its per-node buffer back to their pools.
func (p *timePass) release(buf *[]nodeT) {
	p.c.release()
	nodePool.Put(buf)
}

// gateTime is JudgeTime's restricted pass: the nodes that reach s, grouped by component in
// reverse topological order, and their times V with the slot giving each (-1 in vv: no chain
// through s from there). The ways in and on follow the simple-path rule (timecycles.go): a
// cyclic component before s's is searched for the worst way across towards s, and s's own, when
// cyclic, for the worst way from each of its services to s whose way on from the edge's callee
// does not return to it.
type gateTime struct {
	p       *timePass
	s, cs   int32
	reach   []bool
	nodes   []int32 // the nodes reaching s (s excluded), sinks first
	groups  []int32 // nodes[groups[i]:groups[i+1]] is one component
	vv      []int64
	vs      []int32
	reached bool // some entrypoint reaches s (or is s)
	// csSearch: s's component is cyclic and searched (timecycles.go); cpath is, for its nodes,
	// the way to s that gives vv (the node first, s last).
	csSearch bool
	cpath    map[int32][]int32
	upper    bool // a component too large to search: the times are upper bounds
}

func newGateTime(p *timePass, s int32) *gateTime {
	c := p.c
	gt := &gateTime{p: p, s: s, cs: c.comp[s], reach: make([]bool, c.n), vv: make([]int64, c.n), vs: make([]int32, c.n),
		cpath: map[int32][]int32{}}
	gt.csSearch = c.isCyc(gt.cs) && p.searched[gt.cs]
	c.markReachers(s, gt.reach, func(comp []int32) {
		gt.groups = append(gt.groups, int32(len(gt.nodes)))
		for _, u := range comp {
			if u != s {
				gt.nodes = append(gt.nodes, u)
			}
		}
		if c.isCyc(c.comp[comp[0]]) {
			p.localIndex(comp)
		}
	})
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

// hop is slot e's time when its callee takes x, its first layer at n tries (n <= 0: as
// declared).
func (gt *gateTime) hop(e int32, n int64, x int64) int64 {
	p := gt.p
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
			y, _ = l.step(y, false)
		}
		worst = max(worst, y)
	}
	return worst
}

// cont is the time the callee of s's slot e takes on a chain that visited (C's services, by
// bit) before: its worst time outside s's component, else its worst way on that does not
// return (-1: it is on the chain already).
func (gt *gateTime) cont(e int32, visited uint64) (int64, bool) {
	p, c := gt.p, gt.p.c
	t := c.adj.to[e]
	if !gt.csSearch || c.comp[t] != gt.cs {
		return p.v[t].t, p.v[t].leaf
	}
	bit := uint64(1) << uint(p.local[t])
	if visited&bit != 0 {
		return -1, false
	}
	work := 0
	x, leaf, ok := p.searchT(t, gt.cs, p.local, visited|bit, &work)
	if !ok {
		gt.upper = true
		return p.v[t].t, p.v[t].leaf
	}
	return x, leaf
}

// eval is the worst chain time through s's slot e with its first layer at n tries (n <= 0: as
// declared), and the entrypoint (its index in the core's entrypoints) that waits it; -1 when
// none reaches s that way.
func (gt *gateTime) eval(e int32, n int64) (int64, int) {
	p, c := gt.p, gt.p.c
	gt.vv[gt.s], gt.vs[gt.s] = -1, -1
	if gt.csSearch {
		if x, _ := gt.cont(e, 1<<uint(p.local[gt.s])); x >= 0 {
			gt.vv[gt.s] = gt.hop(e, n, x)
		}
	} else {
		gt.vv[gt.s] = gt.hop(e, n, p.v[c.adj.to[e]].t)
	}
	for g := 0; g+1 < len(gt.groups); g++ {
		nodes := gt.nodes[gt.groups[g]:gt.groups[g+1]]
		if len(nodes) == 0 {
			continue // s's own component, s alone
		}
		cp := c.comp[nodes[0]]
		switch {
		case !c.isCyc(cp):
			gt.node(nodes[0])
		case cp == gt.cs && gt.csSearch:
			gt.intoS(e, n, nodes)
		case cp != gt.cs && p.searched[cp]:
			for _, u := range nodes {
				gt.vv[u], gt.vs[u] = gt.across(u, cp, 1<<uint(p.local[u]))
			}
		default:
			// Too large to search: from "unbounded" down, as AnalyzeTime's pass, an upper bound.
			gt.upper = true
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
	}
	worst, we := int64(-1), -1
	for i, en := range c.ents {
		if !gt.reach[en.node] || gt.vv[en.node] < 0 {
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
		if !gt.reach[w] || gt.vv[w] < 0 {
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

// across is V(u) for u in a searched cyclic component cp before s's: the worst way across cp,
// not returning to a service of visited, to a service outside it with a chain through s; and
// the slot it starts with.
func (gt *gateTime) across(u, cp int32, visited uint64) (int64, int32) {
	p, c := gt.p, gt.p.c
	best, bs := int64(-1), int32(-1)
	lo, hi := c.out(u)
	for e := lo; e < hi; e++ {
		w := c.adj.to[e]
		if !gt.reach[w] {
			continue
		}
		x := gt.vv[w]
		if c.comp[w] == cp {
			bit := uint64(1) << uint(p.local[w])
			if visited&bit != 0 {
				continue
			}
			x, _ = gt.across(w, cp, visited|bit)
		}
		if x < 0 {
			continue
		}
		if y := p.hopTime(e, x, false, false); y > best {
			best, bs = y, e
		}
	}
	return best, bs
}

// intoS is V for the services of s's cyclic component (nodes, s excluded): the worst simple way
// from each to s, then slot e at n tries, then the callee's way on that does not return.
func (gt *gateTime) intoS(e int32, n int64, nodes []int32) {
	p, c, s := gt.p, gt.p.c, gt.s
	for _, a := range nodes {
		best := int64(-1)
		var bestPath []int32
		stack := []int32{a}
		var walk func(u int32, visited uint64)
		walk = func(u int32, visited uint64) {
			if u == s {
				x, _ := gt.cont(e, visited)
				if x < 0 {
					return
				}
				y := gt.hop(e, n, x)
				for k := len(stack) - 2; k >= 0; k-- {
					y = p.hopTime(c.slotBetween(stack[k], stack[k+1]), y, false, false)
				}
				if y > best {
					best, bestPath = y, slices.Clone(stack)
				}
				return
			}
			lo, hi := c.out(u)
			for x := lo; x < hi; x++ {
				w := c.adj.to[x]
				if c.comp[w] != gt.cs {
					continue
				}
				bit := uint64(1) << uint(p.local[w])
				if visited&bit != 0 {
					continue
				}
				stack = append(stack, w)
				walk(w, visited|bit)
				stack = stack[:len(stack)-1]
			}
		}
		walk(a, 1<<uint(p.local[a]))
		gt.vv[a], gt.vs[a] = best, -1
		gt.cpath[a] = bestPath
	}
}

// chain is the chain of entrypoint en (an index into the core's entrypoints) through slot e of
// s at n tries, taking time y: the restricted pass's way down to s, the edge, then the callee's
// worst way on. eval must have run with e and n last.
func (gt *gateTime) chain(en int, e int32, n int64, y int64) TimeChain {
	p, c := gt.p, gt.p.c
	ent := c.ents[en]
	var steps []chainStep
	var visitedK uint64
	inK := int32(-1)
	var pre uint64 // s's component's services on the way in
	v := ent.node
	for v != gt.s && len(steps) <= c.n {
		cp := c.comp[v]
		if cp == gt.cs && gt.csSearch {
			// The searched way to s: each service's time composed back from s's.
			path := gt.cpath[v]
			x, _ := gt.contOf(e, path)
			ys := make([]int64, len(path))
			ys[len(path)-1] = gt.hop(e, n, x)
			for k := len(path) - 2; k >= 0; k-- {
				ys[k] = p.hopTime(c.slotBetween(path[k], path[k+1]), ys[k+1], false, false)
			}
			for k, u := range path[:len(path)-1] {
				steps = append(steps, chainStep{v: u, t: ys[k]})
				pre |= 1 << uint(p.local[u])
			}
			break
		}
		var sl int32
		t := gt.vv[v]
		if c.isCyc(cp) && p.searched[cp] {
			if inK != cp {
				inK, visitedK = cp, 0
			}
			visitedK |= 1 << uint(p.local[v])
			t, sl = gt.across(v, cp, visitedK)
		} else {
			sl = gt.vs[v]
		}
		steps = append(steps, chainStep{v: v, t: t})
		if sl < 0 {
			break // a loop too large to search with no timeout: the fixpoint's way ends here
		}
		v = c.adj.to[sl]
	}
	if gt.csSearch {
		pre |= 1 << uint(p.local[gt.s])
	}
	x, leaf := gt.cont(e, pre)
	steps = append(steps, chainStep{v: gt.s, t: gt.hop(e, n, x)})
	below, loop := p.chainFrom(c.adj.to[e], gt.csSearch, pre, x, leaf)
	steps = append(steps, below...) // a copy: below is chainFrom's scratch
	ch := TimeChain{Entrypoint: c.g.names[ent.node], ClientAttempts: ent.k, Time: time.Duration(y)}
	for _, st := range steps {
		ch.Path = append(ch.Path, c.g.names[st.v])
		ch.Times = append(ch.Times, time.Duration(st.t))
	}
	if y == int64(Forever) {
		ch.Unbounded = p.why(steps, loop)
	}
	return ch
}

// contOf is cont for the way in path (inside s's component, s last).
func (gt *gateTime) contOf(e int32, path []int32) (int64, bool) {
	var visited uint64
	for _, u := range path {
		visited |= 1 << uint(gt.p.local[u])
	}
	return gt.cont(e, visited)
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
	m.Reason, m.Floor = a.Reason, a.Floor
	if a.Fits {
		m.Reason, m.Floor = b.Reason, b.Floor
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
