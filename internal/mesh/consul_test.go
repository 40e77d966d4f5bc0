package mesh

import "testing"

func routerDoc(dest string) string {
	return "\napiVersion: consul.hashicorp.com/v1alpha1\nkind: ServiceRouter\nmetadata: {name: orders, namespace: plain}\nspec:\n  routes:\n  - match: {http: {pathPrefix: /admin}}\n    destination: {service: admin}\n  - destination: " + dest
}

func TestConsulEdge(t *testing.T) {
	consul := caller("plain", "consul.hashicorp.com/connect-inject", "true")
	cases := []struct {
		name   string
		doc    string
		caller Caller
		want   string
	}{
		{name: "no ServiceRouter", caller: consul, want: "Consul 1 (Consul: no ServiceRouter plain/orders sets retries)"},
		{name: "not injected", caller: caller("plain"), doc: routerDoc("{numRetries: 4, retryOnConnectFailure: true}")},
		{name: "numRetries with a condition", caller: consul, doc: routerDoc("{numRetries: 4, retryOnConnectFailure: true}"),
			want: "Consul 5 (Consul ServiceRouter plain/orders numRetries 4) at ServiceRouter plain/orders spec.routes[1].destination.numRetries"},
		{name: "numRetries without a condition gives none", caller: consul, doc: routerDoc("{numRetries: 4}"),
			want: "Consul 1 (Consul ServiceRouter plain/orders: numRetries 4 with no retry condition retries nothing) at ServiceRouter plain/orders spec.routes[1].destination.numRetries"},
		{name: "condition without numRetries", caller: consul, doc: routerDoc("{retryOnStatusCodes: [503]}"),
			want: "Consul 2 (Consul ServiceRouter plain/orders a retry condition without numRetries: Envoy's 1 retry) at ServiceRouter plain/orders spec.routes[1].destination.numRetries"},
		{name: "retryOn list", caller: consul, doc: routerDoc("{numRetries: 2, retryOn: [gateway-error]}"),
			want: "Consul 3 (Consul ServiceRouter plain/orders numRetries 2) at ServiceRouter plain/orders spec.routes[1].destination.numRetries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			docs := nsPlain
			if c.doc != "" {
				docs += "\n---\n" + c.doc
			}
			s := set(t, Options{}, docs)
			got := ""
			for _, l := range s.Edge(c.caller, "orders").Layers {
				got = string(l.Kind) + " " + l.String()
				if l.Object != "" {
					got += " at " + l.Object + " " + l.FieldPath
				}
			}
			if got != c.want {
				t.Fatalf("layer %q, want %q", got, c.want)
			}
		})
	}
	_, err := NewSet(Options{}).AddManifest([]byte(routerDoc("{numRetries: -1}")))
	if want := "ServiceRouter plain/orders spec.routes[1].destination.numRetries: -1 is negative"; err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
