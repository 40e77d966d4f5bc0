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
	d        []int64           // worst product of attempts from the node down, simple paths
	succ     []int32           // acyclic node: the slot of its worst edge, -1 at the end
	inPath   map[int32][]int32 // node of a cyclic component: its worst path inside (it first)
	exitSlot []int32           // node of a cyclic component: its best slot out, -1 = stop there
	inexact  map[int32]bool    // components whose numbers are upper bounds
	local    []int32           // node -> index in the component being searched, -1 otherwise
	selfLoop map[int32]bool    // nodes that call themselves (nil: none)
}

func newSimple(c *core) *simple {
	sp := &simple{c: c, d: make([]int64, c.n), succ: make([]int32, c.n), exitSlot: make([]int32, c.n),
		inPath: map[int32][]int32{}, inexact: map[int32]bool{}, local: make([]int32, c.n)}
	for i := range sp.local {
		sp.local[i] = -1
	}
	for s, f := range c.adj.from {
		if c.adj.to[s] == f {
			if sp.selfLoop == nil {
				sp.selfLoop = map[int32]bool{}
			}
			sp.selfLoop[f] = true
		}
	}
	return sp
}

// selfLoops returns the first self-loop with attempts > 1 (a chain that returns to its service
// with retries on the way), and whether the graph has any self-loop.
func (c *core) selfLoops() (retrying int32, any bool) {
	retrying = -1
	from, to := c.adj.from, c.adj.to
	for s := range to {
		if from[s] == to[s] {
			any = true
			if c.att[s] > 1 && retrying < 0 {
				retrying = int32(s)
			}
		}
	}
	return retrying, any
}

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
	planned, _, _ := c.planRewrite(max(cap, 1), false)
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
		v.Suggestion = string(c.appendSuggest(nil, slots, func(s int32) int64 { return planned[s] }))
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
	exits := make([]int64, len(nodes))
	maxExit, maxAt := int64(1), 0
	for i, w := range nodes {
		sp.local[w] = int32(i)
		exits[i], sp.exitSlot[w] = sp.exit(w, cp)
		if exits[i] > maxExit {
			maxExit, maxAt = exits[i], i
		}
	}
	defer func() {
		for _, w := range nodes {
			sp.local[w] = -1
		}
	}()
	// A service that calls itself with retries: a chain returns to it, without end.
	for _, u := range nodes {
		if !sp.selfLoop[u] {
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
	retries := false
	var inside []int64
	for _, u := range nodes {
		lo, hi := c.out(u)
		for s := lo; s < hi; s++ {
			if c.comp[c.adj.to[s]] == cp && c.adj.to[s] != u {
				inside = append(inside, c.att[s])
				retries = retries || c.att[s] > 1
			}
		}
	}
	if !retries {
		// Every path inside multiplies by 1: the best way out is reachable from everywhere,
		// along a BFS tree towards it (one pass, not a search per node).
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
		for _, v := range nodes {
			best, path, done := sp.search(v, cp, exits, &work)
			if !done {
				ok = false
				break
			}
			sp.d[v], sp.inPath[v] = best, path
		}
		if ok {
			return
		}
	}
	// Too large: an upper bound. A simple path inside uses each edge at most once and at most
	// size-1 of them.
	sp.inexact[cp] = true
	slices.Sort(inside)
	slices.Reverse(inside)
	ub := maxExit
	for _, x := range inside[:min(len(inside), len(nodes)-1)] {
		ub = mul(ub, x)
	}
	for _, v := range nodes {
		sp.d[v] = ub
		if searched {
			delete(sp.inPath, v) // a partial search's paths
		}
	}
	c.treeFrom(nodes, cp, nodes[maxAt], false)
}

// search walks every simple path inside cp from v, depth first in declaration order (ties: the
// path found first), and returns the worst product times the exit, and its path; done is false
// when the walk ran past MaxComponentWork steps.
func (sp *simple) search(v int32, cp int32, exits []int64, work *int) (best int64, path []int32, done bool) {
	c := sp.c
	var visited uint64
	stack := []int32{v}
	var walk func(u int32, prod int64) bool
	walk = func(u int32, prod int64) bool {
		*work++
		if *work > MaxComponentWork {
			return false
		}
		visited |= 1 << uint(sp.local[u])
		// Ties: the longer path (a chain goes on rather than stopping, as everywhere else).
		if x := mul(prod, exits[sp.local[u]]); x > best || x == best && len(stack) > len(path) {
			best, path = x, slices.Clone(stack)
		}
		lo, hi := c.out(u)
		for s := lo; s < hi; s++ {
			t := c.adj.to[s]
			if c.comp[t] != cp || visited&(1<<uint(sp.local[t])) != 0 {
				continue
			}
			stack = append(stack, t)
			if !walk(t, mul(prod, c.att[s])) {
				return false
			}
			stack = stack[:len(stack)-1]
		}
		visited &^= 1 << uint(sp.local[u])
		return true
	}
	done = walk(v, 1)
	return best, path, done
}

// path is the worst path from v: nodes and the slots between them.
func (sp *simple) path(v int32) (nodes, slots []int32) {
	c := sp.c
	for hops := 0; hops <= c.n; hops++ {
		if c.isCyc(c.comp[v]) {
			in := sp.inPath[v]
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
	for i := 0; i < c.n; {
		cp, nodes := c.compAt(i)
		i += len(nodes)
		if !c.isCyc(cp) {
			continue
		}
		sorted := slices.Clone(nodes)
		slices.Sort(sorted)
		r := CycleReport{Services: c.names(sorted), Exact: !sp.inexact[cp]}
		var cyc []int32
		for _, u := range nodes {
			lo, hi := c.out(u)
			for s := lo; s < hi && cyc == nil; s++ {
				if t := c.adj.to[s]; c.comp[t] == cp {
					cyc = append([]int32{u}, c.pathWithin(cp, t, u)...)
					if t == u {
						cyc = []int32{u, u}
					}
				}
			}
			lo, hi = c.out(u)
			for s := lo; s < hi; s++ {
				if c.comp[c.adj.to[s]] == cp && c.att[s] > 1 {
					r.Retries = true
				}
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
	to, ac := c.adj.to, c.adj.attCal
	for i := 0; i < c.n; {
		cp, nodes := c.compAt(i)
		i += len(nodes)
		reached := slices.ContainsFunc(nodes, func(u int32) bool { return load[u] > 0 })
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
		if sp.selfLoop != nil && sp.selfLoop[u] {
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
