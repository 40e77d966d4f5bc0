package graph

import (
	"math"
	"slices"
	"sync"
)

// core holds the structure every computation needs: strongly connected components in
// topological order, the entrypoints, and the forward (into a node) and backward (below a node)
// worst products for one vector of attempts.
//
// Everything here works on the adjacency's slots (see adjacency), not on edge ids: a slot's
// target, source and attempts sit next to its neighbours', so each pass reads memory front to
// back. Edge ids (declaration order) are used only where an order must be stable for users.
type core struct {
	g   *Graph
	adj *adjacency
	n   int

	comp  []int32 // node -> component; components are numbered sinks first (Tarjan order)
	order []int32 // nodes in topological order, each component's nodes contiguous
	csize []int32 // component -> size; nil when the graph is acyclic (every size 1)
	cyc   []bool  // component -> has a cycle (size > 1 or a self-loop); nil when the graph is acyclic

	ents []entry // effective entrypoints (explicit, else default)

	att []int64 // attempts per slot used by the passes

	v    []vals  // per node, see vals; allocated by the first pass
	pred []int32 // slot that gives h, -1 at the start of the path
	succ []int32 // slot that gives d, -1 at the end of the path

	fused   bool    // forwardAcyclic collected candidates and the planner's products
	nOver   int     // forwardAcyclic with candidates: the edges with a path over the cap
	first   []int32 // runFirst's memo
	scratch []int32

	retry     []bool // component -> contains an edge with attempts > 1 (only for cyc components)
	anyRetry  bool
	retryComp int32  // first retry component in topological order, -1 if none
	selfLoop  []bool // node -> calls itself (nil: none does)
	anySelf   bool   // some node calls itself
	selfRetry int32  // the first slot (by index) of a self-loop with attempts > 1, -1 if none

	// treeFrom's scratch, reused across components.
	tfSeen          []bool
	tfQueue         []int32
	pwPrev, pwQueue []int32 // pathWithin's scratch

	buf *buffers // where the node-sized arrays come from (see release)
}

// vals are a node's numbers, kept together: the passes reach a node through a random edge, and
// then one cache line serves all of them where separate arrays would cost one line each.
type vals struct {
	h    int64 // worst product of client attempts and attempts into the node (0 = unreachable)
	d    int64 // worst product of attempts from the node down (>= 1)
	load int64 // worst-case load, fan-out included
	hp   int64 // the whole-graph planner's worst product into the node (forwardAcyclic only)
}

// vals returns the per-node values, zero, on first use.
func (c *core) vals() []vals {
	if c.v == nil {
		c.v = c.buf.vals(c.n)
	}
	return c.v
}

// buffers are the node-sized arrays of one core, recycled between calls: a policy is analysed
// again on every change, and for a large graph these arrays are most of what a call allocates
// (and so of the garbage collector's work).
type buffers struct {
	v          []vals
	pred, succ []int32
}

var bufferPool = sync.Pool{New: func() any { return new(buffers) }}

func (b *buffers) vals(n int) []vals {
	if cap(b.v) < n {
		b.v = make([]vals, n)
	}
	b.v = b.v[:n]
	clear(b.v)
	return b.v
}

// int32s returns *p resized to n (contents undefined), growing it if needed.
func int32s(p *[]int32, n int) []int32 {
	if cap(*p) < n {
		*p = make([]int32, n)
	}
	*p = (*p)[:n]
	return *p
}

// release hands the core's buffers back; nothing of the core may be used afterwards, and
// nothing returned to callers may point into them.
func (c *core) release() {
	if c.buf != nil {
		bufferPool.Put(c.buf)
		c.buf = nil
	}
}

