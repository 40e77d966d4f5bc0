package graph

// core holds the structure every computation needs: strongly connected components in
// topological order, the entrypoints, and the forward (into a node) and backward (below a node)
// worst products for one vector of edge attempts.
type core struct {
	g *Graph
	n int

	comp  []int32 // node -> component; components are numbered sinks first (Tarjan order)
	order []int32 // nodes in topological order, each component's nodes contiguous
	csize []int32 // component -> size
	cyc   []bool  // component -> has a cycle (size > 1 or a self-loop); nil when the graph is acyclic

	ents []entry // effective entrypoints (explicit, else default)

	att []int64 // attempts per edge used by the passes

	h    []int64 // worst product of client attempts and attempts into a node (0 = unreachable)
	pred []int32 // edge that gives h, -1 at the start of the path
	d    []int64 // worst product of attempts from a node down (>= 1)
	succ []int32 // edge that gives d, -1 at the end of the path
	load []int64 // worst-case load, fan-out included

	retry     []bool // component -> contains an edge with attempts > 1 (only for cyc components)
	anyRetry  bool
	retryComp int32 // first retry component in topological order, -1 if none

	local []int32 // scratch: node -> index within the component being processed, -1 otherwise
}

func newCore(g *Graph, att []int64) *core {
	c := &core{g: g, n: len(g.names), att: att, retryComp: -1}
	if !c.kahn() {
		c.tarjan()
	}
	c.entrypoints()
	c.findRetry()
	return c
}

// kahn orders an acyclic graph topologically (every component a single node), which is cheaper
// than Tarjan; it reports false when the graph has a cycle, and tarjan then does the work.
func (c *core) kahn() bool {
	g, n := c.g, c.n
	indeg := make([]int32, n)
	for _, t := range g.eTo {
		indeg[t]++
	}
	order := make([]int32, 0, n)
	for v := range n {
		if indeg[v] == 0 {
			order = append(order, int32(v))
		}
	}
	for i := 0; i < len(order); i++ {
		for _, e := range g.out[order[i]] {
			t := g.eTo[e]
			if indeg[t]--; indeg[t] == 0 {
				order = append(order, t)
			}
		}
	}
	if len(order) != n {
		return false
	}
	// Components are numbered sinks first, as Tarjan does.
	comp := indeg // all zero now: reuse
	for i, v := range order {
		comp[v] = int32(n - 1 - i)
	}
	c.comp, c.order = comp, order
	c.csize = make([]int32, n)
	for i := range c.csize {
		c.csize[i] = 1
	}
	return true
}

