package webhook

import (
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestDecideMeshAltTriesGAMMA: under Istio, a Gateway API route's rules are each timed
// (mesh.Set.TimeAlternatives); spec.rules[1].retry.attempts raised 1 -> 2 within a
// backendRequest timeout of 9s while rules[0] (attempts 3 within 1s) counts.
func TestDecideMeshAltTriesGAMMA(t *testing.T) {
	rt := func(second string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - matches: [{path: {value: /fast}}]
    backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 1s}
    retry: {attempts: 3}
` + second
	}
	rule := func(r string) string {
		return `  - backendRefs: [{name: ratings, port: 9080}]
    timeouts: {backendRequest: 9s, request: 60s}
` + r
	}
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
	p := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	const over = "productpage 27.075s -> reviews 27.075s -> ratings ? = 27.075s > maxTimeToAnswer 20s"
	cluster := func(old string) []string { return []string{altIstioNS, svc, reviews, old} }
	one, two := rt(rule("    retry: {attempts: 1}\n")), rt(rule("    retry: {attempts: 2}\n"))
	expectMeshDecision(t, decideOn(t, cluster(one), p(v1alpha1.EnforcementReject), two, one), MeshDecision{
		Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[1].retry.attempts: 1 -> 2 (a route other than the counted one: the time takes its tries too) makes " +
			over + "; HTTPRoute bookinfo/ratings may keep attempts: 1"})
	expectMeshDecision(t, decideOn(t, cluster(one), p(v1alpha1.EnforcementRewrite), two, one), MeshDecision{Allowed: true,
		Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/ratings: spec.rules[1].retry.attempts: 2 -> 1 (" + over + ")"},
		Patch: []jsonpatch.Operation{
			{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"retrycap.dev/rewritten-from": "spec.rules[1].retry.attempts: 2"}},
			{Operation: "replace", Path: "/spec/rules/1/retry/attempts", Value: float64(1)},
		}})
	expectMeshDecision(t, decideOn(t, cluster(rt("")), p(v1alpha1.EnforcementReject), two, rt("")), MeshDecision{
		Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[1].retry.attempts: unset (a new route) -> 2 (a route other than the counted one: the time takes its tries too) makes " +
			over + "; HTTPRoute bookinfo/ratings may keep attempts: 1"})
	// A new rule without retry takes Istio's default (3 tries, above the 2 its field can give:
	// judged from 2), but Istio makes its backendRequest the route's timeout when it sets no
	// retry: 9s in all, within the maximum (the comment said "not judged": it is, and fits).
	expectMeshDecision(t, decideOn(t, cluster(rt("")), p(v1alpha1.EnforcementReject), rt(rule("")), rt("")), MeshDecision{Allowed: true})
}
