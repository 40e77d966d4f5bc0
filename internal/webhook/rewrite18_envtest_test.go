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
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// meshGateZeroKeepsPerTry runs in TestGateMeshLayers (Istio's real CRDs), through the real API
// server (rewrite18). A route added to ratings' VirtualService with attempts: 1, perTryTimeout:
// 9s and a timeout of 60s makes the chain 2 x 9s + 25ms = 18.025s > maxTimeToAnswer 15s. Rewrite
// lowered it to attempts: 0, which Istio reads with no per-try timeout: the route was then
// bounded by its 60s, longer than as sent, and admitted with a warning that nothing fitted. Now
// Reject advises attempts: 0 with the route's timeout at 9s, and Rewrite stores exactly that.
func meshGateZeroKeepsPerTry(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "zerobound"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio-injection": "enabled"}}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	g.Expect(c.Create(ctx, fromYAML(g, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: zerobound}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`))).To(Succeed())
	ratings := func(second string) *unstructured.Unstructured {
		return fromYAML(g, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: zerobound}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
    timeout: 3s
    retries: {attempts: 2, perTryTimeout: 1s}
`+second)
	}
	g.Expect(c.Create(ctx, ratings(""))).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 15 * time.Second},
			Retry:           v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: 2 * time.Minute}},
			Entrypoints:     []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())

	const slow = `  - route: [{destination: {host: ratings}}]
    timeout: 60s
    retries: {attempts: 1, perTryTimeout: 9s}
`
	update := func(opts ...client.UpdateOption) error {
		var cur unstructured.Unstructured
		cur.SetGroupVersionKind(ratings("").GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ratings"}, &cur); err != nil {
			return err
		}
		next := ratings(slow)
		next.SetResourceVersion(cur.GetResourceVersion())
		return c.Update(ctx, next, opts...)
	}
	const denied = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy zerobound/bookinfo: " +
		"VirtualService zerobound/ratings spec.http[1].retries.attempts: unset (a new route) -> 1 (a route other than the counted one: the time takes its tries too) makes " +
		"productpage 18.025s -> reviews 18.025s -> ratings ? = 18.025s > maxTimeToAnswer 15s; VirtualService zerobound/ratings may keep attempts: 0" +
		` with spec.http[1].timeout: "60s" -> "9s" (Istio drops perTryTimeout at attempts 0)`
	// The gate judges once the manager's cache has the policy and workloads: until then a dry
	// run may pass.
	g.Eventually(func() string {
		if err := update(client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}).Should(Equal(denied))

	g.Eventually(func() error {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), &p); err != nil {
			return err
		}
		p.Spec.Enforcement = v1alpha1.EnforcementRewrite
		return c.Update(ctx, &p)
	}).Should(Succeed())
	// Denied until the gate sees Rewrite; then stored lowered, never as sent.
	g.Eventually(func() error { return update() }).Should(Succeed())
	stored := ratings("")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), stored)).To(Succeed())
	routes, _, _ := unstructured.NestedSlice(stored.Object, "spec", "http")
	g.Expect(routes).To(HaveLen(2))
	second := routes[1].(map[string]any)
	g.Expect(second["retries"]).To(Equal(map[string]any{"attempts": int64(0)}))
	g.Expect(second["timeout"]).To(Equal("9s"))
	g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom,
		`spec.http[1].retries.attempts: 1; spec.http[1].retries.perTryTimeout: "9s"; spec.http[1].timeout: "60s"`))
}
