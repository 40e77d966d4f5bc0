package webhook

import (
	"fmt"
	"slices"
	"strings"

	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Tries raised on a route other than the counted one. The time model times a call over every
// route it may take (mesh.Set.Hops, CallHops), while an edge carries the layer of the most
// tries: a route of fewer tries but a longer per-try timeout given more tries lengthens the
// chain's worst case and changes no layer of the edge, so raisedBy saw no raise and the change
// was admitted while the status reported the chain over maxTimeToAnswer. A route new to the
// object is judged against the fewest tries its field gives (mesh.MinTries): adding a route
// lengthens the chain as surely as raising one does (docs/decisions.md).

// altTries is a route of the object, not the edge's counted layer, whose tries a change raised
// on a call of the edge: raised.layer is the route's tries layer, was its tries before (0: the
// route is new) and wasField its field as stored ("" when new).
type altTries struct {
	raised
	was      int64
	wasField string
}

// altTriesRaises lists the routes of obj on r's edges (built on set, compared with old on
// oldSet) other than the counted ones whose tries are above their old ones (a new route: above
// mesh.MinTries), in edge order, one per edge and field: an Istio VirtualService's other http
// routes and a Gateway API route's other rules (mesh.Set.TimeAlternatives), and the Linkerd
// routes of the callee's Service (mesh.Set.LinkerdRoutes).
func altTriesRaises(r, old *workload.Result, oldSet, set *mesh.Set, obj meshObject) []altTries {
	var out []altTries
	seen := map[[3]string]bool{}
	add := func(from, to string, counted []mesh.Layer, a mesh.Layer, o *mesh.Layer) {
		if a.Object != obj.id() || slices.Contains(counted, a) {
			return
		}
		key := [3]string{from, to, a.FieldPath}
		if seen[key] {
			return
		}
		if _, err := mesh.Field(a); err != nil {
			return // no field of the object gives them (a mesh default): nothing to lower
		}
		at := altTries{raised: raised{from: from, to: to, layer: a}}
		base := mesh.MinTries(a)
		if o != nil {
			at.was, base = o.Tries, o.Tries
			if f, err := mesh.Field(*o); err == nil {
				at.wasField = f.From
			}
		}
		if a.Tries <= base {
			return
		}
		seen[key] = true
		out = append(out, at)
	}
	rule := func(l mesh.Layer) string {
		if i := strings.IndexByte(l.FieldPath, ']'); i >= 0 {
			return l.Object + " " + l.FieldPath[:i+1]
		}
		return l.Object + " " + l.FieldPath
	}
	for _, e := range layered(r, old, obj) {
		before := map[string]mesh.Layer{}
		if e.oldLayer != nil {
			before[rule(*e.oldLayer)] = *e.oldLayer
			for _, o := range routeAlternatives(oldSet, *e.oldLayer, e.from, e.oldAlts) {
				before[rule(o)] = o
			}
		} else if e.from == "" {
			// An entrypoint's routes are every object's (workload.MeshEdge.Alternatives):
			// the object's own rules there before are among them.
			for _, o := range e.oldAlts {
				before[rule(o)] = o
			}
		}
		// At an entrypoint the routes a call may take are its Alternatives (every route to it
		// at a Gateway or ingress; mesh.Set.TimeAlternatives gives none for entry layers): a
		// rule added to an HTTPRoute on a Gateway with tries above its fewest was judged by
		// judgeTimeRaise, which Rewrite refuses, instead of lowered (gate19).
		for _, a := range routeAlternatives(set, e.layer, e.from, e.alts) {
			var o *mesh.Layer
			if ol, ok := before[rule(a)]; ok {
				o = &ol
			}
			add(e.from, e.to, []mesh.Layer{e.layer}, a, o)
		}
	}
	if obj.kind != "Service" && obj.kind != "HTTPRoute" && obj.kind != "GRPCRoute" {
		return out // no Linkerd annotations
	}
	for _, c := range r.MeshCalls() {
		edge := set.Edge(c.Caller, c.Callee)
		if !linkerdOn(edge) {
			continue
		}
		before := map[string]mesh.LinkerdRoute{}
		for _, o := range oldSet.LinkerdRoutes(c.Caller, c.Callee) {
			before[o.Route] = o
		}
		for _, rt := range set.LinkerdRoutes(c.Caller, c.Callee) {
			var o *mesh.Layer
			if ob, ok := before[rt.Route]; ok {
				o = &ob.Tries
			}
			add(c.From, c.To, edge.Layers, rt.Tries, o)
		}
	}
	return out
}

// altVerdict is what judgeAltTries found on one edge: every route of the object other than the
// counted one whose tries it raised there (all; the first is the one the message names), and
// the most tries each may keep: at most keep, but never fewer than its old ones (altTries.base).
// fits says whether that takes the chain within the maximum; when not, keep is 1 (every route
// back to its base) and the chain was over before the raise too.
type altVerdict struct {
	all  []altTries
	keep int64
	fits bool
}

// judgeAltTries is judgeMesh for the routes altTriesRaises finds: the first edge whose chains
// are over p's maxTimeToAnswer with set, with every route raised on it. They are lowered
// together, as lowerOnEdge lowers the counted route's siblings: one at a time, 20 routes raised
// at once took 20 rounds of rewriteMesh's 16 and 4 were admitted still raised, and each one's
// keep, judged with the others raised, fitted nowhere. The common keep is the largest that fits
// by bisection (fewer tries never make a chain longer). r and old are p's graphs on set and
// oldSet.
func judgeAltTries(p judgedPolicy, obj meshObject, oldSet, set *mesh.Set, raw objectJSON, r, old *workload.Result) (meshVerdict, bool) {
	if maxT := p.Spec().MaxTimeToAnswer; maxT == nil || maxT.Duration <= 0 {
		return meshVerdict{}, false
	}
	raises := altTriesRaises(r, old, oldSet, set, obj)
	for i, at := range raises {
		tj := timeAt(p, r, at.raised)
		if tj == nil {
			continue
		}
		av := &altVerdict{}
		hi := int64(0)
		for _, o := range raises[i:] {
			if o.from == at.from && o.to == at.to {
				av.all = append(av.all, o)
				hi = max(hi, o.layer.Tries)
			}
		}
		lo := int64(1) // every route at its base: fits or not
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if av.fitsAt(p, obj, set, raw, mid) {
				lo = mid
			} else {
				hi = mid
			}
		}
		av.keep = lo
		av.fits = lo > 1 || av.fitsAt(p, obj, set, raw, 1)
		v := meshVerdict{policy: p, layer: at.layer, edge: at.raised, time: tj, alt: av}
		if av.fits {
			v.keepBound = zeroBound(at.layer, at.target(av.keep), raw)
		} else {
			v.levers = av.floorLevers(p, obj, set, raw)
		}
		return v, true
	}
	return meshVerdict{}, false
}

