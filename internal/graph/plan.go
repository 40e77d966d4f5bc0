package graph

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrNoRewriteFits is returned (wrapped, with the reason) when no lowering of attempts brings
// every path within the cap.
var ErrNoRewriteFits = errors.New("no rewrite fits")

// EdgeKey names an edge.
type EdgeKey struct{ From, To string }

// Change is one edge whose attempts the plan lowers.
type Change struct {
	From, To string
	Old, New int64
}

// Plan is a rewrite: new attempts per edge. It never raises a value.
type Plan struct {
	Cap int64
	// Fits is false when no rewrite brings every path within the cap; Reason says why.
	Fits   bool
	Reason string
	// Unfit are the entrypoints whose client attempts alone exceed the cap, most attempts first
	// (the one listed first on a tie; PlanRewrite only): no rewrite fits a chain from one of
	// them, and the plan lowers the edges below them as far as the rule goes. Every chain from
	// another entrypoint is within the cap under the plan.
	Unfit []Entrypoint
	// OverFloors are the entrypoints whose client attempts times the worst product of floors
	// below them (PlanRewriteFloors; 1 without) exceed the cap: no plan fits a chain from them
	// with the edges at their floors (in the order of the graph's effective entrypoints).
	OverFloors []string
	// Attempts holds the new attempts of every edge the plan covers: all edges for PlanRewrite,
	// the service's outgoing edges for PlanLocal.
	Attempts map[EdgeKey]int64
	// Changes are the edges whose attempts drop, in topological order (PlanRewrite) or
	// declaration order (PlanLocal).
	Changes []Change
	// Floor is, for a time plan that does not fit (JudgeTime), the chain Reason names: the
	// worst one with the edge at 1 attempt, whose timeouts and other attempts are what to
	// change. nil otherwise.
	Floor *TimeChain
}

// New returns the planned attempts of from->to and whether the plan covers that edge.
func (p *Plan) New(from, to string) (int64, bool) {
	v, ok := p.Attempts[EdgeKey{from, to}]
	return v, ok
}

// Changed reports whether the plan lowers from->to, and to what.
func (p *Plan) Changed(from, to string) (int64, bool) {
	for _, ch := range p.Changes {
		if ch.From == from && ch.To == to {
			return ch.New, true
		}
	}
	return 0, false
}

// appendSuggest appends the planned changes on a path given by its slots to b:
// "gateway: order=2; order: payment=1". planned gives the planned attempts of a slot.
func (c *core) appendSuggest(b []byte, slots []int32, planned func(s int32) int64) []byte {
	first := true
	for _, s := range slots {
		if p := planned(s); p < c.adj.att[s] {
			b = c.appendChange(b, s, p, first)
			first = false
		}
	}
	return b
}

// appendSuggestAcyclic is appendSuggest with plannedAcyclic, without a closure call per slot.
func (c *core) appendSuggestAcyclic(b []byte, slots []int32, cap int64) []byte {
	first := true
	for _, s := range slots {
		if p := c.plannedAcyclic(s, cap); p < c.adj.att[s] {
			b = c.appendChange(b, s, p, first)
			first = false
		}
	}
	return b
}

// appendChange appends "from: to=p" for slot s, after "; " unless it is the first.
func (c *core) appendChange(b []byte, s int32, p int64, first bool) []byte {
	if !first {
		b = append(b, "; "...)
	}
	names := c.g.names
	b = append(b, names[c.adj.from[s]]...)
	b = append(b, ": "...)
	b = append(b, names[c.adj.to[s]]...)
	b = append(b, '=')
	return strconv.AppendInt(b, p, 10)
}

// PlanRewrite plans the whole graph: in topological order each edge keeps
// a'(u,v) = min(a(u,v), floor(cap/h'(u))), at least 1, where h'(u) is the worst product into u
// under the new values (at least 1, so unreachable services are planned as if called once).
// Retries stay nearest the entrypoints. Edges inside a cycle drop to 1: any retry there is
// unbounded. When an entrypoint's client attempts alone exceed the cap no rewrite fits: the plan
// (everything lowered as far as the rule goes) is returned with Fits false and an error wrapping
// ErrNoRewriteFits.
func PlanRewrite(g *Graph, cap int64) (*Plan, error) { return PlanRewriteClients(g, cap, nil) }

