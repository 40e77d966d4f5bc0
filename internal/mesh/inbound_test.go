package mesh

import (
	"strings"
	"testing"
)

// Istio's inbound retry policy is callee-side: with MeshConfig's default (reset-before-request)
// it adds no try; a policy retrying other conditions multiplies every caller's edge into a callee
// with Istio's sidecar, meshed caller or not.
func TestInboundRetryPolicy(t *testing.T) {
	meshCM := func(inbound string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n" + inbound
	}
	nss := "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}\n---\n" +
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: plain}\n"
	grpcSvc := "apiVersion: v1\nkind: Service\nmetadata: {name: pay, namespace: shop}\nspec: {ports: [{name: grpc-api, port: 50051}]}\n"
	outside := Caller{Name: "Deployment plain/web", Namespace: "plain"}
	inside := Caller{Name: "Deployment shop/web", Namespace: "shop"}
	cases := []struct {
		name, mesh string
		extra      string
		caller     Caller
		callee     string
		want       string // the layers, "; "-joined
	}{
		{"no inbound policy: none", "    defaultHttpRetryPolicy: {attempts: 1}\n", "", outside, "orders.shop", ""},
		{"reset-before-request alone adds no try", "    defaultInboundHttpRetryPolicy: {attempts: 4, retryOn: reset-before-request}\n", "", outside, "orders.shop", ""},
		{"attempts 0 disables it", "    defaultInboundHttpRetryPolicy: {attempts: 0, retryOn: 5xx}\n", "", outside, "orders.shop", ""},
		{"5xx: an unmeshed caller into a meshed callee", "    defaultInboundHttpRetryPolicy: {attempts: 2, retryOn: \"reset-before-request,5xx\"}\n", "", outside, "orders.shop",
			`3 (Istio inbound retry policy at shop/orders's sidecar, from ConfigMap istio-system/istio data.mesh defaultInboundHttpRetryPolicy.attempts: 2, retryOn "reset-before-request,5xx")`},
		{"5xx: a meshed caller gets its own outbound layer too", "    defaultInboundHttpRetryPolicy: {attempts: 2, retryOn: 5xx}\n", "", inside, "orders",
			`3 (Istio default, no VirtualService binds orders); 3 (Istio inbound retry policy at shop/orders's sidecar, from ConfigMap istio-system/istio data.mesh defaultInboundHttpRetryPolicy.attempts: 2, retryOn "5xx")`},
		{"5xx: a callee outside Istio: none", "    defaultInboundHttpRetryPolicy: {attempts: 2, retryOn: 5xx}\n", "", inside, "api.plain", "3 (Istio default, no VirtualService binds plain/api)"},
		{"a gRPC port: counted, said to be an upper bound", "    defaultInboundHttpRetryPolicy: {attempts: 1, retryOn: 5xx}\n", grpcSvc, outside, "pay.shop",
			`2 (Istio inbound retry policy at shop/pay's sidecar, from ConfigMap istio-system/istio data.mesh defaultInboundHttpRetryPolicy.attempts: 1, retryOn "5xx" (Istio skips gRPC ports; counted, an upper bound))`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSet(Options{})
			for _, doc := range strings.Split(nss+"---\n"+meshCM(c.mesh)+"---\n"+c.extra, "---\n") {
				if strings.TrimSpace(doc) == "" {
					continue
				}
				if _, err := s.AddManifest([]byte(doc)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, l := range s.Edge(c.caller, c.callee).Layers {
				got = append(got, l.String())
			}
			if g := strings.Join(got, "; "); g != c.want {
				t.Fatalf("layers %q\nwant %q", g, c.want)
			}
		})
	}
	s := NewSet(Options{})
	if _, err := s.AddManifest([]byte(meshCM("    defaultInboundHttpRetryPolicy: {attempts: -1, retryOn: 5xx}\n"))); err == nil ||
		err.Error() != "ConfigMap istio-system/istio data.mesh defaultInboundHttpRetryPolicy.attempts: -1 is negative" {
		t.Fatalf("a negative attempts: %v", err)
	}
}