// newCore orders g and resolves its entrypoints. att holds the attempts per slot (nil: the
// graph's own).
func newCore(g *Graph, att []int64) *core {
	adj := g.adjacency()
	own := att == nil
	if own {
		att = adj.att
	}
	c := &core{g: g, adj: adj, n: len(g.names), att: att, retryComp: -1, selfRetry: -1, buf: bufferPool.Get().(*buffers)}
	if !c.kahn() {
		if r := adj.sccs.Load(); r != nil {
			c.comp, c.order, c.csize, c.cyc, c.selfLoop = r.comp, r.order, r.csize, r.cyc, r.selfLoop
		} else {
			c.tarjan()
			// Concurrent cores may both compute it: the same answer, the last store wins.
			adj.sccs.Store(&sccs{comp: c.comp, order: c.order, csize: c.csize, cyc: c.cyc, selfLoop: c.selfLoop})
		}
	}
	c.entrypoints()
	switch r := adj.retries.Load(); {
	case !own || c.cyc == nil:
		c.findRetry()
	case r != nil:
		c.retry, c.anyRetry, c.retryComp, c.anySelf, c.selfRetry = r.retry, r.anyRetry, r.retryComp, r.anySelf, r.selfRet
	default:
		c.findRetry()
		adj.retries.Store(&retryMarks{retry: c.retry, anyRetry: c.anyRetry, retryComp: c.retryComp, anySelf: c.anySelf, selfRet: c.selfRetry})
	}
	return c
}

// kahn takes the adjacency's topological order (see kahnOrder); it reports false when the graph
// has a cycle, and tarjan then does the work.
func (c *core) kahn() bool {
	if c.adj.order == nil && c.n > 0 {
		return false
	}
	c.comp, c.order = c.adj.comp, c.adj.order
	return true
}

// kahnOrder orders an acyclic graph topologically (Kahn, first in first out), every component a
// single node numbered sinks first as Tarjan numbers them; nil when the graph has a cycle. The
// order depends only on the edges, not on attempts, so the adjacency computes it once, with the
// rest of its arrays, and every Analyze, Judge and plan on the graph reads it.
func kahnOrder(off, to, indegree []int32) (order, comp []int32) {
	n := len(indegree)
	indeg := make([]int32, n) // becomes comp below
	copy(indeg, indegree)
	order = make([]int32, 0, n)
	for v := range n {
		if indeg[v] == 0 {
			order = append(order, int32(v))
		}
	}
	for i := 0; i < len(order); i++ {
		v := order[i]
		for _, t := range to[off[v]:off[v+1]] {
			if indeg[t]--; indeg[t] == 0 {
				order = append(order, t)
			}
		}
	}
	if len(order) != n {
		return nil, nil
	}
	comp = indeg // all zero now: reuse
	for i, v := range order {
		comp[v] = int32(n - 1 - i)
	}
	return order, comp
}

// tarjan computes the components iteratively (deep chains must not overflow the stack).
func (c *core) tarjan() {
	a, n := c.adj, c.n
	off, end, to := a.off, a.end, a.to
	index := make([]int32, n) // 1-based DFS index, 0 = unvisited
	low := make([]int32, n)
	c.comp = make([]int32, n)
	for i := range c.comp {
		c.comp[i] = -1
	}
	stack := make([]int32, 0, 64)
	popped := make([]int32, 0, n)
	type frame struct{ v, s int32 } // node, next slot to look at
	calls := make([]frame, 0, 64)
	var idx, nc int32
	var selfLoop []bool
	for s := range n {
		if index[s] != 0 {
			continue
		}
		idx++
		index[s], low[s] = idx, idx
		stack = append(stack, int32(s))
		calls = append(calls, frame{v: int32(s), s: off[s]})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.s < end[v] {
				w := to[f.s]
				f.s++
				if index[w] == 0 {
					idx++
					index[w], low[w] = idx, idx
					stack = append(stack, w)
					calls = append(calls, frame{v: w, s: off[w]})
				} else if c.comp[w] < 0 && index[w] < low[v] { // w on the stack
					low[v] = index[w]
				}
				if w == v {
					if selfLoop == nil {
						selfLoop = make([]bool, n)
					}
					selfLoop[v] = true
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				if p := calls[len(calls)-1].v; low[v] < low[p] {
					low[p] = low[v]
				}
			}
			if low[v] == index[v] {
				start := len(popped)
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					c.comp[w] = nc
					popped = append(popped, w)
					if w == v {
						break
					}
				}
				size := int32(len(popped) - start)
				c.csize = append(c.csize, size)
				if size > 1 || (selfLoop != nil && selfLoop[v]) {
					if c.cyc == nil {
						c.cyc = make([]bool, n)
					}
					c.cyc[nc] = true
				}
				nc++
			}
		}
	}
	// Tarjan finishes components sinks first: reversed, the pops are a topological order
	// with each component's nodes contiguous.
	for i, j := 0, len(popped)-1; i < j; i, j = i+1, j-1 {
		popped[i], popped[j] = popped[j], popped[i]
	}
	c.order = popped
	if c.cyc != nil {
		c.cyc = c.cyc[:nc]
	}
	c.selfLoop = selfLoop
}

