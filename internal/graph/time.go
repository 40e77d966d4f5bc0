package graph

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Time along the chain (DESIGN.md, "Time along the chain"): the worst-case time until an
// entrypoint's client gets an answer, and the timeout inversions.
//
// A hop u -> v is one or more retrying layers in the order they sit on the wire: u's app, its
// proxy, its mesh's sidecar. Layer i, with a tries, per-try timeout p, backoff (base, max) and
// overall timeout t, waiting on X (the next layer inward, or v's own worst time for the
// innermost layer) costs
//
//	T_i = min(t, a x min(p, X) + sum over retries n = 1..a-1 of min(max, base x 2^(n-1)))
//
// so every inner layer's tries are bounded by the per-try timeout of the layer above, plus d
// where the layer holds each request it receives for d before its tries (Istio's fault.delay),
// outside t and p. A missing p or t bounds nothing. A service's worst time to answer, T(v), is the worst over its outgoing
// hops: calls to different upstreams are not added (time is per chain, like amplification), and
// the `*CALLS` of a fan-out are timed as one call (concurrent); a service that makes them one
// after the other waits up to CALLS times as long, which only its own timeouts bound. A leaf's
// own time is unknown: a try to it is bounded only by its caller's per-try timeout, and where
// nothing bounds it the time is unbounded, and said so. A service's own work besides waiting
// on its calls is not counted.
//
// At an entrypoint the layers of its north-south route (a Gateway API route, Envoy Gateway's
// policy) nest over T(entry), and the outside client is one more layer: clientAttempts tries,
// no per-try timeout and no backoff known (its own are not declared anywhere retrycap reads),
// so a client with k attempts waits up to k times one try's worst time, plus its own backoff.
//
// A timeout inversion is a layer whose per-try timeout is shorter than the worst time of what
// it waits on (the callee, or the layer inside it on the same hop): the caller gives up and
// retries while the callee is still working on the abandoned try, so every tier below keeps
// working for a caller that has gone. A callee whose worst time is unbounded because it calls
// without timeouts counts; a leaf's unknown time does not.

// Forever is the worst time where nothing bounds it ("unbounded"). Sums and products of
// durations saturate at it.
const Forever time.Duration = math.MaxInt64

// MaxInversions bounds the inversions TimeAnalysis lists (all are counted).
const MaxInversions = 20

// TimeLayer is one retrying layer of a hop, as the time model sees it.
type TimeLayer struct {
	// Name says who retries, for messages: "retrycap", "Istio VirtualService shop/payment".
	Name string
	// Tries per call (1 = no retry; below 1 counts as 1).
	Tries int64
	// PerTry bounds each try; 0 = no per-try timeout.
	PerTry time.Duration
	// LastTry, when set, bounds the layer's last try instead of PerTry (never below it; Forever:
	// nothing does): Linkerd drops its retry timeout once no retry remains, so its last try has
	// only the response timeout. 0: the last try is bounded as every other.
	LastTry time.Duration
	// Timeout bounds the tries and backoffs together (a route timeout); 0 = none.
	Timeout time.Duration
	// BackoffBase and BackoffMax: before retry n the layer waits at most
	// min(BackoffMax, BackoffBase x 2^(n-1)) (full jitter's worst case); BackoffBase 0 = no wait,
	// BackoffMax 0 = no cap.
	BackoffBase, BackoffMax time.Duration
	// Delay is held once per request the layer receives, before its first try and outside its
	// timeouts (Istio's fault.delay: Envoy's fault filter runs before the router, whose timeouts
	// start after it and whose retries do not pass it again); 0 = none. A leaf's unknown time
	// stays unknown with it: the caller's per-try timeout still bounds the try.
	Delay time.Duration
}

// BackoffTotal is the most the layer waits between its tries: the sum over retries
// n = 1..Tries-1 of min(BackoffMax, BackoffBase x 2^(n-1)), saturating at Forever.
func (l TimeLayer) BackoffTotal() time.Duration {
	if l.BackoffBase <= 0 || l.Tries <= 1 {
		return 0
	}
	var sum int64
	step := int64(l.BackoffBase)
	limit := int64(l.BackoffMax)
	if limit <= 0 {
		limit = int64(Forever)
	}
	for n := int64(1); n < l.Tries; n++ {
		if step >= limit {
			// Every later retry waits the cap: add them at once (Tries can be large).
			return time.Duration(add(sum, mul(l.Tries-n, limit)))
		}
		sum = add(sum, step)
		step = mul(step, 2)
	}
	return time.Duration(sum)
}

// Hop is the layers of one call edge, in wire order: the caller's app first, then its proxy,
// then its mesh's sidecar. The tries of all layers multiply; the graph's edge attempts should
// be their product.
type Hop []TimeLayer

// layerT is a layer reduced to what the pass needs, durations as int64 nanoseconds, 0 = none.
type layerT struct {
	a, p, t, b int64
	// q bounds the last try where it differs from p (TimeLayer.LastTry); 0: p bounds it too.
	// A hop with such a layer is never compiled for the fast passes (see compile).
	q int64
	// d is the delay held before the layer's tries (TimeLayer.Delay), added after its timeout;
	// like q, a hop with one is read by the slow path only.
	d int64
	// k is the layer's time when its per-try timeout bounds every try (what it waits on takes
	// p or more): a x p + b, within t. The written-out passes take it instead of computing it.
	k int64
}

// hopRec is one declared Hop of an edge; an edge declared by several workloads (a shared
// service name) has several, linked by next, and its time is the worst of them.
type hopRec struct {
	lo, hi int32 // its layers: timing.flat[lo:hi], wire order
	next   int32
	// client is, for an entry hop, the client's own tries when the entrypoint's client
	// attempts in the graph already include the hop's (0: the graph's are the client's own).
	client int64
	hop    Hop
	// class is the hop's layers' class (timing.classes): hops with the same layers share one,
	// -1 for a hop longer than maxPad (laid out on its own).
	class int32
}

// hopKey is a hop's reduced layers, at most maxPad of them (n), as a map key: the classes of
// equal hops.
type hopKey struct {
	n int32
	l [maxPad]layerT
}

// timing is what a Graph holds about time: the hops by edge id and by entrypoint node.
type timing struct {
	eHop  []int32 // edge id -> first hopRec, -1 when none was set
	hops  []hopRec
	flat  []layerT        // every hop's layers, one after the other
	entry map[int32]int32 // entrypoint node -> first hopRec
	gen   int             // counts the changes, for cache
	cache atomic.Pointer[compiled]

	// classes are the distinct hops of at most maxPad layers, found as they are added (one map
	// look-up per SetHop beside its others): a cluster's hops come from a few policies and
	// meshes, so the compiled layers are a table of a few classes that stays in the cache
	// instead of a copy per edge read from memory (see compiled).
	classes []hopKey
	class   map[hopKey]int32
}

