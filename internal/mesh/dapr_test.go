package mesh

import (
	"strings"
	"testing"
)

func resiliencyDoc(scopes, policies, targets string) string {
	return "\napiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: res, namespace: shop}\nscopes: " + scopes +
		"\nspec:\n  policies:\n    retries: " + policies + "\n  targets:\n    apps: " + targets
}

func TestDaprEdge(t *testing.T) {
	dapr := caller("shop", "dapr.io/enabled", "true", "dapr.io/app-id", "checkout")
	cases := []struct {
		name   string
		docs   []string
		caller Caller
		want   string
	}{
		{name: "built-in", caller: dapr, want: "Dapr 4 (Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app orders)"},
		{name: "not enabled", caller: caller("shop", "dapr.io/enabled", "false")},
		{name: "enabled in any case, as Dapr's injector reads it", caller: caller("shop", "dapr.io/enabled", "True", "dapr.io/app-id", "checkout"),
			want: "Dapr 4 (Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app orders)"},
		{name: "target replaces the built-in", caller: dapr,
			docs: []string{resiliencyDoc("[]", "{once: {policy: constant, duration: 1s, maxRetries: 1}}", "{orders: {retry: once}}")},
			want: "Dapr 2 (Dapr Resiliency shop/res retry policy once, maxRetries 1 (replaces the built-in retries)) at Resiliency shop/res spec.policies.retries.once.maxRetries"},
		{name: "out of scope", caller: dapr,
			docs: []string{resiliencyDoc("[payments]", "{once: {maxRetries: 1}}", "{orders: {retry: once}}")},
			want: "Dapr 4 (Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app orders)"},
		{name: "built-in overridden upward", caller: dapr,
			docs: []string{resiliencyDoc("[]", "{DaprBuiltInServiceRetries: {maxRetries: 6}}", "{}")},
			want: "Dapr 7 (Dapr Resiliency shop/res overrides DaprBuiltInServiceRetries: maxRetries 6) at Resiliency shop/res spec.policies.retries.DaprBuiltInServiceRetries.maxRetries"},
		{name: "built-in override below the floor", caller: dapr,
			docs: []string{resiliencyDoc("[]", "{DaprBuiltInServiceRetries: {maxRetries: 1}}", "{}")},
			want: "Dapr 4 (Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app orders)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, nsPlain+"\n---\n"+strings.Join(c.docs, "\n---\n"))
			var got []string
			for _, l := range s.Edge(c.caller, "orders").Layers {
				g := string(l.Kind) + " " + l.String()
				if l.Object != "" {
					g += " at " + l.Object + " " + l.FieldPath
				}
				got = append(got, g)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q, want %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}

func TestDaprUnbounded(t *testing.T) {
	for _, c := range []struct{ policies, want string }{
		{"{forever: {maxRetries: -1}}", "Resiliency shop/res spec.policies.retries.forever.maxRetries: -1 retries without bound (target app orders): set a number"},
		{"{forever: {policy: constant}}", "Resiliency shop/res spec.policies.retries.forever.maxRetries: unset (Dapr's default -1) retries without bound (target app orders): set a number"},
	} {
		_, err := NewSet(Options{}).AddManifest([]byte(resiliencyDoc("[]", c.policies, "{orders: {retry: forever}}")))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.policies, err, c.want)
		}
	}
}

// TestLayerTimeDapr: Dapr waits between its tries as its retry policy says, not as Envoy does.
// The built-in service invocation retries wait 1s (docs.dapr.io operations/resiliency/policies/
// retries/override-default-retries: "a backoff interval of 1 second, up to a threshold of 3
// times"; dapr/dapr pkg/resiliency TestBuiltInPoliciesAreCreated: Duration time.Second); a
// Resiliency's policy is constant unless it says exponential, with duration "Defaults to 5s"
// (operations/resiliency/policies). Before, every Dapr layer waited Envoy's 25ms..250ms: 175ms
// over the built-in 3 retries where Dapr waits 3s.
func TestLayerTimeDapr(t *testing.T) {
	dapr := caller("shop", "dapr.io/enabled", "true", "dapr.io/app-id", "checkout")
	const s = 1000 * ms
	for _, tc := range []struct {
		name string
		docs string
		want LayerTime
	}{
		{"the built-in retries: 1s", "",
			LayerTime{BackoffBase: s, BackoffMax: s, Source: "Dapr built-in DaprBuiltInServiceRetries (1s between tries)"}},
		{"a target's constant policy: its duration",
			resiliencyDoc("[]", "{twice: {policy: constant, duration: 2s, maxRetries: 2}}", "{orders: {retry: twice}}"),
			LayerTime{BackoffBase: 2 * s, BackoffMax: 2 * s, Source: "Resiliency shop/res spec.policies.retries.twice"}},
		{"a policy without policy or duration: constant 5s",
			resiliencyDoc("[]", "{twice: {maxRetries: 2}}", "{orders: {retry: twice}}"),
			LayerTime{BackoffBase: 5 * s, BackoffMax: 5 * s, Source: "Resiliency shop/res spec.policies.retries.twice"}},
		{"the built-in override's own duration",
			resiliencyDoc("[]", "{DaprBuiltInServiceRetries: {maxRetries: 5, duration: 3s}}", "{}"),
			LayerTime{BackoffBase: 3 * s, BackoffMax: 3 * s, Source: "Resiliency shop/res spec.policies.retries.DaprBuiltInServiceRetries"}},
		// Exponential: at most 1.5 x min(500ms x 1.5^(n-1), maxInterval) before retry n (the
		// docs' formula, from cenkalti/backoff's 500ms initial interval): bounded by base 750ms
		// doubling up to 1.5 x maxInterval.
		{"an exponential policy: 750ms doubling up to 1.5 x maxInterval",
			resiliencyDoc("[]", "{twice: {policy: exponential, maxInterval: 10s, maxRetries: 2}}", "{orders: {retry: twice}}"),
			LayerTime{BackoffBase: 750 * ms, BackoffMax: 15 * s, Source: "Resiliency shop/res spec.policies.retries.twice"}},
		{"an exponential policy without maxInterval: Dapr's 60s",
			resiliencyDoc("[]", "{twice: {policy: exponential, maxRetries: 2}}", "{orders: {retry: twice}}"),
			LayerTime{BackoffBase: 750 * ms, BackoffMax: 90 * s, Source: "Resiliency shop/res spec.policies.retries.twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := set(t, Options{}, nsPlain+"\n---\n"+tc.docs)
			e := set.Edge(dapr, "orders")
			if len(e.Layers) != 1 || e.Layers[0].Kind != Dapr {
				t.Fatalf("layers %+v", e.Layers)
			}
			if got := set.LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("LayerTime(%+v)\n got %+v\nwant %+v", e.Layers[0], got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ policies, want string }{
		{"{twice: {duration: soon, maxRetries: 2}}", `Resiliency shop/res spec.policies.retries.twice.duration: "soon" is not a duration (a whole number of milliseconds or a Go duration such as 5s; Dapr skips this Resiliency)`},
		{"{twice: {policy: linear, maxRetries: 2}}", `Resiliency shop/res spec.policies.retries.twice.policy: "linear" is neither constant nor exponential (Dapr skips this Resiliency)`},
	} {
		_, err := NewSet(Options{}).AddManifest([]byte(resiliencyDoc("[]", tc.policies, "{orders: {retry: twice}}")))
		if err == nil || err.Error() != tc.want {
			t.Errorf("error %v\nwant %s", err, tc.want)
		}
	}
}
