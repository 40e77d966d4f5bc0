package mesh

import (
	"fmt"
	"strings"
)

// The what-if side of a rewrite, for the admission gate: judging a candidate value of a field
// on the Set's decoded objects rather than on the object's JSON. A 10,000-route VirtualService is
// 1.1 MB; the gate judged each candidate by rewriting the JSON and reading it back into a Set
// (three decodes and an encode of the whole object per candidate, per field), which took seconds
// where the webhook has 5 (docs/benchmarks.md, "The mesh gate on huge objects").

// Lowered returns a copy of s (s is not modified) with the rewrites applied to the decoded object
// they name (all the same object, of API group group), and true; false when one of them is not a
// VirtualService's spec.http[i].retries(.attempts) or a Gateway API or Linkerd route's
// spec.rules[i].retry(.attempts) or the removal of its spec.rules[i].retry, when the object is not in s, when a field no longer holds
// the value the rewrite was planned from (Apply would refuse it), or when the new value is out of
// the CRD's bounds (bounds.go: AddJSON would refuse it): the caller then applies them to the JSON
// and adds it. The result is what AddJSON of the rewritten JSON gives (the retry fields
// read; the timeouts are not changed by a count of attempts), a differential test says so.
func (s *Set) Lowered(group string, rws []*Rewrite) (*Set, bool) {
	if len(rws) == 0 {
		return nil, false
	}
	kind, name, _ := strings.Cut(rws[0].Object, " ")
	ns, n, ok := strings.Cut(name, "/")
	if !ok {
		return nil, false
	}
	key := group + "/" + kind + "/" + ns + "/" + n
	for _, r := range rws {
		if r.Object != rws[0].Object || len(r.path) < 4 || r.path[0] != "spec" {
			return nil, false
		}
		// A count (spec.LIST[i].BLOCK.attempts), or a rule's retry block removed.
		_, isInt := r.value.(int64)
		count := isInt && !r.remove && len(r.path) == 5 && r.path[4] == "attempts"
		removed := r.remove && r.inner == "attempts" && len(r.path) == 4 && r.path[3] == "retry"
		if !count && !removed {
			return nil, false
		}
	}
	c := s.Clone()
	switch group + "/" + kind {
	case GroupIstio + "/VirtualService":
		vs, ok := s.virtualServices[key]
		if !ok {
			return nil, false
		}
		cp := *vs
		cp.Spec.HTTP = append([]httpRoute(nil), vs.Spec.HTTP...)
		for _, r := range rws {
			i, isInt := r.path[2].(int)
			if r.path[1] != "http" || r.path[3] != "retries" || !isInt || i < 0 || i >= len(cp.Spec.HTTP) {
				return nil, false
			}
			h := &cp.Spec.HTTP[i]
			var cur *int64
			if h.Retries != nil {
				cur = h.Retries.Attempts
			}
			if r.remove {
				return nil, false // a VirtualService takes attempts: 0
			}
			v := r.value.(int64)
			if !holds(r, cur) || boundsInt32.check(vs.id(), r.FieldPath, v) != nil {
				return nil, false
			}
			if ot, ok := c.times[key]; ok && i < len(ot.rules) && (ot.rules[i].noRetries != (v <= 0) || r.only) {
				// Attempts 0 takes the route's retry policy away, per-try timeout and all; the
				// rewrite takes the block's other fields away too (Rewrite.only).
				ot.rules = append([]ruleTime(nil), ot.rules...)
				rt := &ot.rules[i]
				rt.noRetries = v <= 0
				if r.only {
					if rt.perTry > 0 && (rt.timeout == 0 || rt.timeout > rt.perTry) {
						rt.timeout = rt.perTry // Rewrite.keepPerTry
					}
					rt.perTry, rt.base, rt.perTryRaw = 0, 0, ""
					rt.set = rt.timeout > 0
				}
				c.times[key] = ot
			}
			h.Retries = &struct {
				Attempts *int64 `json:"attempts"`
			}{Attempts: &v}
		}
		c.virtualServices[key] = &cp
	case GroupGateway + "/HTTPRoute", GroupGateway + "/GRPCRoute", GroupLinkerdPol + "/HTTPRoute":
		rt, ok := s.routes[key]
		if !ok {
			return nil, false
		}
		cp := *rt
		cp.Spec.Rules = append(cp.Spec.Rules[:0:0], rt.Spec.Rules...)
		var times *objTimes // copied on the first removal: a removed block takes its backoff along
		for _, r := range rws {
			i, isInt := r.path[2].(int)
			if r.path[1] != "rules" || r.path[3] != "retry" || !isInt || i < 0 || i >= len(cp.Spec.Rules) {
				return nil, false
			}
			rule := &cp.Spec.Rules[i]
			var cur *int64
			if rule.Retry != nil {
				cur = rule.Retry.Attempts
			}
			if r.remove {
				if rule.Retry == nil || !holds(r, cur) {
					return nil, false
				}
				rule.Retry = nil
				if ot, ok := c.times[key]; ok && i < len(ot.rules) {
					if times == nil {
						times = &objTimes{rules: append([]ruleTime(nil), ot.rules...), whole: ot.whole}
					}
					rt := &times.rules[i]
					rt.base = 0
					if rt.perTry > 0 {
						// No retry block: backendRequest becomes the route's timeout (addTimes).
						rt.timeout, rt.perTry = rt.perTry, 0
					}
					rt.set = rt.timeout > 0 || rt.perTry > 0
				}
				continue
			}
			v := r.value.(int64)
			b := boundsInt64 // as the reader bounds it (objects.go)
			if group == GroupGateway {
				b = boundsGatewayAPI
			}
			if !holds(r, cur) || b.check(rt.id(), r.FieldPath, v) != nil {
				return nil, false
			}
			rule.Retry = &struct {
				Attempts *int64 `json:"attempts"`
			}{Attempts: &v}
		}
		c.routes[key] = &cp
		if times != nil {
			c.times[key] = *times
		}
	default:
		return nil, false
	}
	c.idx = nil
	return c, true
}

