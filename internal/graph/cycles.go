package graph

import (
	"fmt"
	"slices"
	"strings"
)

// A service graph with a cycle is not a call loop (DESIGN.md, "Real inputs, third round"): A
// calls B for one endpoint and B calls A for another, and no request goes round. The graph says
// who calls whom, not which inbound request causes which call, so the worst case is taken over
// the chains that visit a service at most once (simple paths). A chain returns to a service only
// where a service calls itself (a self-loop): with retries on it the amplification is unbounded,
// and any self-loop makes the load unbounded.
//
// A simple path crosses the DAG of strongly connected components once, so only the paths inside
// one component need a search: from each node, every simple path inside the component, then the
// best way out. The search is exact while the component has at most MaxExactComponent services
// and the search walks at most MaxComponentWork path steps; beyond that the component's numbers
// are upper bounds (the product of its size-1 largest attempts times its best way out), said as
// such. A component without retries needs no search for the amplification (every path inside
// multiplies by 1).

// Limits of the exact search in one strongly connected component.
const (
	MaxExactComponent = 16
	MaxComponentWork  = 1 << 16
)

// CycleReport names one strongly connected component of the graph (services that call each
// other round a cycle).
type CycleReport struct {
	// Services are the component's services, in the graph's order.
	Services []string `json:"services"`
	// Cycle is one concrete cycle in it, first service repeated at the end: [a b a].
	Cycle []string `json:"cycle"`
	// Retries is true when an edge inside the component has attempts > 1.
	Retries bool `json:"retries"`
	// Exact is false when the component was too large to search: its numbers are upper bounds.
	Exact bool `json:"exact"`
}

// String is "a -> b -> a (services a, b; retries; exact)".
func (r CycleReport) String() string {
	var b strings.Builder
	b.WriteString(strings.Join(r.Cycle, " -> "))
	if len(r.Services) > len(r.Cycle)-1 {
		fmt.Fprintf(&b, " (one of the cycles among %d services: %s)", len(r.Services), strings.Join(r.Services, ", "))
	}
	return b.String()
}

// simple is the simple-path analysis of a graph with cycles.
type simple struct {
	c        *core
	d        []int64 // worst product of attempts from the node down, simple paths
	succ     []int32 // acyclic node: the slot of its worst edge, -1 at the end
	exitSlot []int32 // node of a cyclic component: its best slot out, -1 = stop there
	// inAt is, for a node of a searched cyclic component, 1 + where its worst path inside (it
	// first) starts in inStore, whose element there is the path's length; 0: none.
	inAt    []int32
	inStore []int32
	inexact map[int32]bool // components whose numbers are upper bounds
	local   []int32        // node -> index in the component being searched, -1 otherwise
	// The searches' scratch, reused by every component (a graph can have thousands).
	exits  []int64
	frames []frame
	best   []int32
	ups    []int64
}

// frame is one service on the path a search is walking: the next of its slots to try, and the
// product of attempts into it.
type frame struct {
	u, s, hi int32
	prod     int64
}

func newSimple(c *core) *simple {
	sp := &simple{c: c, d: make([]int64, c.n), succ: make([]int32, c.n), exitSlot: make([]int32, c.n),
		inAt: make([]int32, c.n), local: make([]int32, c.n)}
	for i := range sp.local {
		sp.local[i] = -1
	}
	return sp
}

// callsSelf reports whether u calls itself.
func (sp *simple) callsSelf(u int32) bool { return sp.c.selfLoop != nil && sp.c.selfLoop[u] }

// inPath is v's worst path inside its searched component (v first), nil when it has none.
func (sp *simple) inPath(v int32) []int32 {
	at := sp.inAt[v]
	if at == 0 {
		return nil
	}
	return sp.inStore[at : at+sp.inStore[at-1]]
}

// selfLoops returns the first self-loop with attempts > 1 (a chain that returns to its service
// with retries on the way), and whether the graph has any self-loop (findRetry found them).
func (c *core) selfLoops() (retrying int32, any bool) { return c.selfRetry, c.anySelf }

