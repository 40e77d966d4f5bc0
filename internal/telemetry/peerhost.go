package telemetry

import (
	"net"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/retrycap/retrycap/internal/annotations"
)

// istioNoService are the names Istio's stats filter gives destination_service_name for traffic
// that reached no Service: the Envoy clusters of an unregistered host or a pod IP
// (PassthroughCluster), of a blocked one (BlackHoleCluster), and of a port the pod's Services do
// not declare (the inbound passthrough clusters). istio/proxy
// source/extensions/filters/http/istio_stats/istio_stats.cc sets them whatever the namespace,
// which for the source reporter is the called pod's (its peer metadata) when it is in the mesh:
// "shop/PassthroughCluster" is no Service of shop.
var istioNoService = map[string]bool{
	"PassthroughCluster": true, "BlackHoleCluster": true, "InboundPassthroughCluster": true,
	"InboundPassthroughClusterIpv4": true, "InboundPassthroughClusterIpv6": true,
}

// peerHost reads a callee name that is not a Kubernetes Service's own name (a DNS-1035 label):
// Istio's destination_service_name of a ServiceEntry (its host: "api.stripe.com",
// "*.example.com") or the Host header its stats fall back to, the service graph's virtual
// server node (a client span's peer attribute, "payment:8080"). A port is dropped. Then:
//   - an IP address or a wildcard names no one callee: why says so;
//   - a cluster DNS name (name.ns.svc, name.ns.svc.cluster.local) is that Service;
//   - with oneDotIsService, name.ns is that Service, as an annotation's entry reads it
//     (annotations.SplitService);
//   - a single label is the Service of that name, in a namespace the caller decides (ns "");
//   - any other name is a host outside the cluster's Services: Callee{Name: host}, no
//     namespace, as retrycap-proxy's external upstreams.
func peerHost(name string, oneDotIsService bool) (c Callee, why string) {
	host := strings.ToLower(strings.TrimSuffix(name, "."))
	if strings.HasPrefix(host, "[") { // [IPv6]:port
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[1:i]
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 && strings.Count(host, ":") == 1 && allDigits(host[i+1:]) {
		host = strings.TrimSuffix(host[:i], ".")
	}
	switch {
	case host == "":
		return c, "an empty host"
	case net.ParseIP(host) != nil:
		return c, "an IP address, no Service"
	case strings.Contains(host, "*"):
		return c, "a wildcard host (a ServiceEntry's), no one Service"
	}
	dots := strings.Count(host, ".")
	if dots == 0 {
		if len(validation.IsDNS1035Label(host)) > 0 {
			return c, "not a Service name"
		}
		return Callee{Name: host}, ""
	}
	if svc, ns, ok := annotations.SplitService(host); ok && (dots > 1 || oneDotIsService) &&
		len(validation.IsDNS1035Label(svc)) == 0 && len(validation.IsDNS1123Label(ns)) == 0 {
		return Callee{Namespace: ns, Name: svc}, ""
	}
	if len(validation.IsDNS1123Subdomain(host)) > 0 {
		return c, "not a host name"
	}
	return Callee{Name: host}, ""
}

// printable says whether s is printable UTF-8 (spaces allowed): a label value with a control
// character or invalid UTF-8 names nothing a user wrote.
func printable(s string) bool {
	for _, r := range s {
		if r == utf8.RuneError || (r != ' ' && !unicode.IsPrint(r)) {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isServiceName says whether name is a Kubernetes Service's name (a DNS-1035 label).
func isServiceName(name string) bool { return len(validation.IsDNS1035Label(name)) == 0 }
