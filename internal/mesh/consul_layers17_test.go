package mesh

import (
	"testing"
	"time"
)

func ledgerRouter(dest string) string {
	return "\napiVersion: consul.hashicorp.com/v1alpha1\nkind: ServiceRouter\nmetadata: {name: ledger, namespace: shop}\nspec:\n  routes:\n  - match: {http: {pathPrefix: /}}\n    destination: " + dest
}

// TestConsulRequestTimeout: a destination's requestTimeout is the route's timeout over all its
// tries (hashicorp/consul agent/xds/routes.go makeUpstreamRouteForDiscoveryChain:
// routeAction.Route.Timeout = destination.RequestTimeout when > 0), parsed with
// time.ParseDuration (agent/structs/config_entry_discoverychain.go
// ServiceRouteDestination.UnmarshalJSON), which refuses "5 seconds". Before, the field was not
// read: no timeout, and a bad value passed.
func TestConsulRequestTimeout(t *testing.T) {
	s := set(t, Options{}, ledgerRouter("{numRetries: 2, retryOnConnectFailure: true, requestTimeout: 4s}"))
	e := s.Edge(caller("shop", ConsulConnectInject, "true"), "ledger")
	if len(e.Layers) != 1 || e.Layers[0].Tries != 3 {
		t.Fatalf("layers %+v, want one of 3 tries", e.Layers)
	}
	lt := s.LayerTime(e.Layers[0])
	want := LayerTime{Timeout: 4 * time.Second, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Source: "ServiceRouter shop/ledger spec.routes[0].destination.requestTimeout"}
	if lt != want {
		t.Fatalf("time %+v, want %+v", lt, want)
	}
	// Unset: no bound assumed (a ServiceResolver's requestTimeout, not read, may set one).
	s = set(t, Options{}, ledgerRouter("{numRetries: 2, retryOnConnectFailure: true}"))
	if lt := s.LayerTime(s.Edge(caller("shop", ConsulConnectInject, "true"), "ledger").Layers[0]); lt.Timeout != 0 || lt.PerTry != 0 {
		t.Fatalf("time %+v, want no timeout", lt)
	}
	_, err := NewSet(Options{}).AddManifest([]byte(ledgerRouter("{numRetries: 2, requestTimeout: 5 seconds}")))
	const msg = `ServiceRouter shop/ledger spec.routes[0].destination.requestTimeout: "5 seconds" is not a Go duration such as 15s (Consul refuses the config entry)`
	if err == nil || err.Error() != msg {
		t.Fatalf("error %v, want %q", err, msg)
	}
}