// analyzeSimple analyses a graph with a cycle but no retrying self-loop (see above).
func (c *core) analyzeSimple(g *Graph, cap int64) *Analysis {
	sp := newSimple(c)
	// treeFrom's BFS trees (towards a component's best way out) go into c.succ.
	c.succ = int32s(&c.buf.succ, c.n)
	for i := range c.succ {
		c.succ[i] = -1
	}
	sp.backward()
	a := &Analysis{Cap: cap, Services: c.n, Edges: len(g.eFrom), Bounded: true}
	for _, en := range c.ents {
		a.Entrypoints = append(a.Entrypoints, Entrypoint{Service: g.names[en.node], ClientAttempts: en.k})
	}
	// Chains: worst first, then the entrypoint listed first.
	idx := make([]int, len(c.ents))
	for i := range idx {
		idx[i] = i
	}
	amp := func(i int) int64 { return mul(c.ents[i].k, sp.d[c.ents[i].node]) }
	slices.SortStableFunc(idx, func(x, y int) int {
		ax, ay := amp(x), amp(y)
		switch {
		case ax > ay:
			return -1
		case ax < ay:
			return 1
		}
		return 0
	})
	var allow []int64 // the whole-graph planner's, for the suggestions: made for the first violation
	for n, i := range idx {
		en := c.ents[i]
		over := amp(i) > cap
		if over {
			a.ViolationsTotal++
		}
		if n >= MaxChains && (!over || len(a.Violations) >= MaxViolations) {
			continue // paths only for what is listed
		}
		nodes, slots := sp.path(en.node)
		ch := Chain{Entrypoint: g.names[en.node], ClientAttempts: en.k, Amplification: amp(i), Path: c.names(nodes)}
		if n < MaxChains {
			a.Chains = append(a.Chains, ch)
		}
		if !over || len(a.Violations) >= MaxViolations {
			continue
		}
		factors := []int64{en.k}
		for _, s := range slots {
			factors = append(factors, c.att[s])
		}
		v := Violation{Path: ch.Path, Factors: factors, Amplification: ch.Amplification, Message: Explain(ch.Path, factors, cap)}
		if p := sp.boundNote(nodes); p != "" {
			v.Message += " (at most: " + p + ")"
		}
		// As on an acyclic graph (violations): the plan's values on its path, then, for a chain
		// from an entrypoint whose client attempts alone exceed the cap, why that is not enough.
		if allow == nil {
			allow = c.planAllow(max(cap, 1))
		}
		sug := c.appendSuggest(nil, slots, func(s int32) int64 { return c.plannedWith(allow, s) })
		if why := c.entryReason(en, max(cap, 1)); why != "" {
			if len(sug) > 0 {
				sug = append(sug, "; "...)
			}
			sug = append(sug, why...)
		}
		v.Suggestion = string(sug)
		a.Violations = append(a.Violations, v)
	}
	if len(a.Chains) > 0 {
		a.Amplification, a.WorstPath = a.Chains[0].Amplification, a.Chains[0].Path
		nodes, _ := sp.path(c.ents[idx[0]].node)
		a.AmplificationIsBound = sp.boundNote(nodes) != ""
	}
	a.Cycles = sp.cycles()
	a.WorstCaseLoad, a.LoadEntrypoint, a.LoadIsBound, a.LoadUnbounded = sp.worstLoad()
	return a
}

// boundNote says why the numbers along nodes are upper bounds ("" when exact).
func (sp *simple) boundNote(nodes []int32) string {
	c := sp.c
	for _, v := range nodes {
		if cp := c.comp[v]; sp.inexact[cp] {
			return fmt.Sprintf("an upper bound: the cycle through %s has %d services, more than retrycap searches exactly (%d services, %d path steps)",
				c.g.names[v], c.size(cp), MaxExactComponent, MaxComponentWork)
		}
	}
	return ""
}

// backward computes d in reverse topological order, searching the cyclic components.
func (sp *simple) backward() {
	c := sp.c
	to, att := c.adj.to, c.att
	for i := c.n - 1; i >= 0; {
		v := c.order[i]
		cp := c.comp[v]
		if c.isCyc(cp) {
			size := c.size(cp)
			sp.component(c.order[i-size+1:i+1], cp)
			i -= size
			continue
		}
		i--
		dv, sv := int64(0), int32(-1)
		lo, hi := c.out(v)
		for s := lo; s < hi; s++ {
			if to[s] == v {
				continue
			}
			if x := mul(att[s], sp.d[to[s]]); x > dv {
				dv, sv = x, s
			}
		}
		sp.d[v], sp.succ[v] = max(dv, 1), sv
	}
}

// exit is node w's best way out of its component: attempts times d below (1 = stop at w).
func (sp *simple) exit(w int32, cp int32) (int64, int32) {
	c := sp.c
	best, slot := int64(1), int32(-1)
	lo, hi := c.out(w)
	for s := lo; s < hi; s++ {
		if t := c.adj.to[s]; c.comp[t] != cp {
			if x := mul(c.att[s], sp.d[t]); x > best {
				best, slot = x, s
			}
		}
	}
	return best, slot
}