func (g *Graph) timing() *timing {
	if g.time == nil {
		g.time = &timing{entry: map[int32]int32{}}
	}
	return g.time
}

func (t *timing) add(first int32, h Hop) int32 {
	r := hopRec{hop: slices.Clone(h), next: first, lo: int32(len(t.flat))}
	for _, l := range h {
		t.flat = append(t.flat, reduce(l))
	}
	r.hi = int32(len(t.flat))
	r.class = -1
	if len(h) <= maxPad {
		k := hopKey{n: int32(len(h))}
		copy(k.l[:], t.flat[r.lo:r.hi])
		id, ok := t.class[k]
		if !ok {
			if t.class == nil {
				t.class = map[hopKey]int32{}
			}
			id = int32(len(t.classes))
			t.classes = append(t.classes, k)
			t.class[k] = id
		}
		r.class = id
	}
	t.hops = append(t.hops, r)
	t.gen++
	return int32(len(t.hops) - 1)
}

// SetHop sets the layers of the edge from -> to (added before with AddEdge), replacing any set
// before; it reports false, and does nothing, when there is no such edge. An edge without a Hop
// is one layer of its attempts with no timeout.
func (g *Graph) SetHop(from, to string, h Hop) bool { return g.hop(from, to, h, true) }

// AddHop is SetHop for an edge declared again (two workloads sharing a service name): the worst
// of its hops counts, as the larger attempts do.
func (g *Graph) AddHop(from, to string, h Hop) bool { return g.hop(from, to, h, false) }

func (g *Graph) hop(from, to string, h Hop, replace bool) bool {
	if _, ok := g.Edge(from, to); !ok {
		return false
	}
	return g.timing().hop(g, from, to, h, replace)
}

func (tm *timing) hop(g *Graph, from, to string, h Hop, replace bool) bool {
	f, ok1 := g.ids[from]
	t, ok2 := g.ids[to]
	if !ok1 || !ok2 {
		return false
	}
	e, ok := g.edgeIdx[uint64(uint32(f))<<32|uint64(uint32(t))]
	if !ok {
		return false
	}
	if len(tm.eHop) < len(g.eFrom) {
		if len(tm.hops) == 0 {
			// The first hop set: a builder sets one per edge, or most of them (every edge of a
			// policy's workloads has one), so the records and their layers get room for one per
			// edge at once instead of growing by doubling (each growth a fresh large allocation,
			// zeroed, and the old one left to the collector).
			tm.hops = slices.Grow(tm.hops, len(g.eFrom))
			tm.flat = slices.Grow(tm.flat, len(g.eFrom))
		}
		for len(tm.eHop) < len(g.eFrom) {
			tm.eHop = append(tm.eHop, -1)
		}
	}
	first := tm.eHop[e]
	if replace {
		first = -1
	}
	tm.eHop[e] = tm.add(first, h)
	return true
}

// The graph's edits keep the hops with their edges and entrypoints. The records of replaced or
// removed hops stay in t.hops until the graph is dropped: edits are rare beside analyses.

func (t *timing) insertEdge(pos int) {
	if t != nil && pos <= len(t.eHop) {
		t.eHop = slices.Insert(t.eHop, pos, -1)
		t.gen++
	}
}

func (t *timing) removeEdge(i int) {
	if t != nil && i < len(t.eHop) {
		t.eHop = slices.Delete(t.eHop, i, i+1)
		t.gen++
	}
}

// renumber follows normalize: pos maps an old node id to its new id + 1 (0: dropped).
func (t *timing) renumber(pos []int32) {
	if t == nil || len(t.entry) == 0 {
		return
	}
	entry := make(map[int32]int32, len(t.entry))
	for v, r := range t.entry {
		if p := pos[v]; p > 0 {
			entry[p-1] = r
		}
	}
	t.entry = entry
}

// SetEntryHop declares the layers between an entrypoint's outside client and the service (a
// north-south route's retries and timeouts), in wire order. Declared again, the worst counts.
// It does not make name an entrypoint.
func (g *Graph) SetEntryHop(name string, h Hop) {
	id := g.intern(name)
	tm := g.timing()
	first, ok := tm.entry[id]
	if !ok {
		first = -1
	}
	tm.entry[id] = tm.add(first, h)
}

// Timing is hops kept apart from their graph, for a caller that must not change a graph other
// goroutines read (the controller's and the gate's builds): the same as SetHop, AddHop and
// SetEntryHop on the graph, read by AnalyzeTimeWith. It refers to the graph's edges by position:
// the graph must not change while the Timing is used.
type Timing struct {
	g *Graph
	t timing
}

// NewTiming returns an empty Timing for g.
func NewTiming(g *Graph) *Timing { return &Timing{g: g, t: timing{entry: map[int32]int32{}}} }

// SetHop is Graph.SetHop.
func (t *Timing) SetHop(from, to string, h Hop) bool { return t.t.hop(t.g, from, to, h, true) }

// AddHop is Graph.AddHop.
func (t *Timing) AddHop(from, to string, h Hop) bool { return t.t.hop(t.g, from, to, h, false) }

// AddEntryHop is Graph.SetEntryHop for a node the graph has, where the graph's client attempts
// of the entrypoint already include the hop's tries (as a builder that multiplies a gateway
// route's tries into them does) and client is the outside client's own tries (0: the graph's
// client attempts are the client's own, as for SetEntryHop); it reports false, and does
// nothing, for a node the graph has not.
func (t *Timing) AddEntryHop(name string, client int64, h Hop) bool {
	id, ok := t.g.ids[name]
	if !ok {
		return false
	}
	first, ok := t.t.entry[id]
	if !ok {
		first = -1
	}
	r := t.t.add(first, h)
	t.t.hops[r].client = max(client, 0)
	t.t.entry[id] = r
	return true
}

func reduce(l TimeLayer) layerT {
	r := layerT{a: max(l.Tries, 1), p: max(int64(l.PerTry), 0), t: max(int64(l.Timeout), 0), b: int64(l.BackoffTotal())}
	if q := int64(l.LastTry); q > 0 && q != r.p && r.a > 1 {
		r.q = max(q, r.p)
	}
	r.k = add(mul(r.a, r.p), r.b)
	if r.t > 0 && r.t < r.k {
		r.k = r.t
	}
	r.d = max(int64(l.Delay), 0)
	return r
}

