package graph

import (
	"fmt"
	"slices"
)

// The admission judge on a graph with cycles (issue #28): the gate takes the worst case over the
// chains that visit a service at most once, as Analyze does (cycles.go), so that a service graph
// with a cycle (A calls B for one endpoint, B calls A for another) is not refused as a call loop
// at admission while the status calls it bounded. A chain through service s's edge s -> t is an
// entrypoint's simple path down to s, the edge, and a simple path on from t that does not return
// to the way in. The way in and the way on can meet only inside s's own strongly connected
// component (C): the components before it are reached only on the way in, those after it only on
// the way on. So:
//
//   - into every node that reaches s, outside C, the worst simple product from an entrypoint
//     (forward, a cyclic component searched as cycles.go searches it, the other way round);
//   - below every node, the worst simple product down (cycles.go's backward pass);
//   - inside C, one search of the ways from where the chains enter C to s, and from each of s's
//     edges on inside C to the best way out, never revisiting a node.
//
// The searches are exact while C has at most MaxExactComponent services and they walk at most
// MaxComponentWork steps; beyond that the numbers are upper bounds, said as such (Bound). A
// chain that can return to a service with retries on the way (a retrying self-loop) is
// unbounded, as in Analyze. The answer depends only on the nodes that reach s and that s
// reaches, so the gate's relevant part of a namespace gives the whole namespace's answer.

// simpleJudge is Judge's state on a graph with cycles.
type simpleJudge struct {
	c  *core
	sp *simple
	s  int32
	cs int32
	// reach marks the nodes that reach s (s included); h is their worst simple product from
	// an entrypoint, and pred the slot giving it (-1: the entrypoint's own client attempts);
	// for C's nodes h is the worst product entering C there.
	reach []bool
	h     []int64
	pred  []int32
	// inF is, for a node of a cyclic component before C, its worst way in inside the component
	// (the node entering it first).
	inF   map[int32][]int32
	entK  map[int32]int64
	bound string // why the numbers are upper bounds ("" when exact)
	// Per slot of s (index e-lo): the worst product of a chain through it without its own
	// attempts (0: none), and that chain's nodes.
	a     []int64
	paths [][]int32
}

// needsSimple reports whether Judge and PlanLocal take the simple-path rule for s: the graph has
// a retrying cycle, or s is on a cycle. Elsewhere the products into and below s are the simple
// ones already (a cycle without retries multiplies by 1 either way).
func (c *core) needsSimple(s int32) bool {
	return c.cyc != nil && (c.anyRetry || c.isCyc(c.comp[s]))
}

// retryingSelfLoop is a node of component cp that calls itself with retries, -1 if none.
func (c *core) retryingSelfLoop(cp int32) int32 {
	if !c.isCyc(cp) {
		return -1
	}
	for v := range c.n {
		if c.comp[v] != cp {
			continue
		}
		if sl := c.slotBetween(int32(v), int32(v)); sl >= 0 && c.att[sl] > 1 {
			return int32(v)
		}
	}
	return -1
}

func newSimpleJudge(c *core, s int32) *simpleJudge {
	c.succ = int32s(&c.buf.succ, c.n)
	for i := range c.succ {
		c.succ[i] = -1
	}
	sp := newSimple(c)
	sp.backward()
	j := &simpleJudge{c: c, sp: sp, s: s, cs: c.comp[s], reach: make([]bool, c.n), h: make([]int64, c.n),
		pred: make([]int32, c.n), inF: map[int32][]int32{}, entK: map[int32]int64{}}
	if b := sp.boundNote(j.below()); b != "" {
		j.bound = b
	}
	j.reachers()
	for i := range j.pred {
		j.pred[i] = -1
	}
	for _, en := range c.ents {
		j.entK[en.node] = max(j.entK[en.node], en.k)
		if j.reach[en.node] && en.k > j.h[en.node] {
			j.h[en.node] = en.k
		}
	}
	j.forward()
	j.through()
	return j
}