// component searches one cyclic component: for each node, the worst simple path inside it and
// then out.
func (sp *simple) component(nodes []int32, cp int32) {
	c := sp.c
	to, att, comp, off, end := c.adj.to, c.att, c.comp, c.adj.off, c.adj.end
	if cap(sp.exits) < len(nodes) {
		sp.exits = make([]int64, len(nodes))
	}
	exits := sp.exits[:len(nodes)]
	// One walk over the component's edges: each node's best way out, and for the upper bound
	// the attempts above 1 on the edges inside (how many, and their product).
	maxExit, maxAt := int64(1), 0
	over1, prod1 := 0, int64(1)
	small := len(nodes) <= MaxExactComponent // only the search reads the local indexes
	for i, w := range nodes {
		if small {
			sp.local[w] = int32(i)
		}
		best, slot := int64(1), int32(-1)
		for s := off[w]; s < end[w]; s++ {
			t := to[s]
			if comp[t] != cp {
				if x := mul(att[s], sp.d[t]); x > best {
					best, slot = x, s
				}
			} else if t != w && att[s] > 1 {
				over1++
				prod1 = mul(prod1, att[s])
			}
		}
		exits[i], sp.exitSlot[w] = best, slot
		if best > maxExit {
			maxExit, maxAt = best, i
		}
	}
	if small {
		defer sp.unlocal(nodes)
	}
	// A service that calls itself with retries: a chain returns to it, without end.
	for _, u := range nodes {
		if !sp.callsSelf(u) {
			continue // most graphs have none: spare the edge lookup
		}
		if s := c.slotBetween(u, u); s >= 0 && c.att[s] > 1 {
			for _, v := range nodes {
				sp.d[v] = Saturated
			}
			c.treeFrom(nodes, cp, u, false)
			return
		}
	}
	if !c.retry[cp] {
		// Every path inside multiplies by 1 (a retrying self-loop returned above, and c.retry
		// counts only edges inside): the best way out is reachable from everywhere, along a
		// BFS tree towards it (one pass, not a search per node).
		for _, v := range nodes {
			sp.d[v] = maxExit
		}
		c.treeFrom(nodes, cp, nodes[maxAt], false)
		return
	}
	searched := len(nodes) <= MaxExactComponent
	if searched {
		work := 0
		ok := true
		mark := len(sp.inStore)
		for _, v := range nodes {
			best, done := sp.search(v, cp, exits, &work)
			if !done {
				ok = false
				break
			}
			sp.d[v] = best
			sp.inStore = append(sp.inStore, int32(len(sp.best)))
			sp.inAt[v] = int32(len(sp.inStore))
			sp.inStore = append(sp.inStore, sp.best...)
		}
		if ok {
			return
		}
		// A partial search's paths.
		sp.inStore = sp.inStore[:mark]
		for _, v := range nodes {
			sp.inAt[v] = 0
		}
	}
	// Too large: an upper bound. A simple path inside uses each edge at most once and at most
	// size-1 of them: the product of the size-1 largest attempts inside, times the best way
	// out. Attempts of 1 change no product, so only those above 1 count: all of them when there
	// are no more than size-1; else, from 63 on, at least 2^63 (saturated); else the largest.
	if sp.inexact == nil {
		sp.inexact = map[int32]bool{}
	}
	sp.inexact[cp] = true
	k := len(nodes) - 1
	ub := maxExit
	switch {
	case over1 <= k:
		ub = mul(ub, prod1)
	case k >= 63:
		ub = Saturated
	default:
		ups := sp.ups[:0]
		for _, u := range nodes {
			for s := off[u]; s < end[u]; s++ {
				if t := to[s]; comp[t] == cp && t != u && att[s] > 1 {
					ups = append(ups, att[s])
				}
			}
		}
		slices.Sort(ups)
		for _, x := range ups[len(ups)-k:] {
			ub = mul(ub, x)
		}
		sp.ups = ups
	}
	for _, v := range nodes {
		sp.d[v] = ub
	}
	c.treeFrom(nodes, cp, nodes[maxAt], false)
}

// unlocal forgets the local indexes of nodes.
func (sp *simple) unlocal(nodes []int32) {
	for _, w := range nodes {
		sp.local[w] = -1
	}
}

