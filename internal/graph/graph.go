package graph

import (
	"math"
	"math/bits"
	"strconv"
	"sync/atomic"
)

// Saturated is the value every product and sum saturates at (2^63-1).
const Saturated int64 = math.MaxInt64

// Graph is a call graph. Nodes are services; an edge u->v carries the attempts u makes per
// call to v and the calls one inbound request to u makes to v. The zero value is not usable:
// call New.
type Graph struct {
	names    []string
	ids      map[string]int32
	selected []bool

	// Edges as parallel arrays, in declaration order.
	eFrom, eTo []int32
	eAtt, eCal []int64
	edgeIdx    map[uint64]int32

	entries []entry // explicit entrypoints, in the order set
	entryOf map[int32]int
	// extra are default entrypoints beside the services nobody calls (AddDefaultEntrypoint),
	// by node: used only without explicit ones.
	extra map[int32]int64
	// calledOutside are nodes called by edges left out of this graph (MarkCalled): no default
	// entrypoints, as in the full graph.
	calledOutside map[int32]bool

	// adj is the adjacency every pass reads, built on first use after a change and dropped by
	// every change. Atomic so that concurrent readers (Analyze and Judge on one graph) may both
	// build it: they build the same thing, and the last store wins.
	adj atomic.Pointer[adjacency]

	// time is the hops' layers for the time model (time.go); nil until SetHop or SetEntryHop.
	time *timing
}

// adjacency is the graph in compressed sparse row form: node v's outgoing edges are the slots
// off[v] .. end[v]-1, in declaration order, and each slot's target, source, attempts and
// calls sit in flat arrays. The passes walk these arrays front to back instead of chasing a
// slice header per node and an edge id per edge.
type adjacency struct {
	off, end []int32 // node -> first slot, one past its last slot
	indeg    []int32 // node -> number of incoming edges (read-only: Kahn's order copies it)
	to, from []int32 // slot -> target, source
	att, cal []int64 // slot -> attempts, calls
	attCal   []int64 // slot -> attempts x calls (saturating): what one request at the source sends
	edge     []int32 // slot -> edge id (declaration order)
	slot     []int32 // edge id -> slot
	// order is a topological order (nil when the graph has a cycle) and comp each node's
	// position in it counted from the end (its component, numbered as Tarjan does): see
	// kahnOrder. Read-only, shared by every core on the graph.
	order, comp []int32
	// rowEnd is, for an acyclic graph, one past the last slot of order[i]'s row: the rows are
	// laid out in topological order, so the passes, which walk that order, read the slot
	// arrays front to back (at 100k services they no longer fit the cache, and a row at a
	// random place costs a miss in each array). nil when the graph has a cycle (rows by node id).
	rowEnd []int32
	// sccs is Tarjan's answer for a graph with a cycle (see core.tarjan), computed by the first
	// core that needs it: like order, it depends only on the edges. Read-only once stored.
	sccs atomic.Pointer[sccs]
	// retries is findRetry's answer for the graph's own attempts, computed by the first core
	// that needs it (a graph with a cycle only): like sccs, it changes only with the edges.
	retries atomic.Pointer[retryMarks]
	// inner is the edges inside the cyclic components by target (see innerIn), built by the
	// first core that needs it.
	inner atomic.Pointer[innerIn]
}

// sccs are the strongly connected components of a graph with a cycle: core's comp, order,
// csize and cyc, and selfLoop (node -> it calls itself; nil when none does).
type sccs struct {
	comp, order, csize []int32
	cyc, selfLoop      []bool
}

// retryMarks are core's retry, anyRetry, retryComp, selfRetry and anySelf (see findRetry).
type retryMarks struct {
	retry              []bool
	anyRetry, anySelf  bool
	retryComp, selfRet int32
}

// adjacency returns the graph's adjacency, building it if the graph changed since it was last
// built. O(V+E).
func (g *Graph) adjacency() *adjacency {
	if a := g.adj.Load(); a != nil {
		return a
	}
	n, m := len(g.names), len(g.eFrom)
	off, indeg := make([]int32, n+1), make([]int32, n)
	// Counting sort by source, stable: declaration order within each node.
	for e, f := range g.eFrom {
		off[f+1]++
		indeg[g.eTo[e]]++
	}
	for v := range n {
		off[v+1] += off[v]
	}
	// Targets by node id first: the topological order needs them.
	to := make([]int32, m)
	cur := make([]int32, n)
	copy(cur, off[:n])
	for e, f := range g.eFrom {
		to[cur[f]] = g.eTo[e]
		cur[f]++
	}
	a := &adjacency{
		off: make([]int32, n), end: make([]int32, n), indeg: indeg,
		to: to, from: make([]int32, m),
		att: make([]int64, m), cal: make([]int64, m), attCal: make([]int64, m),
		edge: make([]int32, m), slot: make([]int32, m),
	}
	a.order, a.comp = kahnOrder(off, to, indeg)
	if a.order != nil {
		// Rows in topological order (see rowEnd); within a row, declaration order.
		a.rowEnd = make([]int32, n)
		var p int32
		for i, v := range a.order {
			a.off[v] = p
			p += off[v+1] - off[v]
			a.end[v], a.rowEnd[i] = p, p
		}
	} else {
		copy(a.off, off)
		copy(a.end, off[1:])
	}
	copy(cur, a.off)
	for e, f := range g.eFrom {
		s := cur[f]
		cur[f]++
		a.to[s], a.from[s] = g.eTo[e], f
		a.att[s], a.cal[s] = g.eAtt[e], g.eCal[e]
		a.attCal[s] = mul(g.eAtt[e], g.eCal[e])
		a.edge[s], a.slot[e] = int32(e), s
	}
	g.adj.Store(a)
	return a
}