// below lists the nodes s reaches, for the bound note of cycles.go's backward pass.
func (j *simpleJudge) below() []int32 {
	c := j.c
	seen := map[int32]bool{j.s: true}
	stack := []int32{j.s}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		lo, hi := c.out(v)
		for e := lo; e < hi; e++ {
			if w := c.adj.to[e]; !seen[w] {
				seen[w] = true
				stack = append(stack, w)
			}
		}
	}
	out := make([]int32, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// reachers marks the nodes that reach s.
func (j *simpleJudge) reachers() { j.c.markReachers(j.s, j.reach, nil) }

// forward computes h over the nodes that reach s, in topological order; C's nodes keep the
// products entering C.
func (j *simpleJudge) forward() {
	c := j.c
	for i := 0; i < c.n; {
		cp, nodes := c.compAt(i)
		i += len(nodes)
		if !j.reach[nodes[0]] || cp == j.cs {
			continue
		}
		if c.isCyc(cp) {
			j.forwardComponent(nodes, cp)
		}
		for _, u := range nodes {
			if j.h[u] == 0 {
				continue
			}
			lo, hi := c.out(u)
			for e := lo; e < hi; e++ {
				w := c.adj.to[e]
				if !j.reach[w] || c.comp[w] == cp {
					continue
				}
				if x := mul(j.h[u], c.att[e]); x > j.h[w] {
					j.h[w], j.pred[w] = x, e
				}
			}
		}
	}
}

// forwardComponent turns the products entering a cyclic component before C into the worst
// simple products to each of its nodes.
func (j *simpleJudge) forwardComponent(nodes []int32, cp int32) {
	c := j.c
	hin := make([]int64, len(nodes))
	maxIn, maxAt := int64(0), int32(-1)
	for i, v := range nodes {
		hin[i] = j.h[v]
		if hin[i] > maxIn {
			maxIn, maxAt = hin[i], v
		}
	}
	if maxIn == 0 {
		return
	}
	if c.retryingSelfLoop(cp) >= 0 {
		// A chain returns to that service with retries, without end.
		for _, v := range nodes {
			j.h[v] = Saturated
		}
		return
	}
	retries := c.retry != nil && c.retry[cp]
	if retries && len(nodes) <= MaxExactComponent {
		local := map[int32]int{}
		for i, v := range nodes {
			local[v] = i
		}
		best := make([]int64, len(nodes))
		paths := make([][]int32, len(nodes))
		work := 0
		done := true
		for i, a := range nodes {
			if hin[i] == 0 {
				continue
			}
			var visited uint64
			stack := []int32{a}
			var walk func(u int32, prod int64) bool
			walk = func(u int32, prod int64) bool {
				if work++; work > MaxComponentWork {
					return false
				}
				visited |= 1 << uint(local[u])
				if x := prod; x > best[local[u]] {
					best[local[u]], paths[local[u]] = x, slices.Clone(stack)
				}
				lo, hi := c.out(u)
				for e := lo; e < hi; e++ {
					t := c.adj.to[e]
					if c.comp[t] != cp || visited&(1<<uint(local[t])) != 0 {
						continue
					}
					stack = append(stack, t)
					if !walk(t, mul(prod, c.att[e])) {
						return false
					}
					stack = stack[:len(stack)-1]
				}
				visited &^= 1 << uint(local[u])
				return true
			}
			if done = walk(a, hin[i]); !done {
				break
			}
		}
		if done {
			for i, v := range nodes {
				j.h[v] = best[i]
				if len(paths[i]) > 1 {
					j.inF[v] = paths[i]
				}
			}
			return
		}
	}
	ub := maxIn
	if retries {
		ub = mul(maxIn, j.insideBound(nodes, cp))
		j.bound = fmt.Sprintf("an upper bound: the cycle through %s has %d services, more than retrycap searches exactly (%d services, %d path steps)",
			c.g.names[nodes[0]], len(nodes), MaxExactComponent, MaxComponentWork)
	}
	// Without retries inside, every way across multiplies by 1: the best way in reaches every
	// node.
	for _, v := range nodes {
		j.h[v] = ub
		if v != maxAt {
			j.inF[v] = c.pathWithin(cp, maxAt, v)
		}
	}
}

// insideBound is the product of the size-1 largest attempts inside a component: no simple path
// inside uses more edges.
func (j *simpleJudge) insideBound(nodes []int32, cp int32) int64 {
	c := j.c
	var inside []int64
	for _, u := range nodes {
		lo, hi := c.out(u)
		for e := lo; e < hi; e++ {
			if t := c.adj.to[e]; c.comp[t] == cp && t != u {
				inside = append(inside, c.att[e])
			}
		}
	}
	slices.Sort(inside)
	slices.Reverse(inside)
	p := int64(1)
	for _, x := range inside[:min(len(inside), len(nodes)-1)] {
		p = mul(p, x)
	}
	return p
}

// through fills a and paths for each of s's slots.
func (j *simpleJudge) through() {
	c, s := j.c, j.s
	lo, hi := c.out(s)
	j.a = make([]int64, hi-lo)
	j.paths = make([][]int32, hi-lo)
	if !c.isCyc(j.cs) {
		if j.h[s] == 0 {
			return
		}
		pre := j.prefixTo(s)
		for e := lo; e < hi; e++ {
			t := c.adj.to[e]
			j.a[e-lo] = mul(j.h[s], j.sp.d[t])
			below, _ := j.sp.path(t)
			j.paths[e-lo] = append(slices.Clone(pre), below...)
		}
		return
	}
	nodes := c.order[:0:0]
	for v := range c.n {
		if c.comp[v] == j.cs {
			nodes = append(nodes, int32(v))
		}
	}
	if len(nodes) <= MaxExactComponent && j.searchC(nodes, lo, hi) {
		return
	}
	// Too large to search: an upper bound.
	j.bound = fmt.Sprintf("an upper bound: the cycle through %s has %d services, more than retrycap searches exactly (%d services, %d path steps)",
		c.g.names[s], len(nodes), MaxExactComponent, MaxComponentWork)
	maxIn, maxAt := int64(0), int32(-1)
	maxExit := int64(1)
	for _, v := range nodes {
		if j.h[v] > maxIn {
			maxIn, maxAt = j.h[v], v
		}
		if x, _ := j.sp.exit(v, j.cs); x > maxExit {
			maxExit = x
		}
	}
	if maxIn == 0 {
		clear(j.a)
		return
	}
	inside := j.insideBound(nodes, j.cs)
	pre := append(j.prefixTo(maxAt), c.pathWithin(j.cs, maxAt, s)[1:]...)
	for e := lo; e < hi; e++ {
		t := c.adj.to[e]
		if t == s {
			continue
		}
		out := maxExit
		if c.comp[t] != j.cs {
			out = j.sp.d[t]
		}
		j.a[e-lo] = mul(mul(maxIn, inside), out)
		j.paths[e-lo] = append(slices.Clone(pre), t)
	}
}

// searchC is the search inside C (see above); false when it ran past MaxComponentWork steps.
func (j *simpleJudge) searchC(nodes []int32, lo, hi int32) bool {
	c, s, cs := j.c, j.s, j.cs
	local := map[int32]int{}
	exits := make([]int64, len(nodes))
	exitSlot := make([]int32, len(nodes))
	for i, v := range nodes {
		local[v] = i
		exits[i], exitSlot[i] = j.sp.exit(v, cs)
	}
	work := 0
	var visited uint64
	var stack []int32
	// tail is the chain after the last node of stack: the way out of C, or down from t.
	offer := func(e int32, x int64, tail []int32) {
		// Ties: the first found (the walk follows declaration order).
		if i := e - lo; x > j.a[i] {
			pre := j.prefixTo(stack[0])
			j.a[i] = x
			j.paths[i] = append(append(pre[:len(pre)-1:len(pre)-1], stack...), tail...)
		}
	}
	// on walks the way on from the last node of stack (inside C, after s's edge e), base the
	// product so far without e's attempts.
	var on func(u int32, e int32, base int64) bool
	on = func(u int32, e int32, base int64) bool {
		if work++; work > MaxComponentWork {
			return false
		}
		k := local[u]
		visited |= 1 << uint(k)
		var tail []int32
		if sl := exitSlot[k]; sl >= 0 {
			tail, _ = j.sp.path(c.adj.to[sl])
		}
		offer(e, mul(base, exits[k]), tail)
		lo2, hi2 := c.out(u)
		for x := lo2; x < hi2; x++ {
			t := c.adj.to[x]
			if c.comp[t] != cs || visited&(1<<uint(local[t])) != 0 {
				continue
			}
			stack = append(stack, t)
			if !on(t, e, mul(base, c.att[x])) {
				return false
			}
			stack = stack[:len(stack)-1]
		}
		visited &^= 1 << uint(k)
		return true
	}
	// in walks the ways in from an entry of C to s.
	var in func(u int32, prod int64) bool
	in = func(u int32, prod int64) bool {
		if work++; work > MaxComponentWork {
			return false
		}
		visited |= 1 << uint(local[u])
		defer func() { visited &^= 1 << uint(local[u]) }()
		if u == s {
			for e := lo; e < hi; e++ {
				t := c.adj.to[e]
				switch {
				case t == s:
					// A self-loop without retries (a retrying one is unbounded, judged
					// before): no chain goes round it.
				case c.comp[t] != cs:
					below, _ := j.sp.path(t)
					offer(e, mul(prod, j.sp.d[t]), below)
				case visited&(1<<uint(local[t])) == 0:
					stack = append(stack, t)
					if !on(t, e, prod) {
						return false
					}
					stack = stack[:len(stack)-1]
				}
			}
			return true
		}
		lo2, hi2 := c.out(u)
		for x := lo2; x < hi2; x++ {
			t := c.adj.to[x]
			if c.comp[t] != cs || visited&(1<<uint(local[t])) != 0 {
				continue
			}
			stack = append(stack, t)
			if !in(t, mul(prod, c.att[x])) {
				return false
			}
			stack = stack[:len(stack)-1]
		}
		return true
	}
	for _, a := range nodes {
		if j.h[a] == 0 {
			continue
		}
		stack = append(stack[:0], a)
		visited = 0
		if !in(a, j.h[a]) {
			clear(j.a)
			clear(j.paths)
			return false
		}
	}
	return true
}

// prefixTo is the worst simple way from an entrypoint to v (v last), outside C but for v.
func (j *simpleJudge) prefixTo(v int32) []int32 {
	c := j.c
	var rev []int32
	x := v
	for steps := 0; steps <= c.n; steps++ {
		if in, ok := j.inF[x]; ok {
			for i := len(in) - 1; i >= 1; i-- {
				rev = append(rev, in[i])
			}
			x = in[0]
		}
		rev = append(rev, x)
		p := j.pred[x]
		if p < 0 {
			break
		}
		x = c.adj.from[p]
	}
	slices.Reverse(rev)
	return rev
}

// judgement is Judge's answer from the search: the worst chain through any of s's slots (the
// first declared on a tie).
func (j *simpleJudge) judgement(cap int64) *Judgement {
	c, s := j.c, j.s
	jd := &Judgement{Service: c.g.names[s], Cap: cap}
	lo, hi := c.out(s)
	best := int32(-1)
	for e := lo; e < hi; e++ {
		if j.a[e-lo] == 0 {
			continue
		}
		if amp := mul(j.a[e-lo], c.att[e]); best < 0 || amp > jd.Amplification {
			best, jd.Amplification = e, amp
		}
	}
	if best < 0 {
		return jd
	}
	jd.Path, jd.Factors = j.chain(best-lo, c.att[best])
	jd.Over = jd.Amplification > cap
	jd.Bound = j.bound
	return jd
}

// chain is slot i's chain, its factors with att on s's edge: the entrypoint's client attempts,
// then each edge's.
func (j *simpleJudge) chain(i int32, att int64) ([]string, []int64) {
	c := j.c
	nodes := j.paths[i]
	factors := []int64{j.entK[nodes[0]]}
	for k := 1; k < len(nodes); k++ {
		if nodes[k-1] == j.s {
			factors = append(factors, att)
			continue
		}
		factors = append(factors, c.att[c.slotBetween(nodes[k-1], nodes[k])])
	}
	return c.names(nodes), factors
}

// plan is PlanLocal's plan from the search: each slot's largest attempts (at most its own) that
// keep its chains within cap; 1 and fail when even 1 does not fit.
func (j *simpleJudge) plan(cap int64, orig []int64, p *Plan, fail func(string)) {
	c, s := j.c, j.s
	name := c.g.names[s]
	lo, hi := c.out(s)
	for e := lo; e < hi; e++ {
		t := c.adj.to[e]
		to := c.g.names[t]
		newA := c.att[e]
		if a := j.a[e-lo]; a > 0 {
			if a > cap {
				newA = 1
				path, factors := j.chain(e-lo, 1)
				msg := "even with " + name + ": " + to + "=1, " + explain(path, factors, a, cap, factors[0] > 1)
				if j.bound != "" {
					msg += " (at most: " + j.bound + ")"
				}
				fail(msg)
			} else {
				newA = min(newA, cap/a)
			}
		}
		p.Attempts[EdgeKey{name, to}] = newA
		if newA < orig[e] {
			p.Changes = append(p.Changes, Change{From: name, To: to, Old: orig[e], New: newA})
		}
	}
}
