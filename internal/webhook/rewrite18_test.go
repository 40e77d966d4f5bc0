package webhook

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	jsonpatch5 "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// TestRewriteZeroAttemptsKeepsPerTryBound: a VirtualService route lowered to attempts 0 loses
// its perTryTimeout (Istio gives Envoy no retry policy then), so before rewrite18 the one try
// left was bounded by nothing of the route's, longer than the route as sent. The rewrite now
// sets the route's timeout to the per-try timeout where it is unset or longer; the rewritten
// object, judged again, is within the policy (Reject admits it with no warning).
func TestRewriteZeroAttemptsKeepsPerTryBound(t *testing.T) {
	ratings := func(second string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
    timeout: 3s
    retries: {attempts: 2, perTryTimeout: 1s}
` + second
	}
	reviews := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`
	timed := func(e v1alpha1.Enforcement, maxT time.Duration) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, maxT)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	capped := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		return []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, e)}
	}
	const (
		newRoute60 = "RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[1].retries.attempts: 1 -> 0, " +
			`spec.http[1].retries.perTryTimeout: "9s" -> removed, spec.http[1].timeout: "60s" -> "9s" (productpage 18.025s -> reviews 18.025s -> ratings ? = 18.025s > maxTimeToAnswer 15s)`
		capRewrite = "RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[0].retries.attempts: 3 -> 0"
		capChain   = " (productpage -x3-> reviews -x4-> ratings = 12 > cap 3)"
	)
	zero := func(i string) jsonpatch.Operation {
		return jsonpatch.Operation{Operation: "replace", Path: "/spec/http/" + i + "/retries/attempts", Value: float64(0)}
	}
	noPerTry := func(i string) jsonpatch.Operation {
		return jsonpatch.Operation{Operation: "remove", Path: "/spec/http/" + i + "/retries/perTryTimeout"}
	}
	for _, tc := range []struct {
		name        string
		cluster     []string
		policies    func(v1alpha1.Enforcement) []*v1alpha1.RetryPolicy
		object, old string
		enforcement v1alpha1.Enforcement // "": Rewrite
		want        MeshDecision
		// within: the rewritten object, judged again under Reject, is admitted.
		within bool
	}{
		{
			// Reject's advice names the timeout the kept attempts: 0 needs: attempts 0 alone
			// leaves the route its 60s (Istio drops perTryTimeout), over 15s.
			name: "time, Reject: attempts 0 advised with the route timeout", cluster: []string{altIstioNS, reviews, ratings("")}, enforcement: v1alpha1.EnforcementReject,
			policies: func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy { return timed(e, 15*time.Second) },
			object:   ratings("  - route: [{destination: {host: ratings}}]\n    timeout: 60s\n    retries: {attempts: 1, perTryTimeout: 9s}\n"), old: ratings(""),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1].retries.attempts: unset (a new route) -> 1 (a route other than the counted one: the time takes its tries too) makes " +
				"productpage 18.025s -> reviews 18.025s -> ratings ? = 18.025s > maxTimeToAnswer 15s; VirtualService bookinfo/ratings may keep attempts: 0" +
				` with spec.http[1].timeout: "60s" -> "9s" (Istio drops perTryTimeout at attempts 0)`},
		},
		{
			// The counted route's own keep (judgeMesh's advice), raised 3 -> 5 under a cap.
			name: "cap, Reject: attempts 0 advised with the route timeout", cluster: []string{altIstioNS, strings.Replace(vsYAML("3"), "{attempts: 3}", "{attempts: 0}\n    timeout: 30s", 1)}, enforcement: v1alpha1.EnforcementReject,
			policies: capped,
			object:   strings.Replace(vsYAML("3"), "{attempts: 3}", "{attempts: 2, perTryTimeout: 2s}\n    timeout: 30s", 1),
			old:      strings.Replace(vsYAML("3"), "{attempts: 3}", "{attempts: 0}\n    timeout: 30s", 1),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 makes productpage -x3-> reviews -x3-> ratings = 9 > cap 3" +
				"; VirtualService bookinfo/ratings may keep attempts: 0" + ` with spec.http[0].timeout: "30s" -> "2s" (Istio drops perTryTimeout at attempts 0)`},
		},
		{
			// 2 x 9s + 25ms = 18.025s as sent; lowered to attempts 0 it was bounded by its
			// 60s timeout (by the application's 2m without one), admitted with the warning
			// that nothing fitted.
			name: "time: a new route of a 60s timeout over its 2 tries of 9s: the timeout becomes 9s", cluster: []string{altIstioNS, reviews, ratings("")},
			policies: func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy { return timed(e, 15*time.Second) },
			object:   ratings("  - route: [{destination: {host: ratings}}]\n    timeout: 60s\n    retries: {attempts: 1, perTryTimeout: 9s}\n"), old: ratings(""),
			want: MeshDecision{Allowed: true, Warnings: []string{newRoute60}, Patch: []jsonpatch.Operation{
				ann(`spec.http[1].retries.attempts: 1; spec.http[1].retries.perTryTimeout: "9s"; spec.http[1].timeout: "60s"`),
				zero("1"), noPerTry("1"),
				{Operation: "replace", Path: "/spec/http/1/timeout", Value: "9s"},
			}},
			within: true,
		},
		{
			// The route's own 5s bounds its one try below the per-try 9s: no count of its
			// tries fits, and the chain waits on its own 5s. Rewrite lowered it to attempts 0
			// and admitted it with a warning while the chain stayed over maxTimeToAnswer;
			// it is refused now, as Reject would refuse what Rewrite would store (gate19).
			name: "time: a route timeout of 5s below the per-try 9s: refused", cluster: []string{altIstioNS, reviews, ratings("")},
			policies: func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy { return timed(e, 4*time.Second) },
			object:   ratings("  - route: [{destination: {host: ratings}}]\n    timeout: 5s\n    retries: {attempts: 1, perTryTimeout: 9s}\n"), old: ratings(""),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1]: per-try timeout 9s, timeout 5s (a new route; the chain's worst time was 3s) makes " +
				"productpage 5s -> reviews 5s -> ratings ? = 5s > maxTimeToAnswer 4s (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"},
		},
		{
			name: "cap: attempts 3 -> 0 under a route timeout of 30s: the timeout becomes 2s", cluster: []string{altIstioNS},
			policies: capped,
			object:   strings.Replace(vsYAML("3"), "{attempts: 3}", "{attempts: 3, perTryTimeout: 2s}\n    timeout: 30s", 1),
			want: MeshDecision{Allowed: true, Warnings: []string{capRewrite + `, spec.http[0].retries.perTryTimeout: "2s" -> removed, spec.http[0].timeout: "30s" -> "2s"` + capChain},
				Patch: []jsonpatch.Operation{
					ann(`spec.http[0].retries.attempts: 3; spec.http[0].retries.perTryTimeout: "2s"; spec.http[0].timeout: "30s"`),
					zero("0"), noPerTry("0"),
					{Operation: "replace", Path: "/spec/http/0/timeout", Value: "2s"},
				}},
			within: true,
		},
		{
			name: "cap: attempts 3 -> 0 under a route timeout of 1s: kept", cluster: []string{altIstioNS},
			policies: capped,
			object:   strings.Replace(vsYAML("3"), "{attempts: 3}", "{attempts: 3, perTryTimeout: 2s}\n    timeout: 1s", 1),
			want: MeshDecision{Allowed: true, Warnings: []string{capRewrite + `, spec.http[0].retries.perTryTimeout: "2s" -> removed` + capChain},
				Patch: []jsonpatch.Operation{ann(`spec.http[0].retries.attempts: 3; spec.http[0].retries.perTryTimeout: "2s"`), zero("0"), noPerTry("0")}},
			within: true,
		},
		{
			name: "cap: attempts 3 -> 0 without a per-try timeout: no timeout set", cluster: []string{altIstioNS},
			policies: capped,
			object:   vsYAML("3"),
			want: MeshDecision{Allowed: true, Warnings: []string{capRewrite + capChain},
				Patch: []jsonpatch.Operation{ann("spec.http[0].retries.attempts: 3"), zero("0")}},
			within: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.enforcement
			if e == "" {
				e = v1alpha1.EnforcementRewrite
			}
			got := decideOn(t, tc.cluster, tc.policies(e), tc.object, tc.old)
			expectMeshDecision(t, got, tc.want)
			if !tc.within || len(got.Patch) == 0 {
				return
			}
			ops, err := json.Marshal(got.Patch)
			if err != nil {
				t.Fatal(err)
			}
			p, err := jsonpatch5.DecodePatch(ops)
			if err != nil {
				t.Fatal(err)
			}
			out, err := p.Apply(jsonOf(t, tc.object))
			if err != nil {
				t.Fatal(err)
			}
			expectMeshDecision(t, decideOn(t, tc.cluster, tc.policies(v1alpha1.EnforcementReject), string(out), tc.old), MeshDecision{Allowed: true})
		})
	}
}

