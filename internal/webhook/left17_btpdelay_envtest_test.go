package webhook_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// meshGateEnvoyGatewayDelay runs in TestGateMeshLayers (Envoy Gateway's real BackendTrafficPolicy
// CRD beside the Gateway API's): a BackendTrafficPolicy that sets only
// spec.faultInjection.delay on HTTPRoute web (Gateway-parented, 1 retry, request timeout 3s) is
// judged against the policy's maxTimeToAnswer (5s) through the real API server: 1s (3s + 1s =
// 4s) is admitted, 7s (10s) refused naming the route's rule, the policy's field, the change and
// the chain's times. Before left17 both were admitted: the gate looked only at the policy's own
// layers, and a delay-only policy has none.
func meshGateEnvoyGatewayDelay(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "egdelay"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 5 * time.Second},
			Retry:           v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: 2 * time.Second}},
			Entrypoints:     []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "bookinfo-gateway"}}, "rules": []any{map[string]any{
			"backendRefs": []any{map[string]any{"name": "productpage", "port": int64(9080)}},
			"retry":       map[string]any{"attempts": int64(1)},
			"timeouts":    map[string]any{"request": "3s"},
		}}},
	}}
	g.Expect(c.Create(ctx, route)).To(Succeed())

	btp := func(delay string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "BackendTrafficPolicy",
			"metadata": map[string]any{"name": "slow", "namespace": ns},
			"spec": map[string]any{
				"targetRefs":     []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}},
				"faultInjection": map[string]any{"delay": map[string]any{"fixedDelay": delay}},
			},
		}}
	}
	const denied = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy egdelay/bookinfo: " +
		"HTTPRoute egdelay/web spec.rules[0], BackendTrafficPolicy egdelay/slow spec.faultInjection.delay.fixedDelay 7s: " +
		"fault delay 0s -> 7s makes client -x2-> productpage 2s -> reviews 2s -> ratings ? = 10s > maxTimeToAnswer 5s"
	// The gate judges once the manager's cache and the mesh watcher hold the workloads and the
	// route: until then a dry run may pass.
	g.Eventually(dryRunDenial(op, btp("7s"))).Should(Equal(denied))
	g.Expect(c.Create(ctx, btp("7s"))).To(MatchError(denied))
	g.Expect(c.Create(ctx, btp("1s"))).To(Succeed())
	stored := btp("")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), stored)).To(Succeed())
	raised := btp("7s")
	raised.SetResourceVersion(stored.GetResourceVersion())
	g.Expect(c.Update(ctx, raised)).To(MatchError(
		"admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy egdelay/bookinfo: " +
			"HTTPRoute egdelay/web spec.rules[0], BackendTrafficPolicy egdelay/slow spec.faultInjection.delay.fixedDelay 7s: " +
			"fault delay 1s -> 7s makes client -x2-> productpage 2s -> reviews 2s -> ratings ? = 10s > maxTimeToAnswer 5s"))
}
