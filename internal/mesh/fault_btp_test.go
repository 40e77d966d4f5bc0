package mesh

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLayerTimeEnvoyGatewayFaultDelay reads a BackendTrafficPolicy's
// spec.faultInjection.delay into the entry layers of the routes it covers: held once per request
// before the tries, outside the timeouts, as Istio's. On main the delay was not read (Delay 0,
// Source without it) in every case that has one. A route a policy covers is Envoy Gateway's, and
// where neither its rule nor a policy sets a route timeout Envoy's 15s bounds it
// (EnvoyDefaultRouteTimeout; TestLayerTimeEnvoyGateway has the cases); the route's policy
// replaces a Gateway's whole, so the Gateway's 4s does not apply beside the route's delay-only
// policy (before: 4s, and none where 15s).
func TestLayerTimeEnvoyGatewayFaultDelay(t *testing.T) {
	north := func(rules string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  parentRefs: [{name: eg}]\n  rules:\n"+rules)
	}
	const (
		toWeb = "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}"
		toGW  = "{group: gateway.networking.k8s.io, kind: Gateway, name: eg}"
		fd    = " spec.faultInjection.delay.fixedDelay "
	)
	fault := func(delay string) string { return "  faultInjection:\n    delay: " + delay + "\n" }
	envoy := func(per, total, delay time.Duration, source string) LayerTime {
		return LayerTime{PerTry: per, Timeout: total, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Delay: delay, Source: source}
	}
	rule := north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 2}\n    timeouts: {request: 10s}")
	bare := north("  - backendRefs: [{name: frontend}]")
	for _, tc := range []struct {
		name, docs string
		layer      string // the entry layer's object
		want       LayerTime
	}{
		{"a policy on the route with only a delay: the route's layer, its timeouts, then the delay",
			rule + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 7s}")), "HTTPRoute shop/web",
			envoy(0, 10*time.Second, 7*time.Second, "HTTPRoute shop/web spec.rules[0], BackendTrafficPolicy shop/f"+fd+"7s")},
		{"the policy that sets the retry: its layer",
			bare + "\n---\n" + btp("shop", "p", toWeb, "  retry: {numRetries: 2}\n"+fault("{fixedDelay: 1500ms, percentage: 100}")), "BackendTrafficPolicy shop/p",
			envoy(0, 15*time.Second, 1500*ms, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/p and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/p"+fd+"1500ms")},
		{"a policy on the Gateway covers its routes",
			bare + "\n---\n" + btp("shop", "g", toGW, fault("{fixedDelay: 3s}")), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, 3*time.Second, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/g and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/g"+fd+"3s")},
		{"the route's policy over the Gateway's",
			bare + "\n---\n" + btp("shop", "g", toGW, fault("{fixedDelay: 5s}")) + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 2s}")), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, 2*time.Second, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/f"+fd+"2s")},
		// The route's policy replaces the Gateway's whole (envoyproxy/gateway d32f28294245
		// internal/gatewayapi/backendtrafficpolicy.go:705, :1739): no retry, the delay, no
		// timeout but Envoy's 15s. Before: the Gateway's retry (2 tries) and its 4s.
		{"the Gateway's policy sets the retry, the route's the delay: the route's replaces it, no retry",
			bare + "\n---\n" + btp("shop", "g", toGW, "  retry: {numRetries: 1}\n  timeout: {http: {requestTimeout: 4s}}") + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 6s}")), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, 6*time.Second, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/f"+fd+"6s")},
		// With mergeType the two merge (backendtrafficpolicy.go translateBackendTrafficPolicyForRouteWithMerge):
		// the Gateway's retry, the longer of the timeouts (15s: the route's sets none), the delay.
		{"the route's policy with mergeType: merged with the Gateway's, its retry counts",
			bare + "\n---\n" + btp("shop", "g", toGW, "  retry: {numRetries: 1}\n  timeout: {http: {requestTimeout: 4s}}") + "\n---\n" + btp("shop", "f", toWeb, "  mergeType: StrategicMerge\n"+fault("{fixedDelay: 6s}")), "BackendTrafficPolicy shop/g",
			envoy(0, 15*time.Second, 6*time.Second, "BackendTrafficPolicy shop/g, "+"Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/f"+fd+"6s")},
		{"a share under 100 % counts and is named",
			bare + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 9s, percentage: 0.5}")), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, 9*time.Second, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/f"+fd+"9s at 0.5%")},
		{"a percentage the CRD does not bound (over 100): Envoy holds every request",
			bare + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 1s, percentage: 250}")), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, time.Second, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none), "+"BackendTrafficPolicy shop/f"+fd+"1s")},
		{"percentage 0: no delay",
			rule + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 7s, percentage: 0}")), "HTTPRoute shop/web",
			envoy(0, 10*time.Second, 0, "HTTPRoute shop/web spec.rules[0]")},
		{"a zero delay: none",
			bare + "\n---\n" + btp("shop", "f", toWeb, fault("{fixedDelay: 0s}")), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, 0, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none)")},
		{"an abort alone: no time",
			bare + "\n---\n" + btp("shop", "f", toWeb, "  faultInjection: {abort: {httpStatus: 503, percentage: 100}}\n"), "HTTPRoute shop/web",
			envoy(0, 15*time.Second, 0, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/f and HTTPRoute shop/web set none)")},
		{"a policy on another route: none",
			bare + "\n---\n" + btp("shop", "f", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: other}", fault("{fixedDelay: 7s}")), "HTTPRoute shop/web",
			envoy(0, 0, 0, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			e := s.Entry(ServiceRef{"shop", "frontend"})
			if len(e.Layers) != 1 || e.Layers[0].Object != tc.layer {
				t.Fatalf("layers %+v, want one of %s", e.Layers, tc.layer)
			}
			if got := s.LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("LayerTime(%+v)\n got %+v\nwant %+v", e.Layers[0], got, tc.want)
			}
			if got := s.Clone().LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("clone: %+v", got)
			}
			var warn []string
			if tc.want.Delay > 0 {
				warn = []string{WarnEnvoyGatewayFaultDelay(tc.want.Source[strings.LastIndex(tc.want.Source, "BackendTrafficPolicy "):])}
			}
			if !slices.Equal(e.Warnings, warn) {
				t.Errorf("warnings %q, want %q", e.Warnings, warn)
			}
			if got := s.TimeLayer(e.Layers[0]).Delay; got != tc.want.Delay {
				t.Errorf("TimeLayer delay %s, want %s", got, tc.want.Delay)
			}
			// Removing the policies drops the delay.
			for _, d := range strings.Split(tc.docs, "\n---\n") {
				if strings.Contains(d, "kind: BackendTrafficPolicy") {
					name := d[strings.Index(d, "{name: ")+len("{name: "):]
					s.Remove(GroupEnvoyGateway, "BackendTrafficPolicy", "shop", name[:strings.IndexByte(name, ',')])
				}
			}
			if got := s.LayerTime(s.Entry(ServiceRef{"shop", "frontend"}).Layers[0]).Delay; got != 0 {
				t.Errorf("after removing the policies: delay %s", got)
			}
		})
	}
}

