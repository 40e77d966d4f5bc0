package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mesh retries apply on HTTP and gRPC ports only (DESIGN.md, "Real inputs, third round"): the
// sidecars retry requests, and a TCP connection (a database, a cache) carries none they can see.
// Each mesh decides a port's protocol its own way, and a layer is judged by its own mesh's rule
// (protocolOf):
//   - Istio (its sidecar, inbound and waypoint layers, and GAMMA routes under Istio): istio/istio
//     pkg/config/kube/conversion.go ConvertProtocol: UDP is UDP; appProtocol, when set, replaces
//     the port's name (kubernetes.io/h2c is HTTP2, kubernetes.io/ws HTTP, kubernetes.io/wss
//     HTTPS); a "grpc-web" prefix; else the prefix before the first "-", parsed as
//     pkg/config/protocol Parse does; a name it does not parse is sniffed (counted as HTTP, the
//     worst case), except on the well-known ports 25, 53, 3306 and 27017, which are TCP.
//   - Linkerd (and GAMMA routes under it): linkerd/linkerd2 policy-controller
//     k8s/index/src/outbound/index.rs and core/src/outbound.rs AppProtocol: the port's name is
//     not read; appProtocol "http" is HTTP/1, "kubernetes.io/h2c" HTTP/2, any other value opaque;
//     without one, a port in the Service's config.linkerd.io/opaque-ports (else its namespace's,
//     which Linkerd's proxy injector copies onto the Service), else in the default
//     opaque ports (charts/linkerd-control-plane/values.yaml: 25,587,3306,4444,5432,6379,9300,
//     11211), is opaque; else detected (counted as HTTP). An opaque port carries no HTTP route,
//     so no retry.
//   - Kuma: kumahq/kuma pkg/plugins/runtime/k8s/controllers/inbound_converter.go ProtocolTagFor:
//     appProtocol when Kuma knows it (pkg/core/metadata/protocol.go ParseProtocol), else the
//     Service's annotation "<port>.service.kuma.io/protocol", else tcp; MeshRetry retries http
//     and grpc only (pkg/plugins/policies/meshretry/plugin/xds/configurer.go GetRouteRetryConfig:
//     http2, tcp, kafka get no retry policy).
//   - Dapr and Consul: not by the callee Service's ports. Dapr's sidecars invoke each other over
//     their own gRPC port whatever the app's Service says; a Consul ServiceRouter exists only for
//     a service Consul's own config makes HTTP, HTTP/2 or gRPC (Consul refuses it otherwise).
// The port is the one the upstream names ("redis-cart:6379"); else the Service's only port; a
// Service with ports a layer retries and ports it does not, and no port named, gets the worst
// (the layer counted), said in a warning.

type servicePort struct {
	Name        string `json:"name"`
	Port        int32  `json:"port"`
	AppProtocol string `json:"appProtocol"`
	Protocol    string `json:"protocol"` // TCP, UDP, SCTP
}

type serviceSpec struct {
	Spec struct {
		Ports []servicePort `json:"ports"`
	} `json:"spec"`
}

func (s *Set) setPorts(ref ServiceRef, ports []servicePort) {
	if len(ports) == 0 {
		delete(s.ports, ref)
		return
	}
	s.ports[ref] = ports
}

// Service annotations that decide a port's protocol (read by Linkerd and Kuma).
const (
	LinkerdOpaquePorts           = "config.linkerd.io/opaque-ports"
	KumaProtocolAnnotationSuffix = ".service.kuma.io/protocol" // "<port>.service.kuma.io/protocol"
)

// LinkerdDefaultOpaquePorts are the ports Linkerd treats as opaque unless the Service says
// otherwise (charts/linkerd-control-plane/values.yaml proxy.opaquePorts).
const LinkerdDefaultOpaquePorts = "25,587,3306,4444,5432,6379,9300,11211"

// istioWellKnownPorts are the ports Istio does not sniff: a port there whose protocol is not
// declared is TCP (pkg/config/kube/conversion.go wellKnownPorts: SMTP, DNS, MySQL, MongoDB).
var istioWellKnownPorts = map[int32]bool{25: true, 53: true, 3306: true, 27017: true}

// IstioWellKnownPorts are the port numbers whose protocol Istio decides by the number when the
// port's name and appProtocol declare none (istioProtocol), ascending: the mesh gate's
// membership webhook (internal/webhook) sends a Service's port-number change only for these,
// when Istio is read.
func IstioWellKnownPorts() []int32 {
	ports := make([]int32, 0, len(istioWellKnownPorts))
	for p := range istioWellKnownPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	return ports
}

