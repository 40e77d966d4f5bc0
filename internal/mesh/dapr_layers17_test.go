package mesh

import (
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// resiliencyNamed is a Resiliency of namespace shop named name.
func resiliencyNamed(name, scopes, policies, targets string) string {
	return "\napiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: " + name + ", namespace: shop}\nscopes: " + scopes +
		"\nspec:\n  policies:\n    retries: " + policies + "\n  targets:\n    apps: " + targets
}

// TestDaprLayersAsDaprRuns checks the Dapr layers against dapr/dapr at
// d8450742ce3260d93a2346f4398a1e60d019a45b:
//   - pkg/api/http/directmessaging.go:125-134 (onDirectMessage) runs the outer loop with
//     resiliency.EndpointPolicy(app); pkg/resiliency/resiliency.go:620-660 (EndpointPolicy): the
//     target's retry, else getDefaultPolicy (DefaultAppRetryPolicy, else DefaultRetryPolicy,
//     resiliency.go:949-961 with the "App" level of EndpointPolicy, :1135);
//   - pkg/messaging/direct_messaging.go:227-270 (invokeWithRetry, the check at :235) runs the built-in retries
//     inside it unless PolicyDefined(app) (resiliency.go:927-936: r.apps only, defaults not);
//   - resiliency.go:299-314 (FromConfigurations) decodes every Resiliency into one provider, so a
//     target names a policy of any of them.
//
// Before: a DefaultRetryPolicy was not read (4 tries where Dapr makes 3 x 4 = 12), a target
// without a retry kept the built-in 4 (Dapr: 1), and a target naming another Resiliency's
// policy was an error.
func TestDaprLayersAsDaprRuns(t *testing.T) {
	dapr := caller("shop", "dapr.io/enabled", "true", "dapr.io/app-id", "checkout")
	const builtIn = "Dapr 4 (Dapr built-in DaprBuiltInServiceRetries (3 retries), no Resiliency targets app orders)"
	cases := []struct {
		name  string
		docs  []string
		want  string
		tries int64
	}{
		{name: "default policy multiplies the built-in retries", tries: 12,
			docs: []string{resiliencyNamed("res", "[]", "{DefaultRetryPolicy: {policy: constant, duration: 1s, maxRetries: 2}}", "{}")},
			want: "Dapr 3 (Dapr Resiliency shop/res retry policy DefaultRetryPolicy, maxRetries 2 (Dapr's default for an app no Resiliency targets, orders: the built-in retries run inside each of its tries)) at Resiliency shop/res spec.policies.retries.DefaultRetryPolicy.maxRetries; " + builtIn},
		{name: "DefaultAppRetryPolicy before DefaultRetryPolicy", tries: 8,
			docs: []string{resiliencyNamed("res", "[]", "{DefaultRetryPolicy: {maxRetries: 5}, DefaultAppRetryPolicy: {maxRetries: 1}}", "{}")},
			want: "Dapr 2 (Dapr Resiliency shop/res retry policy DefaultAppRetryPolicy, maxRetries 1 (Dapr's default for an app no Resiliency targets, orders: the built-in retries run inside each of its tries)) at Resiliency shop/res spec.policies.retries.DefaultAppRetryPolicy.maxRetries; " + builtIn},
		{name: "a target without a retry turns the built-in retries off", tries: 1,
			docs: []string{"\napiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: res, namespace: shop}\nspec:\n  policies:\n    timeouts: {short: 5s}\n  targets:\n    apps: {orders: {timeout: short}}"},
			want: "Dapr 1 (Dapr Resiliency shop/res targets app orders with no retry policy: no retries (a target turns the built-in retries off)) at Resiliency shop/res spec.targets.apps.orders.retry"},
		{name: "a target beats the default policy", tries: 2,
			docs: []string{resiliencyNamed("res", "[]", "{DefaultRetryPolicy: {maxRetries: 5}, once: {maxRetries: 1}}", "{orders: {retry: once}}")},
			want: "Dapr 2 (Dapr Resiliency shop/res retry policy once, maxRetries 1 (replaces the built-in retries)) at Resiliency shop/res spec.policies.retries.once.maxRetries"},
		{name: "a target naming another Resiliency's policy", tries: 3,
			docs: []string{resiliencyNamed("a-targets", "[]", "{}", "{orders: {retry: twice}}"), resiliencyNamed("b-policies", "[]", "{twice: {maxRetries: 2}}", "{}")},
			want: "Dapr 3 (Dapr Resiliency shop/b-policies retry policy twice, maxRetries 2 (replaces the built-in retries)) at Resiliency shop/b-policies spec.policies.retries.twice.maxRetries"},
		{name: "a target naming a policy no Resiliency defines", tries: 1,
			docs: []string{resiliencyNamed("res", "[]", "{}", "{orders: {retry: forever}}")},
			want: `Dapr 1 (Dapr Resiliency shop/res spec.targets.apps.orders.retry: "forever", which no Resiliency of the caller defines: no retries (a target turns the built-in retries off)) at Resiliency shop/res spec.targets.apps.orders.retry`},
		{name: "another Resiliency's unbounded policy is counted saturated, never 0", tries: graph.Saturated,
			docs: []string{resiliencyNamed("a-targets", "[]", "{}", "{orders: {retry: forever}}"), resiliencyNamed("b-policies", "[]", "{forever: {maxRetries: -1}}", "{}")},
			want: "Dapr 9223372036854775807 (Dapr Resiliency shop/b-policies retry policy forever, maxRetries -1: retries without bound (replaces the built-in retries)) at Resiliency shop/b-policies spec.policies.retries.forever.maxRetries"},
		{name: "a default policy out of the caller's scopes", tries: 4,
			docs: []string{resiliencyNamed("res", "[payments]", "{DefaultRetryPolicy: {maxRetries: 2}}", "{}")},
			want: builtIn},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, nsPlain+"\n---\n"+strings.Join(c.docs, "\n---\n"))
			e := s.Edge(dapr, "orders")
			var got []string
			for _, l := range e.Layers {
				g := string(l.Kind) + " " + l.String()
				if l.Object != "" {
					g += " at " + l.Object + " " + l.FieldPath
				}
				got = append(got, g)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q, want %q", strings.Join(got, "; "), c.want)
			}
			if e.Tries() != c.tries {
				t.Fatalf("tries %d, want %d", e.Tries(), c.tries)
			}
		})
	}
}