// step is the time through layer l when its callee takes y (u: y is a leaf's own time, unknown):
// its tries, each bounded by the per-try timeout, their backoff, and the overall timeout.
func (l *layerT) step(y int64, u bool) (int64, bool) {
	if l.q != 0 {
		y, u = l.lastApart(y, u)
	} else {
		if l.p > 0 {
			u = false
			if l.p < y {
				y = l.p
			}
		}
		y = add(mul(l.a, y), l.b)
	}
	if l.t > 0 {
		u = false
		if l.t < y {
			y = l.t
		}
	}
	if l.d > 0 {
		y = add(y, l.d)
	}
	return y, u
}

// lastApart is the time of the tries and backoff of l, whose last try is bounded apart (q != 0),
// when what it waits on takes y, before its overall timeout; and whether that is still y's
// unknown (a leaf's) where u said it was: every try but the last within p, the last within q
// (Forever: it takes what it waits on, unknown if that is).
func (l *layerT) lastApart(y int64, u bool) (int64, bool) {
	yp := y
	if l.p > 0 && l.p < yp {
		yp = l.p
	}
	return add(add(mul(l.a-1, yp), min(l.q, y)), l.b), u && l.q == int64(Forever)
}

// hopOf is edge e's first hopRec, -1 when none.
func (t *timing) hopOf(e int32) int32 {
	if t == nil || int(e) >= len(t.eHop) {
		return -1
	}
	return t.eHop[e]
}

// TimeChain is the worst time to answer from one entrypoint.
type TimeChain struct {
	Entrypoint     string `json:"entrypoint"`
	ClientAttempts int64  `json:"clientAttempts"`
	// Time is what the client waits in the worst case, all its attempts included; Forever when
	// nothing bounds it.
	Time time.Duration `json:"time"`
	// Path is the chain that takes that long.
	Path []string `json:"path"`
	// Times are the worst time to answer of each service of Path (Forever for a leaf: unknown).
	Times []time.Duration `json:"times"`
	// Unbounded says why Time is Forever ("" when it is not).
	Unbounded string `json:"unbounded,omitempty"`
}