// base is the tries a route raised goes back to when no more fit: its old tries, or the fewest
// its field gives when it is new.
func (at altTries) base() int64 {
	if at.was > 0 {
		return at.was
	}
	return mesh.MinTries(at.layer)
}

// target is the tries at keeps under a common keep: keep, but not below its base nor above what
// it has.
func (at altTries) target(keep int64) int64 {
	return min(max(keep, at.base()), at.layer.Tries)
}

// rewrites are the rewrites that lower each route of av to its target under keep.
func (av *altVerdict) rewrites(keep int64) ([]*mesh.Rewrite, bool) {
	var out []*mesh.Rewrite
	for _, at := range av.all {
		if t := at.target(keep); t < at.layer.Tries {
			rw, err := mesh.PlanRewrite(at.layer, t)
			if err != nil {
				return nil, false
			}
			out = append(out, rw)
		}
	}
	return out, true
}

// floorLevers names, when no count of the routes of av fits, what else on the edge's chain can
// change, judged with the routes at their base (the object's own are at their fewest):
// workload.Result.TimeLevers of the chain still over maxTimeToAnswer, else Levers of the one over
// the cap. "Lower the callers' attempts" was said where they were at 1 (advice19). Without the
// graph at the base (the rewrite cannot be applied), the policy's maximum alone.
func (av *altVerdict) floorLevers(p judgedPolicy, obj meshObject, set *mesh.Set, raw objectJSON) string {
	e := av.all[0].raised
	skip := workload.LeverSkip{Object: av.all[0].layer.Object}
	fallback := "raise " + p.Ref().String() + " spec.maxTimeToAnswer"
	rws, ok := av.rewrites(1)
	if !ok {
		return fallback
	}
	next, ok := withRewrites(obj, set, raw, rws)
	if !ok {
		return fallback
	}
	r := p.build(next)
	if tj := timeAt(p, r, e); tj != nil && len(tj.Chain.Path) > 0 {
		path := tj.Chain.Path
		factors := []int64{tj.Chain.ClientAttempts}
		for k := 1; k < len(path); k++ {
			ge, _ := r.Graph.Edge(path[k-1], path[k])
			factors = append(factors, ge.Attempts)
		}
		// The route raised, at its base, is what the time takes its tries from: its own
		// timeouts are the lever of the object (waitRoute names the hop's route of the longest
		// bound, here another).
		at := av.all[0]
		route := routeOf(at.layer)
		if strings.HasPrefix(at.layer.FieldPath, "metadata.") {
			route = at.layer.Object // an annotation of the object: the object is the route
		}
		wait := fmt.Sprintf("the timeouts of %s (at %d tries: %s)", route, at.base(), describeBounds(set.LayerTime(at.layer)))
		return r.TimeLevers(path, factors, skip, wait, tj.Chain.Time)
	}
	if j := judgeAt(r, e); j.Over {
		return r.Levers(j.Path, j.Factors, skip)
	}
	return fallback
}

