package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Limits on what Analyze lists, matching the RetryPolicy status.
const (
	MaxChains     = 50
	MaxViolations = 20
)

// MaxLoadWork bounds the work of the per-entrypoint loads (entrypoints x (services + edges)):
// a thousand entrypoints over a 10k-service mesh would cost a hundred times the rest of Analyze.
// Real service graphs (tens of entrypoints, hundreds of services) are far below it.
const MaxLoadWork = 1 << 17

// ServiceLoad is a number of requests at one service.
type ServiceLoad struct {
	Service  string `json:"service"`
	Requests int64  `json:"requests"`
}

// Chain is the worst path from one entrypoint.
type Chain struct {
	Entrypoint     string `json:"entrypoint"`
	ClientAttempts int64  `json:"clientAttempts"`
	// Amplification is ClientAttempts times the worst product of attempts below the entrypoint.
	Amplification int64    `json:"amplification"`
	Path          []string `json:"path"`
}

// Violation is a path over the cap, with the planner's fix for it.
type Violation struct {
	Path []string `json:"path"`
	// Factors are the client attempts at Path[0], then each edge's attempts along Path.
	Factors       []int64 `json:"factors"`
	Amplification int64   `json:"amplification"`
	// Message explains the product: "client -x2-> gateway -x3-> order = 6 > cap 4".
	Message string `json:"message"`
	// Suggestion is this chain's fix: the whole-graph planner's lowered values on its path, in
	// path order ("gateway: order=2; order: payment=1"), under which it is within the cap; or,
	// when its entrypoint's client attempts alone exceed the cap, why no rewrite fits it ("no
	// rewrite fits: client attempts 5 at entrypoint api exceed cap 4"). Chains from other
	// entrypoints keep their own fix.
	Suggestion string `json:"suggestion"`
}

// Analysis is everything Analyze computes for one graph and cap.
type Analysis struct {
	Cap      int64
	Services int
	Edges    int
	// Amplification is the worst product of client attempts and attempts along any path from an
	// entrypoint; Saturated when a retry cycle makes it unbounded.
	Amplification int64
	// Bounded is false when the graph has a retry cycle (a cycle with an edge of attempts > 1).
	Bounded bool
	// WorstPath is the path of the worst chain.
	WorstPath []string
	// WorstCaseLoad is the busiest service: the most requests one request at one entrypoint (the
	// entrypoint for which it is largest; never a sum over entrypoints) can cause there when
	// everything below fails, fan-out and the client's attempts included. Any cycle reachable
	// from the entrypoint makes the load of its services (and all below) saturate: a request can
	// go round it without end. See LoadIsBound.
	WorstCaseLoad ServiceLoad
	// LoadEntrypoint is the entrypoint one request at which causes WorstCaseLoad ("" when there
	// is none, or LoadIsBound).
	LoadEntrypoint string
	// LoadIsBound is true when the graph has so many entrypoints that a pass per entrypoint
	// would cost more than MaxLoadWork edge visits: WorstCaseLoad is then the load of one request
	// at every entrypoint at once (LoadEntrypoint ""), an upper bound of the per-entrypoint figure.
	LoadIsBound bool
	// Entrypoints are the effective entrypoints: the explicit ones, else the defaults.
	Entrypoints []Entrypoint
	// Chains has one entry per entrypoint, worst first, ties by name; at most MaxChains.
	Chains []Chain
	// Cycle is a concrete retry cycle, e.g. [a b c a], when !Bounded: a service that calls
	// itself with retries ([a a]); other cycles are not call loops (cycles.go).
	Cycle []string
	// Cycles name the graph's cycles (its strongly connected components), in topological order;
	// nil when it has none or when !Bounded.
	Cycles []CycleReport
	// AmplificationIsBound is true when the worst chain runs through a cycle too large to
	// search exactly: Amplification is then an upper bound (cycles.go).
	AmplificationIsBound bool
	// LoadUnbounded says why WorstCaseLoad is unbounded ("" when it is not): a service that
	// calls itself, or a cycle too large to search.
	LoadUnbounded string
	// Violations are the over-cap paths, worst first, at most MaxViolations (see Analyze).
	Violations []Violation
	// ViolationsTotal is how many distinct over-cap paths there are, listed or not: when it is
	// larger than len(Violations), only the worst MaxViolations are listed.
	ViolationsTotal int
}