// search walks every simple path inside cp from v, depth first in declaration order (ties: the
// path found first), and returns the worst product times the exit, its path in sp.best; done is
// false when the walk ran past MaxComponentWork steps. The component has at most
// MaxExactComponent services, so a path fits a fixed stack of frames and the visited set a word.
func (sp *simple) search(v int32, cp int32, exits []int64, work *int) (best int64, done bool) {
	c := sp.c
	to, att, comp, off, end, local := c.adj.to, c.att, c.comp, c.adj.off, c.adj.end, sp.local
	if sp.frames == nil {
		sp.frames = make([]frame, MaxExactComponent)
	}
	fs := sp.frames
	bestPath := sp.best[:0]
	var visited uint64
	depth := 0
	// enter pushes u, reached with product prod, and weighs stopping the path at it.
	enter := func(u int32, prod int64) bool {
		if *work++; *work > MaxComponentWork {
			return false
		}
		visited |= 1 << uint(local[u])
		fs[depth] = frame{u: u, s: off[u], hi: end[u], prod: prod}
		depth++
		// Ties: the longer path (a chain goes on rather than stopping, as everywhere else).
		if x := mul(prod, exits[local[u]]); x > best || x == best && depth > len(bestPath) {
			best = x
			bestPath = bestPath[:0]
			for _, f := range fs[:depth] {
				bestPath = append(bestPath, f.u)
			}
		}
		return true
	}
	done = enter(v, 1)
	for done && depth > 0 {
		f := &fs[depth-1]
		if f.s == f.hi {
			visited &^= 1 << uint(local[f.u])
			depth--
			continue
		}
		s := f.s
		f.s++
		t := to[s]
		if comp[t] != cp || visited&(1<<uint(local[t])) != 0 {
			continue
		}
		done = enter(t, mul(f.prod, att[s]))
	}
	sp.best = bestPath
	return best, done
}

// path is the worst path from v: nodes and the slots between them.
func (sp *simple) path(v int32) (nodes, slots []int32) {
	c := sp.c
	for hops := 0; hops <= c.n; hops++ {
		if c.isCyc(c.comp[v]) {
			in := sp.inPath(v)
			if len(in) == 0 {
				// Not searched: the BFS tree towards the component's best way out.
				in = []int32{v}
				for x := v; c.succ[x] >= 0 && len(in) <= c.n; {
					x = c.adj.to[c.succ[x]]
					in = append(in, x)
				}
			}
			for i, x := range in {
				if i > 0 {
					slots = append(slots, c.slotBetween(in[i-1], x))
				}
				nodes = append(nodes, x)
			}
			last := in[len(in)-1]
			s := sp.exitSlot[last]
			if s < 0 {
				return nodes, slots
			}
			slots = append(slots, s)
			v = c.adj.to[s]
			continue
		}
		nodes = append(nodes, v)
		s := sp.succ[v]
		if s < 0 {
			return nodes, slots
		}
		slots = append(slots, s)
		v = c.adj.to[s]
	}
	return nodes, slots
}

// cycles names every cyclic component, in topological order.
func (sp *simple) cycles() []CycleReport {
	c := sp.c
	var out []CycleReport
	var mark []bool // for a large component: its services in id order by one scan of the ids
	for i := 0; i < c.n; {
		cp, nodes := c.compAt(i)
		i += len(nodes)
		if !c.isCyc(cp) {
			continue
		}
		var sorted []int32
		if len(nodes)*16 < c.n {
			sorted = slices.Clone(nodes)
			slices.Sort(sorted)
		} else {
			if mark == nil {
				mark = make([]bool, c.n)
			}
			for _, u := range nodes {
				mark[u] = true
			}
			sorted = make([]int32, 0, len(nodes))
			for v, m := range mark {
				if m {
					sorted = append(sorted, int32(v))
					mark[v] = false
				}
			}
		}
		// c.retry counts the edges inside with attempts > 1, a self-loop's included.
		r := CycleReport{Services: c.names(sorted), Exact: !sp.inexact[cp], Retries: c.retry[cp]}
		// The first service's first edge inside: every service of a cyclic component has one.
		u := nodes[0]
		var cyc []int32
		for s := c.adj.off[u]; s < c.adj.end[u]; s++ {
			if t := c.adj.to[s]; c.comp[t] == cp {
				if t == u {
					cyc = []int32{u, u}
				} else {
					cyc = append([]int32{u}, c.pathWithin(cp, t, u)...)
				}
				break
			}
		}
		r.Cycle = c.names(cyc)
		out = append(out, r)
	}
	return out
}

