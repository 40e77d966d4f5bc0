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