// holds reports whether a decoded attempts field (nil: unset) is what r was planned from, as
// Apply checks it on the JSON.
func holds(r *Rewrite, cur *int64) bool {
	switch {
	case r.check:
		old, ok := r.old.(int64)
		return ok && cur != nil && *cur == old
	case r.absent:
		return cur == nil
	}
	return true
}

// Siblings are the layers of l's object (of API group group, in s) that the mesh weighs wherever
// it weighs l, l's among them: an edge takes its worst route, so lowering l alone leaves the
// next one on the edge. They are exact where the set does not depend on the caller or the
// callee: every http route for sidecars of a VirtualService (l of kind Istio or IstioWaypoint),
// every rule of a GAMMA route when l is Istio's default on a rule or a waypoint's; the rules
// that set a retry of a GAMMA route otherwise (Linkerd weighs those alone, Istio every rule).
// An ingress route's and a Gateway-parented rule's siblings depend on the Service they route to:
// EntrySiblings. Other layers have none: the caller lowers l and looks at the edge again.
func (s *Set) Siblings(group string, l Layer) []Layer {
	kind, name, _ := strings.Cut(l.Object, " ")
	ns, n, _ := strings.Cut(name, "/")
	key := group + "/" + kind + "/" + ns + "/" + n
	at := ""
	if l.Kind == IstioWaypoint {
		if i := strings.LastIndex(l.Note, " at "); i >= 0 {
			at = l.Note[i:]
		}
	}
	var out []Layer
	switch group + "/" + kind {
	case GroupIstio + "/VirtualService":
		vs, ok := s.virtualServices[key]
		if !ok || l.Kind != Istio && l.Kind != IstioWaypoint || !strings.HasPrefix(l.FieldPath, "spec.http[") {
			return []Layer{l}
		}
		for i := range vs.Spec.HTTP {
			if !routeForMesh(vs.Spec.HTTP[i].Match) {
				continue
			}
			sl := s.vsRouteLayer(vs, i, &vs.Spec.HTTP[i], at)
			if l.Kind == IstioWaypoint {
				sl.Kind = IstioWaypoint
			}
			out = append(out, sl)
		}
	case GroupGateway + "/HTTPRoute", GroupGateway + "/GRPCRoute":
		r, ok := s.routes[key]
		if !ok || !strings.HasPrefix(l.FieldPath, "spec.rules[") {
			return []Layer{l}
		}
		switch l.Kind {
		case Istio, IstioWaypoint:
			unset := s.istioDefault("").Tries
			for i := range r.Spec.Rules {
				sl, ok := gammaRule(r, i)
				if ok {
					sl.Note += at
				} else {
					sl = withDefault(s.istioDefault(fmt.Sprintf("%s spec.rules[%d] sets no retry%s", r.id(), i, at)), sl)
				}
				if l.Kind == IstioWaypoint {
					sl.Kind = IstioWaypoint
				}
				sl.Unset = unset
				out = append(out, sl)
			}
		case GAMMA:
			for i := range r.Spec.Rules {
				if sl, ok := gammaRule(r, i); ok {
					sl.Unset = l.Unset // the mesh that weighs l weighs them
					out = append(out, sl)
				}
			}
		default:
			return []Layer{l}
		}
	default:
		return []Layer{l}
	}
	return out
}

