package mesh

import (
	"fmt"
	"slices"
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

// The same task in Gateway API form: an HTTPRoute whose parentRef is the ServiceEntry
// (group networking.istio.io, kind ServiceEntry: Istio's GAMMA for a ServiceEntry's hosts)
// binds the sidecars' calls to the entry's hosts, and sends them to the Service Istio deploys
// for a Gateway of class istio ("<gateway>-istio", pilot/pkg/config/kube/gateway deployment
// naming); a route on that Gateway with a backendRef of kind Hostname (group
// networking.istio.io) sends the gateway's calls on to the host. A rule without retry gets
// Istio's default in both places (conversion.go leaves vs.Retries nil). Before, the entry's
// route was not read (its default layer named no route) and the gateway's hop was not counted.

// isServiceEntry: a parentRef naming a ServiceEntry.
func (r ref) isServiceEntry() bool {
	return r.Group != nil && *r.Group == GroupIstio && r.kindOr("") == "ServiceEntry"
}

// isHostname: a backendRef naming a host (Istio's kind Hostname).
func (r ref) isHostname(host string) bool {
	return r.Group != nil && *r.Group == GroupIstio && r.kindOr("") == "Hostname" && strings.EqualFold(r.Name, host)
}

// serviceEntryRoute is the layer of the Gateway API routes whose parentRef is a ServiceEntry
// registering host (visible to the caller, in the route's or the caller's namespace), and the
// egress gateway hop after it when every binding rule sends the call to an istio-class
// Gateway's Service; ok is false when no route binds the host.
func (s *Set) serviceEntryRoute(c Caller, host string, port int32) (sidecar, gw Layer, ok bool) {
	unset := s.istioDefault("").Tries
	viaGateway := true
	var gws []*gateway
	for _, k := range sortedKeys(s.routes) {
		r := s.routes[k]
		if r.group() != GroupGateway || !s.routeEntryHas(r, host, port, c.Namespace) {
			continue
		}
		for i := range r.Spec.Rules {
			better(&sidecar, s.gammaRuleOrDefault(r, i, unset))
			g := s.istioGatewayOf(r.Spec.Rules[i].BackendRefs, r.Metadata.Namespace)
			viaGateway = viaGateway && g != nil
			if g != nil {
				gws = append(gws, g)
			}
		}
	}
	if sidecar.Kind == "" {
		return Layer{}, Layer{}, false
	}
	if viaGateway {
		for _, g := range gws {
			better(&gw, s.gatewayHostLayer(g, host))
		}
	}
	return sidecar, gw, true
}

// routeEntryHas: a parentRef of r names a ServiceEntry that registers host on port (0: any),
// and r binds the caller's calls: r is the entry's producer route (in its namespace) or the
// caller's consumer route (in callerNS).
func (s *Set) routeEntryHas(r *route, host string, port int32, callerNS string) bool {
	for _, p := range r.Spec.ParentRefs {
		if !p.isServiceEntry() {
			continue
		}
		ns := p.namespaceOr(r.Metadata.Namespace)
		if r.Metadata.Namespace != ns && r.Metadata.Namespace != callerNS {
			continue
		}
		se, ok := s.serviceEntries[GroupIstio+"/ServiceEntry/"+ns+"/"+p.Name]
		if !ok || !se.exportedTo(callerNS) || !slices.ContainsFunc(se.Spec.Hosts, func(h string) bool { return hostMatches(h, host) }) {
			continue
		}
		if port == 0 || p.Port == nil || *p.Port == port {
			return true
		}
	}
	return false
}

// istioGatewayOf is the istio-class Gateway whose Service ("<name>-istio") every backendRef
// names, or nil.
func (s *Set) istioGatewayOf(backends []ref, ns string) *gateway {
	var g *gateway
	for _, b := range backends {
		name, ok := strings.CutSuffix(b.Name, "-istio")
		if !b.isService("Service") || !ok {
			return nil
		}
		gw, found := s.gateways[ServiceRef{b.namespaceOr(ns), name}.String()]
		if !found || gw.Spec.GatewayClassName != "istio" || g != nil && g != gw {
			return nil
		}
		g = gw
	}
	return g
}

// gatewayHostLayer is the largest layer of the rules of routes on Gateway g that send calls to
// host (a backendRef of kind Hostname).
func (s *Set) gatewayHostLayer(g *gateway, host string) Layer {
	var best Layer
	for _, k := range sortedKeys(s.routes) {
		r := s.routes[k]
		if r.group() != GroupGateway || !slices.ContainsFunc(r.Spec.ParentRefs, func(p ref) bool {
			return p.isGateway() && p.Name == g.Metadata.Name && p.namespaceOr(r.Metadata.Namespace) == g.Metadata.Namespace
		}) {
			continue
		}
		for i, rule := range r.Spec.Rules {
			if !slices.ContainsFunc(rule.BackendRefs, func(b ref) bool { return b.isHostname(host) }) {
				continue
			}
			l, ok := gammaRule(r, i)
			if !ok {
				l = withDefault(s.istioDefault(fmt.Sprintf("%s spec.rules[%d] sets no retry at egress gateway %s", r.id(), i, g.id())), l)
			} else {
				l.Note += " at egress gateway " + g.id()
			}
			l.Kind = Istio
			better(&best, l)
		}
	}
	return best
}