// WithinCap reports whether every chain is bounded and within the cap.
func (a *Analysis) WithinCap() bool { return a.Bounded && a.Amplification <= a.Cap }

// Analyze computes amplification, worst paths, chains, worst-case load, retry cycles and
// violations, in O(V+E) plus the cost of listing at most MaxViolations paths (and, with several
// entrypoints, one pass of the loads per entrypoint below it).
//
// Ties, one rule everywhere: declaration order. Among paths of equal amplification the one that
// starts at the entrypoint listed first (the explicit entrypoints in the order set, else the
// default ones in the order their services were first named), then takes at each hop the edge
// declared first. So the worst path is the chain of the first-listed entrypoint among the worst;
// below a service a path goes on along the first declared edge among those with the worst product
// below (and never stops early); into a service it comes along the first declared edge among
// those with the worst product (a service that is itself an entrypoint with that product starts
// there); violations are listed worst first, then in that order, so the first violation is the
// worst path; among equal loads, the service named first, then the entrypoint listed first. The
// workload builder declares services in workload order (namespace, name, kind) and each
// workload's edges in its annotation's order, so in the CLI "declared first" is "the workload
// whose name sorts first, the upstream written first".
//
// Violations: for every edge that lies on some over-cap path, the worst path through it (worst
// path into its source, the edge, worst path below its target) is over the cap; these paths,
// deduplicated, worst first (ties by path), at most MaxViolations, are the violations, together
// with every over-cap chain (which covers an entrypoint with too many client attempts and no
// edges). So a simple chain gives one violation, a diamond one per branch, and every edge that
// must change appears in some violation before truncation. When the graph has a retry cycle
// the only violation is the cycle, since every number below it is unbounded.
func Analyze(g *Graph, cap int64) *Analysis { return analyze(g, cap, true) }