// PortFields are the fields of a Service's spec.ports[] the Set reads to decide a port's
// protocol (servicePort; protocolOf): the membership webhook compares these.
func PortFields() []string { return []string{"name", "port", "appProtocol", "protocol"} }

// IstioRetriesPort reports whether Istio's protocol selection (istioProtocol) reads a Service
// port as one its HTTP retries apply to: discover writes NAME:PORT for a Service whose ports
// Istio reads both ways, which analyze otherwise counts at the worst with a warning.
func IstioRetriesPort(name, appProtocol, proto string, port int32) bool {
	return istioProtocol(servicePort{Name: name, Port: port, AppProtocol: appProtocol, Protocol: proto}).retried
}

// protocol is a port's protocol as one mesh reads it.
type protocol struct {
	retried bool
	name    string // "tcp", "grpc", "mysql"; "" when not declared (sniffed or detected)
	why     string // how the mesh chose it, when that is not the port's name or appProtocol
}

// istioProtocol is port p's protocol as Istio selects it.
func istioProtocol(p servicePort) protocol {
	if strings.EqualFold(p.Protocol, "UDP") || strings.EqualFold(p.Protocol, "SCTP") {
		return protocol{name: strings.ToLower(p.Protocol)}
	}
	name := p.Name
	if p.AppProtocol != "" {
		name = p.AppProtocol
		switch strings.ToLower(name) {
		case "kubernetes.io/h2c":
			return protocol{retried: true, name: "http2"}
		case "kubernetes.io/ws":
			return protocol{retried: true, name: "http"}
		case "kubernetes.io/wss":
			return protocol{name: "https"}
		}
	}
	name = strings.ToLower(name)
	if strings.HasPrefix(name, "grpc-web") {
		return protocol{retried: true, name: "grpc-web"}
	}
	prefix, _, _ := strings.Cut(name, "-")
	switch prefix {
	case "http", "http2", "grpc", "http_proxy":
		return protocol{retried: true, name: prefix}
	case "tcp", "udp", "https", "tls", "mongo", "redis", "mysql":
		return protocol{name: prefix}
	}
	if istioWellKnownPorts[p.Port] {
		return protocol{name: "tcp", why: fmt.Sprintf("no protocol declared: Istio does not sniff well-known port %d", p.Port)}
	}
	return protocol{retried: true} // not declared: Istio sniffs; HTTP is the worst case
}

// linkerdProtocol is port p's protocol as Linkerd's policy controller selects it for Service
// annotations ann.
func linkerdProtocol(p servicePort, ann, nsAnn map[string]string) protocol {
	if p.AppProtocol != "" {
		switch ap := strings.ToLower(p.AppProtocol); ap {
		case "http":
			return protocol{retried: true, name: "http"}
		case "kubernetes.io/h2c":
			return protocol{retried: true, name: "http2"}
		default:
			return protocol{name: "opaque", why: fmt.Sprintf("appProtocol %q: Linkerd reads http and kubernetes.io/h2c, any other value as opaque", p.AppProtocol)}
		}
	}
	list, from := LinkerdDefaultOpaquePorts, "Linkerd's default opaque ports "+LinkerdDefaultOpaquePorts
	if v, ok := ann[LinkerdOpaquePorts]; ok {
		list, from = v, fmt.Sprintf("the Service's %s %q", LinkerdOpaquePorts, v)
	} else if v, ok := nsAnn[LinkerdOpaquePorts]; ok {
		// Linkerd's proxy injector copies the namespace's annotation onto a Service without one
		// (pkg/inject/inject.go CreateOpaquePortsPatch).
		list, from = v, fmt.Sprintf("its namespace's %s %q", LinkerdOpaquePorts, v)
	}
	if InPortList(list, p.Port) {
		return protocol{name: "opaque", why: "in " + from}
	}
	return protocol{retried: true} // detected: HTTP is the worst case
}

// InPortList reports whether port is in a Linkerd port list ("25,587,8000-8100", spaces
// allowed); a part that is not a port or a range is passed over, as Linkerd's parser logs and
// skips it. Exported for inject, which reads Linkerd's skip-inbound-ports with the same rule.
func InPortList(list string, port int32) bool {
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(strings.TrimSpace(lo))
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(strings.TrimSpace(hi)); err != nil {
				continue
			}
		}
		if int(port) >= a && int(port) <= b {
			return true
		}
	}
	return false
}