// PlanRewriteClients is PlanRewrite as if the entrypoints clients names had those client
// attempts (another fix lowers them: a gateway route's retries on an entrypoint, which the graph
// holds as client attempts). A name that is no effective entrypoint is an error; so is a value
// below 1.
func PlanRewriteClients(g *Graph, cap int64, clients map[string]int64) (*Plan, error) {
	return PlanRewriteFloors(g, cap, clients, nil)
}

// PlanRewriteFloors is PlanRewriteClients where some edges cannot carry fewer than floors gives
// them (a mesh layer no object's field lowers, a Gateway API rule's 2 tries: the fewest the
// edge's fix can leave, mesh.Fewest). Each edge keeps
// a'(u,v) = min(a(u,v), floor(cap / (h'(u) x m(v)))), at least 1, where m(v) is the worst
// product of floors on the paths below v (1 at a leaf): the room the edges below cannot give up
// is kept for them, so that whenever every chain fits with each edge at its floor, the plan
// fits. An edge planned below its floor (no fit) passes its floor on to h', what it carries.
// With no floor above 1 it is PlanRewriteClients. A floor below 1 or on an edge the graph does
// not have is an error.
func PlanRewriteFloors(g *Graph, cap int64, clients map[string]int64, floors map[EdgeKey]int64) (*Plan, error) {
	cap = max(cap, 1)
	c := newCore(g, nil)
	defer c.release()
	if len(clients) > 0 {
		// c.ents may be the graph's own slice: replace it, never write into it.
		ents := slices.Clone(c.ents)
		for name, k := range clients {
			id, ok := g.ids[name]
			i := slices.IndexFunc(ents, func(en entry) bool { return en.node == id })
			if !ok || i < 0 {
				return nil, fmt.Errorf("planning with client attempts %d at %q: %q is not an entrypoint of the graph", k, name, name)
			}
			if k < 1 {
				return nil, fmt.Errorf("planning with client attempts %d at entrypoint %q: client attempts must be at least 1", k, name)
			}
			ents[i].k = k
		}
		c.ents = ents
	}
	var fl []int64
	for k, f := range floors {
		if f == 1 {
			continue
		}
		from, fok := g.ids[k.From]
		to, tok := g.ids[k.To]
		found := false
		if fok && tok {
			lo, hi := c.out(from)
			for s := lo; s < hi; s++ {
				if c.adj.to[s] == to {
					if fl == nil {
						fl = make([]int64, len(c.adj.att))
					}
					fl[s], found = f, true
				}
			}
		}
		if !found || f < 1 {
			return nil, fmt.Errorf("planning with floor %d on edge %s -> %s: the floor must be at least 1, on an edge of the graph", f, k.From, k.To)
		}
	}
	att, order, reason := c.planRewriteFloors(cap, true, fl)
	p := &Plan{Cap: cap, Fits: reason == "", Reason: reason, Unfit: c.unfitEntries(cap), Attempts: make(map[EdgeKey]int64, len(att))}
	var mb []int64
	if fl != nil {
		mb = c.below(fl)
	}
	for _, en := range c.ents {
		m := int64(1)
		if mb != nil {
			m = mb[en.node]
		}
		if mul(en.k, m) > cap && !slices.Contains(p.OverFloors, g.names[en.node]) {
			p.OverFloors = append(p.OverFloors, g.names[en.node])
		}
	}
	a := c.adj
	for _, s := range order {
		if att[s] < a.att[s] {
			p.Changes = append(p.Changes, Change{From: g.names[a.from[s]], To: g.names[a.to[s]], Old: a.att[s], New: att[s]})
		}
	}
	for s := range att {
		p.Attempts[EdgeKey{g.names[a.from[s]], g.names[a.to[s]]}] = att[s]
	}
	if !p.Fits {
		return p, fmt.Errorf("%w%s", ErrNoRewriteFits, strings.TrimPrefix(p.Reason, "no rewrite fits"))
	}
	return p, nil
}