// TestDecideMeshNewEntryRouteTime: a route new at an entrypoint (a rule added to an HTTPRoute on
// a Gateway, an http route added to a VirtualService bound to an ingress gateway, or either
// created whole) is judged by the chain's time as a service-to-service one is (gate18). Before
// rewrite18 the gate took an entry layer's other routes from mesh.Set.TimeAlternatives, which
// gives none for entry layers, and looked for the wait on service-to-service hops only: each
// case marked over was admitted under every enforcement while the chain went over
// maxTimeToAnswer on the new route's own 60s.
func TestDecideMeshNewEntryRouteTime(t *testing.T) {
	const fastRule = "retry: {attempts: 1}\n    timeouts: {request: 3s}"
	const slowRule = "  - matches: [{path: {value: /slow}}]\n    backendRefs: [{name: productpage, port: 9080}]\n    retry: {attempts: 1}\n    timeouts: {request: 60s}\n"
	front := func(routes string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: bookinfo}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http:
` + routes
	}
	const fastVS = "  - match: [{uri: {prefix: /fast}}]\n    route: [{destination: {host: productpage}}]\n    timeout: 3s\n    retries: {attempts: 0}\n"
	const slowVS = "  - route: [{destination: {host: productpage}}]\n    timeout: 60s\n    retries: {attempts: 0}\n"
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		// The application's own per-try timeout would bound every hop below the entrypoint.
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	const (
		hrChain    = "client -x2-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
		vsChain    = "productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
		hrNew      = "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[1]: per-try timeout unset, timeout 1m0s (a new route; the chain's worst time was 3s) makes " + hrChain
		vsNew      = "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/front spec.http[1]: per-try timeout unset, timeout 1m0s (a new route; the chain's worst time was 3s) makes " + vsChain
		vsWaits    = "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/front spec.http[0]: per-try timeout unset, timeout 1m0s (a new route, the one the chain waits on longest) makes " + vsChain
		rewriteRef = " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"
	)
	for _, tc := range []struct {
		name        string
		cluster     []string
		e           v1alpha1.Enforcement
		object, old string
		want        MeshDecision
	}{
		{name: "HTTPRoute on a Gateway: a new rule of 60s beside one of 3s", cluster: []string{altIstioNS, gatewayRoute(fastRule)},
			object: gatewayRoute(fastRule) + slowRule, old: gatewayRoute(fastRule), want: MeshDecision{Message: hrNew}},
		{name: "HTTPRoute: Rewrite refuses (a timeout, no count of tries)", cluster: []string{altIstioNS, gatewayRoute(fastRule)}, e: v1alpha1.EnforcementRewrite,
			object: gatewayRoute(fastRule) + slowRule, old: gatewayRoute(fastRule), want: MeshDecision{Message: hrNew + rewriteRef}},
		{name: "HTTPRoute: Audit warns", cluster: []string{altIstioNS, gatewayRoute(fastRule)}, e: v1alpha1.EnforcementAudit,
			object: gatewayRoute(fastRule) + slowRule, old: gatewayRoute(fastRule), want: MeshDecision{Allowed: true, Warnings: []string{hrNew + " (admitted: enforcement is Audit)"}}},
		{name: "HTTPRoute: a new rule within the maximum is admitted", cluster: []string{altIstioNS, gatewayRoute(fastRule)},
			object: gatewayRoute(fastRule) + strings.Replace(slowRule, "60s", "15s", 1), old: gatewayRoute(fastRule), want: MeshDecision{Allowed: true}},
		{name: "ingress VirtualService: a new http route of 60s beside one of 3s", cluster: []string{altIstioNS, front(fastVS)},
			object: front(fastVS + slowVS), old: front(fastVS), want: MeshDecision{Message: vsNew}},
		{
			// Before it the client waited on productpage's 2m (no route bounded the entry):
			// 60s shortens the chain, but the chain now waits on this route's own timeout
			// (it cuts the entrypoint's 2m), as a service-to-service route created whole is
			// judged.
			name: "ingress VirtualService created whole with one route of 60s", cluster: []string{altIstioNS},
			object: front(slowVS), want: MeshDecision{Message: vsWaits},
		},
		{
			// Its 2 tries from 1 (a Gateway rule without retry gives 1): no count fits, and
			// the chain's 60s is its own timeout, not its clients' attempts (1 already),
			// which the advice named before rewrite18.
			name: "HTTPRoute on a Gateway created whole with a rule of 2 tries and 60s", cluster: []string{altIstioNS},
			object: gatewayRoute("retry: {attempts: 1}\n    timeouts: {request: 60s}"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0].retry.attempts: 1 makes " + hrChain +
				"; even HTTPRoute bookinfo/web without spec.rules[0].retry (1 try) does not fit: the chain waits on its own timeout of 1m0s: lower that"},
		},
		{
			// Between services the same: reviews' VirtualService created with one route of
			// 60s cuts reviews' 2m (Istio's default route to ratings under the application's
			// per-try 2m); the hop productpage -> reviews is where the chain waits.
			name: "a VirtualService between services created whole, its 60s cutting the callee's 2m", cluster: []string{altIstioNS},
			object: "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: bookinfo}\nspec:\n  hosts: [reviews]\n  http:\n" +
				"  - route: [{destination: {host: reviews}}]\n    timeout: 60s\n    retries: {attempts: 0}\n",
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/reviews spec.http[0]: per-try timeout unset, timeout 1m0s (a new route, the one the chain waits on longest) makes " +
				"productpage 1m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"},
		},
		{name: "ingress VirtualService created whole with one route of 15s: admitted", cluster: []string{altIstioNS},
			object: front(strings.Replace(slowVS, "60s", "15s", 1)), want: MeshDecision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			if e == "" {
				e = v1alpha1.EnforcementReject
			}
			expectMeshDecision(t, decideOn(t, tc.cluster, policy(e), tc.object, tc.old), tc.want)
		})
	}
}

// btpNew is an Envoy Gateway BackendTrafficPolicy bookinfo/web on HTTPRoute web with spec given
// (YAML lines under spec).
func btpNew(spec string) string {
	return `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: web, namespace: bookinfo}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
