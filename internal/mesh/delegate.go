package mesh

// Istio's VirtualService delegation (networking.istio.io HTTPRoute.delegate): a root
// VirtualService's http route with a delegate is replaced by the delegate VirtualService's http
// routes, each merged with it; a merged route keeps the delegate's retries, else takes the
// root route's. A delegate that is not in the set, or not exported to the root's namespace, drops
// the root route (istio/istio pilot/pkg/model/virtualservice_controller.go, the
// MergedVirtualServices collection; pilot/pkg/model/virtualservice.go MergeHTTPRoutes,
// mergeHTTPRoute: "if delegate.Retries == nil { delegate.Retries = root.Retries }"). Before, a
// root route with a delegate was read as a route without retries (Istio's default 3 tries, where
// a delegate with attempts: 5 makes 6), and, bound to an ingress Gateway, it routed nowhere (the
// entrypoint's gateway layer was lost).

// merged returns vs with its delegating routes replaced by the merged ones (vs itself when it
// delegates nothing). Only the fields retrycap reads are merged: the root's matches (which decide
// the gateways), the delegate's destinations, the retries.
func (s *Set) merged(vs *virtualService) *virtualService {
	delegates := false
	for _, h := range vs.Spec.HTTP {
		if h.Delegate != nil {
			delegates = true
			break
		}
	}
	if !delegates {
		return vs
	}
	cp := *vs
	cp.Spec.HTTP = nil
	for i, h := range vs.Spec.HTTP {
		if h.Delegate == nil {
			h.origin, h.originIdx = vs, i
			cp.Spec.HTTP = append(cp.Spec.HTTP, h)
			continue
		}
		ns := h.Delegate.Namespace
		if ns == "" {
			ns = vs.Metadata.Namespace
		}
		d, ok := s.virtualServices[GroupIstio+"/VirtualService/"+ns+"/"+h.Delegate.Name]
		if !ok || !d.exportedTo(vs.Metadata.Namespace) {
			continue // Istio drops the route
		}
		for j, dh := range d.Spec.HTTP {
			m := dh
			m.Match = h.Match
			m.Delegate = nil
			m.origin, m.originIdx = d, j
			if dh.Retries == nil && h.Retries != nil {
				m.Retries = h.Retries
				m.origin, m.originIdx = vs, i
			}
			cp.Spec.HTTP = append(cp.Spec.HTTP, m)
		}
	}
	return &cp
}