func (c *core) isCyc(comp int32) bool { return c.cyc != nil && c.cyc[comp] }

// size is the number of nodes in component cp.
func (c *core) size(cp int32) int {
	if c.csize == nil {
		return 1
	}
	return int(c.csize[cp])
}

// markReachers marks in reach the nodes that reach s (s included), by components, sinks first
// (in a strongly connected component every node reaches every other), and gives each such
// component to each (nil: none) once its nodes are marked. JudgeTime's restricted pass and the
// simple-path judge both start from it.
func (c *core) markReachers(s int32, reach []bool, each func(comp []int32)) {
	reach[s] = true
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
				in = reach[c.adj.to[e]]
			}
		}
		if !in {
			continue
		}
		for _, u := range comp {
			reach[u] = true
		}
		if each != nil {
			each(comp)
		}
	}
}

// compAt is the component whose nodes start at position i of the order (a component's nodes
// are contiguous there): its id and its nodes. The forward sweeps step i by len(nodes).
func (c *core) compAt(i int) (cp int32, nodes []int32) {
	cp = c.comp[c.order[i]]
	return cp, c.order[i : i+c.size(cp)]
}

// out is the range of v's slots.
func (c *core) out(v int32) (lo, hi int32) { return c.adj.off[v], c.adj.end[v] }

// entrypoints resolves the effective entrypoints: the explicit ones, else every selected service
// that no selected service calls, plus, for a closed group of services that call each other and
// that nothing else calls, its first service, so that such a loop is still analysed.
func (c *core) entrypoints() {
	g, a := c.g, c.adj
	if len(g.entries) > 0 {
		c.ents = g.entries
		return
	}
	called := make([]bool, c.n)
	for s, f := range a.from {
		if g.selected[f] {
			called[a.to[s]] = true
		}
	}
	for v := range g.calledOutside {
		called[v] = true
	}
	for v := range c.n {
		k, extra := g.extra[int32(v)]
		switch {
		case g.selected[v] && !called[v]:
			c.ents = append(c.ents, entry{node: int32(v), k: max(k, 1)})
		case extra:
			c.ents = append(c.ents, entry{node: int32(v), k: k})
		}
	}
	if c.cyc == nil {
		return
	}
	ncomp := len(c.csize)
	hasIn := make([]bool, ncomp)
	hasEntry := make([]bool, ncomp)
	for s, f := range a.from {
		if t := a.to[s]; c.comp[f] != c.comp[t] {
			hasIn[c.comp[t]] = true
		}
	}
	for v := range g.calledOutside {
		hasIn[c.comp[v]] = true // called from a node of the full graph
	}
	for _, en := range c.ents {
		hasEntry[c.comp[en.node]] = true
	}
	for _, v := range c.order {
		cp := c.comp[v]
		if c.cyc[cp] && !hasIn[cp] && !hasEntry[cp] && g.selected[v] {
			hasEntry[cp] = true
			c.ents = append(c.ents, entry{node: v, k: 1})
		}
	}
}