// planRewrite returns the planned attempts per slot, the slots in the order planned, and
// why no rewrite fits ("" when one does).
// It reuses c's components and entrypoints (which do not depend on attempts).
func (c *core) planRewrite(cap int64, wantOrder bool) (att []int64, order []int32, reason string) {
	return c.planRewriteFloors(cap, wantOrder, nil)
}

// below is, per node, the worst product of floors (fl, per slot; 0 is 1) on the paths from it
// down, 1 at a leaf; edges inside a cyclic component are planned to 1 and count 1. One pass in
// reverse topological order.
func (c *core) below(fl []int64) []int64 {
	to := c.adj.to
	m := make([]int64, c.n)
	for i := c.n; i > 0; {
		cp := c.comp[c.order[i-1]]
		nodes := c.order[i-c.size(cp) : i]
		i -= len(nodes)
		worst := int64(1)
		for _, u := range nodes {
			lo, hi := c.out(u)
			for s := lo; s < hi; s++ {
				t := to[s]
				if c.comp[t] == cp {
					continue
				}
				worst = max(worst, mul(max(fl[s], 1), m[t]))
			}
		}
		for _, u := range nodes {
			m[u] = worst
		}
	}
	return m
}

// planRewriteFloors is planRewrite with floors fl per slot (nil: none; PlanRewriteFloors).
func (c *core) planRewriteFloors(cap int64, wantOrder bool, fl []int64) (att []int64, order []int32, reason string) {
	var mb []int64
	if fl != nil {
		mb = c.below(fl)
	}
	to := c.adj.to
	att = append([]int64(nil), c.adj.att...)
	if wantOrder {
		order = make([]int32, 0, len(att))
	}
	h := make([]int64, c.n)
	for _, en := range c.ents {
		h[en.node] = max(h[en.node], en.k)
	}
	reason = c.noRewriteReason(cap)
	for i := 0; i < c.n; {
		v := c.order[i]
		cp := c.comp[v]
		nodes := c.order[i : i+c.size(cp)]
		i += len(nodes)
		// H is the real worst product into the component (0 when no entrypoint reaches it); the
		// allowance treats it as at least 1, but only real products propagate, so an unreachable
		// caller never forces a reachable service's edges down.
		var H int64
		for _, u := range nodes {
			H = max(H, h[u])
		}
		allow := max(cap/max(H, 1), 1)
		for _, u := range nodes {
			lo, hi := c.out(u)
			for s := lo; s < hi; s++ {
				if wantOrder {
					order = append(order, s)
				}
				t := to[s]
				if c.comp[t] == cp && c.isCyc(cp) {
					att[s] = 1
					continue
				}
				if mb == nil {
					att[s] = min(att[s], allow)
					h[t] = max(h[t], mul(H, att[s]))
					continue
				}
				att[s] = min(att[s], max(cap/mul(max(H, 1), mb[t]), 1))
				h[t] = max(h[t], mul(H, max(att[s], fl[s])))
			}
		}
	}
	return att, order, reason
}

// planAllow is planRewrite's plan for a graph with a cycle in another form, for the few slots
// the violations list (plannedWith): each component's allowance, floor(cap/H) and at least 1,
// where H is the planner's worst product into the component. One pass like planRewrite's,
// without copying the attempts of every slot.
func (c *core) planAllow(cap int64) []int64 {
	to, att, comp, off, end := c.adj.to, c.att, c.comp, c.adj.off, c.adj.end
	h := make([]int64, c.n)
	for _, en := range c.ents {
		h[en.node] = max(h[en.node], en.k)
	}
	allow := make([]int64, len(c.csize))
	for i := 0; i < c.n; {
		if v := c.order[i]; c.csize[comp[v]] == 1 && !c.cyc[comp[v]] {
			// A service on no cycle (most): no edge of its own to skip.
			i++
			H := h[v]
			a := max(cap/max(H, 1), 1)
			allow[comp[v]] = a
			if H == 0 {
				continue // nothing to propagate: max(h[t], 0) is h[t]
			}
			for s := off[v]; s < end[v]; s++ {
				h[to[s]] = max(h[to[s]], mul(H, min(att[s], a)))
			}
			continue
		}
		cp := comp[c.order[i]]
		nodes := c.order[i : i+c.size(cp)]
		i += len(nodes)
		// As planRewrite: the real worst product into the component propagates, the allowance
		// treats it as at least 1.
		var H int64
		for _, u := range nodes {
			H = max(H, h[u])
		}
		a := max(cap/max(H, 1), 1)
		allow[cp] = a
		for _, u := range nodes {
			for s := off[u]; s < end[u]; s++ {
				if t := to[s]; comp[t] != cp { // inside a cyclic component: 1, nothing propagates
					h[t] = max(h[t], mul(H, min(att[s], a)))
				}
			}
		}
	}
	return allow
}