// kumaProtocol is port p's protocol as Kuma selects it for Service annotations ann.
func kumaProtocol(p servicePort, ann map[string]string) protocol {
	proto, why := "", ""
	switch ap := strings.ToLower(p.AppProtocol); ap {
	case "http", "http2", "tcp", "tls", "grpc", "mysql":
		proto = ap
	}
	if key := strconv.Itoa(int(p.Port)) + KumaProtocolAnnotationSuffix; proto == "" {
		if v, ok := ann[key]; ok && v != "" {
			proto, why = strings.ToLower(v), key+" "+strconv.Quote(v)
		}
	}
	if proto == "" {
		proto, why = "tcp", "no appProtocol Kuma reads and no "+strconv.Itoa(int(p.Port))+KumaProtocolAnnotationSuffix+": Kuma's default"
	}
	// http2 is not retried: GetRouteRetryConfig (kumahq/kuma 348b6528
	// pkg/plugins/policies/meshretry/plugin/xds/configurer.go) gives a policy for http and grpc
	// only; before, http2 was counted.
	if proto == "http2" {
		if why != "" {
			why += "; "
		}
		why += "MeshRetry configures http and grpc routes only"
	}
	return protocol{retried: proto == "http" || proto == "grpc", name: proto, why: why}
}

// protocolOf returns how layer kind k, on a call from c, reads the protocol of a port of the
// Service ref; nil when the layer does not depend on the callee's ports.
func (s *Set) protocolOf(k Kind, c Caller, ref ServiceRef) func(servicePort) protocol {
	ann := s.services[ref].Annotations
	nsAnn := s.namespaces[ref.Namespace].Annotations
	linkerd := func(p servicePort) protocol { return linkerdProtocol(p, ann, nsAnn) }
	switch k {
	case Istio, IstioWaypoint, IstioIngress:
		return istioProtocol
	case Linkerd:
		return linkerd
	case GAMMA:
		if s.InIstio(c) || !s.InLinkerd(c) {
			return istioProtocol
		}
		return linkerd
	case Kuma:
		return func(p servicePort) protocol { return kumaProtocol(p, ann) }
	case Dapr, Consul:
		return nil
	}
	return istioProtocol
}

func (p servicePort) String() string {
	if p.Name == "" {
		return strconv.Itoa(int(p.Port))
	}
	return fmt.Sprintf("%d (%s)", p.Port, p.Name)
}

// onlyHTTP replaces each of e's layers that does not retry on the port called with a 1-try
// layer saying why, and warns when the port is not known.
func (s *Set) onlyHTTP(e *Edge, c Caller, callee string, port int32) {
	ref, inCluster := resolve(callee, c.Namespace)
	if !inCluster {
		s.onlyHTTPExternal(e, c, ref.Name, port) // serviceentry.go
		return
	}
	ports := s.ports[ref]
	if len(ports) == 0 {
		return // no Service object, or no ports: as before, the mesh's layer
	}
	if port != 0 {
		i := slices.IndexFunc(ports, func(p servicePort) bool { return p.Port == port })
		if i < 0 {
			e.Warnings = append(e.Warnings, fmt.Sprintf("%s calls %s:%d, a port Service %s does not have: counting the mesh's retries", c.Name, callee, port, ref))
			return
		}
		ports = ports[i : i+1]
	}
	done := map[Kind]bool{}
	warned := false
	var layers []Layer
	for _, l := range e.Layers {
		of := s.protocolOf(l.Kind, c, ref)
		if of == nil {
			layers = append(layers, l)
			continue
		}
		var tcp []servicePort
		var first protocol
		http := false
		for _, p := range ports {
			if pr := of(p); pr.retried {
				http = true
			} else {
				if len(tcp) == 0 {
					first = pr
				}
				tcp = append(tcp, p)
			}
		}
		if len(tcp) == 0 || http {
			if http && len(tcp) > 0 && !warned {
				warned = true
				e.Warnings = append(e.Warnings, fmt.Sprintf("Service %s has HTTP and TCP ports and %s names no port in its upstream %s: counting the mesh's retries (the worst); write the upstream as %s:PORT", ref, c.Name, callee, callee))
			}
			layers = append(layers, l)
			continue
		}
		if done[l.Kind] {
			continue
		}
		done[l.Kind] = true
		var ps []string
		for _, p := range tcp {
			ps = append(ps, p.String())
		}
		note := fmt.Sprintf("%s does not retry %s port %s of Service %s", l.Kind, first.name, strings.Join(ps, ", "), ref)
		if first.why != "" {
			note += " (" + first.why + ")"
		}
		layers = append(layers, Layer{Kind: l.Kind, Tries: 1, Default: true, Note: note})
	}
	e.Layers = layers
}
