package webhook

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	jsonpatchv5 "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// gate19Front is the VirtualService bookinfo/front bound to the ingress gateway with routes
// (YAML list items under spec.http).
func gate19Front(routes string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: bookinfo}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http:
` + routes
}

// TestDecideMeshNewEntryRouteTriesLowered: a route new at an entrypoint (a rule added to an
// HTTPRoute on a Gateway, an http route added to a VirtualService bound to an ingress gateway)
// whose tries are above its fewest and, each try bounded by its per-try timeout, take the chain
// over maxTimeToAnswer. judgeAltTries looked at service-to-service edges only: the route was
// judged by its timeouts (judgeTimeRaise), Reject named no value that fits and Rewrite refused
// it ("retrycap lowers retries, not timeouts") where lowering its tries fits. Rewrite now lowers
// it like any other route; a new route whose own timeout keeps the chain over is still refused
// naming the timeout.
func TestDecideMeshNewEntryRouteTriesLowered(t *testing.T) {
	const fastRule = "retry: {attempts: 5}\n    timeouts: {request: 3s}"
	const slowRule = "  - matches: [{path: {value: /slow}}]\n    backendRefs: [{name: productpage, port: 9080}]\n    retry: {attempts: 4}\n    timeouts: {backendRequest: 9s}\n"
	const fastVS = "  - match: [{uri: {prefix: /fast}}]\n    route: [{destination: {host: productpage}}]\n    timeout: 3s\n    retries: {attempts: 5}\n"
	const slowVS = "  - route: [{destination: {host: productpage}}]\n    retries: {attempts: 4, perTryTimeout: 9s}\n"
	const ownTimeoutVS = "  - route: [{destination: {host: productpage}}]\n    timeout: 25s\n    retries: {attempts: 2, perTryTimeout: 30s}\n"
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	// 5 tries of 9s and Envoy's backoff (25ms, 50ms, 100ms, 200ms) = 45.375s; 2 tries (attempts
	// 1) = 18.025s fits 20s, 3 tries (27.075s) does not.
	const (
		chain  = " makes client -x6-> productpage 2m0s -> reviews 2m0s -> ratings ? = 45.375s > maxTimeToAnswer 20s"
		hrMsg  = "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[1].retry.attempts: unset (a new route) -> 4 (a route other than the counted one: the time takes its tries too)" + chain + "; HTTPRoute bookinfo/web may keep attempts: 1"
		vsMsg  = "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/front spec.http[1].retries.attempts: unset (a new route) -> 4 (a route other than the counted one: the time takes its tries too)" + chain + "; VirtualService bookinfo/front may keep attempts: 1"
		ownMsg = "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/front spec.http[1]: per-try timeout 30s, timeout 25s (a new route; the chain's worst time was 3s) makes client -x6-> productpage 2m0s -> reviews 2m0s -> ratings ? = 25s > maxTimeToAnswer 20s"
	)
	hrRewritten := MeshDecision{Allowed: true,
		Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/web: spec.rules[1].retry.attempts: 4 -> 1 (client -x6-> productpage 2m0s -> reviews 2m0s -> ratings ? = 45.375s > maxTimeToAnswer 20s)"},
		Patch:    []jsonpatch.Operation{ann("spec.rules[1].retry.attempts: 4"), {Operation: "replace", Path: "/spec/rules/1/retry/attempts", Value: float64(1)}}}
	vsRewritten := MeshDecision{Allowed: true,
		Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/front: spec.http[1].retries.attempts: 4 -> 1 (client -x6-> productpage 2m0s -> reviews 2m0s -> ratings ? = 45.375s > maxTimeToAnswer 20s)"},
		Patch:    []jsonpatch.Operation{ann("spec.http[1].retries.attempts: 4"), {Operation: "replace", Path: "/spec/http/1/retries/attempts", Value: float64(1)}}}
	for _, tc := range []struct {
		name        string
		e           v1alpha1.Enforcement
		object, old string
		want        MeshDecision
	}{
		{name: "HTTPRoute on a Gateway, Reject: the tries that fit are named", e: v1alpha1.EnforcementReject,
			object: gatewayRoute(fastRule) + slowRule, old: gatewayRoute(fastRule), want: MeshDecision{Message: hrMsg}},
		{name: "HTTPRoute on a Gateway, Rewrite: lowered to attempts 1", e: v1alpha1.EnforcementRewrite,
			object: gatewayRoute(fastRule) + slowRule, old: gatewayRoute(fastRule), want: hrRewritten},
		{name: "HTTPRoute on a Gateway, Audit", e: v1alpha1.EnforcementAudit,
			object: gatewayRoute(fastRule) + slowRule, old: gatewayRoute(fastRule), want: MeshDecision{Allowed: true, Warnings: []string{hrMsg + " (admitted: enforcement is Audit)"}}},
		{name: "ingress VirtualService, Reject", e: v1alpha1.EnforcementReject,
			object: gate19Front(fastVS + slowVS), old: gate19Front(fastVS), want: MeshDecision{Message: vsMsg}},
		{name: "ingress VirtualService, Rewrite: lowered to attempts 1", e: v1alpha1.EnforcementRewrite,
			object: gate19Front(fastVS + slowVS), old: gate19Front(fastVS), want: vsRewritten},
		{name: "ingress VirtualService, its own timeout of 25s: Reject names the timeout", e: v1alpha1.EnforcementReject,
			object: gate19Front(fastVS + ownTimeoutVS), old: gate19Front(fastVS), want: MeshDecision{Message: ownMsg}},
		{name: "ingress VirtualService, its own timeout of 25s: Rewrite refuses", e: v1alpha1.EnforcementRewrite,
			object: gate19Front(fastVS + ownTimeoutVS), old: gate19Front(fastVS),
			want: MeshDecision{Message: ownMsg + " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectMeshDecision(t, decideOn(t, []string{altIstioNS, tc.old}, policy(tc.e), tc.object, tc.old), tc.want)
		})
	}
}

// TestDecideMeshRewriteRefusesWhatItCannotFix: Rewrite lowered a route no count of whose tries
// fits to its floor and admitted it with a warning while the chain stayed over the cap (a GAMMA
// HTTPRoute under Istio: attempts 1 is 2 tries, where the VirtualService it takes the calls from
// gave 1) or maxTimeToAnswer (TestRewriteZeroAttemptsKeepsPerTryBound's route of a 5s timeout).
// The object as Rewrite would store it is judged again as Reject would judge it: still over, the
// object is refused naming the chain as sent and as lowered, the cap and the field (gate19).
func TestDecideMeshRewriteRefusesWhatItCannotFix(t *testing.T) {
	const svc = `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}`
	const reviews = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`
	const ratingsVS = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - route: [{destination: {host: ratings}}]
    retries: {attempts: 0}