// plannedWith is what planRewrite plans for slot s of a graph with a cycle, from planAllow's
// allowances: 1 inside a cyclic component, else min(a, its source component's allowance).
func (c *core) plannedWith(allow []int64, s int32) int64 {
	f, t := c.comp[c.adj.from[s]], c.comp[c.adj.to[s]]
	if f == t {
		return 1
	}
	return min(c.att[s], allow[f])
}

// plannedAcyclic is what planRewrite plans for slot s of an acyclic graph, from the planner's
// worst products forwardAcyclic computed: min(a, floor(cap/h'(u))), at least 1.
func (c *core) plannedAcyclic(s int32, cap int64) int64 {
	return min(c.att[s], max(cap/max(c.v[c.adj.from[s]].hp, 1), 1))
}

// noRewriteReason says why no rewrite fits ("" when one does): the entrypoints whose client
// attempts alone exceed the cap (unfitEntries), "no rewrite fits: client attempts 5 at
// entrypoint api exceed cap 4" for one, "... 6 at entrypoint web and 5 at entrypoint api ..."
// for several.
func (c *core) noRewriteReason(cap int64) string {
	return unfitReason(c.unfitEntries(cap), cap)
}

// unfitEntries are the entrypoints whose client attempts alone exceed cap, most attempts first,
// then in the order listed.
func (c *core) unfitEntries(cap int64) []Entrypoint {
	var us []Entrypoint
	for _, en := range c.ents {
		if en.k > cap {
			us = append(us, Entrypoint{Service: c.g.names[en.node], ClientAttempts: en.k})
		}
	}
	slices.SortStableFunc(us, func(x, y Entrypoint) int { return cmp.Compare(y.ClientAttempts, x.ClientAttempts) })
	return us
}

// unfitReason renders why no rewrite fits the chains from the entrypoints us ("" for none).
func unfitReason(us []Entrypoint, cap int64) string {
	if len(us) == 0 {
		return ""
	}
	b := []byte("no rewrite fits: client attempts ")
	for i, u := range us {
		switch {
		case i == 0:
		case i == len(us)-1:
			b = append(b, " and "...)
		default:
			b = append(b, ", "...)
		}
		b = strconv.AppendInt(b, u.ClientAttempts, 10)
		b = append(b, " at entrypoint "...)
		b = append(b, u.Service...)
	}
	if len(us) == 1 {
		b = append(b, " exceed cap "...)
	} else {
		b = append(b, " each exceed cap "...)
	}
	return string(strconv.AppendInt(b, cap, 10))
}

// entryReason is unfitReason of entrypoint en when its client attempts alone exceed cap: the fix
// text of every chain from it. "" when they do not (the plan brings its chains within the cap).
func (c *core) entryReason(en entry, cap int64) string {
	if en.k <= cap {
		return ""
	}
	return unfitReason([]Entrypoint{{Service: c.g.names[en.node], ClientAttempts: en.k}}, cap)
}

