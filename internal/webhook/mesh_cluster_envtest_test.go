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

// meshGateClusterPolicy plays, on TestGateMeshLayers' manager (one per test binary: the
// controllers' names are process-wide), a VirtualService that raises the last hop of a chain
// across namespaces (web in shop -> pay in payments -> bank): refused by the ClusterRetryPolicy
// that selects both namespaces, though no RetryPolicy of either namespace sees the chain, and
// admitted once the policy's cap allows it.
func meshGateClusterPolicy(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	for _, ns := range []string{"shop", "payments"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"istio-injection": "enabled", "chain": "pay"}}})).To(Succeed())
	}
	crp := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "crp-chain"},
		Spec: v1alpha1.ClusterRetryPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"chain": "pay"}},
			RetryPolicySpec: v1alpha1.RetryPolicySpec{MaxAmplification: 10, Enforcement: v1alpha1.EnforcementReject}}}
	g.Eventually(func() error { return c.Create(ctx, crp) }).Should(Succeed())
	// web.shop -x3-> pay.payments -x3-> bank.payments = 9 under Istio's default: within 10.
	for _, d := range []struct{ ns, name, upstreams string }{{"payments", "bank", ""}, {"payments", "pay", "bank=1"}, {"shop", "web", "pay.payments=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(d.ns, d.name, d.upstreams)) }).Should(Succeed())
	}

	// 3 retries on bank: 3 x 4 = 12 > 10. The mesh webhook is configured once the watcher reads
	// the VirtualService API, and judges once the index has the workloads: a dry run each time
	// until then.
	const want = "admission webhook \"mesh.retrycap.dev\" denied the request: ClusterRetryPolicy crp-chain: " +
		"VirtualService payments/bank spec.http[0].retries.attempts: 3 makes web.shop -x3-> pay.payments -x4-> bank.payments = 12 > cap 10; " +
		"VirtualService payments/bank may keep attempts: 2"
	g.Eventually(dryRunDenial(op, bankVirtualService(3))).Should(Equal(want))
	g.Expect(c.Create(ctx, bankVirtualService(3))).To(MatchError(want))

	// A cap of 12 allows it: admitted once the manager's cache has the new cap.
	g.Eventually(func() error {
		var cur v1alpha1.ClusterRetryPolicy
		if err := c.Get(ctx, client.ObjectKeyFromObject(crp), &cur); err != nil {
			return err
		}
		cur.Spec.MaxAmplification = 12
		return c.Update(ctx, &cur)
	}).Should(Succeed())
	g.Eventually(func() error { return c.Create(ctx, bankVirtualService(3), client.DryRunAll) }).Should(Succeed())
	g.Expect(c.Create(ctx, bankVirtualService(3))).To(Succeed())
}

// bankVirtualService binds payments' bank, exported everywhere, with attempts retries.
func bankVirtualService(attempts int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "bank", "namespace": "payments"},
		"spec": map[string]any{
			"hosts": []any{"bank"},
			"http": []any{map[string]any{
				"route":   []any{map[string]any{"destination": map[string]any{"host": "bank"}}},
				"retries": map[string]any{"attempts": attempts},
			}},
		},
	}}
}