// fitsAt reports whether the edge's chains are within p's maxTimeToAnswer (and cap) with the
// routes of av lowered under keep.
func (av *altVerdict) fitsAt(p judgedPolicy, obj meshObject, set *mesh.Set, raw objectJSON, keep int64) bool {
	rws, ok := av.rewrites(keep)
	if !ok {
		return false
	}
	next, ok := withRewrites(obj, set, raw, rws)
	if !ok {
		return false
	}
	r := p.build(next)
	e := av.all[0].raised
	return !judgeAt(r, e).Over && timeAt(p, r, e) == nil
}

// withRewrites is set with the object's rws applied: on the Set's decoded object where it can
// (mesh.Set.Lowered), else on its JSON.
func withRewrites(obj meshObject, set *mesh.Set, raw objectJSON, rws []*mesh.Rewrite) (*mesh.Set, bool) {
	if next, ok := set.Lowered(obj.group, rws); ok {
		return next, true
	}
	data, err := raw()
	if err != nil {
		return nil, false
	}
	doc, err := mesh.NewDoc(data)
	if err != nil {
		return nil, false
	}
	for _, rw := range rws {
		if err := doc.Apply(rw); err != nil {
			return nil, false
		}
	}
	out, err := doc.Bytes()
	if err != nil {
		return nil, false
	}
	next, err := withObject(set, obj, out)
	return next, err == nil
}

// altMessage is the message of a verdict on raised routes other than the counted one, naming
// the first: `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest
// metadata.annotations["retry.linkerd.io/limit"]: "1" -> "2" (a route other than the counted one:
// the time takes its tries too) makes ... > maxTimeToAnswer 20s; HTTPRoute bookinfo/ratings-rest
// may keep retry.linkerd.io/limit: "1"`, and how many others were raised on the same call.
func (v meshVerdict) altMessage() string {
	av := v.alt
	at := av.all[0]
	field, err := mesh.Field(at.layer)
	if err != nil {
		return v.policy.Ref().String() + ": " + at.layer.Note + " makes " + v.explain()
	}
	was := at.wasField
	if at.was == 0 {
		was = "unset (a new route)"
	}
	msg := fmt.Sprintf("%s: %s %s: %s -> %s (a route other than the counted one: the time takes its tries too", v.policy.Ref(), field.Object, field.FieldPath, was, field.From)
	if n := len(av.all) - 1; n > 0 {
		msg += fmt.Sprintf("; with %d more such route(s) of %s raised on the same call, judged together", n, field.Object)
	}
	msg += ") makes " + v.explain()
	if !av.fits {
		return msg + "; " + v.altFloor() + " does not fit either: " + v.levers
	}
	rw, err := mesh.PlanRewrite(at.layer, at.target(av.keep))
	if err != nil {
		return msg
	}
	msg += fmt.Sprintf("; %s may keep %s: %s", field.Object, fieldName(rw.FieldPath), rw.To) + v.boundClause()
	if len(av.all) > 1 {
		msg += fmt.Sprintf(" (the others at most %d tries each, or their old value)", av.keep)
	}
	return msg
}

// altFloor is the value the named route goes back to, as the messages name it:
// `HTTPRoute shop/r retry.linkerd.io/limit: "1"`.
func (v meshVerdict) altFloor() string {
	at := v.alt.all[0]
	rw, err := mesh.PlanRewrite(at.layer, at.base())
	if err != nil {
		return at.layer.Object + " " + at.layer.FieldPath + " at " + fmt.Sprint(at.base()) + " tries"
	}
	if rw.RemovesBlock() {
		return rw.Object + " without " + rw.FieldPath + " (1 try)"
	}
	return rw.Object + " " + fieldName(rw.FieldPath) + ": " + rw.To
}
