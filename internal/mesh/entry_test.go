package mesh

import (
	"reflect"
	"testing"
)

func btp(ns, name, target, retry string) string {
	return "\napiVersion: gateway.envoyproxy.io/v1alpha1\nkind: BackendTrafficPolicy\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  targetRefs: [" + target + "]\n" + retry
}

func istioGateway(ns, name, class string) string {
	return "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  gatewayClassName: " + class + "\n  listeners: [{name: http, port: 80, protocol: HTTP}]"
}

func TestEntry(t *testing.T) {
	north := func(rules string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  parentRefs: [{name: eg}]\n  rules:\n"+rules)
	}
	cases := []struct {
		name    string
		docs    string
		backend ServiceRef
		want    Edge
	}{
		{
			name: "route retry.attempts 3: 4 tries", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend, port: 80}]\n    retry: {attempts: 3, codes: [500]}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 4, Unset: 1,
				Note: "HTTPRoute shop/web spec.rules[0].retry.attempts: 3"}}},
		},
		{
			name: "retry {}: 2 retries", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]\n    retry: {}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 3, Unset: 1, Default: true,
				Note: "HTTPRoute shop/web spec.rules[0].retry without attempts: 2 retries"}}},
		},
		{
			name: "largest over the rules routing to the backend; other backends' rules do not count", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 1}\n  - backendRefs: [{name: frontend}, {name: canary}]\n    retry: {attempts: 2}\n  - backendRefs: [{name: other}]\n    retry: {attempts: 9}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[1].retry.attempts", Tries: 3, Unset: 1,
				Note: "HTTPRoute shop/web spec.rules[1].retry.attempts: 2"}}},
		},
		{
			name: "no retry, no BackendTrafficPolicy: 1 try", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry", Tries: 1, Unset: 1, Default: true,
				Note: "HTTPRoute shop/web spec.rules[0] sets no retry and no BackendTrafficPolicy targets it"}}},
		},
		{
			name: "BackendTrafficPolicy numRetries 5 on the route: 6 tries", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("shop", "retry-for-route", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  retry:\n    numRetries: 5\n    retryOn: {triggers: [connect-failure, retriable-status-codes], httpStatusCodes: [500]}"),
			want: Edge{Layers: []Layer{{Kind: EnvoyGateway, Object: "BackendTrafficPolicy shop/retry-for-route", FieldPath: "spec.retry.numRetries", Tries: 6,
				Note: "BackendTrafficPolicy shop/retry-for-route spec.retry.numRetries: 5 (targets HTTPRoute/shop/web)"}}},
		},
		{
			name: "BackendTrafficPolicy on the Gateway, retry {}", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("shop", "gw-policy", "{group: gateway.networking.k8s.io, kind: Gateway, name: eg}", "  retry: {}"),
			want: Edge{Layers: []Layer{{Kind: EnvoyGateway, Object: "BackendTrafficPolicy shop/gw-policy", FieldPath: "spec.retry.numRetries", Tries: 3, Default: true,
				Note: "BackendTrafficPolicy shop/gw-policy spec.retry without numRetries: 2 retries (targets Gateway/shop/eg)"}}},
		},
		{
			name: "the route's policy wins over the Gateway's", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("shop", "gw-policy", "{group: gateway.networking.k8s.io, kind: Gateway, name: eg}", "  retry: {numRetries: 7}") + "\n---\n" +
				btp("shop", "route-policy", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  retry: {numRetries: 1}"),
			want: Edge{Layers: []Layer{{Kind: EnvoyGateway, Object: "BackendTrafficPolicy shop/route-policy", FieldPath: "spec.retry.numRetries", Tries: 2,
				Note: "BackendTrafficPolicy shop/route-policy spec.retry.numRetries: 1 (targets HTTPRoute/shop/web)"}}},
		},
		{
			// envoyproxy/gateway d32f28294245 internal/gatewayapi/backendtrafficpolicy.go:705 (a
			// route's policy without mergeType is translated alone) and :1739 (a Gateway's policy
			// skips a route whose traffic features are set): the route's policy, retry or not,
			// replaces the Gateway's (its golden internal/gatewayapi/testdata/
			// backendtrafficpolicy-with-httproute-timeout.out.yaml: httproute-1, under a
			// useClientProtocol-only policy, has "traffic: {}", not the Gateway policy's load
			// balancer). Before: the Gateway's 7 retries, 8 tries.
			name: "the route's policy without retry replaces the Gateway's: 1 try", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("shop", "gw-policy", "{group: gateway.networking.k8s.io, kind: Gateway, name: eg}", "  retry: {numRetries: 7}") + "\n---\n" +
				btp("shop", "route-policy", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  timeout: {http: {requestTimeout: 5s}}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry", Tries: 1, Unset: 1, Default: true,
				Note: "HTTPRoute shop/web spec.rules[0] sets no retry, nor BackendTrafficPolicy shop/route-policy, which targets it and replaces its Gateway's policies"}}},
		},
		{
			name: "the route's policy with mergeType merges the Gateway's retry in", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("shop", "gw-policy", "{group: gateway.networking.k8s.io, kind: Gateway, name: eg}", "  retry: {numRetries: 7}") + "\n---\n" +
				btp("shop", "route-policy", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  mergeType: StrategicMerge\n  timeout: {http: {requestTimeout: 5s}}"),
			want: Edge{Layers: []Layer{{Kind: EnvoyGateway, Object: "BackendTrafficPolicy shop/gw-policy", FieldPath: "spec.retry.numRetries", Tries: 8,
				Note: "BackendTrafficPolicy shop/gw-policy spec.retry.numRetries: 7 (targets Gateway/shop/eg)"}}},
		},
		{
			name: "the route's retry wins over a BackendTrafficPolicy", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 1}") + "\n---\n" +
				btp("shop", "route-policy", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  retry: {numRetries: 5}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 2, Unset: 6,
				Note: "HTTPRoute shop/web spec.rules[0].retry.attempts: 1"}}},
		},
		{
			name: "a policy in another namespace does not target the route", backend: ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("elsewhere", "p", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}", "  retry: {numRetries: 5}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry", Tries: 1, Unset: 1, Default: true,
				Note: "HTTPRoute shop/web spec.rules[0] sets no retry and no BackendTrafficPolicy targets it"}}},
		},
		{
			name: "a backend in another namespace", backend: ServiceRef{"api", "orders"},
			docs: north("  - backendRefs: [{name: orders, namespace: api}]\n    retry: {attempts: 2}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 3, Unset: 1,
				Note: "HTTPRoute shop/web spec.rules[0].retry.attempts: 2"}}},
		},
		{
			// Online Boutique's service-mesh-istio component, Istio's helloworld gateway-api sample.
			name: "no retry, parent Gateway of class istio: Istio's default 2 retries", backend: ServiceRef{"shop", "frontend"},
			docs: istioGateway("shop", "eg", "istio") + "\n---\n" + north("  - backendRefs: [{name: frontend}]"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry", Tries: 3, Default: true,
				Note: "Istio default, HTTPRoute shop/web spec.rules[0] sets no retry (parent Gateway shop/eg, class istio)", Unset: 3}}},
		},
		{
			name: "no retry, class istio, MeshConfig default 4 retries", backend: ServiceRef{"shop", "frontend"},
			docs: istioGateway("shop", "eg", "istio") + "\n---\n" + north("  - backendRefs: [{name: frontend}]") + "\n---\n" + "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultHttpRetryPolicy: {attempts: 4, retryOn: 5xx}\n",
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry", Tries: 5, Default: true,
				Note: "Istio default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 4, HTTPRoute shop/web spec.rules[0] sets no retry (parent Gateway shop/eg, class istio)", Unset: 5}}},
		},
		{
			name: "retry.attempts 1 at an istio Gateway: 2 tries, not the default", backend: ServiceRef{"shop", "frontend"},
			docs: istioGateway("shop", "eg", "istio") + "\n---\n" + north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 1}"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 2,
				Note: "HTTPRoute shop/web spec.rules[0].retry.attempts: 1", Unset: 3}}}, // without the block: Istio's default
		},
		{
			name: "no retry, parent Gateway of another class: 1 try", backend: ServiceRef{"shop", "frontend"},
			docs: istioGateway("shop", "eg", "eg") + "\n---\n" + north("  - backendRefs: [{name: frontend}]"),
			want: Edge{Layers: []Layer{{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry", Tries: 1, Default: true,
				Note: "HTTPRoute shop/web spec.rules[0] sets no retry and no BackendTrafficPolicy targets it", Unset: 1}}},
		},
		{
			name: "a Service no Gateway route reaches: no layer", backend: ServiceRef{"shop", "cart"},
			docs: north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 3}"),
			want: Edge{},
		},
		{
			name: "a GAMMA route (Service parent) is not north-south", backend: ServiceRef{"shop", "frontend"},
			docs: routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "mesh", "", "  parentRefs: [{group: '', kind: Service, name: frontend}]\n  rules: [{backendRefs: [{name: frontend}], retry: {attempts: 3}}]"),
			want: Edge{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			if got := s.Entry(tc.backend); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Entry(%s):\n got %#v\nwant %#v", tc.backend, got, tc.want)
			}
		})
	}
}

func TestBackends(t *testing.T) {
	s := set(t, Options{}, routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "",
		"  parentRefs: [{name: eg}, {group: '', kind: Service, name: mesh-only}]\n  rules:\n  - backendRefs: [{name: frontend}, {name: orders, namespace: api}]\n  - backendRefs: [{name: frontend}, {kind: Backend, group: gateway.envoyproxy.io, name: ext}]")+"\n---\n"+
		routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "mesh", "", "  parentRefs: [{group: '', kind: Service, name: cart}]\n  rules: [{backendRefs: [{name: cart}]}]"))
	want := []ServiceRef{{"api", "orders"}, {"shop", "frontend"}}
	if got := s.Backends(); !reflect.DeepEqual(got, want) {
		t.Errorf("Backends() = %v, want %v", got, want)
	}
}