// worstLoad is core.worstLoad over simple paths: per entrypoint (or all at once past
// MaxLoadWork), and why it is unbounded when it is.
func (sp *simple) worstLoad() (best ServiceLoad, entryName string, bound bool, why string) {
	c := sp.c
	if len(c.ents) == 0 {
		return best, "", false, ""
	}
	bound = len(c.ents) > 1 && int64(len(c.ents))*int64(c.n+len(c.adj.to)) > MaxLoadWork
	groups := [][]entry{c.ents}
	if !bound && len(c.ents) > 1 {
		groups = groups[:0]
		for _, en := range c.ents {
			groups = append(groups, []entry{en})
		}
	}
	bestV := int32(-1)
	for _, ens := range groups {
		load, w := sp.loads(ens)
		if why == "" {
			why = w
		}
		for v, l := range load {
			if l > best.Requests || l == best.Requests && l > 0 && int32(v) < bestV {
				best, bestV = ServiceLoad{Service: c.g.names[v], Requests: l}, int32(v)
				if !bound {
					entryName = c.g.names[ens[0].node]
				}
			}
		}
	}
	if best.Requests != Saturated {
		why = ""
	}
	return best, entryName, bound, why
}

// loads is the load one request at each of ens causes at every service, summed over simple
// paths, fan-out included; why says what made some load unbounded.
func (sp *simple) loads(ens []entry) (load []int64, why string) {
	c := sp.c
	load = make([]int64, c.n)
	for _, en := range ens {
		load[en.node] = add(load[en.node], en.k)
	}
	to, ac, off, end := c.adj.to, c.adj.attCal, c.adj.off, c.adj.end
	for i := 0; i < c.n; {
		if v := c.order[i]; c.csize[c.comp[v]] == 1 && !c.cyc[c.comp[v]] {
			// A service on no cycle (most): no edge of its own to skip.
			i++
			if lv := load[v]; lv > 0 {
				for s := off[v]; s < end[v]; s++ {
					load[to[s]] = add(load[to[s]], mul(lv, ac[s]))
				}
			}
			continue
		}
		cp, nodes := c.compAt(i)
		i += len(nodes)
		reached := false
		for _, u := range nodes {
			reached = reached || load[u] > 0
		}
		if !reached {
			continue
		}
		if c.isCyc(cp) {
			if w := sp.componentLoad(nodes, cp, load); w != "" && why == "" {
				why = w
			}
		}
		for _, u := range nodes {
			lo, hi := c.out(u)
			for s := lo; s < hi; s++ {
				if t := to[s]; c.comp[t] != cp {
					load[t] = add(load[t], mul(load[u], ac[s]))
				}
			}
		}
	}
	return load, why
}

// componentLoad turns the load into a cyclic component (load[u] as it enters) into the load at
// each of its services over the simple paths inside it; a self-loop, or a component too large to
// search, makes it unbounded (the reason is returned).
func (sp *simple) componentLoad(nodes []int32, cp int32, load []int64) string {
	c := sp.c
	for _, u := range nodes {
		if sp.callsSelf(u) {
			for _, w := range nodes {
				load[w] = Saturated
			}
			return fmt.Sprintf("%s calls itself: a request can go round without end", c.g.names[u])
		}
	}
	in := make([]int64, len(nodes))
	for i, u := range nodes {
		in[i], load[u] = load[u], 0
		sp.local[u] = int32(i)
	}
	defer func() {
		for _, u := range nodes {
			sp.local[u] = -1
		}
	}()
	work := 0
	ok := len(nodes) <= MaxExactComponent
	for i, u := range nodes {
		if !ok {
			break
		}
		if in[i] == 0 {
			continue
		}
		var visited uint64
		var walk func(x int32, l int64) bool
		walk = func(x int32, l int64) bool {
			work++
			if work > MaxComponentWork {
				return false
			}
			visited |= 1 << uint(sp.local[x])
			load[x] = add(load[x], l)
			lo, hi := c.out(x)
			for s := lo; s < hi; s++ {
				t := c.adj.to[s]
				if c.comp[t] != cp || visited&(1<<uint(sp.local[t])) != 0 {
					continue
				}
				if !walk(t, mul(l, c.adj.attCal[s])) {
					return false
				}
			}
			visited &^= 1 << uint(sp.local[x])
			return true
		}
		ok = walk(u, in[i])
	}
	if ok {
		return ""
	}
	for _, w := range nodes {
		load[w] = Saturated
	}
	return fmt.Sprintf("the cycle through %s has %d services, more than retrycap searches exactly (%d services, %d path steps): its load is not bounded here",
		c.g.names[nodes[0]], len(nodes), MaxExactComponent, MaxComponentWork)
}