` + spec
}

// TestDecideMeshNewBackendTrafficPolicy: an Envoy Gateway BackendTrafficPolicy created (or
// updated) with a retry and/or a timeout on the north-south HTTPRoute web. Its retry is its own
// layer (judged from its fewest tries, as a new route is); its timeout lands on the route's layer
// (mesh envoyGatewayTimeout). Before rewrite18 a policy of a timeout alone was never judged: its
// requestTimeout raised from 10s to 60s, or created at 60s where the chain then waits on it,
// was admitted over maxTimeToAnswer.
func TestDecideMeshNewBackendTrafficPolicy(t *testing.T) {
	// The policy's retry applies to a rule without one (a rule's own retry wins: mesh
	// entryRuleLayer); its timeout to either.
	bare, retried := gatewayRoute(""), gatewayRoute("retry: {attempts: 1}") // 1 or 2 tries, no timeout of their own
	capped := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		return []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, e)}
	}
	timed := func(maxT time.Duration) func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		return func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
			p := timedMeshPolicy(100, e, maxT)
			p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
			return []*v1alpha1.RetryPolicy{p}
		}
	}
	const (
		retry5     = "RetryPolicy bookinfo/bookinfo: BackendTrafficPolicy bookinfo/web spec.retry.numRetries: 5 makes client -x6-> productpage -x1-> reviews -x1-> ratings = 6 > cap 3"
		chain60    = " makes client -x2-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
		newBound   = "RetryPolicy bookinfo/bookinfo: BackendTrafficPolicy bookinfo/web spec.timeout.http.requestTimeout: per-try timeout unset, timeout 1m0s (a new bound, the one the chain waits on longest)" + chain60
		raised     = "RetryPolicy bookinfo/bookinfo: BackendTrafficPolicy bookinfo/web spec.timeout.http.requestTimeout: timeout 10s -> 1m0s" + chain60
		rewriteRef = " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"
	)
	timeout := func(d string) string { return "  timeout: {http: {requestTimeout: " + d + "}}\n" }
	for _, tc := range []struct {
		name        string
		e           v1alpha1.Enforcement
		policies    func(v1alpha1.Enforcement) []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
		bare        bool // the route's rule without retry (else retry.attempts: 1)
	}{
		{name: "retry: numRetries 5 over the cap, Reject", bare: true, policies: capped, object: btpNew("  retry: {numRetries: 5}\n"),
			want: MeshDecision{Message: retry5 + "; BackendTrafficPolicy bookinfo/web may keep numRetries: 2"}},
		{name: "retry: Rewrite lowers numRetries to 2", bare: true, e: v1alpha1.EnforcementRewrite, policies: capped, object: btpNew("  retry: {numRetries: 5}\n"),
			want: MeshDecision{Allowed: true, Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote BackendTrafficPolicy bookinfo/web: spec.retry.numRetries: 5 -> 2 (client -x6-> productpage -x1-> reviews -x1-> ratings = 6 > cap 3)"},
				Patch: []jsonpatch.Operation{ann("spec.retry.numRetries: 5"), {Operation: "replace", Path: "/spec/retry/numRetries", Value: float64(2)}}}},
		{name: "retry: Audit warns", bare: true, e: v1alpha1.EnforcementAudit, policies: capped, object: btpNew("  retry: {numRetries: 5}\n"),
			want: MeshDecision{Allowed: true, Warnings: []string{retry5 + "; BackendTrafficPolicy bookinfo/web may keep numRetries: 2 (admitted: enforcement is Audit)"}}},
		{name: "retry within the cap: admitted", bare: true, policies: capped, object: btpNew("  retry: {numRetries: 2}\n"), want: MeshDecision{Allowed: true}},
		{
			// 2 tries of 9s + 25ms = 18.025s, cut by Envoy Gateway's default route timeout of
			// 15s (the policy now serves the route): within 15s.
			name: "retry with a per-retry timeout under Envoy Gateway's 15s: admitted", bare: true, policies: timed(15 * time.Second),
			object: btpNew("  retry: {numRetries: 1, perRetry: {timeout: 9s}}\n"), want: MeshDecision{Allowed: true},
		},
		{
			name: "retry and a timeout of 60s: no count fits", bare: true, policies: timed(20 * time.Second),
			object: btpNew("  retry: {numRetries: 3}\n" + timeout("60s")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: BackendTrafficPolicy bookinfo/web spec.retry.numRetries: 3 makes client -x4-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s" +
				"; even BackendTrafficPolicy bookinfo/web numRetries: 0 does not fit: the chain waits on its own timeout of 1m0s: lower that"},
		},
		{name: "retry and a timeout of 10s: admitted", bare: true, policies: timed(20 * time.Second), object: btpNew("  retry: {numRetries: 3}\n" + timeout("10s")), want: MeshDecision{Allowed: true}},
		{name: "a timeout alone of 60s created, the chain waits on it: Reject", policies: timed(20 * time.Second), object: btpNew(timeout("60s")),
			want: MeshDecision{Message: newBound}},
		{name: "a timeout alone of 60s created: Rewrite refuses", e: v1alpha1.EnforcementRewrite, policies: timed(20 * time.Second), object: btpNew(timeout("60s")),
			want: MeshDecision{Message: newBound + rewriteRef}},
		{name: "a timeout alone of 10s created: admitted", policies: timed(20 * time.Second), object: btpNew(timeout("10s")), want: MeshDecision{Allowed: true}},
		{name: "a timeout alone raised 10s -> 60s: Reject", policies: timed(20 * time.Second), object: btpNew(timeout("60s")), old: btpNew(timeout("10s")),
			want: MeshDecision{Message: raised}},
		{name: "a timeout alone raised 10s -> 15s, within: admitted", policies: timed(20 * time.Second), object: btpNew(timeout("15s")), old: btpNew(timeout("10s")),
			want: MeshDecision{Allowed: true}},
		{name: "a timeout alone lowered 60s -> 30s, still over: admitted", policies: timed(20 * time.Second), object: btpNew(timeout("30s")), old: btpNew(timeout("60s")),
			want: MeshDecision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.e
			if e == "" {
				e = v1alpha1.EnforcementReject
			}
			cluster := []string{retried}
			if tc.bare {
				cluster[0] = bare
			}
			if tc.old != "" {
				cluster = append(cluster, tc.old)
			}
			expectMeshDecision(t, decideOn(t, cluster, tc.policies(e), tc.object, tc.old), tc.want)
		})
	}
}

func ann(from string) jsonpatch.Operation {
	return jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: from}}
}