// analyze is Analyze; with fused false it takes the plain route everywhere (separate forward
// pass, violations deduplicated by comparing paths, the planner's own pass), which the tests
// compare the fused route against.
func analyze(g *Graph, cap int64, fused bool) *Analysis {
	c := newCore(g, nil)
	defer c.release()
	selfRetry := int32(-1)
	if c.anyRetry {
		// A cycle is not a call loop: the worst case over chains that visit a service at most
		// once (cycles.go), unless a service calls itself with retries. (A cycle without a
		// retry multiplies by 1: the passes below give the same products; only its loads are
		// taken over chains, below.)
		if selfRetry, _ = c.selfLoops(); selfRetry < 0 {
			return c.analyzeSimple(g, cap)
		}
	}
	c.backward()
	a := &Analysis{Cap: cap, Services: c.n, Edges: len(g.eFrom), Bounded: !c.anyRetry}

	for _, en := range c.ents {
		a.Entrypoints = append(a.Entrypoints, Entrypoint{Service: g.names[en.node], ClientAttempts: en.k})
	}
	// Chains: keep the MaxChains worst entrypoints (a sorted window, not a sort of all of
	// them: a mesh can have thousands), build paths only for those.
	before := func(x, y rankedEntry) bool {
		return x.amp > y.amp || (x.amp == y.amp && x.idx < y.idx)
	}
	rs := make([]rankedEntry, 0, min(len(c.ents), MaxChains)+1)
	for i, en := range c.ents {
		x := rankedEntry{entry: en, idx: int32(i), amp: mul(en.k, c.v[en.node].d)}
		if len(rs) == MaxChains && !before(x, rs[MaxChains-1]) {
			continue
		}
		i := len(rs)
		rs = append(rs, x)
		for i > 0 && before(x, rs[i-1]) {
			rs[i] = rs[i-1]
			i--
		}
		rs[i] = x
		rs = rs[:min(len(rs), MaxChains)]
	}
	if len(rs) > 0 {
		a.Chains = make([]Chain, 0, len(rs))
	}
	for i, r := range rs {
		sn, ss := c.suffix(r.node)
		a.Chains = append(a.Chains, Chain{Entrypoint: g.names[r.node], ClientAttempts: r.k, Amplification: r.amp, Path: c.names(sn)})
		rs[i].nodes, rs[i].slots = sn, ss
	}
	if len(a.Chains) > 0 {
		a.Amplification = a.Chains[0].Amplification
		a.WorstPath = a.Chains[0].Path
	}
	// The backward pass gave the amplification, so the forward pass knows whether it must also
	// collect the violations' candidates and the planner's values.
	over := a.Bounded && a.Amplification > cap
	var top *topK
	if over {
		top = newTopK(MaxViolations, cap)
	}
	if c.cyc == nil && fused {
		c.forwardAcyclic(max(cap, 1), top)
	} else {
		c.forward(true)
	}
	a.WorstCaseLoad, a.LoadEntrypoint, a.LoadIsBound = c.worstLoad()
	if c.cyc != nil && a.Bounded {
		sp := newSimple(c)
		a.WorstCaseLoad, a.LoadEntrypoint, a.LoadIsBound, a.LoadUnbounded = sp.worstLoad()
		a.Cycles = sp.cycles()
	}
	if a.WorstCaseLoad.Requests == Saturated && a.LoadUnbounded == "" {
		a.LoadUnbounded = "the product of attempts and calls passes 2^63-1"
	}
	if !a.Bounded {
		a.Amplification = Saturated
		u := c.adj.from[selfRetry]
		cyc := []int32{u, u}
		a.LoadUnbounded = fmt.Sprintf("%s calls itself with %d attempts: a request can go round without end", g.names[u], c.att[selfRetry])
		a.Cycle = c.names(cyc)
		factors := []int64{1}
		var fix []string
		for i := 0; i+1 < len(cyc); i++ {
			s := c.slotBetween(cyc[i], cyc[i+1])
			factors = append(factors, c.att[s])
			if c.att[s] > 1 {
				fix = append(fix, g.names[cyc[i]]+": "+g.names[cyc[i+1]]+"=1")
			}
		}
		a.Violations = []Violation{{
			Path: a.Cycle, Factors: factors, Amplification: Saturated,
			Message:    "retry cycle " + renderPath(a.Cycle, factors[1:]) + ": amplification unbounded > cap " + strconv.FormatInt(cap, 10),
			Suggestion: strings.Join(fix, "; "),
		}}
		a.ViolationsTotal = 1
		return a
	}
	if over {
		a.ViolationsTotal = c.countViolations(cap)
		a.Violations = c.violations(cap, top, rs)
	}
	return a
}

// worstLoad is the busiest (service, entrypoint) pair: the most requests one request at one
// entrypoint causes at one service. With one entrypoint the forward pass's loads are that
// entrypoint's; with several, each gets its own pass over what it reaches. h, pred and the
// forward pass's loads must be final.
func (c *core) worstLoad() (ServiceLoad, string, bool) {
	names := c.g.names
	var best ServiceLoad
	// Ties: the service named first (lowest id), then the entrypoint listed first: the
	// entrypoints are visited in order and a later one must be strictly larger, or equal at a
	// service named earlier.
	bestV, bestE := int32(-1), int32(-1)
	better := func(l int64, v int32, _ int32) bool {
		if l != best.Requests {
			return l > best.Requests
		}
		return v < bestV
	}
	if len(c.ents) == 0 {
		return best, "", false
	}
	bound := int64(len(c.ents))*int64(c.n+len(c.adj.to)) > MaxLoadWork
	if len(c.ents) == 1 || bound {
		en := c.ents[0].node
		for v := range c.v {
			if l := c.v[v].load; l > 0 && (best.Service == "" || better(l, int32(v), en)) {
				best, bestV = ServiceLoad{Service: names[v], Requests: l}, int32(v)
			}
		}
		if bound {
			return best, "", true
		}
		return best, names[en], false
	}
	pos := make([]int32, c.n) // node -> index in c.order
	for i, v := range c.order {
		pos[v] = int32(i)
	}
	load := make([]int64, c.n)
	to, ac := c.adj.to, c.adj.attCal
	for _, en := range c.ents {
		clear(load)
		load[en.node] = en.k
		i := int(pos[en.node])
		for cp := c.comp[en.node]; i > 0 && c.comp[c.order[i-1]] == cp; i-- {
			// The entrypoint's component starts here.
		}
		for i < c.n {
			v := c.order[i]
			cp := c.comp[v]
			if c.isCyc(cp) {
				// Any load into a cycle goes round it without end.
				nodes := c.order[i : i+c.size(cp)]
				i += len(nodes)
				reached := false
				for _, u := range nodes {
					reached = reached || load[u] > 0
				}
				if !reached {
					continue
				}
				for _, u := range nodes {
					load[u] = Saturated
				}
				for _, u := range nodes {
					lo, hi := c.out(u)
					for s := lo; s < hi; s++ {
						load[to[s]] = Saturated
					}
				}
				continue
			}
			i++
			lv := load[v]
			if lv == 0 {
				continue
			}
			lo, hi := c.out(v)
			for s := lo; s < hi; s++ {
				load[to[s]] = add(load[to[s]], mul(lv, ac[s]))
			}
		}
		for v, l := range load {
			if l > 0 && (best.Service == "" || better(l, int32(v), en.node)) {
				best, bestV, bestE = ServiceLoad{Service: names[v], Requests: l}, int32(v), en.node
			}
		}
	}
	return best, names[bestE], false
}