// PlanLocal plans at admission: only service's outgoing edges may change, everyone else is held
// fixed. Each of its edges gets the largest value, at most its current one, such that no path
// through it exceeds the cap; an edge that closes a cycle gets 1. When even 1 does not fit (the
// path into the service, or the rest below, is already over the cap; or a retry cycle remains
// that retries on another service's edge) the plan has Fits false, that edge 1, and the error wraps
// ErrNoRewriteFits with the reason.
func PlanLocal(g *Graph, cap int64, service string) (*Plan, error) {
	cap = max(cap, 1)
	s, ok := g.ids[service]
	if !ok {
		return nil, fmt.Errorf("service %q is not in the graph", service)
	}
	adj := g.adjacency()
	att := append([]int64(nil), adj.att...)
	if sc := newCore(g, nil); sc.needsSimple(s) {
		sc.release()
		return planLocalSimple(g, cap, s, att)
	} else {
		sc.release()
	}
	c := newCore(g, att)
	defer c.release()
	cs := c.comp[s]
	lo, hi := c.out(s)
	for e := lo; e < hi; e++ {
		if c.comp[adj.to[e]] == cs && c.isCyc(cs) {
			att[e] = 1
		}
	}
	// Recompute the retry marks with the service's cycle edges at 1.
	c.anyRetry, c.retryComp, c.retry = false, -1, nil
	c.findRetry()
	c.forward(false)
	c.backward()
	p := &Plan{Cap: cap, Fits: true, Attempts: map[EdgeKey]int64{}}
	fail := func(reason string) {
		if p.Fits {
			p.Fits = false
			p.Reason = "no rewrite fits: " + reason
		}
	}
	if c.isCyc(cs) && c.retry[cs] {
		// The cycle still retries with the service's own edges at 1: its retrying edge (the first
		// one retryCycle returns) belongs to another service, which an admission of this one
		// cannot change.
		ids := c.retryCycle(cs)
		cyc := c.names(ids)
		fail("retry cycle " + renderPath(cyc, c.cycleFactors(ids)) + " retries on " + cyc[0] + "'s edge to " + cyc[1] + ", which " + service + " cannot change")
	}
	es := c.outEdges(s, nil)
	for i := range es {
		if c.comp[es[i].t] == cs && c.isCyc(cs) {
			es[i].inCycle = true
		}
	}
	planOut(c.into(s), es, cap, p, fail)
	if !p.Fits {
		return p, fmt.Errorf("%w%s", ErrNoRewriteFits, strings.TrimPrefix(p.Reason, "no rewrite fits"))
	}
	return p, nil
}

func (c *core) cycleFactors(cyc []int32) []int64 {
	var f []int64
	for i := 0; i+1 < len(cyc); i++ {
		f = append(f, c.att[c.slotBetween(cyc[i], cyc[i+1])])
	}
	return f
}

// Judgement is the admission gate's view of one service's outgoing edges.
type Judgement struct {
	Service string
	Cap     int64
	// Over is true when some path through one of the service's edges exceeds the cap, or a
	// retry cycle runs through them.
	Over bool
	// Cycle is a retry cycle through one of the service's edges ([order payment order]), if any.
	Cycle []string
	// CycleFactors are the attempts along Cycle.
	CycleFactors []int64
	// Path is the worst path through one of the service's edges, from an entrypoint to the end
	// of its worst continuation; Factors are the client attempts then each edge's attempts.
	Path          []string
	Factors       []int64
	Amplification int64
	// Bound says why Amplification is an upper bound (a cycle too large to search; "" when
	// exact).
	Bound string
}

// Judge looks at service's outgoing edges as the admission gate does: the worst path through any
// of them (worst path into the service, the edge, worst path below), and a retry cycle through
// them. A service no entrypoint reaches is never over.
func Judge(g *Graph, cap int64, service string) *Judgement {
	j := &Judgement{Service: service, Cap: cap}
	s, ok := g.ids[service]
	if !ok {
		return j
	}
	c := newCore(g, nil)
	defer c.release()
	cs := c.comp[s]
	if c.needsSimple(s) {
		// Chains that visit a service once (judgesimple.go); unbounded only where one can
		// return to a service with retries: a retrying self-loop on s's cycle.
		if u := c.retryingSelfLoop(cs); u >= 0 {
			j.Over = true
			j.Cycle = []string{g.names[u], g.names[u]}
			j.CycleFactors = []int64{c.att[c.slotBetween(u, u)]}
			j.Amplification = Saturated
			return j
		}
		return newSimpleJudge(c, s).judgement(cap)
	}
	c.forward(false)
	c.backward()
	lo, hi := c.out(s)
	if c.isCyc(cs) && c.retry[cs] {
		for e := lo; e < hi; e++ {
			t := c.adj.to[e]
			if c.comp[t] != cs {
				continue
			}
			// A closed walk s -> t ~> (a retry edge) ~> s: every lap multiplies.
			walk := []int32{s}
			if c.att[e] > 1 {
				walk = append(walk, c.pathWithin(cs, t, s)...)
			} else {
				x, y := c.retryEdgeIn(cs)
				walk = append(walk, c.pathWithin(cs, t, x)...)
				walk = append(walk, c.pathWithin(cs, y, s)...)
			}
			j.Over = true
			j.Cycle = c.names(walk)
			j.CycleFactors = c.cycleFactors(walk)
			j.Amplification = Saturated
			return j
		}
	}
	// The edges that stay inside the service's cycle (which does not retry) carry no path to
	// judge: a path leaves the cycle through some other edge.
	return judgeOut(c.into(s), c.outEdges(s, func(t int32) bool { return c.comp[t] == cs && c.isCyc(cs) }), cap)
}