// Inversion is a timeout inversion: Layer's per-try timeout on the hop Caller -> Callee is
// shorter than the worst time of what it waits on (Inner: the callee, or an inner layer).
type Inversion struct {
	Caller string `json:"caller"`
	Callee string `json:"callee"`
	// Layer is the layer whose per-try timeout is too short ("retrycap", "Istio VirtualService
	// shop/payment"); Inner what it waits on: the callee's name, or the inner layer's.
	Layer string `json:"layer"`
	Inner string `json:"inner"`
	// PerTry is Layer's per-try timeout; InnerTime the worst time of Inner (Forever: unbounded).
	PerTry    time.Duration `json:"perTry"`
	InnerTime time.Duration `json:"innerTime"`
	// Message explains it; Fix gives the timeouts that fit.
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

// TimeViolation is a chain whose worst time to answer is over the maximum.
type TimeViolation struct {
	Path    []string      `json:"path"`
	Time    time.Duration `json:"time"`
	Max     time.Duration `json:"max"`
	Message string        `json:"message"`
}

// TimeAnalysis is the time model's result for one graph.
type TimeAnalysis struct {
	// Max is the maximum time to answer checked (0: none).
	Max time.Duration
	// Worst is the worst time to answer over the entrypoints (Forever: unbounded); WorstPath its
	// chain and WorstUnbounded why it is unbounded.
	Worst          time.Duration
	WorstPath      []string
	WorstUnbounded string
	// Chains has one entry per entrypoint, worst first, ties in entrypoint order; at most
	// MaxChains.
	Chains []TimeChain
	// Inversions, the longest inner time over the per-try timeout first, at most MaxInversions;
	// InversionsTotal counts them all.
	Inversions      []Inversion
	InversionsTotal int
	// Violations are the chains over Max, worst first, at most MaxViolations (as Analyze's, and
	// the status's); ViolationsTotal counts them all, one per entrypoint.
	Violations      []TimeViolation
	ViolationsTotal int
	// UpperBound is true when a call loop's times did not settle within the passes allowed
	// (maxLoopRounds): its figures are then upper bounds, said as such.
	UpperBound bool
}

// OverMax reports whether some chain's worst time is over a set maximum.
func (a *TimeAnalysis) OverMax() bool { return a.Max > 0 && len(a.Violations) > 0 }

// maxLoopRounds bounds the passes over one call loop (see AnalyzeTime).
const maxLoopRounds = 64

// timePass holds the per-node results of the backward pass.
type timePass struct {
	c     *core
	tm    *timing
	v     []nodeT
	span  []span // the compiled hops (see timing.compile)
	multi []int32
	flat  []layerT
	pad   int32 // compiled.pad

	// The inversions found so far: the MaxInversions worst in a sorted window, and the count.
	best  []invCand
	total int
	// floor is the gap an inversion must be over to be kept: the root's once the window is
	// full, -1 before (a gap is positive). Kept apart from best so that node's inlined test reads
	// one field instead of the heap's length and root.
	floor int64
	cur   invCand // the hop being checked (order, caller, callee)

	// searched marks the cyclic components whose times are over chains that visit a service
	// once (timecycles.go); local is the search's scratch.
	searched map[int32]bool
	local    []int32
	steps    []chainStep // chainFrom's scratch
}

// nodePool recycles the per-node results between analyses, as bufferPool does for Analyze's.
var nodePool = sync.Pool{New: func() any { return new([]nodeT) }}

// nodeT is a node's result, kept together: the pass reaches a callee through a random edge.
type nodeT struct {
	t    int64 // worst time to answer (Forever for a leaf: unknown)
	succ int32 // the slot that gives it, -1 for a leaf
	leaf bool
}

// invCand is an inversion before its texts are written: only the listed ones get them.
type invCand struct {
	gap    int64 // inner time - per-try timeout
	seq    int32 // the order found in: deepest hops first (see offer)
	caller int32 // -1: the entry's client
	callee int32
	rec    int32 // the hop record and the layer's index in it
	layer  int32
	inner  int64
}

func (x invCand) before(y invCand) bool {
	return x.gap > y.gap || (x.gap == y.gap && x.seq < y.seq)
}

// offer counts an inversion of layer i of hop record r, which waits on inner, and keeps it
// when it is among the MaxInversions worst: the longest inner time over the per-try timeout
// first, ties in the order found, which is the pass's: callers furthest from the entrypoints
// first (reverse topological order), a caller's hops in declaration order, a hop's layers
// inside out, the entry hops last. Deepest first is also the order to fix them in: a callee's
// worst time is what its callers' per-try timeouts must cover. p.best is a heap whose root is the one listed last
// (the first to go): on a large graph most offers are rejected by one comparison with it, and
// the others cost a few swaps, where a sorted window would move every entry (times grow up the
// chain, so each new inversion tends to be the worst so far).
func (p *timePass) offer(r, i int32, l *layerT, inner int64) {
	p.total++
	p.keep(r, i, l, inner)
}

// keep is offer without the count, for a caller that counted and saw that the inversion may
// be kept (the window is not full, or its gap is over the root's).
func (p *timePass) keep(r, i int32, l *layerT, inner int64) {
	gap := inner - l.p
	full := len(p.best) == MaxInversions
	if full && gap <= p.best[0].gap {
		return // found later than the root: a tie loses
	}
	x := p.cur
	if r < 0 {
		// From the compiled layers of slot -1-r: its edge's only record.
		s := -1 - r
		r = p.tm.eHop[p.c.adj.edge[s]]
		x.caller, x.callee = p.c.adj.from[s], p.c.adj.to[s]
	}
	x.rec, x.layer, x.inner, x.gap, x.seq = r, i, inner, gap, int32(p.total) // unique, growing
	h := p.best
	if !full {
		// Push, sift up.
		h = append(h, x)
		for j := len(h) - 1; j > 0; {
			parent := (j - 1) / 2
			if !h[parent].before(h[j]) {
				break
			}
			h[parent], h[j] = h[j], h[parent]
			j = parent
		}
		p.best = h
		if len(h) == MaxInversions {
			p.floor = h[0].gap
		}
		return
	}
	if !x.before(h[0]) {
		return
	}
	// Replace the root, sift down: a parent is never before its children.
	h[0] = x
	for j := 0; ; {
		c := 2*j + 1
		if c >= len(h) {
			break
		}
		if c+1 < len(h) && h[c].before(h[c+1]) {
			c++
		}
		if !h[j].before(h[c]) {
			break
		}
		h[j], h[c] = h[c], h[j]
		j = c
	}
	p.floor = h[0].gap
}

// through is the time of the hops from record r on (an edge's or an entry's) when what they
// wait on takes x (unknown: a leaf's own time); with check it offers the inversions.
// With several records (workloads sharing a service name that declare the edge differently),
// the worst one counts, and only its inversions are offered: the others are not what a caller
// of the service waits on in the worst case. Ties: the record declared first.
func (p *timePass) through(r int32, x int64, unknown, check bool) int64 {
	if p.tm.hops[r].next < 0 {
		return p.throughOne(r, x, unknown, check)
	}
	worst, wr := int64(-1), int32(-1)
	// Records are linked newest first: walk them all and keep the last one at the worst, the
	// one declared first.
	for ; r >= 0; r = p.tm.hops[r].next {
		if y := p.throughOne(r, x, unknown, false); y >= worst {
			worst, wr = y, r
		}
	}
	if check {
		p.throughOne(wr, x, unknown, true)
	}
	return worst
}

// throughOne is through for record r alone.
func (p *timePass) throughOne(r int32, x int64, unknown, check bool) int64 {
	rec := &p.tm.hops[r]
	flat := p.tm.flat
	y, u := x, unknown
	for i := rec.hi - 1; i >= rec.lo; i-- {
		l := &flat[i]
		if check && l.p > 0 && y > l.p && !u {
			p.offer(r, i-rec.lo, l, y)
		}
		y, u = l.step(y, u)
	}
	return y
}

// hopTime is the time of edge slot s when its callee takes x.
func (p *timePass) hopTime(s int32, x int64, leaf, check bool) int64 {
	lo, hi := p.span[s].lo, p.span[s].hi
	if lo == hi {
		if p.multi != nil && p.multi[s] >= 0 {
			// Several declarations: the slow path over the records.
			return p.through(p.multi[s], x, leaf, check)
		}
		// No hop: one layer of the edge's attempts, no timeout.
		return mul(p.c.att[s], x)
	}
	y, u := x, leaf
	flat := p.flat
	for i := hi - 1; i >= lo; i-- {
		l := &flat[i]
		if check && l.p > 0 && y > l.p && !u {
			p.offer(-1-s, i-lo, l, y)
		}
		y, u = l.step(y, u)
	}
	return y
}

// compiled is the hops laid out for the pass: slot s's layers are flat[span[s].lo:span[s].hi].
// Hops with the same layers (one class, see timing.classes) are laid out once, at the first
// slot of the class the pass meets, and every other slot of the class points at them: a
// cluster's hops come from a few policies and meshes, so flat is a few classes that stay in the
// processor's cache (at 10k services and 50k edges, 6 classes: 480 bytes instead of 3.2 MB read
// from memory per analysis). A hop of more than maxPad layers has no class and is laid out at its
// slot, in the order the pass walks the edges on an acyclic graph (callers in reverse
// topological order, a caller's edges in slot order). An edge with several records (declared by
// several workloads) has none there and multi[s] is its first record, read from the records
// (multi is nil when no edge has several). Built on the first analysis after a change and kept
// while neither the adjacency nor the hops change.
//
// Where the hops have different numbers of layers (a meshed namespace's edges have the mesh's
// layer under the policy's, the others not), each is padded after its last layer, up to the most
// any has (at most maxPad), with layers that change nothing (one try, no timeout, no backoff):
// the pass's loop over a hop's layers then runs the same number of times on every edge, and the
// processor predicts its exit instead of missing it on about every other edge. Padding comes after
// the hop's own layers, so a layer's index in its span is still its index in the Hop.
type compiled struct {
	adj   *adjacency
	gen   int
	span  []span
	multi []int32
	flat  []layerT
	pad   int32 // the layers every non-empty span has, 0: not padded
}

// span is a range of compiled layers.
type span struct{ lo, hi int32 }

// maxPad is the most layers a hop is padded to (see compiled): app, proxy and mesh. A graph with
// longer hops is laid out unpadded.
const maxPad = 3

// lastTried reports whether a layer of ls bounds its last try apart (layerT.q) or holds a delay
// (layerT.d): terms the fast passes do not compute.
func lastTried(ls []layerT) bool {
	for i := range ls {
		if ls[i].q != 0 || ls[i].d != 0 {
			return true
		}
	}
	return false
}

// identity is a padding layer: y -> add(1 x y, 0) = y, no timeout (so no inversion, and a leaf's
// unknown time stays unknown).
var identity = layerT{a: 1}

func (t *timing) compile(a *adjacency) *compiled {
	if c := t.cache.Load(); c != nil && c.adj == a && c.gen == t.gen {
		return c
	}
	m := len(a.to)
	c := &compiled{adj: a, gen: t.gen, span: make([]span, m)}
	pad := int32(0) // the layers every laid-out hop is padded to, 0: none
	for _, e := range a.edge {
		if r := t.hopOf(e); r >= 0 && t.hops[r].next < 0 {
			pad = max(pad, t.hops[r].hi-t.hops[r].lo)
		}
	}
	if pad > maxPad {
		pad = 0
	}
	c.pad = pad
	// at is where each class was laid out: span.hi > 0 once it was (a class's span is never
	// empty at 0: the empty hop's class is laid out where it is met, with lo == hi).
	at := make([]span, len(t.classes))
	laid := make([]bool, len(t.classes))
	lay := func(s int32) {
		lo := int32(len(c.flat))
		c.span[s] = span{lo, lo}
		r := t.hopOf(a.edge[s])
		if r < 0 {
			return
		}
		rec := t.hops[r]
		if rec.next >= 0 || lastTried(t.flat[rec.lo:rec.hi]) {
			// Several records, or a layer whose last try is bounded apart (Linkerd's) or with
			// a delay (Istio's fault injection): read from the records by the slow path, which
			// the fast passes need not know.
			if c.multi == nil {
				c.multi = make([]int32, m)
				for i := range c.multi {
					c.multi[i] = -1
				}
			}
			c.multi[s] = r
			return
		}
		if k := rec.class; k >= 0 && laid[k] {
			c.span[s] = at[k]
			return
		}
		c.flat = append(c.flat, t.flat[rec.lo:rec.hi]...)
		if rec.hi > rec.lo {
			// A hop declared with no layers stays empty: hopTime reads it as none.
			for n := rec.hi - rec.lo; n < pad; n++ {
				c.flat = append(c.flat, identity)
			}
		}
		c.span[s].hi = int32(len(c.flat))
		if k := rec.class; k >= 0 {
			at[k], laid[k] = c.span[s], true
		}
	}
	if a.order != nil {
		for i := len(a.order) - 1; i >= 0; i-- {
			v := a.order[i]
			for s := a.off[v]; s < a.end[v]; s++ {
				lay(s)
			}
		}
	} else {
		for s := range int32(m) {
			lay(s)
		}
	}
	// Concurrent analyses of one graph may both build it: the same thing, the last store wins.
	t.cache.Store(c)
	return c
}

// node computes v's worst time from its callees' current times (with check, offering the
// inversions of its hops: the callees' times must be final); it reports whether it changed.
func (p *timePass) node(v int32, check bool) bool {
	lo, hi := p.c.out(v)
	return p.nodeSlots(v, lo, hi, check)
}

// nodeSlots is node with v's slots lo .. hi-1 given: the acyclic pass knows them from the
// rows' layout (adjacency.rowEnd) and so reads no off and end at a random place per node.
func (p *timePass) nodeSlots(v, lo, hi int32, check bool) bool {
	pv := p.v
	if lo == hi {
		pv[v] = nodeT{t: int64(Forever), succ: -1, leaf: true}
		return false
	}
	best, bs := int64(-1), int32(-1)
	// The inversions' count and floor in locals, synced around the calls that read them.
	total, floor := p.total, p.floor
	for s := lo; ; s++ {
		// slotsFast runs up to the first slot that needs a call (rare): that slot is taken
		// here, and the fast run goes on after it.
		switch p.pad {
		case 1:
			s, best, bs, total = p.slotsFast1(s, hi, best, bs, total, floor, check)
		case 2:
			s, best, bs, total = p.slotsFast2(s, hi, best, bs, total, floor, check)
		default:
			s, best, bs, total = p.slotsFast(s, hi, best, bs, total, floor, check)
		}
		if s == hi {
			break
		}
		p.total = total
		y := p.slotSlow(v, s, check)
		total, floor = p.total, p.floor
		if y > best {
			best, bs = y, s
		}
	}
	p.total = total
	changed := best != pv[v].t
	pv[v] = nodeT{t: best, succ: bs} // all of it: the buffer is recycled (nodePool)
	return changed
}

// slotsFast is the pass's inner loop: slots s .. hi-1 of one node, each hop's compiled layers
// over its callee's time, the worst (best, bs) carried over. It makes no call, so that the
// compiler keeps its values in registers (a call anywhere in the loop made it reload about
// fifteen of them from the stack on every slot): it stops at the first slot that needs one (no
// compiled layers: hopTime; an inversion that may be kept: keep) and returns that slot, with
// total as it was before it, for slotSlow; s == hi when it ran to the end.
func (p *timePass) slotsFast(s, hi int32, best int64, bs int32, total int, floor int64, check bool) (int32, int64, int32, int) {
	to, pv, spans, flat := p.c.adj.to, p.v, p.span, p.flat
	for ; s < hi; s++ {
		w := to[s]
		y, u := pv[w].t, pv[w].leaf
		a, b := spans[s].lo, spans[s].hi
		if a == b {
			return s, best, bs, total // no compiled layers: no hop, or several records
		}
		t0 := total
		ls := flat[a:b]
		for i := len(ls) - 1; i >= 0; i-- {
			l := &ls[i]
			if l.p > 0 {
				if check && y > l.p && !u {
					// offer's count and first test, inlined: most are rejected here.
					total++
					if y-l.p > floor {
						return s, best, bs, t0
					}
				}
				u = false
				if l.p < y {
					y = l.p
				}
			}
			if y < 1<<40 && l.a < 1<<22 {
				y = add(l.a*y, l.b) // below 2^62: no overflow (the common case, ~18 minutes)
			} else {
				y = add(mul(l.a, y), l.b)
			}
			if l.t > 0 {
				u = false
				if l.t < y {
					y = l.t
				}
			}
		}
		if y > best {
			best, bs = y, s
		}
	}
	return s, best, bs, total
}

// slotsFast2 is slotsFast where every compiled hop has two layers (pad 2: a policy's layer and
// a mesh's, or a padding layer), the two written out: the generic loop over a hop's layers kept
// its slice, index and bounds on the stack, reloaded on every layer.
func (p *timePass) slotsFast2(s, hi int32, best int64, bs int32, total int, floor int64, check bool) (int32, int64, int32, int) {
	to, pv, spans, flat := p.c.adj.to, p.v, p.span, p.flat
	for ; s < hi; s++ {
		w := to[s]
		y, u := pv[w].t, pv[w].leaf
		a := spans[s].lo
		if a == spans[s].hi {
			return s, best, bs, total // no compiled layers: no hop, or several records
		}
		t0 := total
		l := &flat[a+1] // the inner layer first, as the wire nests them
		if l.p > 0 {
			if check && y > l.p && !u {
				total++
				if y-l.p > floor {
					return s, best, bs, t0
				}
			}
			u = false
			if l.p < y {
				y = l.p
			}
		}
		if y < 1<<40 && l.a < 1<<22 {
			y = add(l.a*y, l.b)
		} else {
			y = add(mul(l.a, y), l.b)
		}
		if l.t > 0 {
			u = false
			if l.t < y {
				y = l.t
			}
		}
		l = &flat[a]
		if l.p > 0 && y >= l.p {
			// The per-try timeout bounds every try: the layer takes k.
			if check && y > l.p && !u {
				total++
				if y-l.p > floor {
					return s, best, bs, t0
				}
			}
			y = l.k
		} else {
			if y < 1<<40 && l.a < 1<<22 {
				y = add(l.a*y, l.b)
			} else {
				y = add(mul(l.a, y), l.b)
			}
			if l.t > 0 && l.t < y {
				y = l.t
			}
		}
		if y > best {
			best, bs = y, s
		}
	}
	return s, best, bs, total
}

// slotsFast1 is slotsFast2 for one layer per hop (pad 1: no mesh layer anywhere).
func (p *timePass) slotsFast1(s, hi int32, best int64, bs int32, total int, floor int64, check bool) (int32, int64, int32, int) {
	to, pv, spans, flat := p.c.adj.to, p.v, p.span, p.flat
	for ; s < hi; s++ {
		w := to[s]
		y, u := pv[w].t, pv[w].leaf
		a := spans[s].lo
		if a == spans[s].hi {
			return s, best, bs, total // no compiled layers: no hop, or several records
		}
		t0 := total
		l := &flat[a]
		if l.p > 0 && y >= l.p {
			// The per-try timeout bounds every try: the layer takes k.
			if check && y > l.p && !u {
				total++
				if y-l.p > floor {
					return s, best, bs, t0
				}
			}
			y = l.k
		} else {
			if y < 1<<40 && l.a < 1<<22 {
				y = add(l.a*y, l.b)
			} else {
				y = add(mul(l.a, y), l.b)
			}
			if l.t > 0 && l.t < y {
				y = l.t
			}
		}
		if y > best {
			best, bs = y, s
		}
	}
	return s, best, bs, total
}

// slotSlow is slot s of v's time, its inversions offered (with check): hopTime's, with v as
// the caller. p.total must be current.
func (p *timePass) slotSlow(v, s int32, check bool) int64 {
	w := p.c.adj.to[s]
	if check {
		p.cur = invCand{caller: v, callee: w}
	}
	return p.hopTime(s, p.v[w].t, p.v[w].leaf, check)
}

// AnalyzeTime computes the worst time to answer of every chain, the timeout inversions, and,
// when maxTime > 0, the chains over it. One pass in reverse topological order, O(V+E) on an
// acyclic graph (times the layers per hop). A call loop's services are computed together by
// repeated passes from "unbounded" down to the greatest fixpoint (a loop with no timeout on it
// stays unbounded: a request can go round it without end), at most maxLoopRounds passes, after
// which the figures are upper bounds (UpperBound).
func AnalyzeTime(g *Graph, maxTime time.Duration) *TimeAnalysis {
	return analyzeTime(g, g.time, maxTime)
}

// AnalyzeTimeWith is AnalyzeTime with the hops of t (made for g) instead of g's own.
func AnalyzeTimeWith(g *Graph, t *Timing, maxTime time.Duration) *TimeAnalysis {
	var tm *timing
	if t != nil {
		tm = &t.t
	}
	return analyzeTime(g, tm, maxTime)
}

func analyzeTime(g *Graph, tm *timing, maxTime time.Duration) *TimeAnalysis {
	c := newCore(g, nil)
	defer c.release()
	buf := nodePool.Get().(*[]nodeT)
	defer nodePool.Put(buf)
	p := newTimePass(c, tm, buf)
	p.best = make([]invCand, 0, MaxInversions+1)
	ta := &TimeAnalysis{Max: max(maxTime, 0)}
	ta.UpperBound = !p.settle(true)
	p.chains(ta)
	p.inversions(ta)
	return ta
}

// newTimePass prepares the pass over c with the hops of tm (nil: none), its per-node results in
// buf (grown as needed).
func newTimePass(c *core, tm *timing, buf *[]nodeT) *timePass {
	if cap(*buf) < c.n {
		*buf = make([]nodeT, c.n)
	}
	// Every node is written by the pass before it is read: no clearing needed.
	p := &timePass{c: c, tm: tm, v: (*buf)[:c.n], floor: -1}
	if p.tm == nil {
		p.tm = &timing{}
	}
	cc := p.tm.compile(c.adj)
	p.span, p.multi, p.flat, p.pad = cc.span, cc.multi, cc.flat, cc.pad
	return p
}

// settle computes every node's worst time, in reverse topological order, a call loop's nodes
// together (see AnalyzeTime); with check it offers the inversions. It reports false when some
// loop did not settle within maxLoopRounds (the figures are then upper bounds).
func (p *timePass) settle(check bool) bool {
	c := p.c
	var off []bool // nodes no chain from an entrypoint reaches: their hops offer no inversion
	if check {
		off = c.unreached()
	}
	on := func(v int32) bool { return check && (off == nil || !off[v]) }
	if c.cyc == nil {
		// Acyclic: every component is one node, no loop to settle.
		// The rows are laid out in c.order (see adjacency.rowEnd): walking it backwards, each
		// row ends where the next one starts.
		hi, rowEnd := int32(len(c.adj.to)), c.adj.rowEnd
		for i := len(c.order) - 1; i >= 0; i-- {
			lo := int32(0)
			if i > 0 {
				lo = rowEnd[i-1]
			}
			p.nodeSlots(c.order[i], lo, hi, on(c.order[i]))
			hi = lo
		}
		return true
	}
	settledAll := true
	for i := c.n - 1; i >= 0; {
		v := c.order[i]
		cp := c.comp[v]
		if !c.isCyc(cp) {
			p.node(v, on(v))
			i--
			continue
		}
		size := c.size(cp)
		nodes := c.order[i-size+1 : i+1]
		i -= size
		if p.simpleTimes(nodes, cp, slices.ContainsFunc(nodes, on)) {
			continue
		}
		// Too large to search: the greatest fixpoint round the loop, an upper bound.
		settledAll = false
		for _, u := range nodes {
			p.v[u] = nodeT{t: int64(Forever), succ: -1}
		}
		settled := false
		for round := 0; round < maxLoopRounds && !settled; round++ {
			settled = true
			for j := len(nodes) - 1; j >= 0; j-- {
				if p.node(nodes[j], false) {
					settled = false
				}
			}
		}
		if !settled {
			settledAll = false
		}
		for j := len(nodes) - 1; j >= 0; j-- {
			p.node(nodes[j], on(nodes[j]))
		}
	}
	return settledAll
}

// unreached marks the nodes that no chain from an effective entrypoint reaches (nil when every
// node is reached). A timeout inversion is orphaned work on a chain: a hop no chain of the graph
// takes is not one of its inversions. The common case is a workload's own-name node beside the
// Service that fronts it (bookinfo's productpage-v1 beside productpage): nobody calls it, and its
// hops were listed a second time under its name, the same layer and the same fix.
func (c *core) unreached() []bool {
	seen := make([]bool, c.n)
	stack := make([]int32, 0, len(c.ents))
	for _, en := range c.ents {
		if !seen[en.node] {
			seen[en.node] = true
			stack = append(stack, en.node)
		}
	}
	n := len(stack)
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		lo, hi := c.out(v)
		for s := lo; s < hi; s++ {
			if u := c.adj.to[s]; !seen[u] {
				seen[u] = true
				stack = append(stack, u)
				n++
			}
		}
	}
	if n == c.n {
		return nil
	}
	for v := range seen {
		seen[v] = !seen[v]
	}
	return seen
}

