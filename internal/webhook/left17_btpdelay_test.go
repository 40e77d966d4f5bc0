package webhook

import (
	"testing"
	"time"

	v1alpha1 "github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// btpDelay is an Envoy Gateway BackendTrafficPolicy bookinfo/slow on HTTPRoute web (or, gw,
// on Gateway bookinfo-gateway) that sets only spec.faultInjection.delay.
func btpDelay(fixed string, gw bool) string {
	target := "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}"
	if gw {
		target = "{group: gateway.networking.k8s.io, kind: Gateway, name: bookinfo-gateway}"
	}
	return `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: slow, namespace: bookinfo}
spec:
  targetRefs: [` + target + `]
  faultInjection: {delay: {fixedDelay: ` + fixed + `}}
`
}

// TestDecideMeshEnvoyGatewayFaultDelay: a BackendTrafficPolicy that sets only a fault delay (no
// retry, no timeout) adds no layer of its own: the delay lands on the entry layer of the route
// it covers (mesh: the route's layer, LayerTime.Delay). The time gate judges it as a
// VirtualService's fault.delay: a delay that takes a chain over maxTimeToAnswer is denied
// (Reject, and Rewrite too: retrycap lowers retries, not delays), warned under Audit; a delay
// that keeps within it, or a lowered one, passes. On main every case was admitted without a
// word: the gate looked only at layers whose object is the incoming one.
func TestDecideMeshEnvoyGatewayFaultDelay(t *testing.T) {
	// web: 2 tries (attempts 1) of the entry, the route's request timeout 3s. With the policy's
	// 2s per try below, without a delay the client waits 3s (the timeout cuts the 2 tries of
	// 2s and 25ms backoff); a delay of d is held once before: d + 3s.
	route := gatewayRoute("retry: {attempts: 1}\n    timeouts: {request: 3s}")
	const chain = "client -x2-> productpage 2s -> reviews 2s -> ratings ?"
	for _, tc := range []struct {
		name   string
		e      v1alpha1.Enforcement
		maxT   time.Duration
		object string
		old    string
		want   MeshDecision
	}{
		{name: "a delay on the route over maxTimeToAnswer: denied", maxT: 5 * time.Second, object: btpDelay("7s", false),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0], BackendTrafficPolicy bookinfo/slow spec.faultInjection.delay.fixedDelay 7s: " +
				"fault delay 0s -> 7s makes " + chain + " = 10s > maxTimeToAnswer 5s"}},
		{name: "a delay on the route's Gateway: denied the same", maxT: 5 * time.Second, object: btpDelay("7s", true),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0], BackendTrafficPolicy bookinfo/slow spec.faultInjection.delay.fixedDelay 7s: " +
				"fault delay 0s -> 7s makes " + chain + " = 10s > maxTimeToAnswer 5s"}},
		{name: "a delay raised on an update: denied", maxT: 5 * time.Second, object: btpDelay("7s", false), old: btpDelay("1s", false),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0], BackendTrafficPolicy bookinfo/slow spec.faultInjection.delay.fixedDelay 7s: " +
				"fault delay 1s -> 7s makes " + chain + " = 10s > maxTimeToAnswer 5s"}},
		{name: "Audit: admitted with the warning", e: v1alpha1.EnforcementAudit, maxT: 5 * time.Second, object: btpDelay("7s", false),
			want: MeshDecision{Allowed: true, Warnings: []string{"RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0], BackendTrafficPolicy bookinfo/slow spec.faultInjection.delay.fixedDelay 7s: " +
				"fault delay 0s -> 7s makes " + chain + " = 10s > maxTimeToAnswer 5s (admitted: enforcement is Audit)"}}},
		{name: "Rewrite: refused, a delay is no retry to lower", e: v1alpha1.EnforcementRewrite, maxT: 5 * time.Second, object: btpDelay("7s", false),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0], BackendTrafficPolicy bookinfo/slow spec.faultInjection.delay.fixedDelay 7s: " +
				"fault delay 0s -> 7s makes " + chain + " = 10s > maxTimeToAnswer 5s (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"}},
		{name: "within maxTimeToAnswer: admitted", maxT: 11 * time.Second, object: btpDelay("7s", false), want: MeshDecision{Allowed: true}},
		{name: "a delay lowered: admitted, even over", maxT: 5 * time.Second, object: btpDelay("6s", false), old: btpDelay("7s", false), want: MeshDecision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			docs := []string{route}
			if tc.old != "" {
				docs = append(docs, tc.old)
			}
			for _, o := range docs {
				if _, err := set.AddManifest([]byte(o)); err != nil {
					t.Fatal(err)
				}
			}
			in := MeshInput{Policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, tc.e, tc.maxT)}, Workloads: bookinfoChain(), Set: set, Object: jsonOf(t, tc.object)}
			if tc.old != "" {
				in.Old = jsonOf(t, tc.old)
			}
			expectMeshDecision(t, DecideMesh(in), tc.want)
		})
	}
}
