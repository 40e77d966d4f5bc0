package webhook

import (
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestDecideMeshNewRouteDefaultTries: a Gateway API route (GAMMA, under Istio) created with a
// rule that sets no retry takes Istio's default, 3 tries. Before the route, the call had Istio's
// default route, 3 tries too: the edge's count did not rise, and the create was admitted under
// every enforcement with productpage -x1-> reviews -x3-> ratings = 3 over the cap of 2, though
// the route, which now owns the hop, could set retry.attempts: 1 (2 tries). A route new to an
// edge is now judged from the fewest tries its field gives (raisedBy), as a new route other than
// the counted one already was (tries17): Reject denies saying where the tries come from and the
// two ways to lower them, Rewrite writes the explicit retry that fits, Audit warns.
func TestDecideMeshNewRouteDefaultTries(t *testing.T) {
	hr := func(second string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - matches: [{path: {value: /fast}}]
    backendRefs: [{name: ratings, port: 9080}]
    retry: {attempts: 1}
` + second
	}
	const bare = `  - backendRefs: [{name: ratings, port: 9080}]
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
	meshConfig := `apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data:
  mesh: |
    defaultHttpRetryPolicy:
      attempts: 3
`
	ratingsVS := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - route: [{destination: {host: ratings}}]
`
	policy := func(cap int32, e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		return []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", cap, e)}
	}
	const denied = "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[1].retry.attempts: unset (2) makes productpage -x1-> reviews -x3-> ratings = 3 > cap 2" +
		"; HTTPRoute bookinfo/ratings may keep attempts: 1" +
		"; HTTPRoute bookinfo/ratings spec.rules[1] sets no retry: its 3 tries are Istio's default (2 retries); set spec.rules[1].retry.attempts, or lower the mesh's defaultHttpRetryPolicy"
	rewritten := MeshDecision{Allowed: true,
		Warnings: []string{`RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/ratings: spec.rules[1].retry: unset -> {"attempts":1} (productpage -x1-> reviews -x3-> ratings = 3 > cap 2)`},
		Patch: []jsonpatch.Operation{
			{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"retrycap.dev/rewritten-from": "spec.rules[1].retry: unset"}},
			{Operation: "add", Path: "/spec/rules/1/retry", Value: map[string]any{"attempts": float64(1)}},
		}}
	base := []string{altIstioNS, svc, reviews}
	for _, tc := range []struct {
		name        string
		cluster     []string
		policies    []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{name: "Reject: created with a rule that sets no retry", cluster: base, policies: policy(2, v1alpha1.EnforcementReject),
			object: hr(bare), want: MeshDecision{Message: denied}},
		{name: "Rewrite: the rule gets an explicit retry that fits", cluster: base, policies: policy(2, v1alpha1.EnforcementRewrite),
			object: hr(bare), want: rewritten},
		{name: "Audit: a warning", cluster: base, policies: policy(2, v1alpha1.EnforcementAudit),
			object: hr(bare), want: MeshDecision{Allowed: true, Warnings: []string{denied + " (admitted: enforcement is Audit)"}}},
		{name: "an update adding the rule: judged as before, the message says whose tries", cluster: append(base[:3:3], hr("")), policies: policy(2, v1alpha1.EnforcementReject),
			object: hr(bare), old: hr(""), want: MeshDecision{Message: denied}},
		{name: "within the cap: admitted", cluster: base, policies: policy(3, v1alpha1.EnforcementReject),
			object: hr(bare), want: MeshDecision{Allowed: true}},
		{name: "every rule with a retry that fits: admitted", cluster: base, policies: policy(2, v1alpha1.EnforcementReject),
			object: hr(bare + "    retry: {attempts: 1}\n"), want: MeshDecision{Allowed: true}},
		{
			// The MeshConfig's default (3 retries) is named, and the rule's floor (2 tries)
			// fits no more than the callers leave (cap 1).
			name: "Reject: Istio's default from the MeshConfig, nothing fits", cluster: append(base[:3:3], meshConfig), policies: policy(1, v1alpha1.EnforcementReject),
			object: hr(bare),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[1].retry.attempts: unset (3) makes productpage -x1-> reviews -x4-> ratings = 4 > cap 1" +
				"; even HTTPRoute bookinfo/ratings attempts: 1 does not fit: raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 1 (the Gateway API CRD's attempts is at least 1, and without retry the rule gets 4 tries)" +
				"; HTTPRoute bookinfo/ratings spec.rules[1] sets no retry: its 4 tries are Istio's default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 3; set spec.rules[1].retry.attempts, or lower the mesh's defaultHttpRetryPolicy"},
		},
		{
			// The same for a VirtualService route without retries: created, it repeats
			// Istio's default where attempts: 0 or 1 would fit.
			name: "Reject: a VirtualService created with a route that sets no retries", cluster: base, policies: policy(2, v1alpha1.EnforcementReject),
			object: ratingsVS,
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: unset (2) makes productpage -x1-> reviews -x3-> ratings = 3 > cap 2" +
				"; VirtualService bookinfo/ratings may keep attempts: 1" +
				"; VirtualService bookinfo/ratings spec.http[0] sets no retry: its 3 tries are Istio's default (2 retries); set spec.http[0].retries.attempts, or lower the mesh's defaultHttpRetryPolicy"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectMeshDecision(t, decideOn(t, tc.cluster, tc.policies, tc.object, tc.old), tc.want)
		})
	}
}

// TestDecideMeshWaitElsewhere: the counted route's tries rise and the chain is over
// maxTimeToAnswer, but the time is another route's: a route of the same VirtualService of one
// try and a timeout of 60s, or the VirtualService of the hop above. The message named the
// counted route alone and, no count of it fitting, told to lower the callers' attempts; it now
// also names the hop and the route the chain waits on, with its bounds (waitSource), and its remedy
// is that route's timeouts or the policy's maxTimeToAnswer (adv20; it still said "lower the
// callers' attempts", which made none of the time).
func TestDecideMeshWaitElsewhere(t *testing.T) {
	ratings := func(attempts, timeout, second string) string { // timeout: its YAML line, or ""
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
` + timeout + `    retries: {attempts: ` + attempts + `, perTryTimeout: 1s}
` + second
	}
	const slow = `  - route: [{destination: {host: ratings}}]
    timeout: 60s
    retries: {attempts: 0}
`
	reviews := func(attempts string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: ` + attempts + `}
`
	}
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	for _, tc := range []struct {
		name        string
		cluster     []string
		object, old string
		want        MeshDecision
	}{
		{
			name:    "another route of the object: spec.http[1]'s 60s",
			cluster: []string{altIstioNS, reviews("0"), ratings("1", "    timeout: 3s\n", slow)}, object: ratings("2", "    timeout: 3s\n", slow), old: ratings("1", "    timeout: 3s\n", slow),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 makes productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s" +
				"; even VirtualService bookinfo/ratings attempts: 0 does not fit: lower the timeouts of VirtualService bookinfo/ratings spec.http[1], or raise RetryPolicy bookinfo/bookinfo spec.maxTimeToAnswer: 1m0s" +
				"; the wait over maxTimeToAnswer comes from reviews -> ratings: VirtualService bookinfo/ratings spec.http[1] (1 try, per-try timeout unset, timeout 1m0s)"},
		},
		{
			// reviews' route makes 7 tries, each up to reviews' 3s (ratings' timeout): 21s
			// of the chain are productpage -> reviews, 3s reviews -> ratings, whatever
			// ratings' tries within its 3s. attempts: 1 (2 tries of 1s, 2.025s) fits; before
			// rewrite18 the bisection (keepOn) tried attempts: 0 first, which Istio leaves
			// without its per-try timeout (3s a try of reviews' 7: over), took fewer tries
			// for never shorter, and said none fitted.
			name:    "another hop: reviews' VirtualService",
			cluster: []string{altIstioNS, reviews("6"), ratings("1", "    timeout: 3s\n", "")}, object: ratings("2", "    timeout: 3s\n", ""), old: ratings("1", "    timeout: 3s\n", ""),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 makes productpage 21.875s -> reviews 3s -> ratings ? = 21.875s > maxTimeToAnswer 20s" +
				"; VirtualService bookinfo/ratings may keep attempts: 1" +
				"; the wait over maxTimeToAnswer comes from productpage -> reviews: VirtualService bookinfo/reviews spec.http[0] (7 tries, per-try timeout unset, timeout unset)"},
		},
		{
			// 26 tries of 1s and Envoy's backoff: ratings' own route; no clause.
			name:    "the counted route's own time: no clause",
			cluster: []string{altIstioNS, reviews("0"), ratings("1", "", "")}, object: ratings("25", "", ""), old: ratings("1", "", ""),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 25 makes productpage 31.625s -> reviews 31.625s -> ratings ? = 31.625s > maxTimeToAnswer 20s" +
				"; VirtualService bookinfo/ratings may keep attempts: 15"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectMeshDecision(t, decideOn(t, tc.cluster, policy(v1alpha1.EnforcementReject), tc.object, tc.old), tc.want)
		})
	}
}

// TestDecideMeshNewGRPCRouteDefault: a GRPCRoute (GAMMA, under Istio) has no retry field (the
// Gateway API's v1.6): its rules take Istio's default, 3 tries. Created, it repeated the default
// route's 3 tries and was admitted over the cap of 2; no field of it can lower them. Reject and
// Rewrite refuse it naming what to declare instead, Audit warns.
func TestDecideMeshNewGRPCRouteDefault(t *testing.T) {
	const gr = `apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - backendRefs: [{name: ratings, port: 9080}]
`
	const svc = `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: grpc, port: 9080}]}`
	const reviews = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`
	const msg = "RetryPolicy bookinfo/bookinfo: Istio default, GRPCRoute bookinfo/ratings spec.rules[0] sets no retry makes productpage -x1-> reviews -x3-> ratings = 3 > cap 2" +
		"; GRPCRoute bookinfo/ratings has no retry field (the Gateway API's GRPCRoute: the API server drops one), so its rules get the mesh's default: declare the retries on a VirtualService route for the Service with retries.attempts: 1, or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 2"
	for _, tc := range []struct {
		e    v1alpha1.Enforcement
		cap  int32
		want MeshDecision
	}{
		{v1alpha1.EnforcementReject, 2, MeshDecision{Message: msg}},
		{v1alpha1.EnforcementRewrite, 2, MeshDecision{Message: msg + " (refused although enforcement is Rewrite: GRPCRoute bookinfo/ratings has no field that sets these tries)"}},
		{v1alpha1.EnforcementAudit, 2, MeshDecision{Allowed: true, Warnings: []string{msg + " (admitted: enforcement is Audit)"}}},
		{v1alpha1.EnforcementReject, 3, MeshDecision{Allowed: true}},
	} {
		t.Run(string(tc.e), func(t *testing.T) {
			p := meshPolicy("bookinfo", tc.cap, tc.e)
			expectMeshDecision(t, decideOn(t, []string{altIstioNS, svc, reviews}, []*v1alpha1.RetryPolicy{p}, gr, ""), tc.want)
		})
	}
}