// entryTime is what one request at entrypoint v costs its client with k tries: the entry's
// route layers over T(v), then k tries of that.
func (p *timePass) entryTime(v int32, k int64, check bool) int64 {
	return p.entryTimeAt(v, k, p.v[v].t, check)
}

// entryTimeAt is entryTime when v takes x.
func (p *timePass) entryTimeAt(v int32, k int64, x int64, check bool) int64 {
	r, ok := p.tm.entry[v]
	if !ok {
		return mul(k, x)
	}
	worst := int64(-1)
	for ; r >= 0; r = p.tm.hops[r].next {
		// One record at a time: each may come with its own client tries.
		kr := k
		if c := p.tm.hops[r].client; c > 0 {
			kr = c
		}
		worst = max(worst, mul(kr, p.throughOne(r, x, p.v[v].leaf, check)))
	}
	return worst
}

func (p *timePass) chains(ta *TimeAnalysis) {
	c := p.c
	type ranked struct {
		idx  int
		en   entry
		time int64
	}
	rs := make([]ranked, 0, len(c.ents))
	for i, en := range c.ents {
		rs = append(rs, ranked{idx: i, en: en, time: p.entryTime(en.node, en.k, false)})
	}
	slices.SortStableFunc(rs, func(x, y ranked) int {
		switch {
		case x.time > y.time:
			return -1
		case x.time < y.time:
			return 1
		}
		return x.idx - y.idx
	})
	if ta.Max > 0 {
		for _, r := range rs {
			if r.time > int64(ta.Max) {
				ta.ViolationsTotal++
			}
		}
	}
	rs = rs[:min(len(rs), MaxChains)]
	if len(rs) > 0 {
		ta.Chains = make([]TimeChain, 0, len(rs)) // nil without entrypoints, as before
	}
	for _, r := range rs {
		ch := p.chainOf(r.en, r.time)
		ta.Chains = append(ta.Chains, ch)
		if ta.Max > 0 && ch.Time > ta.Max && len(ta.Violations) < MaxViolations {
			ta.Violations = append(ta.Violations, TimeViolation{Path: ch.Path, Time: ch.Time, Max: ta.Max,
				Message: explainTime(ch, ta.Max)})
		}
	}
	if len(ta.Chains) > 0 {
		ta.Worst, ta.WorstPath, ta.WorstUnbounded = ta.Chains[0].Time, ta.Chains[0].Path, ta.Chains[0].Unbounded
	}
}