// countViolations is how many distinct paths the violations are drawn from (see Analyze): the
// worst paths through the over-cap edges, and the over-cap chains. h, d, pred and succ must be
// final. On an acyclic graph the edges that share a worst path are a run (see runFirsts): edge
// s = (u, v) and the next one on its path, succ[v], share it exactly when pred[v] = s; so the
// count is the over-cap edges less those links, plus the over-cap chains that are not an edge's
// path (an entrypoint with no edge below, or one the worst path into comes from above). With a
// cycle the paths are built and compared.
func (c *core) countViolations(cap int64) int {
	to, from, att := c.adj.to, c.adj.from, c.att
	n := 0
	if c.cyc == nil {
		if c.fused {
			// forwardAcyclic counted the over-cap edges; a link is a node t whose worst path in
			// (pred[t]) goes on (succ[t]) over the cap: O(V).
			n = c.nOver
			for t := range c.n {
				if c.pred[t] >= 0 && c.succ[t] >= 0 && mul(c.v[t].h, c.v[t].d) > cap {
					n--
				}
			}
		} else {
			for s := range to {
				if mul(mul(c.v[from[s]].h, att[s]), c.v[to[s]].d) <= cap {
					continue
				}
				n++
				if t := to[s]; c.pred[t] == int32(s) && c.succ[t] >= 0 {
					n-- // the same path as the next edge's
				}
			}
		}
		for _, en := range c.ents {
			if mul(en.k, c.v[en.node].d) > cap && (c.succ[en.node] < 0 || c.pred[en.node] >= 0) {
				n++
			}
		}
		return n
	}
	seen := map[string]bool{}
	for s := range to {
		u, t := from[s], to[s]
		if c.comp[u] == c.comp[t] || mul(mul(c.v[u].h, att[s]), c.v[t].d) <= cap {
			continue
		}
		p, _, _ := c.throughEdge(int32(s))
		seen[pathKey(p)] = true
	}
	for _, en := range c.ents {
		if mul(en.k, c.v[en.node].d) > cap {
			p, _ := c.suffix(en.node)
			seen[pathKey(p)] = true
		}
	}
	return len(seen)
}

// rankedEntry is an entrypoint with the amplification of its worst chain.
type rankedEntry struct {
	entry
	idx int32 // in c.ents
	amp int64
	// The worst path from it, once listed.
	nodes, slots []int32
}

type cand struct {
	amp int64
	e   int32 // edge id: ties go by declaration order
	s   int32 // its slot
}

// before orders candidates worst first, then by edge id (declaration order).
func (x cand) before(y cand) bool {
	return x.amp > y.amp || (x.amp == y.amp && x.e < y.e)
}

