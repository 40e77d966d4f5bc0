package mesh

import (
	"encoding/json"
	"testing"

	"sigs.k8s.io/yaml"
)

// Fixes in the unit of the thing they change for the layers of Kuma, Dapr and Consul (#28): the
// layer is read from a real object, the rewrite names its field and a value its project reads as
// the target tries, and applying it gives an object whose layer has those tries.
func TestPlanRewriteKinds(t *testing.T) {
	kumaNS := "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {kuma.io/sidecar-injection: enabled}}\n"
	cases := []struct {
		name     string
		objects  []string // YAML; the first is the one rewritten
		caller   Caller
		callee   string
		tries    int64
		want     string // the suggestion, or the error
		wantErr  bool
		newTries int64 // the layer's tries after the rewrite, read back
	}{
		{
			name: "Kuma numRetries 4 -> 1",
			objects: []string{`apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: orders-retry, namespace: shop, labels: {kuma.io/mesh: default}}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: orders, k8s.kuma.io/namespace: shop}}
    default: {http: {numRetries: 4}}`, kumaNS},
			caller: Caller{Namespace: "shop", Name: "frontend"}, callee: "orders", tries: 2,
			want: "MeshRetry shop/orders-retry spec.to[0].default.http.numRetries: 4 -> 1", newTries: 2,
		},
		{
			name: "Kuma without numRetries: Envoy's 1 retry, the field set to 0",
			objects: []string{`apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: all, namespace: kuma-system}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: Mesh}
    default: {grpc: {backOff: {baseInterval: 1s}}}`, kumaNS},
			caller: Caller{Namespace: "shop", Name: "frontend"}, callee: "orders", tries: 1,
			want: "MeshRetry kuma-system/all spec.to[0].default.grpc.numRetries: unset (1) -> 0", newTries: 1,
		},
		{
			name:    "Kuma's default MeshRetry, assumed: the object Kuma creates",
			objects: []string{"apiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\n", kumaNS},
			caller:  Caller{Namespace: "shop", Name: "frontend"}, callee: "orders", tries: 3,
			want: "MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries: 5 -> 2",
		},
		{
			name: "Dapr retry policy targeting the app: maxRetries",
			objects: []string{`apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata: {name: payments, namespace: shop}
spec:
  policies: {retries: {slow: {policy: exponential, maxRetries: 5}}}
  targets: {apps: {payment: {retry: slow}}}`},
			caller: Caller{Namespace: "shop", Name: "orders", Annotations: map[string]string{DaprEnabled: "true", DaprAppID: "orders"}}, callee: "payment", tries: 3,
			want: "Resiliency shop/payments spec.policies.retries.slow.maxRetries: 5 -> 2", newTries: 3,
		},
		{
			name:    "Dapr built-in retries: no object; a Resiliency targeting the app replaces them",
			objects: []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"},
			caller:  Caller{Namespace: "shop", Name: "orders", Annotations: map[string]string{DaprEnabled: "true", DaprAppID: "orders"}}, callee: "payment", tries: 2, wantErr: true,
			want: "Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app payment: declare a Resiliency in the caller's namespace whose spec.targets.apps.<app-id>.retry names a retry policy with maxRetries: 1 (it replaces the built-in retries)",
		},
		{
			name: "Dapr DaprBuiltInServiceRetries is floored at 3",
			objects: []string{`apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata: {name: builtin, namespace: shop}
spec:
  policies: {retries: {DaprBuiltInServiceRetries: {policy: constant, maxRetries: 6}}}`},
			caller: Caller{Namespace: "shop", Name: "orders", Annotations: map[string]string{DaprEnabled: "true", DaprAppID: "orders"}}, callee: "payment", tries: 3, wantErr: true,
			want: "Dapr Resiliency shop/builtin overrides DaprBuiltInServiceRetries: maxRetries 6: Dapr floors DaprBuiltInServiceRetries at 3 retries: set Resiliency shop/builtin spec.policies.retries.DaprBuiltInServiceRetries.maxRetries to 3 and target the app with a retry policy of maxRetries: 2 (it replaces the built-in retries)",
		},
		{
			name: "Consul numRetries 3 -> 1",
			objects: []string{`apiVersion: consul.hashicorp.com/v1alpha1
kind: ServiceRouter
metadata: {name: ledger, namespace: shop}
spec:
  routes:
  - destination: {numRetries: 3, retryOnStatusCodes: [503]}`},
			caller: Caller{Namespace: "shop", Name: "payment", Annotations: map[string]string{ConsulConnectInject: "true"}}, callee: "ledger", tries: 2,
			want: "ServiceRouter shop/ledger spec.routes[0].destination.numRetries: 3 -> 1", newTries: 2,
		},
		{
			name: "Consul 1 try: numRetries 0 is unset (Envoy's 1 retry), the conditions go",
			objects: []string{`apiVersion: consul.hashicorp.com/v1alpha1
kind: ServiceRouter
metadata: {name: ledger, namespace: shop}
spec:
  routes:
  - destination: {numRetries: 3, retryOnConnectFailure: true}`},
			caller: Caller{Namespace: "shop", Name: "payment", Annotations: map[string]string{ConsulConnectInject: "true"}}, callee: "ledger", tries: 1, wantErr: true,
			want: "Consul ServiceRouter shop/ledger numRetries 3: ServiceRouter shop/ledger spec.routes[0].destination.numRetries cannot give 1 try (0 is unset, Envoy's 1 retry): remove retryOn, retryOnConnectFailure and retryOnStatusCodes of spec.routes[0].destination",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			layer := func(objs []string) Layer {
				s := NewSet(Options{})
				for _, o := range objs {
					if _, err := s.AddManifest([]byte(o)); err != nil {
						t.Fatal(err)
					}
				}
				e := s.Edge(c.caller, c.callee)
				if len(e.Layers) != 1 {
					t.Fatalf("layers %v, want one", e.Layers)
				}
				return e.Layers[0]
			}
			l := layer(c.objects)
			rw, err := PlanRewrite(l, c.tries)
			if c.wantErr {
				if err == nil || err.Error() != c.want {
					t.Fatalf("error %v\nwant %s", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rw.Suggestion != c.want {
				t.Fatalf("suggestion %q\nwant %q", rw.Suggestion, c.want)
			}
			if c.newTries == 0 {
				return
			}
			js, err := yaml.YAMLToJSON([]byte(c.objects[0]))
			if err != nil {
				t.Fatal(err)
			}
			out, err := rw.Apply(js)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			y, _ := yaml.Marshal(back)
			if got := layer(append([]string{string(y)}, c.objects[1:]...)); got.Tries != c.newTries {
				t.Fatalf("after the rewrite the layer gives %d tries, want %d:\n%s", got.Tries, c.newTries, y)
			}
		})
	}
}