`
	const hr = `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - backendRefs: [{name: ratings, port: 9080}]
    retry: {attempts: 3}
`
	const sent = "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[0].retry.attempts: 3 makes productpage -x1-> reviews -x4-> ratings = 4 > cap 1" +
		"; even HTTPRoute bookinfo/ratings attempts: 1 does not fit: raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 1 (the Gateway API CRD's attempts is at least 1, and without retry the rule gets 3 tries)"
	for _, tc := range []struct {
		e    v1alpha1.Enforcement
		want MeshDecision
	}{
		{v1alpha1.EnforcementReject, MeshDecision{Message: sent}},
		// Before: admitted with spec.rules[0].retry.attempts 3 -> 1 and "rewritten as far as it
		// goes", the chain at 2 > cap 1.
		{v1alpha1.EnforcementRewrite, MeshDecision{Message: sent + " (refused although enforcement is Rewrite: lowered as far as it goes, " +
			"HTTPRoute bookinfo/ratings spec.rules[0].retry.attempts: 1 makes productpage -x1-> reviews -x2-> ratings = 2 > cap 1)"}},
		{v1alpha1.EnforcementAudit, MeshDecision{Allowed: true, Warnings: []string{sent + " (admitted: enforcement is Audit)"}}},
	} {
		t.Run("count/"+string(tc.e), func(t *testing.T) {
			expectMeshDecision(t, decideOn(t, []string{altIstioNS, svc, reviews, ratingsVS}, []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 1, tc.e)}, hr, ""), tc.want)
		})
	}
}

// expectStaticAgrees fails t unless the object with the patch the webhook returned (d.Patch)
// equals the object with each rewrite's static patch (mesh.Rewrite.StaticPatch, what `retrycap
// analyze -o patch` and a `kubectl patch` apply) applied in turn, but for
// retrycap.dev/rewritten-from. A lowering to attempts 0 set the route's timeout to the per-try
// timeout in the webhook's rewrite and not in the static patch (gate19). decideOn checks every
// rewrite it makes.
func expectStaticAgrees(t *testing.T, object []byte, d MeshDecision) {
	t.Helper()
	if d.Patch == nil {
		return
	}
	ops, err := json.Marshal(d.Patch)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatchv5.DecodePatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	webhook, err := p.Apply(object)
	if err != nil {
		t.Fatalf("the webhook's patch %s: %v", ops, err)
	}
	static := object
	for _, rw := range d.rewrites {
		typ, sp, err := rw.StaticPatch(static)
		if err != nil {
			t.Fatalf("StaticPatch of %s: %v", rw.Suggestion, err)
		}
		if typ == "merge" {
			static, err = jsonpatchv5.MergePatch(static, sp)
		} else {
			var q jsonpatchv5.Patch
			if q, err = jsonpatchv5.DecodePatch(sp); err == nil {
				static, err = q.Apply(static)
			}
		}
		if err != nil {
			t.Fatalf("static patch %s %s: %v", typ, sp, err)
		}
	}
	if a, b := withoutRewrittenFrom(t, webhook, object), withoutRewrittenFrom(t, static, object); !reflect.DeepEqual(a, b) {
		t.Errorf("the webhook's patch applied:\n%s\nthe static patches applied:\n%s", webhook, static)
	}
}