// topK keeps the k best over-cap candidates offered, sorted, without allocating per offer: a
// sorted array with insertion is cheaper than a heap for k = 20, and most offers are rejected by
// one comparison with the current worst.
type topK struct {
	k    int
	cap  int64
	best []cand
}

func newTopK(k int, cap int64) *topK { return &topK{k: k, cap: cap, best: make([]cand, 0, k+1)} }

func (t *topK) full() bool  { return len(t.best) == t.k }
func (t *topK) worst() cand { return t.best[len(t.best)-1] }

func (t *topK) offer(x cand) {
	if len(t.best) == t.k && !x.before(t.best[t.k-1]) {
		return
	}
	i := len(t.best)
	t.best = append(t.best, x)
	for i > 0 && x.before(t.best[i-1]) {
		t.best[i] = t.best[i-1]
		i--
	}
	t.best[i] = x
	if len(t.best) > t.k {
		t.best = t.best[:t.k]
	}
}

// offerAll offers every over-cap edge; h and d must be final.
func (c *core) offerAll(top *topK) {
	for v := range c.n {
		c.offerOut(top, int32(v))
	}
}

// violations lists the over-cap paths: the worst path through each of the best candidates,
// one per distinct path, then the over-cap chains not already listed; worst first, at most
// MaxViolations. top holds the candidates forwardAcyclic collected, one per distinct path as far
// as it could tell, checked here against the rest of each run; or, after the plain forward pass
// (graphs with cycles), it is filled here and the paths are deduplicated by comparing them.
func (c *core) violations(cap int64, top *topK, chains []rankedEntry) []Violation {
	// Paths are gathered as node ids and ordered; names, messages and suggestions are built
	// only for those listed (up to 50 over-cap chains can join the MaxViolations edge paths).
	type found struct {
		path, slots []int32
		factors     []int64
		amp         int64
	}
	seen := map[string]bool{}
	var fs []found
	addPath := func(path []int32, factors []int64, slots []int32) {
		key := pathKey(path)
		if seen[key] {
			return
		}
		seen[key] = true
		fs = append(fs, found{path: path, slots: slots, factors: factors, amp: Product(factors)})
	}
	if c.fused {
		for _, x := range c.runFirsts(top).best {
			addPath(c.throughEdge(x.s))
		}
	} else {
		// Several edges can share their worst path: take more candidates until MaxViolations
		// distinct paths are found or none are left.
		c.offerAll(top)
		for k, done := MaxViolations, 0; len(fs) < MaxViolations; k *= 4 {
			if k > top.k {
				top = newTopK(k, cap)
				c.offerAll(top)
			}
			best := top.best
			for _, x := range best[done:] {
				if len(fs) == MaxViolations {
					break
				}
				addPath(c.throughEdge(x.s))
			}
			if len(best) < k {
				break // every over-cap edge has been seen
			}
			done = len(best)
		}
	}
	for _, ch := range chains {
		if ch.amp <= cap {
			break
		}
		factors := make([]int64, 0, len(ch.nodes))
		factors = append(factors, ch.k)
		for _, s := range ch.slots {
			factors = append(factors, c.att[s])
		}
		addPath(ch.nodes, factors, ch.slots)
	}
	names := c.g.names
	entryOf := make(map[int32]int, len(c.ents))
	for i, en := range c.ents {
		entryOf[en.node] = i
	}
	entryIdx := func(v int32) int {
		if i, ok := entryOf[v]; ok {
			return i
		}
		return len(c.ents)
	}
	slices.SortFunc(fs, func(x, y found) int {
		if x.amp != y.amp {
			if x.amp > y.amp {
				return -1
			}
			return 1
		}
		// Declaration order (see Analyze): the entrypoint listed first, then hop by hop the
		// edge declared first.
		if a, b := entryIdx(x.path[0]), entryIdx(y.path[0]); a != b {
			return a - b
		}
		for i := range min(len(x.slots), len(y.slots)) {
			if a, b := c.adj.edge[x.slots[i]], c.adj.edge[y.slots[i]]; a != b {
				return int(a - b)
			}
		}
		return len(x.path) - len(y.path)
	})
	fs = fs[:min(len(fs), MaxViolations)]

	// Each violation's fix is its own: the whole-graph plan's values on its path (what
	// PlanRewrite, and so analyze -o patch, changes there), which bring it within the cap even
	// when some other entrypoint's chains cannot be (PlanRewrite's Unfit); a chain from an
	// entrypoint whose client attempts alone exceed the cap then says why that is not enough
	// (the clients' own attempts, which no object here sets). Before, such a chain read the
	// reason alone while the patch lowered the edges below it.
	pcap := max(cap, 1)
	var planned []int64
	if !c.fused {
		planned, _, _ = c.planRewrite(pcap, false)
	}
	// All names in one array and all messages and suggestions in one buffer, cut into
	// per-violation pieces: the 20 paths can be thousands of services and ~100 KB of text
	// together, and two allocations per violation cost more than writing the text.
	nNames, nText := 0, 0
	for _, f := range fs {
		nNames += len(f.path)
		nText += 64
		for _, v := range f.path {
			nText += 2*len(names[v]) + 16
		}
	}
	allNames := make([]string, nNames)
	text := make([]byte, 0, nText)
	type cut struct{ msg, sug int } // ends of the message and the suggestion in text
	cuts := make([]cut, len(fs))
	vs := make([]Violation, len(fs))
	for i, f := range fs {
		path := allNames[:len(f.path):len(f.path)]
		allNames = allNames[len(f.path):]
		for j, v := range f.path {
			path[j] = names[v]
		}
		vs[i] = Violation{Path: path, Factors: f.factors, Amplification: f.amp}
		text = appendExplain(text, path, f.factors, f.amp, cap, true)
		cuts[i].msg = len(text)
		reason := ""
		if i, ok := entryOf[f.path[0]]; ok {
			reason = c.entryReason(c.ents[i], pcap)
		}
		at := len(text)
		if planned != nil {
			text = c.appendSuggest(text, f.slots, func(s int32) int64 { return planned[s] })
		} else {
			text = c.appendSuggestAcyclic(text, f.slots, pcap)
		}
		if reason != "" {
			if len(text) > at {
				text = append(text, "; "...)
			}
			text = append(text, reason...)
		}
		cuts[i].sug = len(text)
	}
	all, start := string(text), 0
	for i, ct := range cuts {
		vs[i].Message, vs[i].Suggestion = all[start:ct.msg], all[ct.msg:ct.sug]
		start = ct.sug
	}
	return vs
}