// retryEdgeIn returns the ends of the first edge with attempts > 1 inside cp.
func (c *core) retryEdgeIn(cp int32) (int32, int32) {
	cyc := c.retryCycle(cp)
	return cyc[0], cyc[1]
}

// Explain renders the judgement without a policy name or plan, e.g.
// "gateway -x3-> order -x3-> payment = 9 > cap 4" or
// "retry cycle order -x3-> payment -x1-> order: amplification unbounded".
func (j *Judgement) Explain() string {
	if j.Cycle != nil {
		return "retry cycle " + renderPath(j.Cycle, j.CycleFactors) + ": amplification unbounded"
	}
	if j.Path == nil {
		return ""
	}
	msg := explain(j.Path, j.Factors, j.Amplification, j.Cap, len(j.Factors) > 0 && j.Factors[0] > 1)
	if j.Bound != "" {
		msg += " (at most: " + j.Bound + ")"
	}
	return msg
}

// AdmissionMessage renders the gate's message:
// "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1".
// plan is PlanLocal's result for the judged service (nil to omit); several changes read
// "order may keep payment=1, inventory=2"; when nothing fits, the plan's reason follows instead.
func AdmissionMessage(policy string, j *Judgement, plan *Plan) string {
	return "RetryPolicy " + policy + ": " + j.Explain() + PlanSuffix(j.Service, plan)
}

// planLocalSimple is PlanLocal on a graph where Judge takes the simple-path rule: a retrying
// self-loop of the service drops to 1 (a chain returns to it through it), then each edge gets
// the largest attempts whose chains fit (judgesimple.go). A retrying self-loop of another service
// on its cycle is not the service's to change: no rewrite fits.
func planLocalSimple(g *Graph, cap int64, s int32, att []int64) (*Plan, error) {
	name := g.names[s]
	orig := g.adjacency().att
	p := &Plan{Cap: cap, Fits: true, Attempts: map[EdgeKey]int64{}}
	fail := func(reason string) {
		if p.Fits {
			p.Fits = false
			p.Reason = "no rewrite fits: " + reason
		}
	}
	c := newCore(g, att)
	defer c.release()
	if sl := c.slotBetween(s, s); sl >= 0 && att[sl] > 1 {
		att[sl] = 1
		c.anyRetry, c.retryComp, c.retry = false, -1, nil
		c.findRetry()
	}
	if u := c.retryingSelfLoop(c.comp[s]); u >= 0 {
		fail("retry cycle " + renderPath([]string{g.names[u], g.names[u]}, []int64{att[c.slotBetween(u, u)]}) +
			" retries on " + g.names[u] + "'s edge to " + g.names[u] + ", which " + name + " cannot change")
		lo, hi := c.out(s)
		for e := lo; e < hi; e++ {
			to := g.names[c.adj.to[e]]
			p.Attempts[EdgeKey{name, to}] = att[e]
			if att[e] < orig[e] {
				p.Changes = append(p.Changes, Change{From: name, To: to, Old: orig[e], New: att[e]})
			}
		}
	} else {
		newSimpleJudge(c, s).plan(cap, orig, p, fail)
	}
	if !p.Fits {
		return p, fmt.Errorf("%w%s", ErrNoRewriteFits, strings.TrimPrefix(p.Reason, "no rewrite fits"))
	}
	return p, nil
}
