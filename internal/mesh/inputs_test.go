package mesh

import (
	"reflect"
	"testing"
)

// A VirtualService bound to an ingress Gateway is the entry's layer: its route's destination is a
// north-south backend whose client attempts the route's tries multiply; "mesh" is the sidecars'.
func TestIngressVirtualService(t *testing.T) {
	gw := func(gateways, http string) string {
		return vs("bookinfo", "bookinfo", "  hosts: [\"*\"]\n  gateways: "+gateways+"\n  http:\n"+http)
	}
	route := "  - route:\n    - destination: {host: productpage, port: {number: 9080}}\n"
	cases := []struct {
		name     string
		docs     string
		backends []ServiceRef
		want     Edge
	}{
		{
			name: "no retries block: Istio's default, 3 tries", docs: gw("[bookinfo-gateway]", route),
			backends: []ServiceRef{{"bookinfo", "productpage"}},
			want: Edge{Layers: []Layer{{Kind: IstioIngress, Object: "VirtualService bookinfo/bookinfo", FieldPath: "spec.http[0].retries", Tries: 3, Default: true,
				Note: "Istio default, VirtualService bookinfo/bookinfo spec.http[0] (ingress gateway bookinfo-gateway) sets no retries"}}},
		},
		{
			name: "retries.attempts 4: 5 tries", docs: gw("[istio-system/public, mesh]", route+"    retries: {attempts: 4}\n"),
			backends: []ServiceRef{{"bookinfo", "productpage"}},
			want: Edge{Layers: []Layer{{Kind: IstioIngress, Object: "VirtualService bookinfo/bookinfo", FieldPath: "spec.http[0].retries.attempts", Tries: 5,
				Note: "VirtualService bookinfo/bookinfo spec.http[0].retries.attempts: 4 (ingress gateway istio-system/public)"}}},
		},
		{
			name: "a route matched only for the mesh is not the ingress's", docs: gw("[bookinfo-gateway, mesh]", "  - match: [{gateways: [mesh]}]\n    route:\n    - destination: {host: productpage}\n"),
		},
		{
			name: "gateways: [mesh] only: no entry", docs: gw("[mesh]", route),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			if got := s.Backends(); !reflect.DeepEqual(got, tc.backends) && (len(got) > 0 || len(tc.backends) > 0) {
				t.Fatalf("Backends = %v, want %v", got, tc.backends)
			}
			if got := s.Entry(ServiceRef{"bookinfo", "productpage"}); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Entry =\n%#v\nwant\n%#v", got, tc.want)
			}
		})
	}
}

// A pod template already injected is meshed whatever its namespace says.
func TestInjectedIsMeshed(t *testing.T) {
	s := set(t, Options{}, nsPlain+"\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: nomesh, labels: {istio-injection: disabled}}")
	cases := []struct {
		name          string
		c             Caller
		istio, linker bool
	}{
		{"plain", caller("plain"), false, false},
		{"istioctl kube-inject: status annotation", caller("plain", IstioSidecarStatus, `{"containers":["istio-proxy"]}`), true, false},
		{"istio-proxy container", Caller{Namespace: "plain", Containers: []string{"app", "istio-proxy"}}, true, false},
		{"injected wins over inject false", caller("plain", IstioSidecarStatus, "{}", IstioInjectAnnotation, "false"), true, false},
		// istio/istio manifests/charts/ztunnel/templates/daemonset.yaml (commit eed52ebb66ad): the node
		// proxy names its container istio-proxy and opts out of injection (label and annotation
		// sidecar.istio.io/inject "false"), which pkg/kube/inject injectRequired honours for the
		// webhook and kube-inject alike: no sidecar. Before, it was meshed, and its calls counted
		// Istio's default retries.
		{"ztunnel: istio-proxy container, inject false", Caller{Namespace: "plain", Containers: []string{"istio-proxy"},
			Labels: map[string]string{IstioInjectAnnotation: "false"}, Annotations: map[string]string{IstioInjectAnnotation: "false"}}, false, false},
		{"istio-proxy container, inject false by annotation only", Caller{Namespace: "plain", Containers: []string{"istio-proxy"},
			Annotations: map[string]string{IstioInjectAnnotation: "false"}}, false, false},
		// manifests/charts/gateway/templates/deployment.yaml: the gateway's istio-proxy (image auto)
		// with sidecar.istio.io/inject "true" is Istio's proxy.
		{"the gateway chart: istio-proxy container, inject true", Caller{Namespace: "plain", Containers: []string{"istio-proxy"},
			Labels: map[string]string{IstioInjectAnnotation: "true"}}, true, false},
		{"the label wins over the annotation (Istio's injectRequired)", Caller{Namespace: "plain", Annotations: map[string]string{IstioInjectAnnotation: "true"}, Labels: map[string]string{IstioInjectAnnotation: "false"}}, false, false},
		{"a pod-template istio.io/rev label in a namespace without injection labels (Istio's revision webhook injects it)", Caller{Namespace: "plain", Labels: map[string]string{IstioRevLabel: "canary"}}, true, false},
		{"istio-injection: disabled wins over the pod's label (no Istio webhook selects the namespace)", Caller{Namespace: "nomesh", Labels: map[string]string{IstioInjectAnnotation: "true"}}, false, false},
		{"linkerd inject --manual: proxy-version", caller("plain", LinkerdProxyVersion, "edge-25.1.1"), false, true},
		{"linkerd-proxy container", Caller{Namespace: "plain", Containers: []string{"linkerd-proxy", "app"}}, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.InIstio(tc.c); got != tc.istio {
				t.Errorf("InIstio = %v, want %v", got, tc.istio)
			}
			if got := s.InLinkerd(tc.c); got != tc.linker {
				t.Errorf("InLinkerd = %v, want %v", got, tc.linker)
			}
		})
	}
	e := s.Edge(caller("plain", IstioSidecarStatus, "{}"), "reviews")
	if e.Tries() != 3 {
		t.Fatalf("an injected caller's edge: %d tries, want Istio's default 3 (%v)", e.Tries(), e.Layers)
	}
}