// chainOf is entrypoint en's worst chain, which takes its client y (entryTime's).
func (p *timePass) chainOf(en entry, y int64) TimeChain {
	names := p.c.g.names
	steps, loop := p.chainFrom(en.node, false, 0, 0, false)
	ch := TimeChain{Entrypoint: names[en.node], ClientAttempts: en.k, Time: time.Duration(y)}
	ch.Path = make([]string, len(steps))
	ch.Times = make([]time.Duration, len(steps))
	for i, st := range steps {
		ch.Path[i], ch.Times[i] = names[st.v], time.Duration(st.t)
	}
	if y == int64(Forever) {
		ch.Unbounded = p.why(steps, loop)
	}
	return ch
}

// why says what leaves a chain unbounded: the hops from the first service whose time is
// unbounded down to the leaf have no timeout, or go round a loop.
func (p *timePass) why(steps []chainStep, loop bool) string {
	names := p.c.g.names
	if p.overflowed(steps) {
		return "the tries, per-try timeouts and backoff on " + joinSteps(names, steps) + " add up past " +
			Forever.String() + ", the longest time counted"
	}
	first := len(steps) - 1
	for i, st := range steps {
		if st.t == int64(Forever) && !st.leaf {
			first = i
			break
		}
	}
	tail := make([]int32, 0, len(steps)-first)
	for _, st := range steps[first:] {
		tail = append(tail, st.v)
	}
	if loop {
		return "no timeout bounds the call loop " + joinNames(names, tail, " -> ")
	}
	if len(tail) < 2 {
		return "no timeout between the client and " + names[steps[0].v] + ", and its own time is unknown"
	}
	return "no timeout on " + joinNames(names, tail, " -> ") + ", and " + names[tail[len(tail)-1]] + "'s own time is unknown"
}