// findRetry marks the components that contain an edge with attempts > 1 (retry cycles), and
// finds the self-loops (anySelf, and selfRetry: the first by slot with attempts > 1), in one
// walk over the cyclic components' edges.
func (c *core) findRetry() {
	c.anyRetry, c.retryComp, c.anySelf, c.selfRetry = false, -1, false, -1
	if c.cyc == nil {
		return
	}
	to, comp, att, off, end := c.adj.to, c.comp, c.att, c.adj.off, c.adj.end
	c.retry = make([]bool, len(c.csize))
	for i := 0; i < c.n; {
		v := c.order[i]
		cp := comp[v]
		size := int(c.csize[cp])
		if c.cyc[cp] {
			r := false
			for _, u := range c.order[i : i+size] {
				for s := off[u]; s < end[u]; s++ {
					t := to[s]
					if comp[t] != cp {
						continue
					}
					if att[s] > 1 {
						r = true
					}
					if t == u {
						c.anySelf = true
						if att[s] > 1 && (c.selfRetry < 0 || s < c.selfRetry) {
							c.selfRetry = s
						}
					}
				}
			}
			c.retry[cp] = r
			if r && !c.anyRetry {
				c.anyRetry = true
				c.retryComp = cp
			}
		}
		i += size
	}
}

// forward computes h, pred and (with load) the worst-case load, in topological order.
func (c *core) forward(withLoad bool) {
	n := c.n
	vs := c.vals()
	c.pred = int32s(&c.buf.pred, n)
	for i := range c.pred {
		c.pred[i] = -1
	}
	for _, en := range c.ents {
		vs[en.node].h = max(vs[en.node].h, en.k)
		if withLoad {
			vs[en.node].load = add(vs[en.node].load, en.k)
		}
	}
	pred, att, edge := c.pred, c.att, c.adj.edge
	off, end, to, ac := c.adj.off, c.adj.end, c.adj.to, c.adj.attCal
	for i := 0; i < n; {
		v := c.order[i]
		if cp := c.comp[v]; c.isCyc(cp) {
			size := c.size(cp)
			c.forwardCyclic(c.order[i:i+size], cp, withLoad)
			i += size
			continue
		}
		i++
		hv, lv := vs[v].h, vs[v].load
		if hv == 0 {
			continue
		}
		lo, hi := off[v], end[v]
		for s := lo; s < hi; s++ {
			w := &vs[to[s]]
			if x := mul(hv, att[s]); x > w.h || (x == w.h && pred[to[s]] >= 0 && edge[s] < edge[pred[to[s]]]) {
				w.h = x
				pred[to[s]] = s
			}
			if withLoad {
				w.load = add(w.load, mul(lv, ac[s]))
			}
		}
	}
}

