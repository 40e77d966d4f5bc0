package graph

// Time on a graph with cycles (#28, #29): a chain visits a service at most once, as the
// amplification's chains do (cycles.go), so a service's worst time on a cycle is the worst over
// the ways on from it that do not return to a service already on the chain. A service whose
// every call on the chain would return is where the chain ends: its own time is unknown, as a
// leaf's. The search is exact while the component has at most MaxExactComponent services and
// walks at most MaxComponentWork steps; beyond that the times are the greatest fixpoint of the
// hops round the loop (settle), which bounds every chain's from above, and said so
// (TimeAnalysis.UpperBound).

// chainStep is one service of a chain as the time model sees it there: its worst time on that
// chain and whether it ends the chain (a leaf: unknown time).
type chainStep struct {
	v    int32
	t    int64
	leaf bool
}

// searchT is the worst time from u on a chain that has visited the services of visited (bits
// by local index, u's included) inside component cp: the worst over u's hops to services
// outside cp (their final times) and to unvisited ones inside (searched), or unknown (a leaf)
// when there are none. ok is false when the walk ran past MaxComponentWork steps.
func (p *timePass) searchT(u, cp int32, local []int32, visited uint64, work *int) (t int64, leaf, ok bool) {
	if *work++; *work > MaxComponentWork {
		return 0, false, false
	}
	c := p.c
	best := int64(-1)
	lo, hi := c.out(u)
	for s := lo; s < hi; s++ {
		x, wl, ok := p.callee(s, cp, local, visited, work)
		if !ok {
			return 0, false, false
		}
		if x < 0 {
			continue
		}
		if y := p.hopTime(s, x, wl, false); y > best {
			best = y
		}
	}
	if best < 0 {
		return int64(Forever), true, true
	}
	return best, false, true
}

// callee is the time slot s's callee takes on the chain (-1: it is on the chain already).
func (p *timePass) callee(s int32, cp int32, local []int32, visited uint64, work *int) (int64, bool, bool) {
	c := p.c
	w := c.adj.to[s]
	if c.comp[w] != cp {
		return p.v[w].t, p.v[w].leaf, true
	}
	bit := uint64(1) << uint(local[w])
	if visited&bit != 0 {
		return -1, false, true
	}
	return p.searchT(w, cp, local, visited|bit, work)
}

// simpleTimes sets the worst times of a cyclic component's nodes over chains that visit a
// service once (with check, offering the inversions of their hops, each against the callee's
// worst time on a chain that came through the caller); false when the component is too large
// to search, with nothing set.
func (p *timePass) simpleTimes(nodes []int32, cp int32, check bool) bool {
	if len(nodes) > MaxExactComponent {
		return false
	}
	c := p.c
	local := p.localIndex(nodes)
	type result struct {
		t    int64
		succ int32
		leaf bool
	}
	res := make([]result, len(nodes))
	work := 0
	for i, u := range nodes {
		best, bs := int64(-1), int32(-1)
		lo, hi := c.out(u)
		for s := lo; s < hi; s++ {
			x, wl, ok := p.callee(s, cp, local, 1<<uint(i), &work)
			if !ok {
				return false
			}
			if x < 0 {
				continue
			}
			if y := p.hopTime(s, x, wl, false); y > best {
				best, bs = y, s
			}
		}
		res[i] = result{t: best, succ: bs}
		if bs < 0 {
			res[i] = result{t: int64(Forever), succ: -1, leaf: true}
		}
	}
	if check {
		// Offered only once the search is known to be exact.
		for i, u := range nodes {
			lo, hi := c.out(u)
			for s := lo; s < hi; s++ {
				x, wl, _ := p.callee(s, cp, local, 1<<uint(i), &work)
				if x < 0 {
					continue
				}
				p.cur = invCand{caller: u, callee: c.adj.to[s]}
				p.hopTime(s, x, wl, true)
			}
		}
	}
	for i, u := range nodes {
		p.v[u] = nodeT{t: res[i].t, succ: res[i].succ, leaf: res[i].leaf}
	}
	if p.searched == nil {
		p.searched = map[int32]bool{}
	}
	p.searched[cp] = true
	return true
}

// localIndex numbers nodes (a component) for the search's bit sets: local[v] is v's index, the
// others unset. The slice is p's, reused.
func (p *timePass) localIndex(nodes []int32) []int32 {
	if p.local == nil {
		p.local = make([]int32, p.c.n)
	}
	for i, v := range nodes {
		p.local[v] = int32(i)
	}
	return p.local
}

// chainFrom is the worst chain from v with each service's time on it: succ where no cycle was
// searched; inside a searched component, the hop whose way on (not returning to the chain) is
// the worst, re-searched step by step. A call loop whose times are a fixpoint (not searched) can
// make succ return to a service: the chain stops there, loop true. With inPre, the chain came
// into v's component through the services of pre (bits by the search's local index), and v
// takes t0 (leaf0: its own time unknown) on it; else v takes its worst time.
func (p *timePass) chainFrom(v int32, inPre bool, pre uint64, t0 int64, leaf0 bool) (steps []chainStep, loop bool) {
	c := p.c
	steps = p.steps[:0] // p's scratch: the caller copies what it keeps
	defer func() { p.steps = steps[:0] }()
	cur := chainStep{v: v, t: t0, leaf: leaf0}
	if !inPre {
		cur.t, cur.leaf = p.v[v].t, p.v[v].leaf
	}
	if c.cyc == nil {
		// Acyclic: no component was searched and succ never returns; the chain is succ's.
		to, pv := c.adj.to, p.v
		for {
			steps = append(steps, cur)
			s := pv[cur.v].succ
			if s < 0 {
				return steps, false
			}
			w := to[s]
			cur = chainStep{v: w, t: pv[w].t, leaf: pv[w].leaf}
		}
	}
	seen := map[int32]bool{}
	preComp := int32(-1)
	if inPre {
		preComp = c.comp[v]
	}
	var visited uint64
	var inComp int32 = -1
	for {
		steps = append(steps, cur)
		u := cur.v
		seen[u] = true
		cp := c.comp[u]
		if !p.searched[cp] {
			s := p.v[u].succ
			if s < 0 {
				return steps, false
			}
			w := c.adj.to[s]
			if seen[w] {
				return append(steps, chainStep{v: w, t: p.v[w].t, leaf: p.v[w].leaf}), true
			}
			cur, inComp = chainStep{v: w, t: p.v[w].t, leaf: p.v[w].leaf}, -1
			continue
		}
		// Inside a searched component: the hop whose way on is the worst.
		if inComp != cp {
			// The search numbered the component's services (simpleTimes).
			inComp, visited = cp, 0
			if cp == preComp {
				visited, preComp = pre, -1
			}
		}
		visited |= 1 << uint(p.local[u])
		work := 0
		best, bs := int64(-1), int32(-1)
		var bx int64
		var bl bool
		lo, hi := c.out(u)
		for s := lo; s < hi; s++ {
			x, wl, _ := p.callee(s, cp, p.local, visited, &work)
			if x < 0 {
				continue
			}
			if y := p.hopTime(s, x, wl, false); y > best {
				best, bs, bx, bl = y, s, x, wl
			}
		}
		if bs < 0 {
			// Every call returns to the chain: it ends here, u's own time unknown.
			steps[len(steps)-1].t, steps[len(steps)-1].leaf = int64(Forever), true
			return steps, false
		}
		w := c.adj.to[bs]
		cur = chainStep{v: w, t: bx, leaf: bl}
		if c.comp[w] != cp {
			inComp = -1
		}
	}
}