// Runs. The worst path through an edge e = (u, v) is prefix(u) + e + suffix(v). The edges that
// have the same worst path P are consecutive on P: e0 = pred[w] and e1 = succ[w] through one node
// w (the path through e1 is prefix(w) + e1 + suffix, and prefix(w) ends with e0 exactly when
// pred[w] = e0). Such a run shares one amplification; the candidates are taken worst first, then
// in declaration order, so P is listed for its run's edge declared first, and only that edge
// needs to be offered. forwardAcyclic checks the part of the run before the edge (runFirst);
// the part after it is known only once pred is final, and runFirsts checks it.

// laterInRun reports whether an edge after slot s on its run was declared before it.
func (c *core) laterInRun(s int32) bool {
	edge, to := c.adj.edge, c.adj.to
	e := edge[s]
	for cur, v := s, to[s]; c.pred[v] == cur && c.succ[v] >= 0; v = to[cur] {
		cur = c.succ[v]
		if edge[cur] < e {
			return true
		}
	}
	return false
}

// earlierInRun reports whether an edge before slot s on its run was declared before it.
func (c *core) earlierInRun(s int32) bool {
	u := c.adj.from[s]
	return c.succ[u] == s && c.pred[u] >= 0 && c.runFirst(u) < c.adj.edge[s]
}