// tarjan computes the components iteratively (deep chains must not overflow the stack).
func (c *core) tarjan() {
	g, n := c.g, c.n
	index := make([]int32, n) // 1-based DFS index, 0 = unvisited
	low := make([]int32, n)
	c.comp = make([]int32, n)
	for i := range c.comp {
		c.comp[i] = -1
	}
	stack := make([]int32, 0, 64)
	popped := make([]int32, 0, n)
	type frame struct{ v, i int32 }
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
		calls = append(calls, frame{v: int32(s)})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			out := g.out[v]
			if int(f.i) < len(out) {
				w := g.eTo[out[f.i]]
				f.i++
				if index[w] == 0 {
					idx++
					index[w], low[w] = idx, idx
					stack = append(stack, w)
					calls = append(calls, frame{v: w})
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
}

func (c *core) isCyc(comp int32) bool { return c.cyc != nil && c.cyc[comp] }

// entrypoints resolves the effective entrypoints: the explicit ones, else every selected service
// that no selected service calls, plus, for a closed group of services that call each other and
// that nothing else calls, its first service, so that such a loop is still analysed.
func (c *core) entrypoints() {
	g := c.g
	if len(g.entries) > 0 {
		c.ents = g.entries
		return
	}
	called := make([]bool, c.n)
	for e, f := range g.eFrom {
		if g.selected[f] {
			called[g.eTo[e]] = true
		}
	}
	for v := range c.n {
		if g.selected[v] && !called[v] {
			c.ents = append(c.ents, entry{node: int32(v), k: 1})
		}
	}
	if c.cyc == nil {
		return
	}
	ncomp := len(c.csize)
	hasIn := make([]bool, ncomp)
	hasEntry := make([]bool, ncomp)
	for e, f := range g.eFrom {
		if t := g.eTo[e]; c.comp[f] != c.comp[t] {
			hasIn[c.comp[t]] = true
		}
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

// findRetry marks the components that contain an edge with attempts > 1 (retry cycles).
func (c *core) findRetry() {
	if c.cyc == nil {
		return
	}
	c.retry = make([]bool, len(c.csize))
	for i := 0; i < c.n; {
		v := c.order[i]
		cp := c.comp[v]
		size := int(c.csize[cp])
		if c.cyc[cp] {
			for _, u := range c.order[i : i+size] {
				for _, e := range c.g.out[u] {
					if c.comp[c.g.eTo[e]] == cp && c.att[e] > 1 {
						c.retry[cp] = true
					}
				}
			}
			if c.retry[cp] && !c.anyRetry {
				c.anyRetry = true
				c.retryComp = cp
			}
		}
		i += size
	}
}

// forward computes h, pred and (with load) the worst-case load, in topological order.
func (c *core) forward(withLoad bool) {
	g, n := c.g, c.n
	c.h = make([]int64, n)
	c.pred = make([]int32, n)
	for i := range c.pred {
		c.pred[i] = -1
	}
	if withLoad {
		c.load = make([]int64, n)
	}
	for _, en := range c.ents {
		c.h[en.node] = max(c.h[en.node], en.k)
		if withLoad {
			c.load[en.node] = add(c.load[en.node], en.k)
		}
	}
	h, pred, load, att, eTo := c.h, c.pred, c.load, c.att, g.eTo
	for i := 0; i < n; {
		v := c.order[i]
		if cp := c.comp[v]; c.isCyc(cp) {
			size := int(c.csize[cp])
			c.forwardCyclic(c.order[i:i+size], cp, withLoad)
			i += size
			continue
		}
		i++
		hv := h[v]
		if hv == 0 {
			continue
		}
		if !withLoad {
			for _, e := range g.out[v] {
				t := eTo[e]
				if x := mul(hv, att[e]); x > h[t] {
					h[t] = x
					pred[t] = e
				}
			}
			continue
		}
		lv, cal := load[v], g.eCal
		for _, e := range g.out[v] {
			t := eTo[e]
			a := att[e]
			if x := mul(hv, a); x > h[t] {
				h[t] = x
				pred[t] = e
			}
			load[t] = add(load[t], mul(mul(lv, a), cal[e]))
		}
	}
}

// forwardCyclic handles one component with a cycle. Without a retry every node in it is reached
// with the same worst product (the cycle multiplies by 1), through a BFS tree from the node where
// the worst path enters; with a retry every reachable node's product saturates. Load through any
// cycle saturates: a request can go round it without end.
func (c *core) forwardCyclic(nodes []int32, cp int32, withLoad bool) {
	g := c.g
	var best int32 = -1
	var H int64
	for _, v := range nodes {
		if c.h[v] > H {
			H, best = c.h[v], v
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
		c.h[v] = H
		if withLoad {
			c.load[v] = Saturated
		}
	}
	for _, v := range nodes {
		for _, e := range g.out[v] {
			t := g.eTo[e]
			if c.comp[t] == cp {
				continue
			}
			if x := mul(H, c.att[e]); x > c.h[t] {
				c.h[t] = x
				c.pred[t] = e
			}
			if withLoad {
				c.load[t] = Saturated
			}
		}
	}
}

// treeFrom sets, for the nodes of component cp, pred (forward: a BFS tree from root) or succ
// (backward: a BFS tree towards root), using only edges inside the component.
func (c *core) treeFrom(nodes []int32, cp int32, root int32, forward bool) {
	g := c.g
	if c.local == nil {
		c.local = make([]int32, c.n)
		for i := range c.local {
			c.local[i] = -1
		}
	}
	for i, v := range nodes {
		c.local[v] = int32(i)
	}
	defer func() {
		for _, v := range nodes {
			c.local[v] = -1
		}
	}()
	seen := make([]bool, len(nodes))
	seen[c.local[root]] = true
	queue := []int32{root}
	if forward {
		for i := 0; i < len(queue); i++ {
			u := queue[i]
			for _, e := range g.out[u] {
				t := g.eTo[e]
				if c.comp[t] != cp || seen[c.local[t]] {
					continue
				}
				seen[c.local[t]] = true
				c.pred[t] = e
				queue = append(queue, t)
			}
		}
		return
	}
	// Backward: reverse the component's inner edges.
	in := make([][]int32, len(nodes))
	for _, u := range nodes {
		for _, e := range g.out[u] {
			if t := g.eTo[e]; c.comp[t] == cp {
				in[c.local[t]] = append(in[c.local[t]], e)
			}
		}
	}
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		for _, e := range in[c.local[v]] {
			u := g.eFrom[e]
			if seen[c.local[u]] {
				continue
			}
			seen[c.local[u]] = true
			c.succ[u] = e
			queue = append(queue, u)
		}
	}
}

// backward computes d and succ in reverse topological order.
func (c *core) backward() {
	g, n := c.g, c.n
	c.d = make([]int64, n)
	c.succ = make([]int32, n)
	d, succ, att, eTo := c.d, c.succ, c.att, g.eTo
	for i := n - 1; i >= 0; {
		v := c.order[i]
		if cp := c.comp[v]; c.isCyc(cp) {
			size := int(c.csize[cp])
			c.backwardCyclic(c.order[i-size+1:i+1], cp)
			i -= size
			continue
		}
		i--
		// Start below 1 so that, on a tie, the path goes on (to the deepest service) rather than
		// stopping; the first declared edge wins ties.
		dv, sv := int64(0), int32(-1)
		for _, e := range g.out[v] {
			if x := mul(att[e], d[eTo[e]]); x > dv {
				dv, sv = x, e
			}
		}
		d[v], succ[v] = max(dv, 1), sv
	}
}

func (c *core) backwardCyclic(nodes []int32, cp int32) {
	g := c.g
	for _, v := range nodes {
		c.succ[v] = -1
	}
	if c.retry[cp] {
		for _, v := range nodes {
			c.d[v] = Saturated
		}
		return
	}
	D, best := int64(0), int32(-1)
	for _, u := range nodes {
		for _, e := range g.out[u] {
			t := g.eTo[e]
			if c.comp[t] == cp {
				continue
			}
			if x := mul(c.att[e], c.d[t]); x > D {
				D, best = x, e
			}
		}
	}
	D = max(D, 1)
	for _, v := range nodes {
		c.d[v] = D
	}
	if best >= 0 {
		exit := g.eFrom[best]
		c.treeFrom(nodes, cp, exit, false)
		c.succ[exit] = best
	}
}

// prefix is the worst path from an entrypoint into v (node ids, entry first) and the edges on it.
func (c *core) prefix(v int32) (nodes []int32, edges []int32) {
	nodes = append(nodes, v)
	for steps := 0; c.pred[v] >= 0 && steps < c.n; steps++ {
		e := c.pred[v]
		edges = append(edges, e)
		v = c.g.eFrom[e]
		nodes = append(nodes, v)
	}
	for i, j := 0, len(nodes)-1; i < j; i, j = i+1, j-1 {
		nodes[i], nodes[j] = nodes[j], nodes[i]
	}
	for i, j := 0, len(edges)-1; i < j; i, j = i+1, j-1 {
		edges[i], edges[j] = edges[j], edges[i]
	}
	return nodes, edges
}

// suffix is the worst path down from v (v first) and the edges on it.
func (c *core) suffix(v int32) (nodes []int32, edges []int32) {
	nodes = append(nodes, v)
	for steps := 0; c.succ[v] >= 0 && steps < c.n; steps++ {
		e := c.succ[v]
		edges = append(edges, e)
		v = c.g.eTo[e]
		nodes = append(nodes, v)
	}
	return nodes, edges
}

// throughEdge is the worst path through edge e: the worst path into its source, e, and the worst
// path below its target. Factors are the start's product (client attempts) then each edge's
// attempts.
func (c *core) throughEdge(e int32) (path []int32, factors []int64) {
	pn, pe := c.prefix(c.g.eFrom[e])
	sn, se := c.suffix(c.g.eTo[e])
	path = append(pn, sn...)
	factors = make([]int64, 0, len(path))
	factors = append(factors, c.h[pn[0]])
	for _, x := range pe {
		factors = append(factors, c.att[x])
	}
	factors = append(factors, c.att[e])
	for _, x := range se {
		factors = append(factors, c.att[x])
	}
	return path, factors
}

// cycleFrom returns a concrete retry cycle in component cp, starting and ending at the source of
// its first edge with attempts > 1: [u v ... u].
func (c *core) retryCycle(cp int32) []int32 {
	g := c.g
	for _, u := range c.order {
		if c.comp[u] != cp {
			continue
		}
		for _, e := range g.out[u] {
			if v := g.eTo[e]; c.comp[v] == cp && c.att[e] > 1 {
				return append([]int32{u}, c.pathWithin(cp, v, u)...)
			}
		}
	}
	return nil
}

// pathWithin is a shortest path from a to b (a first, b last) using only edges inside cp.
func (c *core) pathWithin(cp int32, a, b int32) []int32 {
	if a == b {
		return []int32{a}
	}
	g := c.g
	prev := map[int32]int32{a: -1}
	queue := []int32{a}
	for i := 0; i < len(queue); i++ {
		u := queue[i]
		for _, e := range g.out[u] {
			t := g.eTo[e]
			if c.comp[t] != cp {
				continue
			}
			if _, ok := prev[t]; ok {
				continue
			}
			prev[t] = u
			if t == b {
				var rev []int32
				for x := b; x != -1; x = prev[x] {
					rev = append(rev, x)
				}
				for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
					rev[i], rev[j] = rev[j], rev[i]
				}
				return rev
			}
			queue = append(queue, t)
		}
	}
	return nil
}

// attemptsOn returns the attempts of the edge u->v (the first one declared).
func (c *core) edgeBetween(u, v int32) int32 {
	if e, ok := c.g.edgeIdx[uint64(uint32(u))<<32|uint64(uint32(v))]; ok {
		return e
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