// dropAdjacency forgets the adjacency after a change. A load first: while a graph is being built
// there is none, and an atomic store with its write barrier on every AddEdge showed in the
// admission gate's profile.
func (g *Graph) dropAdjacency() {
	if g.adj.Load() != nil {
		g.adj.Store(nil)
	}
}

type entry struct {
	node int32
	k    int64
}

// Edge is one call edge.
type Edge struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Attempts int64  `json:"attempts"`
	Calls    int64  `json:"calls"`
}

// Service is one node.
type Service struct {
	Name string `json:"name"`
	// Selected is true for services added with AddService (workloads the policy selects);
	// false for upstream-only nodes (unselected or external services, leaves).
	Selected bool `json:"selected"`
}

// Entrypoint is a service called from outside, with the attempts the outside caller makes.
type Entrypoint struct {
	Service        string `json:"service"`
	ClientAttempts int64  `json:"clientAttempts"`
}

// New returns an empty graph.
func New() *Graph {
	return &Graph{ids: map[string]int32{}, edgeIdx: map[uint64]int32{}, entryOf: map[int32]int{}}
}

// NewSized returns an empty graph with room for about services nodes and edges edges, so that
// a builder that knows its size (the admission gate, with thousands of workloads) does not pay
// for growing the maps and arrays step by step.
func NewSized(services, edges int) *Graph {
	if services < 0 {
		services = 0
	}
	if edges < 0 {
		edges = 0
	}
	return &Graph{
		names: make([]string, 0, services), ids: make(map[string]int32, services), selected: make([]bool, 0, services),
		eFrom: make([]int32, 0, edges), eTo: make([]int32, 0, edges), eAtt: make([]int64, 0, edges), eCal: make([]int64, 0, edges),
		edgeIdx: make(map[uint64]int32, edges), entryOf: map[int32]int{},
	}
}

func (g *Graph) intern(name string) int32 {
	if id, ok := g.ids[name]; ok {
		return id
	}
	id := int32(len(g.names))
	g.ids[name] = id
	g.names = append(g.names, name)
	g.selected = append(g.selected, false)
	g.dropAdjacency()
	return id
}

// AddService adds a selected service (one the policy selects). Selected services may be default
// entrypoints; upstream-only nodes created by AddEdge never are.
func (g *Graph) AddService(name string) {
	g.selected[g.intern(name)] = true
}

// AddEdge adds from->to with the given attempts and calls (values below 1 count as 1). When the
// same edge is declared again (two workloads sharing a service name), the larger attempts and
// the larger calls count: the worst case.
func (g *Graph) AddEdge(from, to string, attempts, calls int64) {
	attempts, calls = max(attempts, 1), max(calls, 1)
	f, t := g.intern(from), g.intern(to)
	key := uint64(uint32(f))<<32 | uint64(uint32(t))
	g.dropAdjacency()
	if e, ok := g.edgeIdx[key]; ok {
		g.eAtt[e] = max(g.eAtt[e], attempts)
		g.eCal[e] = max(g.eCal[e], calls)
		return
	}
	e := int32(len(g.eFrom))
	g.edgeIdx[key] = e
	g.eFrom = append(g.eFrom, f)
	g.eTo = append(g.eTo, t)
	g.eAtt = append(g.eAtt, attempts)
	g.eCal = append(g.eCal, calls)
}

// SetEntrypoint declares name an entrypoint whose outside callers make clientAttempts tries
// (below 1 counts as 1; set twice, the larger counts). Once any entrypoint is set, only the set
// ones count; otherwise Analyze uses the default entrypoints.
func (g *Graph) SetEntrypoint(name string, clientAttempts int64) {
	clientAttempts = max(clientAttempts, 1)
	id := g.intern(name)
	if i, ok := g.entryOf[id]; ok {
		g.entries[i].k = max(g.entries[i].k, clientAttempts)
		return
	}
	g.entryOf[id] = len(g.entries)
	g.entries = append(g.entries, entry{node: id, k: clientAttempts})
}

// AddDefaultEntrypoint makes name an entrypoint with clientAttempts (at least 1; the larger
// wins) when no explicit entrypoint is set, beside the default ones (the selected services no
// selected service calls): a service that outside clients reach, e.g. through a Gateway route,
// although services of the graph call it too. Ignored once SetEntrypoint is used.
func (g *Graph) AddDefaultEntrypoint(name string, clientAttempts int64) {
	id := g.intern(name)
	if g.extra == nil {
		g.extra = map[int32]int64{}
	}
	g.extra[id] = max(g.extra[id], clientAttempts, 1)
}