// withoutRewrittenFrom is data decoded, without retrycap.dev/rewritten-from (and an annotations
// map the original had not, left empty).
func withoutRewrittenFrom(t *testing.T, data, original []byte) map[string]any {
	t.Helper()
	var m, o map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(original, &o); err != nil {
		t.Fatal(err)
	}
	md, _ := m["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	delete(ann, annotations.RewrittenFrom)
	if omd, _ := o["metadata"].(map[string]any); len(ann) == 0 && md != nil && omd["annotations"] == nil {
		delete(md, "annotations")
	}
	return m
}

// TestDecideMeshNewRouteWithoutBounds: Istio's bookinfo sample VirtualService ratings (one route,
// no timeout), with retries.attempts 0, created where the chain was already over
// maxTimeToAnswer on the application's per-try timeout of 2m (Istio's default route sets no
// timeout either). The route lengthens nothing and sets no bound, yet it was refused as "the one
// the chain waits on longest", under Rewrite too ("lower the timeout": it has none). It is
// admitted now; one with a timeout of its own that keeps the chain over is still refused.
func TestDecideMeshNewRouteWithoutBounds(t *testing.T) {
	const reviews = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: bookinfo}\nspec:\n  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}}]\n    retries: {attempts: 0}\n"
	ratings := func(timeout string) string {
		return "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]\n" + timeout + "    retries: {attempts: 0}\n"
	}
	for _, tc := range []struct {
		name   string
		e      v1alpha1.Enforcement
		object string
		want   MeshDecision
	}{
		{"no bound: Reject admits", v1alpha1.EnforcementReject, ratings(""), MeshDecision{Allowed: true}},
		{"no bound: Rewrite admits", v1alpha1.EnforcementRewrite, ratings(""), MeshDecision{Allowed: true}},
		{"a timeout of 60s the chain waits on: Reject refuses", v1alpha1.EnforcementReject, ratings("    timeout: 60s\n"), MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0]: per-try timeout unset, timeout 1m0s (a new route, the one the chain waits on longest) makes " +
			"productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := timedMeshPolicy(100, tc.e, 20*time.Second)
			p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
			d := decideOn(t, []string{altIstioNS, reviews}, []*v1alpha1.RetryPolicy{p}, tc.object, "")
			expectMeshDecision(t, d, tc.want)
			if tc.e == v1alpha1.EnforcementReject {
				expectAgreesWithAnalyze(t, p, []string{altIstioNS, reviews}, tc.object, "", d)
			}
		})
	}
}