// forwardAcyclic is forward(true) for an acyclic graph, run after backward and fused with what
// Analyze needs next when the graph is over the cap (top not nil): the whole-graph planner's
// worst products (hp, for the suggestions; cap is the planner's) and the violations' candidates,
// one per distinct path as far as the run before each edge tells (see runFirsts). So the edges
// are walked once here instead of three times.
func (c *core) forwardAcyclic(cap int64, top *topK) {
	n := c.n
	vs := c.vals()
	pred := int32s(&c.buf.pred, n)
	for i := range pred {
		pred[i] = -1
	}
	for _, en := range c.ents {
		w := &vs[en.node]
		w.h = max(w.h, en.k)
		w.load = add(w.load, en.k)
		w.hp = max(w.hp, en.k)
	}
	c.pred = pred
	a := c.adj
	// The rows are laid out in c.order (see adjacency.rowEnd): each row starts where the
	// previous one ended.
	rowEnd, to, att, ac := a.rowEnd, a.to, c.att, a.attCal
	edge := a.edge
	if top == nil {
		var next int32 // the next row's first slot
		for k, v := range c.order {
			lo, hi := next, rowEnd[k]
			next = hi
			hv, lv := vs[v].h, vs[v].load
			if hv == 0 {
				continue
			}
			ts, as, acs := to[lo:hi], att[lo:hi], ac[lo:hi]
			for i, t := range ts {
				w := &vs[t]
				x, ht, pt := mul(hv, as[i]), w.h, pred[t]
				if s := lo + int32(i); x > ht || (x == ht && pt >= 0 && edge[s] < edge[pt]) {
					ht, pt = x, s
				}
				w.h, pred[t] = ht, pt
				w.load = add(w.load, mul(lv, acs[i]))
			}
		}
		return
	}
	c.fused = true
	succ := c.succ
	over, overE := top.cap, int32(-1)
	var next int32
	for k, v := range c.order {
		lo, hi := next, rowEnd[k]
		next = hi
		hv, lv, hpv := vs[v].h, vs[v].load, vs[v].hp
		if hv == 0 {
			continue
		}
		allow := max(cap/max(hpv, 1), 1)
		sv := succ[v]
		if pred[v] < 0 {
			sv = -1 // no run goes through v
		}
		ts, as, acs := to[lo:hi], att[lo:hi], ac[lo:hi]
		for i, t := range ts {
			s, at := lo+int32(i), as[i]
			w := &vs[t]
			x := mul(hv, at)
			// Unconditional stores of conditionally moved values: whether x wins is a coin
			// toss the branch predictor loses.
			ht, pt := w.h, pred[t]
			if x > ht || (x == ht && pt >= 0 && edge[s] < edge[pt]) {
				ht, pt = x, s
			}
			w.h, pred[t] = ht, pt
			w.load = add(w.load, mul(lv, acs[i]))
			w.hp = max(w.hp, mul(hpv, min(at, allow)))
			amp := mul(x, w.d)
			if amp > top.cap {
				c.nOver++
			}
			if amp > over {
				// Once top is full, over is its worst amplification minus one (and overE its
				// edge id), so most edges are turned away here without a call.
				e := edge[s]
				if amp == over+1 && overE >= 0 && e > overE {
					continue
				}
				if s == sv && c.runFirst(v) < e {
					continue // an edge before it on its run was declared first
				}
				top.offer(cand{amp: amp, e: e, s: s})
				if top.full() {
					w := top.worst()
					over, overE = w.amp-1, w.e
				}
			}
		}
	}
}

// runFirst is the lowest edge id on the run (see runFirsts) up to and including pred[v], which
// must be set. Asked only for the few edges that would enter the violations' candidates, and
// memoised in c.first (id+1; 0 = not yet), so that all calls together walk each node once.
func (c *core) runFirst(v int32) int32 {
	if c.first == nil {
		c.first = make([]int32, c.n)
	}
	pred, succ, from, edge := c.pred, c.succ, c.adj.from, c.adj.edge
	// Walk back to a node already known or to the run's start, then fill in going forward.
	stack := c.scratch[:0]
	f := int32(math.MaxInt32) // no edge yet
	for w := v; ; {
		if m := c.first[w]; m != 0 {
			f = m - 1
			break
		}
		stack = append(stack, w)
		p := pred[w]
		u := from[p]
		if succ[u] != p || pred[u] < 0 {
			break // the run starts with p
		}
		w = u
	}
	for i := len(stack) - 1; i >= 0; i-- {
		x := stack[i]
		f = min(f, edge[pred[x]])
		c.first[x] = f + 1
	}
	c.scratch = stack
	return f
}

// forwardCyclic handles one component with a cycle. Without a retry every node in it is reached
// with the same worst product (the cycle multiplies by 1), through a BFS tree from the node where
// the worst path enters; with a retry every reachable node's product saturates. Load through any
// cycle saturates: a request can go round it without end.
func (c *core) forwardCyclic(nodes []int32, cp int32, withLoad bool) {
	to := c.adj.to
	var best int32 = -1
	var H int64
	for _, v := range nodes {
		if c.v[v].h > H {
			H, best = c.v[v].h, v
		}
	}
	if H == 0 {
		return
	}
	if c.retry[cp] {
		H = Saturated
	}
	c.treeFrom(nodes, cp, best, true)
	for _, v := range nodes {
		c.v[v].h = H
		if withLoad {
			c.v[v].load = Saturated
		}
	}
	for _, v := range nodes {
		lo, hi := c.out(v)
		for s := lo; s < hi; s++ {
			t := to[s]
			if c.comp[t] == cp {
				continue
			}
			if x := mul(H, c.att[s]); x > c.v[t].h || (x == c.v[t].h && c.pred[t] >= 0 && c.adj.edge[s] < c.adj.edge[c.pred[t]]) {
				c.v[t].h = x
				c.pred[t] = s
			}
			if withLoad {
				c.v[t].load = Saturated
			}
		}
	}
}

