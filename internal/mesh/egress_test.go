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