// gate19Reviews is the VirtualService reviews of one try.
const gate19Reviews = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: reviews, namespace: bookinfo}\nspec:\n  hosts: [reviews]\n  http:\n  - route: [{destination: {host: reviews}}]\n    retries: {attempts: 0}\n"

// TestDecideMeshReleasedCalls: an update of the VirtualService ratings (one route, attempts 0)
// that leaves the calls reviews -> ratings no route of it (an empty spec.http, tcp routes
// only, a delegate that does not exist, exportTo another namespace) puts them back on Istio's
// default, 3 tries: productpage -x1-> reviews -x3-> ratings = 3 > cap 2. raisedBy looks at the
// edges carrying a layer of the object, and the update was admitted under every enforcement
// (found by TestRedTeamPublicMeshObjects). It is judged now: Reject refuses naming the route
// that took the calls and the tries they take; Rewrite refuses too (no field of the object
// sets them); Audit warns; a release that lowers the tries (attempts 5 before) is admitted.
func TestDecideMeshReleasedCalls(t *testing.T) {
	ratings := func(body string) string {
		return "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n  hosts: [ratings]\n" + body
	}
	stored := ratings("  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 0}\n")
	const msg = "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0] no longer takes the calls reviews -> ratings (the object as sent gives them no route): " +
		"they take 3 tries (Istio default, no VirtualService binds ratings), which makes productpage -x1-> reviews -x3-> ratings = 3 > cap 2" +
		"; keep a route of VirtualService bookinfo/ratings for them with retries that fit, or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 2"
	for _, tc := range []struct {
		name        string
		e           v1alpha1.Enforcement
		object, old string
		want        MeshDecision
	}{
		{"an empty http list: Reject", v1alpha1.EnforcementReject, ratings("  http: []\n"), stored, MeshDecision{Message: msg}},
		{"tcp routes only: Reject", v1alpha1.EnforcementReject, ratings("  tcp:\n  - route: [{destination: {host: ratings}}]\n"), stored, MeshDecision{Message: msg}},
		{"a delegate that does not exist: Reject", v1alpha1.EnforcementReject, ratings("  http:\n  - delegate: {name: nowhere, namespace: bookinfo}\n"), stored, MeshDecision{Message: msg}},
		{"exportTo another namespace: Reject", v1alpha1.EnforcementReject, ratings("  exportTo: [other]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 0}\n"), stored, MeshDecision{Message: msg}},
		{"an empty http list: Rewrite refuses", v1alpha1.EnforcementRewrite, ratings("  http: []\n"), stored,
			MeshDecision{Message: msg + " (refused although enforcement is Rewrite: no field of VirtualService bookinfo/ratings sets the tries of calls it no longer takes)"}},
		{"an empty http list: Audit warns", v1alpha1.EnforcementAudit, ratings("  http: []\n"), stored, MeshDecision{Allowed: true, Warnings: []string{msg + " (admitted: enforcement is Audit)"}}},
		{"released from attempts 5: fewer tries, admitted", v1alpha1.EnforcementReject, ratings("  http: []\n"),
			ratings("  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"), MeshDecision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := meshPolicy("bookinfo", 2, tc.e)
			cluster := []string{altIstioNS, gate19Reviews, tc.old}
			d := decideOn(t, cluster, []*v1alpha1.RetryPolicy{p}, tc.object, tc.old)
			expectMeshDecision(t, d, tc.want)
			if tc.e == v1alpha1.EnforcementReject {
				expectAgreesWithAnalyze(t, p, cluster, tc.object, tc.old, d)
			}
		})
	}
}