// overflowed reports whether a chain that takes Forever got there by its sums and products
// passing Forever, every try on it bounded by some timeout, rather than by a try nothing bounds
// (a hop without a timeout down to a leaf, or round a loop): a policy of 100 tries of 499995h
// each is a finite time too long to count, not a missing timeout, and is said so.
func (p *timePass) overflowed(steps []chainStep) bool {
	if len(steps) == 0 {
		return false
	}
	if r, ok := p.tm.entry[steps[0].v]; ok && p.bounds(r) {
		return true // the entry's route bounds every try of the client
	}
	for i, st := range steps {
		switch {
		case st.leaf:
			return false // reached through hops without a timeout: unknown
		case st.t != int64(Forever):
			return true // a finite time, multiplied past Forever by the tries above it
		case i == len(steps)-1:
			return false // round a loop without a timeout
		}
		e, ok := p.c.g.edgeIdx[uint64(uint32(st.v))<<32|uint64(uint32(steps[i+1].v))]
		if ok && p.bounds(p.tm.hopOf(e)) {
			return true
		}
	}
	return false
}

// bounds reports whether every hop record from r on has a layer with a per-try or an overall
// timeout: the hop's time is then finite whatever it waits on (no record: nothing bounds it).
func (p *timePass) bounds(r int32) bool {
	if r < 0 {
		return false
	}
	for ; r >= 0; r = p.tm.hops[r].next {
		rec := &p.tm.hops[r]
		b := false
		for _, l := range p.tm.flat[rec.lo:rec.hi] {
			// A per-try timeout bounds the layer unless its last try is unbounded.
			b = b || l.p > 0 && l.q != int64(Forever) || l.t > 0
		}
		if !b {
			return false
		}
	}
	return true
}

