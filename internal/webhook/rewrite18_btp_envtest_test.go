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

// meshGateEnvoyGatewayNewPolicy runs in TestGateMeshLayers (Envoy Gateway's real
// BackendTrafficPolicy CRD): a policy created and updated on HTTPRoute web (Gateway-parented, a
// rule without retry or timeout) through the real API server (rewrite18). Its numRetries 5 is
// refused over the cap of 3 (6 tries); a timeout alone of 10s is admitted and, raised to 60s,
// refused (before rewrite18 admitted: a policy of a timeout alone has no layer of its own);
// under Rewrite, the same policy with numRetries 5 is stored with 2.
func meshGateEnvoyGatewayNewPolicy(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "egnew"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 3, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 20 * time.Second},
			Retry:           v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: 2 * time.Minute}},
			Entrypoints:     []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())
	g.Expect(c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "bookinfo-gateway"}}, "rules": []any{map[string]any{
			"backendRefs": []any{map[string]any{"name": "productpage", "port": int64(9080)}},
		}}},
	}})).To(Succeed())

	btp := func(spec map[string]any) *unstructured.Unstructured {
		spec["targetRefs"] = []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}}
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "BackendTrafficPolicy",
			"metadata": map[string]any{"name": "web", "namespace": ns},
			"spec":     spec,
		}}
	}
	retry5 := map[string]any{"numRetries": int64(5)}
	timeout := func(d string) map[string]any { return map[string]any{"http": map[string]any{"requestTimeout": d}} }
	const prefix = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy egnew/bookinfo: BackendTrafficPolicy egnew/web "
	const retryDenied = prefix + "spec.retry.numRetries: 5 makes client -x6-> productpage -x1-> reviews -x1-> ratings = 6 > cap 3; BackendTrafficPolicy egnew/web may keep numRetries: 2"
	// The gate judges once the manager's cache and the mesh watcher hold the workloads and the
	// route: until then a dry run may pass.
	g.Eventually(dryRunDenial(op, btp(map[string]any{"retry": retry5}))).Should(Equal(retryDenied))
	g.Expect(c.Create(ctx, btp(map[string]any{"retry": retry5}))).To(MatchError(retryDenied))

	g.Expect(c.Create(ctx, btp(map[string]any{"timeout": timeout("10s")}))).To(Succeed())
	update := func(spec map[string]any) error {
		stored := btp(map[string]any{})
		if err := c.Get(ctx, client.ObjectKeyFromObject(stored), stored); err != nil {
			return err
		}
		next := btp(spec)
		next.SetResourceVersion(stored.GetResourceVersion())
		return c.Update(ctx, next)
	}
	g.Expect(update(map[string]any{"timeout": timeout("60s")})).To(MatchError(prefix +
		"spec.timeout.http.requestTimeout: timeout 10s -> 1m0s makes productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"))

	g.Eventually(func() error {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), &p); err != nil {
			return err
		}
		p.Spec.Enforcement = v1alpha1.EnforcementRewrite
		return c.Update(ctx, &p)
	}).Should(Succeed())
	// Denied until the gate sees Rewrite; then stored lowered, never as sent.
	g.Eventually(func() error {
		return update(map[string]any{"timeout": timeout("10s"), "retry": map[string]any{"numRetries": int64(5)}})
	}).Should(Succeed())
	stored := btp(map[string]any{})
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), stored)).To(Succeed())
	n, found, err := unstructured.NestedInt64(stored.Object, "spec", "retry", "numRetries")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(n).To(Equal(int64(2)))
	g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom, "spec.retry.numRetries: 5"))
}
