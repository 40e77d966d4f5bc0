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
// spec.rules[i].retry(.attempts), when the object is not in s, when a field no longer holds
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
		if r.Object != rws[0].Object || r.remove || len(r.path) != 5 || r.path[0] != "spec" || r.path[4] != "attempts" {
			return nil, false
		}
		if _, isInt := r.value.(int64); !isInt {
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
			v := r.value.(int64)
			if !holds(r, cur) || boundsInt32.check(vs.id(), r.FieldPath, v) != nil {
				return nil, false
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
// Other layers have no siblings here (an ingress route's, a Gateway-parented rule's depend on
// the Service they route to): the caller lowers l and looks at the edge again for the rest.
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
				out = append(out, sl)
			}
		case GAMMA:
			for i := range r.Spec.Rules {
				if sl, ok := gammaRule(r, i); ok {
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
