package mesh

import (
	"fmt"
	"testing"
)

// TestBTPTargetSelectors: an Envoy Gateway BackendTrafficPolicy that names its targets by labels
// (spec.targetSelectors) multiplies the entry it targets, as Envoy Gateway resolves them
// (internal/gatewayapi/helpers.go resolvePolicyTargetsFromSelectors). Before, such a policy
// targeted nothing: 1 try where Envoy Gateway makes 6.
func TestBTPTargetSelectors(t *testing.T) {
	const base = `
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: policies}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: eg, namespace: shop, labels: {tier: edge}}
spec: {gatewayClassName: eg, listeners: [{name: http, protocol: HTTP, port: 80}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop, labels: {retry: "on"}}
spec:
  parentRefs: [{name: eg}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
`
	policy := func(ns, selectors string) string {
		return fmt.Sprintf("apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: BackendTrafficPolicy\nmetadata: {name: r, namespace: %s}\nspec:\n  targetSelectors: %s\n  retry: {numRetries: 5}", ns, selectors)
	}
	const six = "6 (BackendTrafficPolicy %s/r spec.retry.numRetries: 5 (targets %s))"
	const none = "1 (HTTPRoute shop/web spec.rules[0] sets no retry and no BackendTrafficPolicy targets it)"
	for _, c := range []struct {
		name, ns, selectors, want string
	}{
		{"matchLabels", "shop", `[{kind: HTTPRoute, matchLabels: {retry: "on"}}]`, fmt.Sprintf(six, "shop", "HTTPRoute/shop/web")},
		{"matchExpressions Exists", "shop", `[{kind: HTTPRoute, matchExpressions: [{key: retry, operator: Exists}]}]`, fmt.Sprintf(six, "shop", "HTTPRoute/shop/web")},
		{"no labels: every route of the namespace", "shop", `[{kind: HTTPRoute}]`, fmt.Sprintf(six, "shop", "HTTPRoute/shop/web")},
		{"labels that do not match", "shop", `[{kind: HTTPRoute, matchLabels: {retry: "off"}}]`, none},
		{"another kind", "shop", `[{kind: GRPCRoute}]`, none},
		{"another group", "shop", `[{group: example.com, kind: HTTPRoute}]`, none},
		{"the Gateway", "shop", `[{kind: Gateway, matchLabels: {tier: edge}}]`, fmt.Sprintf(six, "shop", "Gateway/shop/eg")},
		{"another namespace, Same", "policies", `[{kind: HTTPRoute}]`, none},
		{"another namespace, All", "policies", `[{kind: HTTPRoute, namespaces: {from: All}}]`, fmt.Sprintf(six, "policies", "HTTPRoute/shop/web")},
		{"another namespace, Selector", "policies", `[{kind: HTTPRoute, namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}]`, fmt.Sprintf(six, "policies", "HTTPRoute/shop/web")},
		{"another namespace, Selector by name", "policies",
			`[{kind: HTTPRoute, namespaces: {from: Selector, selector: {matchLabels: {kubernetes.io/metadata.name: shop}}}}]`, fmt.Sprintf(six, "policies", "HTTPRoute/shop/web")},
		{"another namespace, Selector not matching", "policies", `[{kind: HTTPRoute, namespaces: {from: Selector, selector: {matchLabels: {team: b}}}}]`, none},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, base+policy(c.ns, c.selectors))
			got := fmt.Sprint(s.Entry(ServiceRef{"shop", "web"}).Layers)
			if got != "["+c.want+"]" {
				t.Fatalf("entry layers %s\nwant %s", got, c.want)
			}
		})
	}
	// A selector the API server's syntax refuses: an error naming the policy, field and value.
	for _, c := range []struct{ selectors, want string }{
		{`[{kind: HTTPRoute, matchExpressions: [{key: retry, operator: Has}]}]`,
			`BackendTrafficPolicy shop/r spec.targetSelectors[0]: "Has" is not a valid label selector operator`},
		{`[{kind: HTTPRoute}, {kind: HTTPRoute, namespaces: {from: Selector}}]`,
			`BackendTrafficPolicy shop/r spec.targetSelectors[1].namespaces: from Selector without a selector`},
	} {
		_, err := NewSet(Options{}).AddManifest([]byte(policy("shop", c.selectors)))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v\nwant %s", c.selectors, err, c.want)
		}
	}
}