// TestEnvoyGatewayFaultErrors: what Envoy Gateway's CRD refuses in spec.faultInjection is an
// error naming the object, the field and the value (on main each was read without one).
func TestEnvoyGatewayFaultErrors(t *testing.T) {
	const p = "BackendTrafficPolicy shop/p spec.faultInjection"
	for _, tc := range []struct{ fault, want string }{
		{"{}", p + `: neither delay nor abort, which Envoy Gateway's CRD refuses ("Delay and abort faults are set at least one.")`},
		{"{delay: {percentage: 50}}", p + ".delay.fixedDelay: missing, which Envoy Gateway's CRD requires in a delay"},
		{"{delay: {fixedDelay: 1.5s}}", p + `.delay.fixedDelay: "1.5s" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{"{delay: {fixedDelay: 500us}}", p + `.delay.fixedDelay: "500us" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{"{abort: {httpStatus: 503, grpcStatus: 14}}", p + ".abort: httpStatus 503 and grpcStatus 14 together, which Envoy Gateway's CRD refuses (one of them)"},
		{"{abort: {percentage: 10}}", p + ".abort: neither httpStatus nor grpcStatus, which Envoy Gateway's CRD refuses (one of them)"},
		{"{abort: {httpStatus: 700}}", p + ".abort.httpStatus: 700 is refused by Envoy Gateway's CRD: 200 to 600"},
		{"{abort: {grpcStatus: 17}}", p + ".abort.grpcStatus: 17 is refused by Envoy Gateway's CRD: 0 to 16"},
		{"{delay: {fixedDelay: 7s}, abort: {grpcStatus: -1}}", p + ".abort.grpcStatus: -1 is refused by Envoy Gateway's CRD: 0 to 16"},
	} {
		s := NewSet(Options{})
		_, err := s.AddManifest([]byte(btp("shop", "p", "{kind: Gateway, name: eg}", "  faultInjection: "+tc.fault)))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got %v\nwant %s", tc.fault, err, tc.want)
		}
	}
}

// TestFuzzFaultSeeds: the fuzz seeds of the fault templates build them as written, and the
// Set reads their delays (asWritten, fuzzObjects).
func TestFuzzFaultSeeds(t *testing.T) {
	read := func(data []byte) *Set {
		s := NewSet(Options{})
		for _, obj := range fuzzObjects(t, data) {
			if _, err := s.AddJSON(obj); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	s := read(asWritten(t, 16, 15))
	e := s.Edge(Caller{Name: "Deployment shop/checkout", Namespace: "shop"}, "orders")
	if len(e.Layers) != 1 {
		t.Fatalf("layers %+v", e.Layers)
	}
	want := LayerTime{PerTry: time.Second, Timeout: 3 * time.Second, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Delay: 7 * time.Second,
		Source: "VirtualService shop/vsf spec.http[0], VirtualService shop/vsf spec.http[0].fault.delay.fixedDelay 7s at 50%"}
	if got := s.LayerTime(e.Layers[0]); got != want {
		t.Errorf("VirtualService layer %+v:\n got %+v\nwant %+v", e.Layers[0], got, want)
	}
	s = read(asWritten(t, 1, 17))
	entry := s.Entry(ServiceRef{"shop", "orders"})
	if len(entry.Layers) != 1 {
		t.Fatalf("entry layers %+v", entry.Layers)
	}
	if got := s.LayerTime(entry.Layers[0]); got.Delay != 7*time.Second || got.Source != "HTTPRoute shop/hr spec.rules[0], BackendTrafficPolicy shop/btpf spec.faultInjection.delay.fixedDelay 7s at 50%" {
		t.Errorf("entry layer %+v: %+v", entry.Layers[0], got)
	}
}
