package webhook

import (
	"fmt"
	"slices"
	"strings"

	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Linkerd's routes other than the counted one. Linkerd applies to a call any HTTPRoute attached
// to the callee's Service, each with its own retry and timeout annotations (else the Service's,
// taken apart: mesh.LinkerdRoute), and the time model times the call over every one of them
// (mesh.Set.CallHops), while the edge carries the layer of the most tries only. A timeout raised
// on another route, or on the Service whose timeouts such a route inherits, changes no layer of
// the edge: judgeTimeRaise and changedEdges compared the edge's layers and admitted it, while
// the status reported the chain over maxTimeToAnswer.

// linkerdRaise is a route Linkerd may apply to the calls of an edge whose timeouts a change
// lengthened.
type linkerdRaise struct {
	raised
	// route names the route ("HTTPRoute bookinfo/ratings-rest"), change the bounds lengthened
	// ("per-try timeout 1s -> 15s", timeRaises).
	route, change string
	// created: the route is new to the edge (change empty): judged by whether the chain's time
	// grew, or waits longest on it (judgeLinkerdRoutes), its times read from times; longest:
	// its bound is the longest of the call's routes.
	created, longest bool
	times            mesh.Layer
}

// linkerdTimeRaises lists the edges of r (built on set) whose calls Linkerd may send over a
// route whose timeouts are objID's, before (oldSet) or after, and lengthened from oldSet's: the
// route's own, or the Service's where the route sets none. A route new to the Set whose
// timeouts are objID's is listed as created (no bound of its own to compare: judgeLinkerdRoutes
// compares the chain's time, gate18). In r's call order, one per edge and route.
func linkerdTimeRaises(r *workload.Result, oldSet, set *mesh.Set, objID string) []linkerdRaise {
	var out []linkerdRaise
	seen := map[[3]string]bool{}
	for _, c := range r.MeshCalls() {
		if !linkerdOn(set.Edge(c.Caller, c.Callee)) {
			continue
		}
		routes := set.LinkerdRoutes(c.Caller, c.Callee)
		if len(routes) == 0 {
			continue
		}
		before := map[string]mesh.LinkerdRoute{}
		for _, o := range oldSet.LinkerdRoutes(c.Caller, c.Callee) {
			before[o.Route] = o
		}
		for _, rt := range routes {
			o, ok := before[rt.Route]
			if !ok && rt.Times.Object != objID && rt.Route != objID || ok && rt.Times.Object != objID && o.Times.Object != objID {
				continue
			}
			key := [3]string{c.From, c.To, rt.Route}
			if seen[key] {
				continue
			}
			seen[key] = true
			if !ok {
				longest := true
				b := routeBound(rt.Tries, set.LayerTime(rt.Times))
				for _, o := range routes {
					if o.Route != rt.Route && routeBound(o.Tries, set.LayerTime(o.Times)) > b {
						longest = false
					}
				}
				out = append(out, linkerdRaise{raised: raised{from: c.From, to: c.To, layer: rt.Tries}, route: rt.Route, created: true, longest: longest, times: rt.Times})
				continue
			}
			if change := timeRaises(oldSet.LayerTime(o.Times), set.LayerTime(rt.Times)); change != "" {
				out = append(out, linkerdRaise{raised: raised{from: c.From, to: c.To, layer: rt.Tries}, route: rt.Route, change: change})
			}
		}
	}
	return out
}

// linkerdOn reports whether Linkerd's proxy makes e's tries (a layer of its own, or a Gateway
// API rule it serves).
func linkerdOn(e mesh.Edge) bool {
	for _, l := range e.Layers {
		if l.Kind == mesh.Linkerd || l.NoRuleTimes {
			return true
		}
	}
	return false
}

// linkerdRaiseMessage names objID's Linkerd timeout annotations the change set, old and new,
// and the route whose bounds they lengthen: `HTTPRoute bookinfo/ratings-rest
// metadata.annotations["timeout.linkerd.io/response"]: "1s" -> "15s" (per-try timeout 1s -> 15s)`,
// `Service bookinfo/ratings metadata.annotations[...]: ... (HTTPRoute bookinfo/ratings-rest:
// per-try timeout 1s -> 15s)` where the route inherits the Service's timeouts.
func linkerdRaiseMessage(oldSet, set *mesh.Set, objID string, lr linkerdRaise) string {
	b, a := oldSet.LinkerdTimeoutAnnotations(objID), set.LinkerdTimeoutAnnotations(objID)
	keys := make([]string, 0, len(b)+len(a))
	for k := range b {
		keys = append(keys, k)
	}
	for k := range a {
		if _, dup := b[k]; !dup {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		ov, had := b[k]
		nv, has := a[k]
		if had != has || ov != nv {
			parts = append(parts, fmt.Sprintf("metadata.annotations[%q]: %s -> %s", k, quotedOrUnset(ov, had), quotedOrUnset(nv, has)))
		}
	}
	msg := objID
	if len(parts) > 0 {
		msg += " " + strings.Join(parts, ", ")
	}
	if lr.route == objID {
		return msg + " (" + lr.change + ")"
	}
	return msg + " (" + lr.route + ": " + lr.change + ")"
}

// judgeLinkerdRoutes is judgeTimeRaise for the Linkerd routes of r's edges other than the
// counted ones (linkerdTimeRaises): the first edge whose chains are over p's maxTimeToAnswer
// through a route objID's change lengthened.
// A route created is judged when the chains through the edge are over and either longer than
// on old (p's graph on oldSet) or waiting longest on it (the hop that adds the most, the route
// of the longest bound), and its tries are not its own to lower (ownTries: else they are
// judgeAltTries'): named by the route and its bounds.
func judgeLinkerdRoutes(p judgedPolicy, r, old *workload.Result, oldSet, set *mesh.Set, obj meshObject) (meshVerdict, bool) {
	objID := obj.id()
	for _, lr := range linkerdTimeRaises(r, oldSet, set, objID) {
		tj := timeAt(p, r, lr.raised)
		if tj == nil {
			continue
		}
		if lr.created {
			if ownTries(lr.layer, obj) {
				continue
			}
			was := chainTime(p, old, lr.raised)
			from, to, _ := longestHop(tj)
			waits := lr.longest && from == lr.from && to == lr.to
			if was >= tj.Chain.Time && !waits {
				continue
			}
			return meshVerdict{policy: p, layer: lr.layer, edge: lr.raised, time: tj, timeRaise: lr.route + ": " + newRouteBounds(set.LayerTime(lr.times), was, was < tj.Chain.Time)}, true
		}
		return meshVerdict{policy: p, layer: lr.layer, edge: lr.raised, time: tj, timeRaise: linkerdRaiseMessage(oldSet, set, objID, lr)}, true
	}
	return meshVerdict{}, false
}
