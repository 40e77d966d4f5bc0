package webhook

import (
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestDecideMeshNewRouteTime: a route new to an edge (a new spec.http entry, a new Gateway API
// rule, a whole new object beside another route of the Service) of one try and a long timeout
// raises no bound of its own and no tries, yet the time model times the calls over it too
// (mesh.Set.TimeAlternatives). Before gate18 each case below marked "over" was admitted under
// every enforcement while the status showed the chain over maxTimeToAnswer; now it is judged as
// a raised timeout is: Reject denies, Rewrite refuses (it lowers tries, not timeouts), Audit
// warns, each naming the object, the route, its bounds, the chain before and the maximum.
func TestDecideMeshNewRouteTime(t *testing.T) {
	vs := func(second string) string {
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
	slow := func(timeout string) string {
		return `  - route: [{destination: {host: ratings}}]
    timeout: ` + timeout + `
    retries: {attempts: 0}
`
	}
	hr := func(second string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - matches: [{path: {value: /fast}}]
    backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 3s}
    retry: {attempts: 2}
` + second
	}
	rule := `  - backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 60s}
    retry: {attempts: 1}
`
	svc := `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}`
	reviews := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		// The application's own per-try timeout would bound every hop below it.
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	const over60 = "productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
	vsMsg := "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1]: per-try timeout unset, timeout 1m0s (a new route; the chain's worst time was 3s) makes " + over60
	hrMsg := "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[1]: per-try timeout unset, timeout 1m0s (a new route; the chain's worst time was 3s) makes " + over60
	const rewriteRefusal = " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"
	for _, tc := range []struct {
		name        string
		cluster     []string
		policies    []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{
			name: "Reject: a new http entry of one try and a timeout of 60s", cluster: []string{altIstioNS, reviews, vs("")},
			policies: policy(v1alpha1.EnforcementReject), object: vs(slow("60s")), old: vs(""),
			want: MeshDecision{Message: vsMsg},
		},
		{
			name: "Rewrite: refused, no count of tries to lower", cluster: []string{altIstioNS, reviews, vs("")},
			policies: policy(v1alpha1.EnforcementRewrite), object: vs(slow("60s")), old: vs(""),
			want: MeshDecision{Message: vsMsg + rewriteRefusal},
		},
		{
			name: "Audit: a warning", cluster: []string{altIstioNS, reviews, vs("")},
			policies: policy(v1alpha1.EnforcementAudit), object: vs(slow("60s")), old: vs(""),
			want: MeshDecision{Allowed: true, Warnings: []string{vsMsg + " (admitted: enforcement is Audit)"}},
		},
		{
			// Before it, Istio's default route (3 tries, no timeout) gave ratings' hop the
			// application's 2m: the new VirtualService bounds it at 60s, no raise of a
			// timeout. Its spec.http[0], new, gives 3 tries where its field can give 1: judged
			// as a raise from 1 (raisedBy), over the time, and no count fits: the message
			// says where the chain waits (waitSource), not only the callers' attempts.
			name: "Reject: the whole VirtualService created with both routes", cluster: []string{altIstioNS, reviews},
			policies: policy(v1alpha1.EnforcementReject), object: vs(slow("60s")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 makes " + over60 +
				"; even VirtualService bookinfo/ratings attempts: 0 does not fit: lower the timeouts of VirtualService bookinfo/ratings spec.http[1], or raise RetryPolicy bookinfo/bookinfo spec.maxTimeToAnswer: 1m0s" +
				"; the wait over maxTimeToAnswer comes from reviews -> ratings: VirtualService bookinfo/ratings spec.http[1] (1 try, per-try timeout unset, timeout 1m0s)"},
		},
		{
			name: "a new http entry whose timeout keeps the chain within: admitted", cluster: []string{altIstioNS, reviews, vs("")},
			policies: policy(v1alpha1.EnforcementReject), object: vs(slow("15s")), old: vs(""),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "a new http entry shorter than the old one: admitted", cluster: []string{altIstioNS, reviews, vs("")},
			policies: policy(v1alpha1.EnforcementReject), object: vs(slow("2s")), old: vs(""),
			want: MeshDecision{Allowed: true},
		},
		{
			// Tries above its fewest: judgeAltTries' (Rewrite lowers them): 2 x 9s + 25ms =
			// 18.025s > 15s. attempts 0 drops perTryTimeout (Istio gives Envoy no retry
			// policy): before rewrite18 the route was then bounded by the application's 2m
			// alone, longer than as sent, and admitted with a warning that nothing fitted
			// (before gate18's guard, 16 times). The route's timeout now takes the per-try
			// timeout: one try of 9s, within.
			name: "Rewrite: a new route lowered to attempts 0 keeps its per-try bound as the route timeout", cluster: []string{altIstioNS, reviews, vs("")},
			policies: []*v1alpha1.RetryPolicy{func() *v1alpha1.RetryPolicy {
				p := policy(v1alpha1.EnforcementRewrite)[0]
				p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: 15 * time.Second}
				return p
			}()},
			object: vs("  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 1, perTryTimeout: 9s}\n"), old: vs(""),
			want: MeshDecision{Allowed: true,
				Warnings: []string{
					`RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[1].retries.attempts: 1 -> 0, spec.http[1].retries.perTryTimeout: "9s" -> removed, spec.http[1].timeout: unset -> "9s" (productpage 18.025s -> reviews 18.025s -> ratings ? = 18.025s > maxTimeToAnswer 15s)`,
				},
				Patch: []jsonpatch.Operation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"retrycap.dev/rewritten-from": `spec.http[1].retries.attempts: 1; spec.http[1].retries.perTryTimeout: "9s"; spec.http[1].timeout: unset`}},
					{Operation: "replace", Path: "/spec/http/1/retries/attempts", Value: float64(0)},
					{Operation: "remove", Path: "/spec/http/1/retries/perTryTimeout"},
					{Operation: "add", Path: "/spec/http/1/timeout", Value: "9s"},
				}},
		},
		{
			// Created whole: before it Istio's default route left ratings' hop to the
			// application's 2m, so the 60s rule shortens the chain, but stays over. Its
			// spec.rules[0] (3 tries, new) is judged from 2, no count fits, and the message
			// names the rule the chain waits on (analyze says over as well,
			// TestNewRoutesGateAgreesWithAnalyze; a rule at its fewest tries there is named as
			// the new route the chain waits on longest).
			name: "Reject: a whole Gateway API route created with a rule of 60s", cluster: []string{altIstioNS, svc, reviews},
			policies: policy(v1alpha1.EnforcementReject), object: hr(rule),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[0].retry.attempts: 2 makes " + over60 +
				"; even HTTPRoute bookinfo/ratings attempts: 1 does not fit: lower the timeouts of HTTPRoute bookinfo/ratings spec.rules[1], or raise RetryPolicy bookinfo/bookinfo spec.maxTimeToAnswer: 1m0s (the Gateway API CRD's attempts is at least 1, and without retry the rule gets 3 tries)" +
				"; the wait over maxTimeToAnswer comes from reviews -> ratings: HTTPRoute bookinfo/ratings spec.rules[1] (2 tries, per-try timeout unset, timeout 1m0s)"},
		},
		{
			name: "Reject: a new Gateway API rule (GAMMA) of a long request timeout", cluster: []string{altIstioNS, svc, reviews, hr("")},
			policies: policy(v1alpha1.EnforcementReject), object: hr(rule), old: hr(""),
			want: MeshDecision{Message: hrMsg},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectMeshDecision(t, decideOn(t, tc.cluster, tc.policies, tc.object, tc.old), tc.want)
		})
	}
}

// TestDecideMeshNewRouteTimeLinkerd: under Linkerd every HTTPRoute of the callee's Service is a
// route the calls may take (mesh.Set.LinkerdRoutes). ratings-fast makes 4 tries within a request
// timeout of 3s; a new ratings-slow of 1 try (no retry annotation) and a request timeout of 60s
// was admitted (a route new to the Service was judged against no bound) while the chain became
// 60s.
func TestDecideMeshNewRouteTimeLinkerd(t *testing.T) {
	ns := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}`
	svc := `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}`
	fast := linkerdRatingsRoute("ratings-fast", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "3", timeout.linkerd.io/request: 3s`, "/fast")
	slow := func(timeout string) string {
		return linkerdRatingsRoute("ratings-slow", `timeout.linkerd.io/request: `+timeout, "/")
	}
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	const msg = "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-slow: per-try timeout unset, timeout 1m0s (a new route; the chain's worst time was 3s) makes " +
		"productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
	for _, tc := range []struct {
		name    string
		cluster []string // nil: ns, svc, fast
		policy  []*v1alpha1.RetryPolicy
		object  string
		want    MeshDecision
	}{
		{name: "Reject", policy: policy(v1alpha1.EnforcementReject), object: slow("60s"), want: MeshDecision{Message: msg}},
		{name: "Audit", policy: policy(v1alpha1.EnforcementAudit), object: slow("60s"),
			want: MeshDecision{Allowed: true, Warnings: []string{msg + " (admitted: enforcement is Audit)"}}},
		{name: "within the maximum: admitted", policy: policy(v1alpha1.EnforcementReject), object: slow("15s"), want: MeshDecision{Allowed: true}},
		{
			// The Service's first route: before it Linkerd's one try had no bound (the
			// application's 2m), so 60s shortens the chain, but it waits longest there.
			name: "the Service's first route: the chain waits on it", cluster: []string{ns, svc},
			policy: policy(v1alpha1.EnforcementReject), object: slow("60s"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-slow: per-try timeout unset, timeout 1m0s (a new route, the one the chain waits on longest) makes " +
				"productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := tc.cluster
			if cluster == nil {
				cluster = []string{ns, svc, fast}
			}
			expectMeshDecision(t, decideOn(t, cluster, tc.policy, tc.object, ""), tc.want)
		})
	}
}