// TestDaprBadValues: what dapr/kit config.Decode (config/decode.go decodeString: a whole number
// is milliseconds, else time.ParseDuration) and retry.PolicyType.DecodeString (retry/retry.go:
// constant or exponential, any case) refuse makes Dapr skip the whole Resiliency
// (resiliency.go:309 "Could not read resiliency policy"): an error naming the field here.
func TestDaprBadValues(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{resiliencyNamed("res", "[]", "{slow: {policy: constant, duration: 5 seconds, maxRetries: 2}}", "{orders: {retry: slow}}"),
			`Resiliency shop/res spec.policies.retries.slow.duration: "5 seconds" is not a duration (a whole number of milliseconds or a Go duration such as 5s; Dapr skips this Resiliency)`},
		{resiliencyNamed("res", "[]", "{slow: {policy: exponential, maxInterval: 1 minute, maxRetries: 2}}", "{}"),
			`Resiliency shop/res spec.policies.retries.slow.maxInterval: "1 minute" is not a duration (a whole number of milliseconds or a Go duration such as 5s; Dapr skips this Resiliency)`},
		{resiliencyNamed("res", "[]", "{slow: {policy: linear, maxRetries: 2}}", "{}"),
			`Resiliency shop/res spec.policies.retries.slow.policy: "linear" is neither constant nor exponential (Dapr skips this Resiliency)`},
		{"\napiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: res, namespace: shop}\nspec:\n  policies:\n    timeouts: {short: 5 s}",
			`Resiliency shop/res spec.policies.timeouts.short: "5 s" is not a duration (a whole number of milliseconds or a Go duration such as 5s; Dapr skips this Resiliency)`},
		{resiliencyNamed("res", "[]", "{DefaultRetryPolicy: {policy: exponential}}", "{}"),
			"Resiliency shop/res spec.policies.retries.DefaultRetryPolicy.maxRetries: unset (Dapr's default -1) retries without bound (Dapr's default policy for every app no Resiliency targets): set a number"},
		{resiliencyNamed("res", "[]", "{DefaultAppRetryPolicy: {maxRetries: -1}}", "{}"),
			"Resiliency shop/res spec.policies.retries.DefaultAppRetryPolicy.maxRetries: -1 retries without bound (Dapr's default policy for every app no Resiliency targets): set a number"},
	} {
		_, err := NewSet(Options{}).AddManifest([]byte(c.doc))
		if err == nil || err.Error() != c.want {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
	// What Dapr decodes is accepted: milliseconds as a whole number, a Go duration, any case.
	ok := resiliencyNamed("res", "[]", "{slow: {policy: Exponential, duration: \"500\", maxInterval: 1m30s, maxRetries: 2}}", "{orders: {retry: slow}}")
	if _, err := NewSet(Options{}).AddManifest([]byte(ok)); err != nil {
		t.Fatalf("valid Resiliency refused: %v", err)
	}
}

// TestEdgeTriesSaturates: a layer without bound times another layer stays saturated; before,
// Edge.Tries multiplied plainly and wrapped to a negative.
func TestEdgeTriesSaturates(t *testing.T) {
	e := Edge{Layers: []Layer{{Kind: Dapr, Tries: graph.Saturated}, {Kind: Istio, Tries: 3}}}
	if got := e.Tries(); got != graph.Saturated {
		t.Fatalf("Tries %d, want %d", got, graph.Saturated)
	}
}

// TestDaprTime: Dapr's runner waits as its retry policy says (dapr/kit retry/retry.go:66-77
// DefaultConfig: constant 5 s, exponential from 500 ms to 60 s with randomization 0.5; :117-136
// NewBackOff), the built-in retries 1 s (dapr/dapr pkg/resiliency/resiliency.go:368-378). Before,
// Envoy's 25-250 ms was assumed for every Dapr layer.
func TestDaprTime(t *testing.T) {
	docs := resiliencyNamed("res", "[]", "{c: {policy: constant, duration: 2s, maxRetries: 2}, d: {maxRetries: 2}, e: {policy: exponential, maxInterval: \"4000\", maxRetries: 3}, f: {policy: Exponential, maxRetries: 1}}", "{}")
	s := set(t, Options{}, docs)
	for _, c := range []struct {
		l         Layer
		base, max time.Duration
	}{
		{Layer{Kind: Dapr, Tries: 4, Default: true}, time.Second, time.Second},
		{Layer{Kind: Dapr, Object: "Resiliency shop/res", FieldPath: "spec.policies.retries.c.maxRetries", Tries: 3}, 2 * time.Second, 2 * time.Second},
		{Layer{Kind: Dapr, Object: "Resiliency shop/res", FieldPath: "spec.policies.retries.d.maxRetries", Tries: 3}, 5 * time.Second, 5 * time.Second},
		{Layer{Kind: Dapr, Object: "Resiliency shop/res", FieldPath: "spec.policies.retries.e.maxRetries", Tries: 4}, 750 * time.Millisecond, 6 * time.Second},
		{Layer{Kind: Dapr, Object: "Resiliency shop/res", FieldPath: "spec.policies.retries.f.maxRetries", Tries: 2}, 750 * time.Millisecond, 90 * time.Second},
	} {
		lt := s.LayerTime(c.l)
		if lt.BackoffBase != c.base || lt.BackoffMax != c.max || lt.PerTry != 0 || lt.Timeout != 0 {
			t.Errorf("%s: %+v, want backoff %v..%v and no timeout", c.l.FieldPath, lt, c.base, c.max)
		}
	}
}

// TestDaprTargetTimeout: a target's timeout bounds each try of its retry policy (dapr/dapr
// pkg/resiliency/policy.go NewRunnerWithOptions: context.WithTimeout around each attempt, the
// retry loop outside it); before, no Dapr layer had a per-try bound.
func TestDaprTargetTimeout(t *testing.T) {
	doc := "\napiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: res, namespace: shop}\nspec:\n  policies:\n    timeouts: {short: 3s, long: \"7000\"}\n" +
		"    retries: {twice: {maxRetries: 2, duration: 1s}, once: {maxRetries: 1}}\n  targets:\n    apps: {orders: {retry: twice, timeout: short}, payments: {retry: twice, timeout: long}, ledger: {retry: once}}"
	s := set(t, Options{}, doc)
	for _, c := range []struct {
		policy string
		perTry time.Duration
	}{{"twice", 7 * time.Second}, {"once", 0}} {
		lt := s.LayerTime(Layer{Kind: Dapr, Object: "Resiliency shop/res", FieldPath: "spec.policies.retries." + c.policy + ".maxRetries", Tries: 3})
		if lt.PerTry != c.perTry {
			t.Errorf("%s: per try %v, want %v", c.policy, lt.PerTry, c.perTry)
		}
	}
}