// Mesh retries apply on HTTP and gRPC ports only.
func TestOnlyHTTPPorts(t *testing.T) {
	port := func(name, ports string) string {
		return "\napiVersion: v1\nkind: Service\nmetadata: {name: " + name + ", namespace: bookinfo}\nspec:\n  selector: {app: " + name + "}\n  ports: " + ports
	}
	docs := nsIstio + "\n---\n" + port("redis-cart", "[{name: tcp-redis, port: 6379}]") +
		"\n---\n" + port("web", "[{name: http-web, port: 80}]") +
		"\n---\n" + port("both", "[{name: grpc, port: 7070}, {name: mysql, port: 3306}]") +
		"\n---\n" + port("proto", "[{name: x, port: 5000, appProtocol: grpc}, {name: 'y', port: 5432, appProtocol: tcp}]") +
		"\n---\n" + port("plainport", "[{port: 8080}]")
	s := set(t, Options{}, docs)
	c := caller("bookinfo")
	cases := []struct {
		callee string
		port   int32
		tries  int64
		note   string
		warn   string
	}{
		{"redis-cart", 0, 1, "Istio does not retry tcp port 6379 (tcp-redis) of Service bookinfo/redis-cart", ""},
		{"redis-cart", 6379, 1, "Istio does not retry tcp port 6379 (tcp-redis) of Service bookinfo/redis-cart", ""},
		{"web", 0, 3, "Istio default, no VirtualService binds web", ""},
		{"both", 3306, 1, "Istio does not retry mysql port 3306 (mysql) of Service bookinfo/both", ""},
		{"both", 7070, 3, "Istio default, no VirtualService binds both", ""},
		{"both", 0, 3, "Istio default, no VirtualService binds both",
			"Service bookinfo/both has HTTP and TCP ports and Deployment bookinfo/productpage names no port in its upstream both: counting the mesh's retries (the worst); write the upstream as both:PORT"},
		{"proto", 5000, 3, "Istio default, no VirtualService binds proto", ""},
		{"proto", 5432, 1, "Istio does not retry tcp port 5432 (y) of Service bookinfo/proto", ""},
		{"plainport", 0, 3, "Istio default, no VirtualService binds plainport", ""},
		{"noservice", 0, 3, "Istio default, no VirtualService binds noservice", ""},
	}
	for _, tc := range cases {
		e := s.EdgePort(c, tc.callee, tc.port)
		if len(e.Layers) != 1 || e.Tries() != tc.tries || e.Layers[0].Note != tc.note {
			t.Errorf("%s:%d: layers %+v, want one of %d tries noted %q", tc.callee, tc.port, e.Layers, tc.tries, tc.note)
		}
		var warn string
		if len(e.Warnings) > 0 {
			warn = e.Warnings[0]
		}
		if warn != tc.warn {
			t.Errorf("%s:%d: warning %q, want %q", tc.callee, tc.port, warn, tc.warn)
		}
	}
}
