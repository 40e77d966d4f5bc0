package mesh

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Istio ambient waypoints (DESIGN.md, "Real inputs, third round"; issue #28), read from
// istio/istio at 86c9f01fd735fb01d8192f5bcaf0d424afb7f14c and istio/ztunnel at
// 62d826530e5ce85764e309170205b293efcbc80b:
//
//   - Which Service uses a waypoint (pilot/pkg/serviceregistry/ambient/waypoints.go,
//     fetchWaypointForTarget and GetUseWaypoint): the label istio.io/use-waypoint on the Service,
//     else on its Namespace; "none" on the Service opts it out; the waypoint is the Gateway of
//     that name in the namespace istio.io/use-waypoint-namespace names (on the same object),
//     else the Service's own. The Gateway carries traffic for Services when its label
//     istio.io/waypoint-for is "service" (the default) or "all" (fetchWaypointForService), and
//     accepts the Service when its HBONE listener (port 15008) allows routes from the Service's
//     namespace (makeAllowedRoutes: allowedRoutes.namespaces.from, default Same).
//   - Who goes through it: ztunnel sends service-addressed traffic of a captured pod to the
//     service's waypoint (ztunnel src/proxy/outbound.rs, fetch_service_waypoint; a workload
//     waypoint only for traffic addressed to a pod, which retrycap's upstreams never are). A pod
//     is captured when its label istio.io/dataplane-mode is "ambient", or its namespace's is and
//     the pod's is not "none", and it has no sidecar (the istio-cni chart's
//     enablementSelectors; cni/pkg/util/enablement_selector.go Matches: a pod with a sidecar is
//     never captured). A sidecar sends straight to the endpoints with its own routes (pilot sends
//     only gateways to waypoints: pilot/pkg/xds/endpoints/endpoint_builder.go
//     findServiceWaypoint, "Currently only ingress and e/w gateway will call waypoints"), so the
//     sidecar layer and the waypoint layer never both apply. A caller outside the mesh reaches
//     the pod through ztunnel's inbound passthrough, which does not redirect to a waypoint.
//     Ingress gateways use the waypoint only when the Service (else its Namespace) has
//     istio.io/ingress-use-waypoint "true" (services.go ingressUseWaypointFromLabels).
//   - What it retries: the waypoint is an Envoy whose inbound routes come from the
//     VirtualServices binding the Service's host in the Service's or the waypoint's namespace,
//     gateways "mesh" (pilot/pkg/networking/core/listener_waypoint.go
//     getVirtualServiceForWaypoint, translateWaypointRoute -> route.TranslateRoute: the same
//     retry translation as a sidecar, Istio's default 2 retries where a route sets none); GAMMA
//     HTTPRoutes with a parentRef to the Service become such VirtualServices. With none, the
//     route is BuildDefaultHTTPOutboundRoute ("the inbound route of a Waypoint is more like the
//     outbound route", httproute.go buildSidecarInboundHTTPRouteConfig): MeshConfig's
//     defaultHttpRetryPolicy, Istio's 2 retries. Ports as for a sidecar: HTTP routes on HTTP
//     ports, sniffed ports, none on TCP (buildWaypointInternal).
//
// A Service or Namespace labelled for a waypoint whose Gateway is not in the input gets one
// assumed (class istio-waypoint, for service traffic, as `istioctl waypoint apply` creates it)
// and the layer says so (DESIGN.md: "a layer a mesh creates by default is assumed when its
// trigger is in the input and its defaulting object is not").

// Ambient labels, the waypoint's class and its traffic types.
const (
	IstioDataplaneModeLabel             = "istio.io/dataplane-mode"         // pod or namespace: "ambient" captures, "none" (pod) opts out
	IstioUseWaypointLabel               = "istio.io/use-waypoint"           // Service or Namespace: the waypoint's name; "none" opts out
	IstioUseWaypointNamespaceLabel      = "istio.io/use-waypoint-namespace" // beside it: the waypoint's namespace
	IstioIngressUseWaypointLabel        = "istio.io/ingress-use-waypoint"   // Service or Namespace: "true" sends ingress traffic through it
	IstioWaypointForLabel               = "istio.io/waypoint-for"           // Gateway: service (default), workload, all, none
	IstioWaypointClass                  = "istio-waypoint"
	IstioWaypoint                  Kind = "IstioWaypoint"
)

// gateway is a Gateway API Gateway: what a waypoint's use reads of it.
type gateway struct {
	header
	Spec struct {
		GatewayClassName string `json:"gatewayClassName"`
		Listeners        []struct {
			Port          int32  `json:"port"`
			Protocol      string `json:"protocol"`
			AllowedRoutes *struct {
				Namespaces *struct {
					From     string                `json:"from"`
					Selector *metav1.LabelSelector `json:"selector"`
				} `json:"namespaces"`
			} `json:"allowedRoutes"`
		} `json:"listeners"`
	} `json:"spec"`
}

// addGateway decodes a Gateway API Gateway into s, by "namespace/name" (how use-waypoint names it).
func (s *Set) addGateway(h header, decode func(any) error) error {
	g := &gateway{}
	if err := decode(g); err != nil {
		return err
	}
	g.header = h
	s.gateways[ServiceRef{h.Metadata.Namespace, h.Metadata.Name}.String()] = g
	return nil
}

// InAmbient reports whether the caller's pod is captured by ztunnel (Istio's ambient mode): its
// label istio.io/dataplane-mode is "ambient", or its namespace's is and its own is not "none";
// a pod with Istio's sidecar (InIstio) is never captured.
func (s *Set) InAmbient(c Caller) bool {
	return s != nil && !s.InIstio(c) && s.ambientLabels(c)
}

// ambientLabels: the pod's or its namespace's labels capture it (InAmbient without the sidecar
// check, for a caller already known to have none).
func (s *Set) ambientLabels(c Caller) bool {
	switch v, ok := c.Labels[IstioDataplaneModeLabel]; {
	case v == "ambient":
		return true
	case ok && v == "none":
		return false
	}
	return s.namespaces[c.Namespace].Labels[IstioDataplaneModeLabel] == "ambient"
}

// waypointUse is the waypoint a Service uses: the Gateway's namespace/name, the label that
// names it, and the Gateway when the Set has it (nil: assumed).
type waypointUse struct {
	ref   ServiceRef // the Gateway, namespace and name
	label string     // `Service bookinfo/reviews istio.io/use-waypoint=waypoint`
	gw    *gateway
}

func (w waypointUse) String() string {
	if w.gw == nil {
		return fmt.Sprintf("waypoint %s (assumed: %s, no Gateway %s in the input)", w.ref, w.label, w.ref)
	}
	return fmt.Sprintf("waypoint %s (%s)", w.ref, w.label)
}

// serviceWaypoint returns the waypoint that service traffic to ref goes through (ok), or a
// warning when a waypoint is named but does not take it.
func (s *Set) serviceWaypoint(ref ServiceRef) (w waypointUse, ok bool, warning string) {
	svcLabels := s.services[ref].Labels
	nsLabels := s.namespaces[ref.Namespace].Labels
	var from map[string]string
	switch v, set := svcLabels[IstioUseWaypointLabel]; {
	case set && (v == "none" || v == ""):
		return w, false, ""
	case set:
		from, w.label = svcLabels, fmt.Sprintf("Service %s %s=%s", ref, IstioUseWaypointLabel, v)
	default:
		v := nsLabels[IstioUseWaypointLabel]
		if v == "" || v == "none" {
			return w, false, ""
		}
		from, w.label = nsLabels, fmt.Sprintf("Namespace %s %s=%s", ref.Namespace, IstioUseWaypointLabel, v)
	}
	w.ref = ServiceRef{Namespace: ref.Namespace, Name: from[IstioUseWaypointLabel]}
	if ns, set := from[IstioUseWaypointNamespaceLabel]; set {
		w.ref.Namespace = ns
	}
	g := s.gateways[w.ref.String()]
	if g == nil {
		return w, true, ""
	}
	w.gw = g
	switch {
	case g.Spec.GatewayClassName != IstioWaypointClass:
		return w, false, fmt.Sprintf("%s names Gateway %s of class %q, not %s: its retries are not read", w.label, w.ref, g.Spec.GatewayClassName, IstioWaypointClass)
	case !waypointForServices(g.Metadata.Labels[IstioWaypointForLabel]):
		return w, false, fmt.Sprintf("%s names Gateway %s, whose %s=%s takes no service traffic: no waypoint layer", w.label, w.ref, IstioWaypointForLabel, g.Metadata.Labels[IstioWaypointForLabel])
	case !g.allows(ref.Namespace, nsLabels):
		return w, false, fmt.Sprintf("%s names Gateway %s, whose HBONE listener does not allow namespace %s: Istio refuses the attachment, no waypoint layer", w.label, w.ref, ref.Namespace)
	}
	return w, true, ""
}

// waypointForServices: istio.io/waypoint-for unset (Istio's default "service"), "service" or "all".
func waypointForServices(v string) bool { return v == "" || v == "service" || v == "all" }

// allows: the Gateway's HBONE listener (port 15008) admits a Service of namespace ns
// (allowedRoutes.namespaces.from: Same, the default and the answer without that listener; All;
// Selector on the namespace's labels).
func (g *gateway) allows(ns string, nsLabels map[string]string) bool {
	for _, l := range g.Spec.Listeners {
		if l.Protocol != "HBONE" || l.Port != 15008 {
			continue
		}
		if l.AllowedRoutes == nil || l.AllowedRoutes.Namespaces == nil {
			break
		}
		switch l.AllowedRoutes.Namespaces.From {
		case "All":
			return true
		case "Selector":
			sel, err := metav1.LabelSelectorAsSelector(l.AllowedRoutes.Namespaces.Selector)
			return err == nil && sel.Matches(labels.Set(nsLabels))
		}
		break
	}
	return g.Metadata.Namespace == ns
}

// waypointEdge adds the waypoint's layer on an ambient caller's call into ref.
func (s *Set) waypointEdge(x *index, e *Edge, ref ServiceRef) {
	w, ok, warn := s.serviceWaypoint(ref)
	if warn != "" {
		e.Warnings = append(e.Warnings, warn)
	}
	if ok {
		e.Layers = append(e.Layers, s.waypointLayer(x, ref, w))
	}
}

// waypointEntry is the waypoint's layer on ingress traffic into ref: only with
// istio.io/ingress-use-waypoint "true" on the Service, else on its Namespace.
func (s *Set) waypointEntry(x *index, e *Edge, ref ServiceRef) {
	v, set := s.services[ref].Labels[IstioIngressUseWaypointLabel]
	if !set {
		v = s.namespaces[ref.Namespace].Labels[IstioIngressUseWaypointLabel]
	}
	if !strings.EqualFold(v, "true") {
		return
	}
	s.waypointEdge(x, e, ref)
}

// waypointLayer is the largest retry of the routes the waypoint applies to ref: the http routes
// of the VirtualServices binding ref's host in ref's or the waypoint's namespace, and the rules
// of the GAMMA routes (parentRef Service ref) there; with none, Istio's default route.
func (s *Set) waypointLayer(x *index, ref ServiceRef, w waypointUse) Layer {
	at := " at " + w.String()
	vss := x.vsByService[ref]
	for _, vs := range x.vsWildcard {
		if matchWildcard(vs.Spec.Hosts, ref, true) {
			vss = append(vss, vs)
		}
	}
	var best Layer
	for _, vs := range vss {
		if ns := vs.Metadata.Namespace; ns != ref.Namespace && ns != w.ref.Namespace || !vs.exportedTo(w.ref.Namespace) {
			continue
		}
		for i, r := range vs.Spec.HTTP {
			if !routeForMesh(r.Match) {
				continue
			}
			l := s.vsRouteLayer(vs, i, &vs.Spec.HTTP[i], at)
			l.Kind = IstioWaypoint
			better(&best, l)
		}
	}
	unset := s.istioDefault("").Tries // a rule without retry, at the waypoint too
	for _, r := range x.routesByService[ref] {
		if ns := r.Metadata.Namespace; r.group() != GroupGateway || ns != ref.Namespace && ns != w.ref.Namespace {
			continue
		}
		for i := range r.Spec.Rules {
			l, ok := gammaRule(r, i)
			if ok {
				l.Note += at
			} else {
				l = withDefault(s.istioDefault(fmt.Sprintf("%s spec.rules[%d] sets no retry%s", r.id(), i, at)), l)
			}
			l.Kind, l.Unset = IstioWaypoint, unset
			better(&best, l)
		}
	}
	if best.Kind == "" {
		best = s.istioDefault(fmt.Sprintf("no VirtualService or HTTPRoute binds %s%s", ref, at))
		best.Kind = IstioWaypoint
	}
	return best
}
