package mesh

import (
	"fmt"
	"slices"
	"strings"
)

// Istio's ingress layer (DESIGN.md, "Real inputs, third round"): a VirtualService whose
// spec.gateways names an ingress Gateway (any name but the reserved "mesh") configures the
// Envoy of that gateway, which retries like a sidecar: spec.http[i].retries.attempts, and with
// no retries block MeshConfig's defaultHttpRetryPolicy (Istio's 2 retries). Its routes'
// destinations are where outside clients enter, so, as a Gateway API route with a Gateway
// parentRef, each destination Service is a north-south backend (Set.Backends) whose client
// attempts the route's tries multiply (Set.Entry). Istio's pilot/pkg/networking/core/route
// builds the gateway's routes from the same HTTPRoute messages as the sidecar's, with the same
// retry translation (pilot/pkg/networking/core/route/retry: the default policy when the route
// sets none).

// ingressRoute is one http route of a VirtualService bound to an ingress Gateway.
type ingressRoute struct {
	vs *virtualService
	i  int // index in spec.http
}

// ingressGateway reports whether gateways names a gateway other than the sidecars' "mesh".
func ingressGateway(gateways []string) bool {
	for _, g := range gateways {
		if g != "mesh" {
			return true
		}
	}
	return false
}

// atIngress reports whether http route i of vs is served by an ingress gateway: its matches name
// no gateways (they take the VirtualService's, which name one) or some match names one.
func (vs *virtualService) atIngress(i int) bool {
	match := vs.Spec.HTTP[i].Match
	if len(match) == 0 {
		return ingressGateway(vs.Spec.Gateways)
	}
	for _, m := range match {
		if len(m.Gateways) == 0 && ingressGateway(vs.Spec.Gateways) || ingressGateway(m.Gateways) {
			return true
		}
	}
	return false
}

// addIngress indexes the http routes of vs that an ingress gateway serves, by the in-cluster
// Services they route to (a host as vs's namespace names it).
func (x *index) addIngress(vs *virtualService) {
	if !ingressGateway(vs.Spec.Gateways) && !slices.ContainsFunc(vs.Spec.HTTP, func(h httpRoute) bool {
		return slices.ContainsFunc(h.Match, func(m httpMatch) bool { return ingressGateway(m.Gateways) })
	}) {
		return
	}
	for i, h := range vs.Spec.HTTP {
		if !vs.atIngress(i) {
			continue
		}
		seen := map[ServiceRef]bool{}
		for _, d := range h.Route {
			ref, ok := resolve(d.Destination.Host, vs.Metadata.Namespace)
			if !ok || seen[ref] || d.Destination.Host == "" {
				continue
			}
			seen[ref] = true
			x.ingress[ref] = append(x.ingress[ref], ingressRoute{vs: vs, i: i})
		}
	}
}

// ingressLayer is the tries of an ingress route on its destination's client attempts.
func (s *Set) ingressLayer(ir ingressRoute) Layer {
	r := ir.vs.Spec.HTTP[ir.i]
	names := ingressNames(ir.vs)
	vs, i := r.named(ir.vs, ir.i)
	var l Layer
	switch {
	case r.Retries == nil:
		l = withDefault(s.istioDefault(fmt.Sprintf("%s spec.http[%d] (ingress gateway %s) sets no retries", vs.id(), i, names)),
			Layer{Object: vs.id(), FieldPath: fmt.Sprintf("spec.http[%d].retries", i), Default: true})
	case r.Retries.Attempts == nil:
		l = Layer{Object: vs.id(), FieldPath: fmt.Sprintf("spec.http[%d].retries.attempts", i), Tries: 1,
			Note: fmt.Sprintf("%s spec.http[%d].retries without attempts: no retries (ingress gateway %s)", vs.id(), i, names)}
	default:
		n := *r.Retries.Attempts
		l = Layer{Object: vs.id(), FieldPath: fmt.Sprintf("spec.http[%d].retries.attempts", i), Tries: n + 1,
			Note: fmt.Sprintf("%s spec.http[%d].retries.attempts: %d (ingress gateway %s)", vs.id(), i, n, names)}
	}
	l.Kind = IstioIngress
	return l
}

// ingressNames are the ingress gateways vs names, for notes: "bookinfo-gateway".
func ingressNames(vs *virtualService) string {
	var out []string
	for _, g := range vs.Spec.Gateways {
		if g != "mesh" {
			out = append(out, g)
		}
	}
	if len(out) == 0 {
		return "named by its matches"
	}
	return strings.Join(out, ", ")
}
