package mesh

import (
	"fmt"
	"strings"
)

// Istio's egress gateway (istio.io docs, tasks/traffic-management/egress/egress-gateway): one
// VirtualService for an external host H, bound to "mesh" and to an egress Gateway G, sends the
// sidecars' calls to H to G's Service (istio-egressgateway.istio-system.svc.cluster.local) and
// G's calls on to H. Both are Envoys that retry by the route that took the call: the sidecar by
// the mesh route (Istio's default 2 retries when it sets none), the gateway by its own route
// (the same translation: pilot/pkg/networking/core/route builds a gateway's routes as a
// sidecar's), so H sees the product, 3 x 3 = 9 tries. Before, only the sidecar's route counted
// (3). The gateway's route is the largest over the http routes of the VirtualServices binding H
// that a gateway other than "mesh" serves and that route to H; a mesh route is taken as going to
// an egress gateway when every destination of it names a host whose first label has "egress"
// in it (the Istio charts' istio-egressgateway, the gateway chart's istio-egress): the Istio
// Gateway object that selects the gateway's pods is not read, and a mesh route to another
// Service (a canary) must not be taken for the gateway's hop.

// toEgressGateway: every destination of route r is an egress gateway's Service.
func toEgressGateway(r *httpRoute) bool {
	if len(r.Route) == 0 {
		return false
	}
	for _, d := range r.Route {
		first, _, _ := strings.Cut(strings.ToLower(d.Destination.Host), ".")
		if !strings.Contains(first, "egress") {
			return false
		}
	}
	return true
}

// egressLayer is the layer of the egress gateway's own route on to ref (the caller's callee):
// the largest over the gateway-served http routes of vss whose destinations name ref.
func (s *Set) egressLayer(vss []*virtualService, c Caller, ref ServiceRef, inCluster bool, port int32) (Layer, bool) {
	var best Layer
	for _, vs := range vss {
		if !vs.exportedTo(c.Namespace) {
			continue
		}
		for i := range vs.Spec.HTTP {
			r := &vs.Spec.HTTP[i]
			if !vs.atIngress(i) || !matchesPort(r.Match, port) || !httpRoutesTo(r, vs.Metadata.Namespace, ref, inCluster) {
				continue
			}
			better(&best, s.vsRouteLayer(vs, i, r, " at egress gateway "+gatewayOf(vs, r)))
		}
	}
	return best, best.Kind != ""
}

// httpRoutesTo: a destination of r names ref (a host as vs's namespace names it).
func httpRoutesTo(r *httpRoute, vsNamespace string, ref ServiceRef, inCluster bool) bool {
	for _, d := range r.Route {
		got, ok := resolve(d.Destination.Host, vsNamespace)
		if ok == inCluster && got == ref {
			return true
		}
	}
	return false
}

// gatewayOf names the gateway (not "mesh") that serves route r of vs, for notes.
func gatewayOf(vs *virtualService, r *httpRoute) string {
	for _, m := range r.Match {
		for _, g := range m.Gateways {
			if g != "mesh" {
				return g
			}
		}
	}
	for _, g := range vs.Spec.Gateways {
		if g != "mesh" {
			return g
		}
	}
	return fmt.Sprint(vs.Spec.Gateways)
}
