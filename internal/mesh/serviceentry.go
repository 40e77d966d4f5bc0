package mesh

import (
	"fmt"
	"slices"
	"strings"
)

// An Istio ServiceEntry puts a host outside the cluster (api.stripe.com, www.googleapis.com)
// into the mesh's registry, and a sidecar's outbound route to a registered host that no
// VirtualService binds is Istio's default route, with the default retry policy (istio/istio
// eed52ebb66ad pilot/pkg/networking/core/route/route.go buildSidecarVirtualHostForService ->
// BuildDefaultHTTPOutboundRoute: retry.ConvertPolicy(MeshConfig defaultHttpRetryPolicy)). A host
// outside the registry goes out through the catch-all route to the PassthroughCluster, which
// has no retry policy (httproute.go buildCatchAllVirtualHost): no layer, as before. Only HTTP
// and gRPC ports are retried: a port's protocol is its ports[].protocol, read as Istio's
// protocol.Parse reads it (HTTPS and TLS pass through as TCP; an empty or unknown one is
// sniffed: HTTP, the worst case), by istioProtocol. Before, a ServiceEntry was counted as
// ignored and a sidecar's call to its HTTP host was 1 try.

type serviceEntry struct {
	header
	Spec struct {
		Hosts []string           `json:"hosts"`
		Ports []serviceEntryPort `json:"ports"`
		// ExportTo: the namespaces that see the entry ("." its own, "*" all, "~" none); empty
		// is every namespace (MeshConfig defaultServiceExportTo, "*" by default; not read).
		ExportTo []string `json:"exportTo"`
	} `json:"spec"`
}

type serviceEntryPort struct {
	Number   int32  `json:"number"`
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
}

func (p serviceEntryPort) protocol() protocol {
	return istioProtocol(servicePort{Name: p.Protocol, Port: p.Number})
}

func (p serviceEntryPort) String() string {
	if p.Protocol == "" {
		return fmt.Sprintf("%d (no protocol: sniffed)", p.Number)
	}
	return fmt.Sprintf("%d %s", p.Number, p.Protocol)
}

// exportedTo: the entry is visible in namespace ns.
func (se *serviceEntry) exportedTo(ns string) bool {
	if len(se.Spec.ExportTo) == 0 {
		return true
	}
	for _, e := range se.Spec.ExportTo {
		if e == "*" || e == ns || e == "." && se.Metadata.Namespace == ns {
			return true
		}
	}
	return false
}

// hostMatches: entry host h (maybe "*.example.com") names host, as Istio's host.Name.Matches
// does. A full wildcard "*" names nothing: Istio's validation refuses it in a ServiceEntry
// (pkg/config/validation/validation.go, "invalid host *").
func hostMatches(h, host string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	switch {
	case h == "*":
		return false
	case strings.HasPrefix(h, "*."):
		return strings.HasSuffix(host, h[1:])
	}
	return h == host
}

// entryUse is a ServiceEntry naming a host, with the ports a call to it can take.
type entryUse struct {
	se    *serviceEntry
	ports []serviceEntryPort
}

// entriesFor returns the ServiceEntries visible to a caller in namespace ns that register
// host (an external one), each with its ports a call to port takes (0: every port); an entry
// without that port does not take the call.
func (s *Set) entriesFor(ns, host string, port int32) []entryUse {
	var out []entryUse
	for _, k := range sortedKeys(s.serviceEntries) {
		se := s.serviceEntries[k]
		if !se.exportedTo(ns) || !slices.ContainsFunc(se.Spec.Hosts, func(h string) bool { return hostMatches(h, host) }) {
			continue
		}
		var ports []serviceEntryPort
		for _, p := range se.Spec.Ports {
			if port == 0 || p.Number == port {
				ports = append(ports, p)
			}
		}
		if len(ports) > 0 {
			out = append(out, entryUse{se, ports})
		}
	}
	return out
}

// serviceEntryDefault is the layer of Istio's default route to an external host a
// ServiceEntry registers (ok false when none does, for that port).
func (s *Set) serviceEntryDefault(c Caller, host string, port int32) (Layer, bool) {
	uses := s.entriesFor(c.Namespace, host, port)
	if len(uses) == 0 {
		return Layer{}, false
	}
	u := uses[0]
	for _, v := range uses { // the first that retries, if one does
		if slices.ContainsFunc(v.ports, func(p serviceEntryPort) bool { return p.protocol().retried }) {
			u = v
			break
		}
	}
	ps := make([]string, len(u.ports))
	for i, p := range u.ports {
		ps[i] = p.String()
	}
	l := s.istioDefault(fmt.Sprintf("%s registers %s (port %s), no VirtualService binds it", u.se.id(), host, strings.Join(ps, ", ")))
	l.Registers, l.RegisteredPorts = u.se.id(), strings.Join(ps, ", ")
	return l, true
}

// onlyHTTPExternal is onlyHTTP for a call to an external host: where the ServiceEntries that
// register it declare the port's protocol, an Istio layer on a port Istio does not retry
// (HTTPS, TLS, TCP: the app's own TLS passes through) is 1 try, said so.
func (s *Set) onlyHTTPExternal(e *Edge, c Caller, host string, port int32) {
	uses := s.entriesFor(c.Namespace, host, port)
	if len(uses) == 0 {
		return
	}
	var tcp []string
	var first protocol
	var entry string
	http := false
	for _, u := range uses {
		for _, p := range u.ports {
			if pr := p.protocol(); pr.retried {
				http = true
			} else {
				if len(tcp) == 0 {
					first, entry = pr, u.se.id()
				}
				tcp = append(tcp, p.String())
			}
		}
	}
	if len(tcp) == 0 {
		return
	}
	if http {
		if port != 0 {
			return // entries disagree on the port's protocol: the worst, counted
		}
		e.Warnings = append(e.Warnings, fmt.Sprintf("%s registers %s with HTTP and other ports and %s names no port in its upstream %s: counting the mesh's retries (the worst); write the upstream as %s:PORT", uses[0].se.id(), host, c.Name, host, host))
		return
	}
	var layers []Layer
	done := false
	for _, l := range e.Layers {
		if l.Kind != Istio && l.Kind != GAMMA {
			layers = append(layers, l)
			continue
		}
		if !done {
			done = true
			layers = append(layers, Layer{Kind: Istio, Tries: 1, Default: true,
				Note: fmt.Sprintf("Istio does not retry %s port %s of host %s (%s)", first.name, strings.Join(tcp, ", "), host, entry)})
		}
	}
	e.Layers = layers
}
