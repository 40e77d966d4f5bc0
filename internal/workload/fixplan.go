package workload

import (
	"fmt"
	"slices"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// FixPlan is the combined fix of a policy's graph: the one plan that both the fix text of each
// violation (ExplainMesh: the status, analyze's table, JSON and SARIF) and analyze -o patch
// read, so that a user who applies what the status says applies the patch.
//
// It is graph.PlanRewrite, except where an entrypoint's client attempts alone exceed the cap and
// a gateway route (a layer of MeshEntry) multiplies them: the planner holds client attempts
// fixed, but the route is ours to lower. It is lowered to the tries the chains from the
// entrypoint leave (the cap over their worst product below, per client attempt; the fewest any
// entrypoint through the same layer asks), or, when its field cannot give that few (a Gateway
// API rule: 2 tries, mesh.MinTries), to the fewest it gives. The edges are then planned for the
// client attempts the lowered routes leave (graph.PlanRewriteClients): an entry route at its
// floor gets the edges below it lowered too, and the fix text names both.
type FixPlan struct {
	// Plan is the edges' plan: graph.PlanRewriteClients with Clients.
	Plan *graph.Plan
	// Routes are the layers on entrypoints' client attempts the fix lowers, or would lower but
	// cannot (Rewrite nil), in the order the entrypoints ask for them (a's).
	Routes []RouteFix
	// Clients are the entrypoints whose client attempts the lowered routes change, and to what
	// (the clients' own attempts times what each layer gives under the fix).
	Clients map[string]int64
	// byEntry are, per entrypoint, the indexes in Routes its fix names: the layers on its client
	// attempts the fix lowers, and those it asked to lower and cannot.
	byEntry map[string][]int
}

// RouteFix is a layer on entrypoints' client attempts (a Gateway-parented route rule, an
// ingress VirtualService route, a BackendTrafficPolicy) that the fix lowers.
type RouteFix struct {
	Layer mesh.Layer
	// Tries is what the fix asks of the layer: the most tries with which every chain from the
	// entrypoints that ask fits, at least 1.
	Tries int64
	// Give is the tries the layer gives under the fix: Tries, or its field's fewest when it
	// cannot give that few; Layer.Tries when it cannot be lowered at all (Rewrite nil).
	Give int64
	// Rewrite changes the layer's field to Give tries (nil: Err says why it cannot).
	Rewrite *mesh.Rewrite
	// Err is why the layer cannot give Tries (nil when it can).
	Err error
	// Entrypoints are the entrypoints that ask for it: their client attempts alone exceed the
	// cap, and it is on them, or it is another route to them with more tries than theirs leaves.
	Entrypoints []string
}

// layerKey identifies a layer across entrypoints (one rule routing to two backends is one
// layer on both): analyze -o patch keys its demands the same way.
func layerKey(l mesh.Layer) string { return l.Object + " " + l.FieldPath + " " + l.Note }

// PlanFix plans r's combined fix; a is graph.Analyze of r's graph (its entrypoints, chains and
// violations). A graph with a retry cycle gets graph.PlanRewrite's plan and no route: every
// number below the cycle is unbounded until its retries go, which the plan does first.
func (r *Result) PlanFix(a *graph.Analysis) *FixPlan {
	fp := &FixPlan{}
	if a != nil && a.Bounded {
		r.planRoutes(a, fp)
	}
	fp.Plan = r.planFloors(fp.Clients)
	if fp.Plan == nil {
		fp.Clients = nil
		fp.Plan = r.planFloors(nil)
	}
	if fp.Plan == nil {
		fp.Plan, _ = graph.PlanRewrite(r.Graph, r.Cap) // cannot happen (planFloors)
	}
	return fp
}

// planFloors is graph.PlanRewriteFloors of r's graph with client attempts clients and r's
// floors (nil: cannot happen, planFloors' errors are a name that is no entrypoint or an edge the
// graph does not have: each client is one of the analysis's entrypoints, each floor on an edge of
// MeshEdges, which the graph has). When some chain does not fit even with every field at its
// fewest and each layer no object's field lowers as it is (Plan.OverFloors), no patch brings it
// within the cap: its fix then names what to do by hand (declare a VirtualService route...),
// planned as if that gave 1 try, as few of them as the planner needs (bookinfo under Istio's
// default: the ratings edge's, not every edge's); the patch still writes what it can.
func (r *Result) planFloors(clients map[string]int64) *graph.Plan {
	floors, byHand := r.floors()
	p, _ := graph.PlanRewriteFloors(r.Graph, r.Cap, clients, floors)
	if p != nil && len(p.OverFloors) > 0 {
		p, _ = graph.PlanRewriteFloors(r.Graph, r.Cap, clients, byHand)
	}
	return p
}

// floors are the edges whose mesh layers cannot all go to 1 try under a fix (a Gateway API
// rule's fewest is 2; a layer no object's field lowers stays as it is): the fewest each can
// carry, the annotation at 1 (mesh.Fewest, what mesh.Split leaves when asked for 1); byHand
// counts a layer no object's field lowers as 1 try. The planner keeps room for them below an
// edge (graph.PlanRewriteFloors), so that a chain whose every edge at its fewest fits is planned
// to fit, not lowered where its field cannot go. One mesh.Split per multiplied edge.
func (r *Result) floors() (floors, byHand map[graph.EdgeKey]int64) {
	for k, m := range r.MeshEdges {
		if !m.Multiplied() {
			continue
		}
		f, h := mesh.Fewest(m.Layers)
		if f > 1 {
			if floors == nil {
				floors = make(map[graph.EdgeKey]int64, len(r.MeshEdges))
			}
			floors[graph.EdgeKey{From: k[0], To: k[1]}] = f
		}
		if h > 1 {
			if byHand == nil {
				byHand = make(map[graph.EdgeKey]int64, len(r.MeshEdges))
			}
			byHand[graph.EdgeKey{From: k[0], To: k[1]}] = h
		}
	}
	return floors, byHand
}

// needsRoutes reports whether some entrypoint of a has client attempts alone over the cap that
// a gateway route multiplies: only then does PlanFix differ from graph.PlanRewrite.
func (r *Result) needsRoutes(a *graph.Analysis) bool {
	if a == nil || !a.Bounded || len(r.MeshEntry) == 0 {
		return false
	}
	for _, ep := range a.Entrypoints {
		if m, ok := r.MeshEntry[ep.Service]; ok && ep.ClientAttempts > max(r.Cap, 1) && m.Multiplied() && m.Attempts() == ep.ClientAttempts {
			return true
		}
	}
	return false
}

// planRoutes fills fp's Routes, Clients and byEntry.
func (r *Result) planRoutes(a *graph.Analysis, fp *FixPlan) {
	cap := max(r.Cap, 1)
	byKey := map[string]int{}
	ask := func(l mesh.Layer, tries int64, e string) {
		k := layerKey(l)
		i, seen := byKey[k]
		if !seen {
			i = len(fp.Routes)
			byKey[k] = i
			fp.Routes = append(fp.Routes, RouteFix{Layer: l, Tries: tries})
		}
		rt := &fp.Routes[i]
		rt.Tries = min(rt.Tries, tries)
		if !slices.Contains(rt.Entrypoints, e) {
			rt.Entrypoints = append(rt.Entrypoints, e)
		}
	}
	for _, ep := range a.Entrypoints {
		m, ok := r.MeshEntry[ep.Service]
		// m.Attempts() differs from the graph's client attempts only when the graph counts more
		// (an entrypoint set twice): the route is then not all there is to lower.
		if !ok || ep.ClientAttempts <= cap || !m.Multiplied() || m.Attempts() != ep.ClientAttempts {
			continue
		}
		// The clients' own attempts (m.App) are not ours to change, only the layers: they may
		// give allowed / App tries (at least 1). Split with App taken as 1, or it would lower the
		// client attempts first and ask the route for too little (5 client attempts x 3 tries
		// over cap 4 read "retry.attempts: 2 -> 1", which leaves 10).
		allowed := max(cap/max(worstBelow(a, ep.Service), 1), 1)
		for _, lf := range mesh.Split(1, m.Layers, max(allowed/max(m.App, 1), 1)).Layers {
			ask(lf.Layer, lf.Tries, ep.Service)
		}
	}
	if len(fp.Routes) == 0 {
		return
	}
	give := func() {
		for i := range fp.Routes {
			rt := &fp.Routes[i]
			rt.Rewrite, rt.Give, rt.Err = mesh.LowestRewrite(rt.Layer, rt.Tries)
		}
	}
	give()
	// An entrypoint takes the largest of its routes (mesh.Set.EntryLayers): where the one it
	// takes goes down, every other with more tries than that leaves goes down to it too, or it
	// takes their place (two rules, or an HTTPRoute and an ingress VirtualService, to one
	// backend). One pass: what a lowered route leaves is re-checked by the re-analysis of -o patch.
	for _, ep := range a.Entrypoints {
		m, ok := r.MeshEntry[ep.Service]
		if !ok || len(m.Layers) == 0 {
			continue
		}
		// Only for an entrypoint that asked: another one within the cap through the same layer
		// keeps its largest other route, and stays within the cap.
		i, ok := byKey[layerKey(m.Layers[0])]
		if !ok || fp.Routes[i].Give >= m.Layers[0].Tries || !slices.Contains(fp.Routes[i].Entrypoints, ep.Service) {
			continue
		}
		g := fp.Routes[i].Give
		for _, l := range m.Alternatives {
			if l.Tries > g && layerKey(l) != layerKey(m.Layers[0]) {
				ask(l, g, ep.Service)
			}
		}
	}
	give()
	// Every entrypoint through a lowered layer gets fewer client attempts, whether or not its
	// own chains asked: the patch changes the layer's field, which they share.
	fp.byEntry = map[string][]int{}
	for _, ep := range a.Entrypoints {
		m, ok := r.MeshEntry[ep.Service]
		if !ok || m.Attempts() != ep.ClientAttempts {
			continue
		}
		named := map[int]bool{}
		// tries is what l gives under the fix; a layer the fix lowers or cannot lower for this
		// entrypoint's chains is named in their fix.
		tries := func(l mesh.Layer) int64 {
			i, ok := byKey[layerKey(l)]
			switch {
			case ok && fp.Routes[i].Give < l.Tries:
				named[i] = true
				return fp.Routes[i].Give
			case ok && slices.Contains(fp.Routes[i].Entrypoints, ep.Service):
				named[i] = true // its error
			}
			return l.Tries
		}
		var first int64
		if len(m.Layers) > 0 {
			first = tries(m.Layers[0])
			for _, l := range m.Alternatives {
				first = max(first, tries(l))
			}
		}
		k := graph.Mul(m.App, first)
		for _, l := range m.Layers[min(1, len(m.Layers)):] {
			k = graph.Mul(k, tries(l))
		}
		for i := range fp.Routes {
			if named[i] {
				fp.byEntry[ep.Service] = append(fp.byEntry[ep.Service], i)
			}
		}
		if k < m.Attempts() {
			if fp.Clients == nil {
				fp.Clients = map[string]int64{}
			}
			fp.Clients[ep.Service] = k
		}
	}
}

// worstBelow is the worst product of attempts below entrypoint e (its worst chain over its
// client attempts), from a's chains, else the violations that start at e (a lists at most
// graph.MaxChains chains); graph.Saturated when a lists neither, so that the route is asked for
// 1 try rather than for a number no chain was checked against.
func worstBelow(a *graph.Analysis, e string) int64 {
	for _, ch := range a.Chains {
		if ch.Entrypoint == e && ch.ClientAttempts > 0 {
			return ch.Amplification / ch.ClientAttempts
		}
	}
	var w int64
	for _, v := range a.Violations {
		if len(v.Path) > 0 && v.Path[0] == e && len(v.Factors) > 0 {
			w = max(w, graph.Product(v.Factors[1:]))
		}
	}
	if w == 0 {
		return graph.Saturated
	}
	return w
}

// clients is entrypoint e's client attempts under the fix.
func (fp *FixPlan) clients(e string, now int64) int64 {
	if k, ok := fp.Clients[e]; ok {
		return k
	}
	return now
}

// fixParts is violation v's fix under fp, in the graph planner's units ("order: payment=1") for
// the edges: the routes on its entrypoint's client attempts that the fix lowers (or the reason it
// cannot), then each edge of its path the plan lowers, in path order, then, when its client
// attempts under the fix still exceed the cap, why no rewrite fits. A chain from an entrypoint
// over the cap that no route multiplies gets the same: the edges fp's plan lowers on it (which
// may be fewer than graph.PlanRewrite's, the graph's text, once a route elsewhere is lowered),
// then why no rewrite fits.
func (fp *FixPlan) fixParts(r *Result, v *graph.Violation, parts []string) []string {
	if len(v.Path) == 0 || len(v.Factors) != len(v.Path) {
		return parts
	}
	e, cap := v.Path[0], max(r.Cap, 1)
	routes := fp.byEntry[e]
	var out []string
	for _, i := range routes {
		rt := fp.Routes[i]
		if rt.Rewrite != nil && rt.Give < rt.Layer.Tries {
			out = append(out, rt.Rewrite.Suggestion)
		} else {
			out = append(out, fmt.Sprintf("client -> %s: %v", e, rt.Err))
		}
	}
	for j := 0; j+1 < len(v.Path); j++ {
		now := v.Factors[j+1]
		if nv, ok := fp.Plan.New(v.Path[j], v.Path[j+1]); ok && nv < now {
			out = append(out, v.Path[j]+": "+v.Path[j+1]+"="+graph.FormatInt(nv))
		}
	}
	if k := fp.clients(e, v.Factors[0]); k > cap {
		out = append(out, fmt.Sprintf("no rewrite fits: client attempts %d at entrypoint %s exceed cap %d", k, e, cap))
	} else if slices.Contains(fp.Plan.OverFloors, e) {
		// Not even by hand: the fields that cannot go lower (a Gateway API rule's 2 tries) leave
		// this chain over the cap with every retry on it at its fewest.
		if f := r.fewestOn(v.Path, k); f > cap {
			out = append(out, fmt.Sprintf("no rewrite fits: with every retry at its fewest this chain carries %d > cap %d", f, cap))
		}
	}
	if len(out) == 0 {
		return parts // cannot happen: a chain over the cap is lowered somewhere
	}
	return out
}

// hasFloors reports whether some multiplied edge's layers cannot all go to 1 try (floors): only
// then is PlanFix's plan not the graph's own suggestion's. It stops at the first.
func (r *Result) hasFloors() bool {
	for _, m := range r.MeshEdges {
		if m.Multiplied() {
			if f, _ := mesh.Fewest(m.Layers); f > 1 {
				return true
			}
		}
	}
	return false
}

// fewestOn is the fewest a chain along path carries with k client attempts, each annotation at
// 1, each mesh field at its fewest and each layer no object's field lowers at 1 try (its fix by
// hand): the by-hand floors PlanFix plans with when no patch fits.
func (r *Result) fewestOn(path []string, k int64) int64 {
	f := k
	for j := 0; j+1 < len(path); j++ {
		if m, ok := r.MeshEdges[[2]string{path[j], path[j+1]}]; ok && m.Multiplied() {
			_, h := mesh.Fewest(m.Layers)
			f = graph.Mul(f, h)
		}
	}
	return f
}