func joinSteps(names []string, steps []chainStep) string {
	var b strings.Builder
	for i, st := range steps {
		if i > 0 {
			b.WriteString(" -> ")
		}
		b.WriteString(names[st.v])
	}
	return b.String()
}

func joinNames(names []string, ids []int32, sep string) string {
	var b strings.Builder
	for i, v := range ids {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(names[v])
	}
	return b.String()
}

// explainTime renders a chain over the maximum:
// "client -x2-> gateway 3.2s -> order 1.05s -> payment ? = 6.4s > maxTimeToAnswer 5s".
func explainTime(ch TimeChain, maxT time.Duration) string {
	var b strings.Builder
	n := 64 + len(ch.Unbounded)
	for _, s := range ch.Path {
		n += len(s) + 12
	}
	b.Grow(n)
	// Duration.String is inlined here and its string stays on the stack (nothing keeps it):
	// formatting costs no allocation. A chain's times repeat (each hop bounded by the same
	// per-try timeout): the last one formatted is kept in a stack buffer (at most 24 bytes:
	// "2540400h10m10.000000000s"; "unbounded" 9).
	last, lastN := time.Duration(-1), 0
	var lastB [32]byte
	if ch.ClientAttempts > 1 {
		b.WriteString("client -x")
		b.WriteString(strconv.FormatInt(ch.ClientAttempts, 10))
		b.WriteString("-> ")
	}
	for i, s := range ch.Path {
		if i > 0 {
			b.WriteString(" -> ")
		}
		b.WriteString(s)
		b.WriteByte(' ')
		if i == len(ch.Path)-1 && ch.Times[i] == Forever {
			b.WriteByte('?')
		} else {
			if d := ch.Times[i]; d != last {
				last = d
				if d == Forever {
					lastN = copy(lastB[:], Unbounded)
				} else {
					lastN = copy(lastB[:], d.String())
				}
			}
			b.Write(lastB[:lastN])
		}
	}
	b.WriteString(" = ")
	b.WriteString(FormatTime(ch.Time))
	b.WriteString(" > maxTimeToAnswer ")
	b.WriteString(FormatTime(maxT))
	if ch.Unbounded != "" {
		b.WriteString(" (")
		b.WriteString(ch.Unbounded)
		b.WriteByte(')')
	}
	return b.String()
}

// FormatTime renders a worst time: Go's duration form ("1.5s", "2m0s"), "unbounded" for Forever.
func FormatTime(d time.Duration) string {
	if d == Forever {
		return Unbounded
	}
	return d.String()
}

// inversions offers the entry hops' inversions (the edges' were offered by the pass) and
// writes the texts of the listed ones.
func (p *timePass) inversions(ta *TimeAnalysis) {
	g := p.c.g
	for _, en := range p.c.ents {
		p.cur = invCand{caller: -1, callee: en.node}
		p.entryTime(en.node, en.k, true)
	}
	ta.InversionsTotal = p.total
	slices.SortFunc(p.best, func(x, y invCand) int {
		if x.before(y) {
			return -1
		}
		return 1
	})
	for _, x := range p.best {
		h := p.tm.hops[x.rec].hop
		l := h[x.layer]
		caller := "client"
		if x.caller >= 0 {
			caller = g.names[x.caller]
		}
		callee := g.names[x.callee]
		inner := callee
		if int(x.layer)+1 < len(h) {
			inner = h[x.layer+1].Name
		}
		inv := Inversion{Caller: caller, Callee: callee, Layer: l.Name, Inner: inner, PerTry: l.PerTry, InnerTime: time.Duration(x.inner)}
		var innerDelay time.Duration
		if int(x.layer)+1 < len(h) {
			innerDelay = h[x.layer+1].Delay
		}
		inv.Message, inv.Fix = explainInversion(inv, int(x.layer)+1 < len(h), innerDelay)
		ta.Inversions = append(ta.Inversions, inv)
	}
}

// explainInversion renders an inversion and its fix: the per-try timeout that covers what it
// waits on, or the bound on that which fits the per-try timeout.
func explainInversion(inv Inversion, innerLayer bool, innerDelay time.Duration) (msg, fix string) {
	what := inv.Callee + "'s worst time"
	if innerLayer {
		what = inv.Inner + "'s worst time on " + inv.Callee
	}
	msg = inv.Caller + " -> " + inv.Callee + ": " + inv.Layer + " per-try timeout " + FormatTime(inv.PerTry) +
		" < " + what + " " + FormatTime(inv.InnerTime) + ": " + inv.Caller + " retries while " + inv.Callee + " still works on the abandoned try"
	bound := "a timeout of at most " + FormatTime(inv.PerTry) + " on " + inv.Callee + "'s own calls"
	if innerLayer {
		bound = inv.Inner + " finishing within " + FormatTime(inv.PerTry) + " (its tries x per-try timeout + backoff, or its timeout)"
		if innerDelay > 0 {
			// Held outside its tries and timeout (Istio's fault.delay): the bound must cover it.
			bound = inv.Inner + " finishing within " + FormatTime(inv.PerTry) + " (its fault delay " + FormatTime(innerDelay) +
				" + its tries x per-try timeout + backoff, or + its timeout)"
		}
	}
	if inv.InnerTime == Forever {
		fix = "bound " + what + ": " + bound
		return msg, fix
	}
	fix = inv.Layer + " per-try timeout for " + inv.Callee + " >= " + FormatTime(inv.InnerTime) + ", or " + bound
	return msg, fix
}