// EntrySiblings are the layers of l's object (of API group group, in s) that weigh on backend
// v's client attempts (Entry) where l does, l's among them: every http route of an ingress
// VirtualService that routes to v (l of kind IstioIngress), every rule of a Gateway-parented
// route with a backendRef to v (l of kind Gateway; a rule without retry that a
// BackendTrafficPolicy covers is that object's layer, not a sibling). The gate lowers them in one
// round: it lowered one per round (at most 8), and an edge of more such routes did not fit.
// Other layers: Siblings.
func (s *Set) EntrySiblings(group string, l Layer, v ServiceRef) []Layer {
	kind, name, _ := strings.Cut(l.Object, " ")
	ns, n, _ := strings.Cut(name, "/")
	key := group + "/" + kind + "/" + ns + "/" + n
	var out []Layer
	switch {
	case l.Kind == IstioIngress && group+"/"+kind == GroupIstio+"/VirtualService":
		vs, ok := s.virtualServices[key]
		if !ok {
			return []Layer{l}
		}
		for _, ir := range s.index().ingress[v] {
			// By the object that names the layer: a root VirtualService's routes merged from a
			// delegate name the delegate where it sets the retries (delegate.go).
			if sl := s.ingressLayer(ir); sl.Object == vs.id() {
				out = append(out, sl)
			}
		}
	case l.Kind == Gateway && (group+"/"+kind == GroupGateway+"/HTTPRoute" || group+"/"+kind == GroupGateway+"/GRPCRoute"):
		r, ok := s.routes[key]
		if !ok {
			return []Layer{l}
		}
		x := s.index()
		for i := range r.Spec.Rules {
			if !routesTo(r, i, v) {
				continue
			}
			if sl := s.entryRuleLayer(x, r, i); sl.Object == l.Object {
				out = append(out, sl)
			}
		}
	default:
		return s.Siblings(group, l)
	}
	if len(out) == 0 {
		return []Layer{l}
	}
	return out
}

// Routes is how many routes the object holds (a VirtualService's spec.http, a route's
// spec.rules; 0 for other kinds or an object not in s): what the admission gate's cost grows
// with.
func (s *Set) Routes(group, kind, namespace, name string) int {
	key := group + "/" + kind + "/" + namespace + "/" + name
	if vs, ok := s.virtualServices[key]; ok {
		return len(vs.Spec.HTTP)
	}
	if r, ok := s.routes[key]; ok {
		return len(r.Spec.Rules)
	}
	return 0
}