// MarkCalled records that a selected service calls name through an edge left out of this graph:
// the admission gate's judged build drops the calls of the incoming workload's siblings (other
// workloads of its node), and a service only they call is then no default entrypoint, as it is
// not in the full graph the status analyses. Explicit entrypoints make it moot.
func (g *Graph) MarkCalled(name string) {
	id := g.intern(name)
	if g.calledOutside == nil {
		g.calledOutside = map[int32]bool{}
	}
	g.calledOutside[id] = true
	g.dropAdjacency()
}

// Len is the number of services.
func (g *Graph) Len() int { return len(g.names) }

// NumEdges is the number of distinct edges.
func (g *Graph) NumEdges() int { return len(g.eFrom) }

// Has reports whether name is a node.
func (g *Graph) Has(name string) bool { _, ok := g.ids[name]; return ok }

// IsSelected reports whether name was added with AddService.
func (g *Graph) IsSelected(name string) bool {
	id, ok := g.ids[name]
	return ok && g.selected[id]
}

// Services lists the nodes in the order they were first named.
func (g *Graph) Services() []Service {
	out := make([]Service, len(g.names))
	for i, n := range g.names {
		out[i] = Service{Name: n, Selected: g.selected[i]}
	}
	return out
}

// Edges lists the edges in declaration order.
func (g *Graph) Edges() []Edge {
	out := make([]Edge, len(g.eFrom))
	for i := range g.eFrom {
		out[i] = g.edge(int32(i))
	}
	return out
}

// OutEdges lists name's outgoing edges in declaration order.
func (g *Graph) OutEdges(name string) []Edge {
	id, ok := g.ids[name]
	if !ok {
		return nil
	}
	a := g.adjacency()
	out := make([]Edge, 0, a.end[id]-a.off[id])
	for _, e := range a.edge[a.off[id]:a.end[id]] {
		out = append(out, g.edge(e))
	}
	return out
}

// Edge returns the edge from->to.
func (g *Graph) Edge(from, to string) (Edge, bool) {
	f, ok1 := g.ids[from]
	t, ok2 := g.ids[to]
	if !ok1 || !ok2 {
		return Edge{}, false
	}
	e, ok := g.edgeIdx[uint64(uint32(f))<<32|uint64(uint32(t))]
	if !ok {
		return Edge{}, false
	}
	return g.edge(e), true
}

func (g *Graph) edge(e int32) Edge {
	return Edge{From: g.names[g.eFrom[e]], To: g.names[g.eTo[e]], Attempts: g.eAtt[e], Calls: g.eCal[e]}
}

// Entrypoints returns the explicitly set entrypoints, in the order set.
func (g *Graph) Entrypoints() []Entrypoint {
	out := make([]Entrypoint, len(g.entries))
	for i, e := range g.entries {
		out[i] = Entrypoint{Service: g.names[e.node], ClientAttempts: e.k}
	}
	return out
}

// BFS visits every node reachable from the entrypoints (explicit, else every selected node) and
// returns how many it reached. It is the baseline the benchmarks compare Analyze against: a bare
// traversal of the same adjacency Analyze reads, touching each reachable node and edge once.
func (g *Graph) BFS() int {
	a := g.adjacency()
	n := len(g.names)
	seen := make([]bool, n)
	queue := make([]int32, 0, n)
	if len(g.entries) > 0 {
		for _, e := range g.entries {
			if !seen[e.node] {
				seen[e.node] = true
				queue = append(queue, e.node)
			}
		}
	} else {
		for v := range n {
			if g.selected[v] {
				seen[v] = true
				queue = append(queue, int32(v))
			}
		}
	}
	off, end, to := a.off, a.end, a.to
	for i := 0; i < len(queue); i++ {
		v := queue[i]
		for _, t := range to[off[v]:end[v]] {
			if !seen[t] {
				seen[t] = true
				queue = append(queue, t)
			}
		}
	}
	return len(queue)
}

// mul is a*b for a, b >= 0, saturating at Saturated.
func mul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	// Written so that the compiler emits a conditional move: in a graph full of saturated
	// products a branch here is mispredicted half the time.
	p := int64(lo)
	if hi|lo>>63 != 0 {
		p = Saturated
	}
	return p
}

// add is a+b for a, b >= 0, saturating at Saturated.
func add(a, b int64) int64 {
	s := a + b
	if s < 0 {
		s = Saturated
	}
	return s
}

// Mul multiplies non-negative values, saturating at 2^63-1.
func Mul(a, b int64) int64 { return mul(a, b) }

// Product multiplies non-negative factors, saturating at 2^63-1.
func Product(factors []int64) int64 {
	p := int64(1)
	for _, f := range factors {
		p = mul(p, f)
	}
	return p
}

// FormatInt is strconv.FormatInt(x, 10), for callers that render numbers next to FormatAmount.
func FormatInt(x int64) string { return strconv.FormatInt(x, 10) }