// treeFrom sets, for the nodes of component cp (nodes: its run of c.order), pred (forward: a
// BFS tree from root) or succ (backward: a BFS tree towards root), using only edges inside the
// component. A node's index in the component is its position in c.order less the first's.
func (c *core) treeFrom(nodes []int32, cp int32, root int32, forward bool) {
	to := c.adj.to
	in := c.innerEdges()
	pos := in.pos
	base := pos[nodes[0]]
	// The scratch is the core's, reused by every component (a graph can have thousands).
	k := len(nodes)
	if cap(c.tfSeen) < k {
		c.tfSeen = make([]bool, k)
	}
	seen := c.tfSeen[:k]
	clear(seen)
	seen[pos[root]-base] = true
	queue := append(c.tfQueue[:0], root)
	defer func() { c.tfQueue = queue[:0] }()
	if forward {
		for i := 0; i < len(queue); i++ {
			u := queue[i]
			lo, hi := c.out(u)
			for s := lo; s < hi; s++ {
				t := to[s]
				if c.comp[t] != cp || seen[pos[t]-base] {
					continue
				}
				seen[pos[t]-base] = true
				c.pred[t] = s
				queue = append(queue, t)
			}
		}
		return
	}
	order := c.order[base:]
	for i := 0; i < len(queue); i++ {
		p := pos[queue[i]]
		lo, hi := in.start[p], in.start[p+1]
		for k, l := range in.srcLocal[lo:hi] {
			if seen[l] {
				continue
			}
			seen[l] = true
			u := order[l]
			c.succ[u] = in.slots[lo+int32(k)]
			queue = append(queue, u)
		}
	}
}

// innerIn is, for a graph with a cycle, every node's position in the topological order (pos)
// and the edges inside each cyclic component by target: the node at position p has
// slots[start[p]:start[p+1]], ordered by their source's position, then by slot, and srcLocal
// holds each one's source as its index in the component (its position less the component's
// first): the BFS reads them front to back instead of looking each source up. It depends only
// on the edges, so the adjacency keeps it, like the components, for every core on the graph;
// treeFrom's backward BFS, run for every such component of every analysis, then reads it
// instead of building it.
type innerIn struct {
	pos, start, slots, srcLocal []int32
}

// innerEdges returns the graph's innerIn, building it on first use. O(V+E).
func (c *core) innerEdges() *innerIn {
	if in := c.adj.inner.Load(); in != nil {
		return in
	}
	n, to, off, end := c.n, c.adj.to, c.adj.off, c.adj.end
	in := &innerIn{pos: make([]int32, n), start: make([]int32, n+1)}
	for i, v := range c.order {
		in.pos[v] = int32(i)
	}
	// Count by target position, then lay out by a running fill.
	for i := 0; i < n; {
		cp := c.comp[c.order[i]]
		size := c.size(cp)
		if c.isCyc(cp) {
			for _, u := range c.order[i : i+size] {
				for s := off[u]; s < end[u]; s++ {
					if t := to[s]; c.comp[t] == cp {
						in.start[in.pos[t]+1]++
					}
				}
			}
		}
		i += size
	}
	for p := 1; p <= n; p++ {
		in.start[p] += in.start[p-1]
	}
	in.slots, in.srcLocal = make([]int32, in.start[n]), make([]int32, in.start[n])
	fill := slices.Clone(in.start[:n])
	for i := 0; i < n; {
		cp := c.comp[c.order[i]]
		size := c.size(cp)
		if c.isCyc(cp) {
			for l, u := range c.order[i : i+size] {
				for s := off[u]; s < end[u]; s++ {
					if t := to[s]; c.comp[t] == cp {
						p := in.pos[t]
						in.slots[fill[p]], in.srcLocal[fill[p]] = s, int32(l)
						fill[p]++
					}
				}
			}
		}
		i += size
	}
	// Concurrent cores may both build it: the same thing, the last store wins.
	c.adj.inner.Store(in)
	return in
}

