package mesh

import (
	"errors"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/jsonfield"
)

// Each reader's retry count at and past the bound its CRD's schema sets: past it, an error
// naming the object, the field and the value (the API server refuses the object, so reading it
// would judge what no cluster holds); at it, read.
func TestCountBounds(t *testing.T) {
	kumaRetry := func(n string) string {
		return "apiVersion: kuma.io/v1alpha1\nkind: MeshRetry\nmetadata: {name: r, namespace: kuma-system}\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {http: {numRetries: " + n + "}}}]\n"
	}
	consul := func(n string) string {
		return "apiVersion: consul.hashicorp.com/v1alpha1\nkind: ServiceRouter\nmetadata: {name: api, namespace: shop}\nspec:\n  routes: [{destination: {numRetries: " + n + "}}]\n"
	}
	meshConfig := func(key, n string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    " + key + ": {attempts: " + n + ", retryOn: 5xx}\n"
	}
	httpRoute := func(n string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{retry: {attempts: "+n+"}}]")
	}
	cases := []struct {
		name, doc   string
		path, value string
		want        string // "": read
	}{
		{name: "istio at int32", doc: vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: 2147483647}")},
		{name: "istio over int32", doc: vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: 2147483648}"),
			path: "spec.http[0].retries.attempts", value: "2147483648",
			want: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2147483648 is over 2147483647 (the CRD's format int32: the API server refuses it)"},
		{name: "istio mesh default over int32", doc: meshConfig("defaultHttpRetryPolicy", "4294967296"),
			path: "data.mesh defaultHttpRetryPolicy.attempts", value: "4294967296",
			want: "ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 4294967296 is over 2147483647 (the CRD's format int32: the API server refuses it)"},
		{name: "istio inbound over int32", doc: meshConfig("defaultInboundHttpRetryPolicy", "2147483648"),
			path: "data.mesh defaultInboundHttpRetryPolicy.attempts", value: "2147483648",
			want: "ConfigMap istio-system/istio data.mesh defaultInboundHttpRetryPolicy.attempts: 2147483648 is over 2147483647 (the CRD's format int32: the API server refuses it)"},
		{name: "gateway api at minimum", doc: httpRoute("1")},
		{name: "gateway api at int64", doc: httpRoute("9223372036854775807")},
		{name: "gateway api zero", doc: httpRoute("0"),
			path: "spec.rules[0].retry.attempts", value: "0",
			want: "HTTPRoute shop/web spec.rules[0].retry.attempts: 0 is under 1 (the CRD's minimum 1: the API server refuses it)"},
		{name: "envoy gateway at int32", doc: btp("shop", "p", "{kind: Gateway, name: eg}", "  retry: {numRetries: 2147483647}")},
		{name: "envoy gateway over int32", doc: btp("shop", "p", "{kind: Gateway, name: eg}", "  retry: {numRetries: 2147483648}"),
			path: "spec.retry.numRetries", value: "2147483648",
			want: "BackendTrafficPolicy shop/p spec.retry.numRetries: 2147483648 is over 2147483647 (the CRD's format int32, minimum 0: the API server refuses it)"},
		{name: "kuma at int32", doc: kumaRetry("2147483647")},
		{name: "kuma over int32", doc: kumaRetry("2147483648"),
			path: "spec.to[0].default.http.numRetries", value: "2147483648",
			want: "MeshRetry kuma-system/r spec.to[0].default.http.numRetries: 2147483648 is over 2147483647 (the CRD's format int32: the API server refuses it)"},
		{name: "consul at int32", doc: consul("2147483647")},
		{name: "consul over int32", doc: consul("2147483648"),
			path: "spec.routes[0].destination.numRetries", value: "2147483648",
			want: "ServiceRouter shop/api spec.routes[0].destination.numRetries: 2147483648 is over 2147483647 (the CRD's format int32: the API server refuses it)"},
		{name: "dapr at int64", doc: resiliencyDoc("[]", "{r1: {maxRetries: 9223372036854775807}}", "{orders: {retry: r1}}")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewSet(Options{}).AddManifest([]byte(c.doc))
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v\nwant %q", err, c.want)
			}
			fe, ok := errors.AsType[*jsonfield.Error](err)
			if !ok || fe.Path != c.path || fe.Value != c.value {
				t.Fatalf("field error %+v, want path %q value %q", fe, c.path, c.value)
			}
		})
	}
}

// A count the schema allows up to 2^63-1 reads as saturated tries, never as a wrapped negative
// (before: maxRetries 9223372036854775807 was -9223372036854775808 tries, under every cap).
func TestCountSaturates(t *testing.T) {
	dapr := caller("shop", "dapr.io/enabled", "true", "dapr.io/app-id", "checkout")
	s := set(t, Options{}, nsPlain+"\n---\n"+resiliencyDoc("[]", "{r1: {maxRetries: 9223372036854775807}}", "{orders: {retry: r1}}"))
	var got []string
	for _, l := range s.Edge(dapr, "orders").Layers {
		got = append(got, string(l.Kind)+" "+l.String())
	}
	want := "Dapr 9223372036854775807 (Dapr Resiliency shop/res retry policy r1, maxRetries 9223372036854775807 (replaces the built-in retries))"
	if strings.Join(got, "; ") != want {
		t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), want)
	}
	for n, want := range map[int64]int64{0: 1, 3: 4, graph.Saturated - 1: graph.Saturated, graph.Saturated: graph.Saturated} {
		if got := tries(n); got != want {
			t.Errorf("tries(%d) = %d, want %d", n, got, want)
		}
	}
}