// TestRewriteRendersLargeAttempts: attempts 2147483647 rewritten were written
// "2.147483647e+09" in the warning and in retrycap.dev/rewritten-from (render read the stored
// JSON number as a float64).
func TestRewriteRendersLargeAttempts(t *testing.T) {
	vs := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 2147483647}\n"
	d := decideOn(t, []string{altIstioNS, gate19Reviews}, []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 2, v1alpha1.EnforcementRewrite)}, vs, "")
	expectMeshDecision(t, d, MeshDecision{Allowed: true,
		Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[0].retries.attempts: 2147483647 -> 1 (productpage -x1-> reviews -x2147483648-> ratings = 2147483648 > cap 2)"},
		Patch:    []jsonpatch.Operation{ann("spec.http[0].retries.attempts: 2147483647"), {Operation: "replace", Path: "/spec/http/0/retries/attempts", Value: float64(1)}}})
}

// TestDecideMeshEntryRuleTimeoutRaised: a rule of an HTTPRoute on a Gateway other than the
// entrypoint's counted one (both 2 tries), its per-try 9s (18.025s) replaced by a request timeout
// of 60s. judgeTimeRaise compared the entry layer's other routes through mesh.Set.TimeAlternatives,
// which gives none at an entrypoint: the update was admitted under every enforcement while the
// chain went to 60s over maxTimeToAnswer 20s (found by meshGate19 in envtest).
func TestDecideMeshEntryRuleTimeoutRaised(t *testing.T) {
	ratings := "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 0}\n"
	hr := func(second string) string {
		return gatewayRoute("retry: {attempts: 1}\n    timeouts: {request: 3s}") + second
	}
	const slow = "  - matches: [{path: {value: /slow}}]\n    backendRefs: [{name: productpage, port: 9080}]\n    retry: {attempts: 1}\n    timeouts: {backendRequest: 9s}\n"
	const long = "  - matches: [{path: {value: /long}}]\n    backendRefs: [{name: productpage, port: 9080}]\n    retry: {attempts: 1}\n    timeouts: {request: 60s}\n"
	const msg = "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[1]: per-try timeout 9s -> unset makes client -x2-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
	for _, tc := range []struct {
		e    v1alpha1.Enforcement
		want MeshDecision
	}{
		{v1alpha1.EnforcementReject, MeshDecision{Message: msg}},
		{v1alpha1.EnforcementRewrite, MeshDecision{Message: msg + " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"}},
		{v1alpha1.EnforcementAudit, MeshDecision{Allowed: true, Warnings: []string{msg + " (admitted: enforcement is Audit)"}}},
	} {
		t.Run(string(tc.e), func(t *testing.T) {
			p := timedMeshPolicy(2, tc.e, 20*time.Second)
			p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
			cluster := []string{altIstioNS, gate19Reviews, ratings, hr(slow)}
			d := decideOn(t, cluster, []*v1alpha1.RetryPolicy{p}, hr(long), hr(slow))
			expectMeshDecision(t, d, tc.want)
			if tc.e == v1alpha1.EnforcementReject {
				expectAgreesWithAnalyze(t, p, cluster, hr(long), hr(slow), d)
			}
		})
	}
}