// backward computes d and succ in reverse topological order. It does not depend on forward's
// results (nor forward on its), so Analyze runs it first and knows the amplification before it
// walks forward.
func (c *core) backward() {
	n := c.n
	vs := c.vals()
	c.succ = int32s(&c.buf.succ, n)
	succ, att := c.succ, c.att
	off, end, to := c.adj.off, c.adj.end, c.adj.to
	if rowEnd := c.adj.rowEnd; c.cyc == nil && rowEnd != nil {
		// Acyclic: the rows are laid out in c.order (see adjacency.rowEnd).
		hi := int32(len(to))
		for i := n - 1; i >= 0; i-- {
			v, lo := c.order[i], int32(0)
			if i > 0 {
				lo = rowEnd[i-1]
			}
			// Start below 1 so that, on a tie, the path goes on (to the deepest service)
			// rather than stopping; the first declared edge wins ties (see Analyze: the
			// tie-break rule).
			dv, sv := int64(0), int32(-1)
			for s := lo; s < hi; s++ {
				if x := mul(att[s], vs[to[s]].d); x > dv {
					dv, sv = x, s
				}
			}
			vs[v].d, succ[v] = max(dv, 1), sv
			hi = lo
		}
		return
	}
	for i := n - 1; i >= 0; {
		v := c.order[i]
		if cp := c.comp[v]; c.isCyc(cp) {
			size := c.size(cp)
			c.backwardCyclic(c.order[i-size+1:i+1], cp)
			i -= size
			continue
		}
		i--
		// Start below 1 so that, on a tie, the path goes on (to the deepest service) rather than
		// stopping; the first declared edge wins ties.
		dv, sv := int64(0), int32(-1)
		lo, hi := off[v], end[v]
		for s := lo; s < hi; s++ {
			if x := mul(att[s], vs[to[s]].d); x > dv {
				dv, sv = x, s
			}
		}
		vs[v].d, succ[v] = max(dv, 1), sv
	}
}

// offerOut offers v's over-cap outgoing edges to top (edges inside a component excluded); h and
// d must be final.
func (c *core) offerOut(top *topK, v int32) {
	hv := c.v[v].h
	if hv == 0 {
		return
	}
	to, edge := c.adj.to, c.adj.edge
	lo, hi := c.out(v)
	for s := lo; s < hi; s++ {
		t := to[s]
		if c.cyc != nil && c.comp[v] == c.comp[t] {
			continue
		}
		if amp := mul(mul(hv, c.att[s]), c.v[t].d); amp > top.cap {
			top.offer(cand{amp: amp, e: edge[s], s: s})
		}
	}
}

func (c *core) backwardCyclic(nodes []int32, cp int32) {
	to, from := c.adj.to, c.adj.from
	for _, v := range nodes {
		c.succ[v] = -1
	}
	if c.retry[cp] {
		for _, v := range nodes {
			c.v[v].d = Saturated
		}
		return
	}
	D, best := int64(0), int32(-1)
	for _, u := range nodes {
		lo, hi := c.out(u)
		for s := lo; s < hi; s++ {
			t := to[s]
			if c.comp[t] == cp {
				continue
			}
			if x := mul(c.att[s], c.v[t].d); x > D {
				D, best = x, s
			}
		}
	}
	D = max(D, 1)
	for _, v := range nodes {
		c.v[v].d = D
	}
	if best >= 0 {
		exit := from[best]
		c.treeFrom(nodes, cp, exit, false)
		c.succ[exit] = best
	}
}

// prefix is the worst path from an entrypoint into v (node ids, entry first) and the slots on it.
func (c *core) prefix(v int32) (nodes []int32, slots []int32) {
	// Count first: paths can be hundreds of hops, and growing two slices costs more than a
	// second walk along pred.
	hops := 0
	for x := v; c.pred[x] >= 0 && hops < c.n; hops++ {
		x = c.adj.from[c.pred[x]]
	}
	nodes, slots = make([]int32, hops+1), make([]int32, hops)
	nodes[hops] = v
	for i := hops - 1; i >= 0; i-- {
		s := c.pred[v]
		slots[i] = s
		v = c.adj.from[s]
		nodes[i] = v
	}
	return nodes, slots
}