// runFirsts drops from top the candidates that are not the first declared edge of their run. If
// that leaves room that other edges could fill, it collects the candidates again, exactly (rare:
// it takes a path whose edges were declared out of order).
func (c *core) runFirsts(top *topK) *topK {
	full := top.full()
	kept := top.best[:0]
	for _, x := range top.best {
		if !c.laterInRun(x.s) {
			kept = append(kept, x)
		}
	}
	if len(kept) == len(top.best) || !full {
		top.best = kept
		return top
	}
	top = newTopK(top.k, top.cap)
	to, att, edge := c.adj.to, c.att, c.adj.edge
	for v := range int32(c.n) {
		hv := c.v[v].h
		if hv == 0 {
			continue
		}
		lo, hi := c.out(v)
		for s := lo; s < hi; s++ {
			x := cand{amp: mul(mul(hv, att[s]), c.v[to[s]].d), e: edge[s], s: s}
			if x.amp <= top.cap || (top.full() && !x.before(top.worst())) || c.earlierInRun(s) || c.laterInRun(s) {
				continue
			}
			top.offer(x)
		}
	}
	return top
}

// pathKey encodes a path of ids as a map key without formatting numbers.
func pathKey(p []int32) string {
	b := make([]byte, 4*len(p))
	for i, v := range p {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return string(b)
}

// Explain renders a chain from outside the cluster, the form used in violations:
// "client -x2-> gateway -x3-> order -x3-> payment = 18 > cap 4". factors are the client attempts
// then each edge's attempts (len(path) values).
func Explain(path []string, factors []int64, cap int64) string {
	return explain(path, factors, Product(factors), cap, true)
}

// ExplainPath renders a path that starts at a service, the form used at admission:
// "gateway -x3-> order -x3-> payment = 9 > cap 4". factors are as for Explain; the
// "client -xK->" prefix is written only when K > 1, so the factors shown always multiply to the
// product shown.
func ExplainPath(path []string, factors []int64, cap int64) string {
	return explain(path, factors, Product(factors), cap, len(factors) > 0 && factors[0] > 1)
}

func explain(path []string, factors []int64, amp, cap int64, client bool) string {
	// One buffer sized up front: violation paths can be hundreds of hops long.
	return string(appendExplain(make([]byte, 0, pathLen(path)+48), path, factors, amp, cap, client))
}

func appendExplain(b []byte, path []string, factors []int64, amp, cap int64, client bool) []byte {
	var edges []int64
	if len(factors) > 0 {
		edges = factors[1:]
	}
	if client && len(factors) > 0 {
		b = append(b, "client -x"...)
		b = strconv.AppendInt(b, factors[0], 10)
		b = append(b, "-> "...)
	}
	b = appendPath(b, path, edges)
	b = append(b, " = "...)
	if amp == Saturated {
		b = append(b, Unbounded...)
	} else {
		b = strconv.AppendInt(b, amp, 10)
	}
	if amp > cap {
		b = append(b, " > cap "...)
	} else {
		b = append(b, " <= cap "...)
	}
	return strconv.AppendInt(b, cap, 10)
}

// renderPath renders "a -x3-> b -x1-> c" with edges[i] the attempts of path[i]->path[i+1].
func renderPath(path []string, edges []int64) string {
	return string(appendPath(make([]byte, 0, pathLen(path)), path, edges))
}

// pathLen is about the length of path rendered by appendPath (exact for one-digit attempts).
func pathLen(path []string) int {
	n := 7 * len(path)
	for _, s := range path {
		n += len(s)
	}
	return n
}

func appendPath(b []byte, path []string, edges []int64) []byte {
	for i, s := range path {
		if i > 0 {
			b = append(b, " -x"...)
			if i-1 < len(edges) {
				b = strconv.AppendInt(b, edges[i-1], 10)
			} else {
				b = append(b, '?')
			}
			b = append(b, "-> "...)
		}
		b = append(b, s...)
	}
	return b
}

// Unbounded is how a saturated product or load reads in every human-readable output: a retry
// cycle (or any cycle, for loads) makes it so, and a product past 2^63-1 is beyond any cap.
// JSON and the API keep the saturated integer, with bounded false where it is a cycle.
const Unbounded = "unbounded"

// FormatAmount renders a product or a load; the saturated value reads "unbounded".
func FormatAmount(x int64) string {
	if x == Saturated {
		return Unbounded
	}
	return strconv.FormatInt(x, 10)
}
