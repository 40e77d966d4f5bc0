package mesh

import (
	"strings"
	"testing"
)

// Istio's egress gateway pattern (egress.go): the sidecar's route to the gateway and the
// gateway's route on to the host both retry. Before, only the sidecar's counted: 3 where the host
// sees 9 (testdata/public/istio-egress-gateway-http).
func TestEgressGatewayLayer(t *testing.T) {
	const se = `
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cnn, namespace: bookinfo}
spec:
  hosts: [edition.cnn.com]
  ports: [{number: 80, name: http-port, protocol: HTTP}]
  resolution: DNS`
	vs := func(meshTo, gatewayRetries string) string {
		return `
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: cnn, namespace: bookinfo}
spec:
  hosts: [edition.cnn.com]
  gateways: [istio-egressgateway, mesh]
  http:
  - match: [{gateways: [mesh], port: 80}]
    route: [{destination: {host: ` + meshTo + `, port: {number: 80}}}]
  - match: [{gateways: [istio-egressgateway], port: 80}]
    route: [{destination: {host: edition.cnn.com, port: {number: 80}}}]` + gatewayRetries
	}
	const sidecar = "Istio 3 (Istio default, VirtualService bookinfo/cnn spec.http[0] sets no retries)"
	cases := []struct {
		name string
		docs []string
		want string
	}{
		{name: "the task's VirtualService: sidecar 3 x gateway 3",
			docs: []string{nsIstio, se, vs("istio-egressgateway.istio-system.svc.cluster.local", "")},
			want: sidecar + "; Istio 3 (Istio default, VirtualService bookinfo/cnn spec.http[1] sets no retries at egress gateway istio-egressgateway)"},
		{name: "the gateway's route sets attempts 1",
			docs: []string{nsIstio, se, vs("istio-egressgateway.istio-system.svc.cluster.local", "\n    retries: {attempts: 1}")},
			want: sidecar + "; Istio 2 (VirtualService bookinfo/cnn spec.http[1].retries.attempts: 1 at egress gateway istio-egressgateway)"},
		{name: "a mesh route to a host that is no egress gateway: no gateway hop",
			docs: []string{nsIstio, se, vs("proxy.bookinfo.svc.cluster.local", "")},
			want: sidecar},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(c.docs, "\n---\n"))
			e := s.EdgePort(caller("bookinfo"), "edition.cnn.com", 80)
			var got []string
			for _, l := range e.Layers {
				got = append(got, string(l.Kind)+" "+l.String())
			}
			if strings.Join(got, "; ") != c.want || len(e.Warnings) != 0 {
				t.Fatalf("layers %q, warnings %q\nwant %q", strings.Join(got, "; "), e.Warnings, c.want)
			}
		})
	}
}

// The task's Gateway API form: the HTTPRoute bound to the ServiceEntry is the sidecar's layer,
// the one on the istio-class Gateway whose Service ("<name>-istio") it sends to is the gateway's.
// Before: the entry's default alone, 3.
func TestEgressGatewayAPILayer(t *testing.T) {
	docs := func(backend, forwardRetry string) string {
		return nsIstio + `
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: cnn, namespace: bookinfo}
spec:
  hosts: [edition.cnn.com]
  ports: [{number: 80, name: http-port, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: cnn-egress-gateway, namespace: bookinfo}
spec:
  gatewayClassName: istio
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: direct, namespace: bookinfo}
spec:
  parentRefs: [{kind: ServiceEntry, group: networking.istio.io, name: cnn}]
  rules: [{backendRefs: [{name: ` + backend + `, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: forward, namespace: bookinfo}
spec:
  parentRefs: [{name: cnn-egress-gateway}]
  rules:
  - backendRefs: [{kind: Hostname, group: networking.istio.io, name: edition.cnn.com, port: 80}]` + forwardRetry
	}
	const sidecar = "Istio 3 (Istio default, HTTPRoute bookinfo/direct spec.rules[0] sets no retry)"
	cases := []struct{ name, docs, want string }{
		{"the task's routes: 3 x 3", docs("cnn-egress-gateway-istio", ""),
			sidecar + "; Istio 3 (Istio default, HTTPRoute bookinfo/forward spec.rules[0] sets no retry at egress gateway Gateway bookinfo/cnn-egress-gateway)"},
		{"the gateway's route sets attempts 1", docs("cnn-egress-gateway-istio", "\n    retry: {attempts: 1}"),
			sidecar + "; Istio 2 (HTTPRoute bookinfo/forward spec.rules[0].retry.attempts: 1 at egress gateway Gateway bookinfo/cnn-egress-gateway)"},
		{"a route to another Service: no gateway hop", docs("proxy", ""), sidecar},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := set(t, Options{}, c.docs).EdgePort(caller("bookinfo"), "edition.cnn.com", 80)
			var got []string
			for _, l := range e.Layers {
				got = append(got, string(l.Kind)+" "+l.String())
			}
			if strings.Join(got, "; ") != c.want || len(e.Warnings) != 0 {
				t.Fatalf("layers %q, warnings %q\nwant %q", strings.Join(got, "; "), e.Warnings, c.want)
			}
		})
	}
}