// suffix is the worst path down from v (v first) and the slots on it.
func (c *core) suffix(v int32) (nodes []int32, slots []int32) {
	hops := 0
	for x := v; c.succ[x] >= 0 && hops < c.n; hops++ {
		x = c.adj.to[c.succ[x]]
	}
	nodes, slots = make([]int32, hops+1), make([]int32, hops)
	nodes[0] = v
	for i := range hops {
		s := c.succ[v]
		slots[i] = s
		v = c.adj.to[s]
		nodes[i+1] = v
	}
	return nodes, slots
}

// throughEdge is the worst path through slot s: the worst path into its source, s, and the worst
// path below its target. Factors are the start's product (client attempts) then each edge's
// attempts; slots are the path's edges.
func (c *core) throughEdge(s int32) (path []int32, factors []int64, slots []int32) {
	pn, ps := c.prefix(c.adj.from[s])
	sn, ss := c.suffix(c.adj.to[s])
	path = make([]int32, 0, len(pn)+len(sn))
	path = append(append(path, pn...), sn...)
	slots = make([]int32, 0, len(path)-1)
	slots = append(append(append(slots, ps...), s), ss...)
	factors = make([]int64, 0, len(path))
	factors = append(factors, c.v[pn[0]].h)
	for _, x := range slots {
		factors = append(factors, c.att[x])
	}
	return path, factors, slots
}

// retryCycle returns a concrete retry cycle in component cp, starting and ending at the source of
// its first edge with attempts > 1: [u v ... u].
func (c *core) retryCycle(cp int32) []int32 {
	to := c.adj.to
	for _, u := range c.order {
		if c.comp[u] != cp {
			continue
		}
		lo, hi := c.out(u)
		for s := lo; s < hi; s++ {
			if v := to[s]; c.comp[v] == cp && c.att[s] > 1 {
				return append([]int32{u}, c.pathWithin(cp, v, u)...)
			}
		}
	}
	return nil
}

// pathWithin is a shortest path from a to b (a first, b last) using only edges inside cp: a BFS
// from a, the first way found to each service kept. Its marks are the core's (pwPrev: 0 =
// unseen, 1 = a, else the service it was reached from + 2), cleared again for the services it
// saw, so that a large component costs no map and many small ones no node-sized array each.
func (c *core) pathWithin(cp int32, a, b int32) []int32 {
	if a == b {
		return []int32{a}
	}
	if c.pwPrev == nil {
		c.pwPrev = make([]int32, c.n)
	}
	prev, to := c.pwPrev, c.adj.to
	queue := append(c.pwQueue[:0], a)
	prev[a] = 1 // the start: no predecessor
	var path []int32
	for i := 0; i < len(queue) && path == nil; i++ {
		u := queue[i]
		for s := c.adj.off[u]; s < c.adj.end[u]; s++ {
			t := to[s]
			if c.comp[t] != cp || prev[t] != 0 {
				continue
			}
			prev[t] = u + 2
			if t == b {
				n := 1
				for x := b; prev[x] != 1; x = prev[x] - 2 {
					n++
				}
				path = make([]int32, n)
				for x, k := b, n-1; k >= 0; k-- {
					path[k] = x
					x = prev[x] - 2
				}
				break
			}
			queue = append(queue, t)
		}
	}
	for _, u := range queue {
		prev[u] = 0
	}
	prev[b] = 0
	c.pwQueue = queue[:0]
	return path
}

// slotBetween returns the slot of the edge u->v, -1 if there is none.
func (c *core) slotBetween(u, v int32) int32 {
	if e, ok := c.g.edgeIdx[uint64(uint32(u))<<32|uint64(uint32(v))]; ok {
		return c.adj.slot[e]
	}
	return -1
}

func (c *core) names(ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = c.g.names[id]
	}
	return out
}
