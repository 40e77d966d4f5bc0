package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Mesh retries apply on HTTP and gRPC ports only (DESIGN.md, "Real inputs, third round"): the
// sidecars retry requests, and a TCP connection (a database, a cache) carries none they can see.
// The port's protocol is chosen as Istio does (its "protocol selection" docs; pkg/config/protocol
// Parse, and kube.ConvertProtocol: appProtocol first, then the port name's prefix before the first
// "-"), and Linkerd's HTTP routes, the only thing its retries hang on, match HTTP and gRPC too.
// The port is the one the upstream names ("redis-cart:6379"); else the Service's only port; a
// Service with HTTP and TCP ports and no port named gets the worst (the mesh's retries counted),
// said in a warning. A port whose protocol is not declared (unnamed, no appProtocol) is counted as
// HTTP: Istio sniffs it, and HTTP is the worst case.

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

// httpProtocols are the protocols whose requests a mesh retries (Istio: HTTP, HTTP2, GRPC,
// GRPC-Web; appProtocol also kubernetes.io/h2c and kubernetes.io/ws).
var httpProtocols = map[string]bool{
	"http": true, "http2": true, "grpc": true, "grpc-web": true, "h2c": true,
	"kubernetes.io/h2c": true, "kubernetes.io/ws": true,
}

// knownProtocols are the other protocols Istio recognises: declared, they mean "not HTTP".
var knownProtocols = map[string]bool{
	"tcp": true, "tls": true, "https": true, "mongo": true, "mysql": true, "redis": true, "udp": true,
}

// retried reports whether a mesh retries requests on port p, and the protocol as declared
// ("" when not declared).
func (p servicePort) retried() (bool, string) {
	if strings.EqualFold(p.Protocol, "UDP") || strings.EqualFold(p.Protocol, "SCTP") {
		return false, strings.ToLower(p.Protocol)
	}
	if ap := strings.ToLower(p.AppProtocol); ap != "" {
		if httpProtocols[ap] {
			return true, ap
		}
		if knownProtocols[ap] || strings.HasPrefix(ap, "kubernetes.io/") {
			return false, ap
		}
	}
	prefix, _, _ := strings.Cut(strings.ToLower(p.Name), "-")
	switch {
	case httpProtocols[prefix]:
		return true, prefix
	case knownProtocols[prefix]:
		return false, prefix
	}
	return true, "" // not declared: Istio sniffs; HTTP is the worst case
}

func (p servicePort) String() string {
	if p.Name == "" {
		return strconv.Itoa(int(p.Port))
	}
	return fmt.Sprintf("%d (%s)", p.Port, p.Name)
}

// onlyHTTP replaces e's layers with a 1-try layer when the call goes to a port the mesh does
// not retry, and warns when the port is not known.
func (s *Set) onlyHTTP(e *Edge, c Caller, callee string, port int32) {
	ref, inCluster := resolve(callee, c.Namespace)
	if !inCluster {
		return
	}
	ports := s.ports[ref]
	if len(ports) == 0 {
		return // no Service object, or no ports: as before, the mesh's layer
	}
	var tcp []servicePort
	http := false
	switch {
	case port != 0:
		i := slices.IndexFunc(ports, func(p servicePort) bool { return p.Port == port })
		if i < 0 {
			e.Warnings = append(e.Warnings, fmt.Sprintf("%s calls %s:%d, a port Service %s does not have: counting the mesh's retries", c.Name, callee, port, ref))
			return
		}
		if ok, _ := ports[i].retried(); ok {
			return
		}
		tcp = ports[i : i+1]
	default:
		for _, p := range ports {
			if ok, _ := p.retried(); ok {
				http = true
			} else {
				tcp = append(tcp, p)
			}
		}
		if http && len(tcp) > 0 {
			e.Warnings = append(e.Warnings, fmt.Sprintf("Service %s has HTTP and TCP ports and %s names no port in its upstream %s: counting the mesh's retries (the worst); write the upstream as %s:PORT", ref, c.Name, callee, callee))
			return
		}
		if http {
			return
		}
	}
	_, proto := tcp[0].retried()
	var ps []string
	for _, p := range tcp {
		ps = append(ps, p.String())
	}
	kinds := map[Kind]bool{}
	var layers []Layer
	for _, l := range e.Layers {
		if kinds[l.Kind] {
			continue
		}
		kinds[l.Kind] = true
		layers = append(layers, Layer{Kind: l.Kind, Tries: 1, Default: true,
			Note: fmt.Sprintf("%s does not retry %s port %s of Service %s", l.Kind, proto, strings.Join(ps, ", "), ref)})
	}
	e.Layers = layers
}
