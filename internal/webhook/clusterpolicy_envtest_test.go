package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/inject"
)

// The incident's three teams as three namespaces, through the real API server and the manager's
// handlers: web (crp-shop) -x3-> order (crp-orders) -x3-> payment (crp-payments) -x3-> the
// payment provider = 27, under one ClusterRetryPolicy. Its namespaceSelector matches only the
// namespaces of this file, so the other specs of the suite never see it.
var _ = Describe("workload gate and pod injector with a ClusterRetryPolicy", Ordered, func() {
	ctx := context.Background()
	const (
		shop, orders, payments, batch = "crp-shop", "crp-orders", "crp-payments", "crp-batch"
		chainKey, chainValue          = "retrycap.dev/test-chain", "checkout"
	)
	chainLabel := map[string]string{chainKey: chainValue}
	crp := &v1alpha1.ClusterRetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "crp-chain"},
		Spec: v1alpha1.ClusterRetryPolicySpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: chainLabel},
			RetryPolicySpec:   v1alpha1.RetryPolicySpec{MaxAmplification: 10, Enforcement: v1alpha1.EnforcementReject},
		},
	}
	// setCluster updates the cluster policy's enforcement and cap and waits for the cache.
	setCluster := func(mode v1alpha1.Enforcement, cap int32) {
		var p v1alpha1.ClusterRetryPolicy
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(crp), &p)).To(Succeed())
		p.Spec.Enforcement, p.Spec.MaxAmplification = mode, cap
		Expect(k8sClient.Update(ctx, &p)).To(Succeed())
		Eventually(func(g Gomega) {
			var cached v1alpha1.ClusterRetryPolicy
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(crp), &cached)).To(Succeed())
			g.Expect(cached.Spec.Enforcement).To(Equal(mode))
			g.Expect(cached.Spec.MaxAmplification).To(Equal(cap))
		}, cacheWait).Should(Succeed())
	}
	indexed := func(ns string, n int) {
		Eventually(func() int { return gateWebhooks.Index.Len(ns) }, cacheWait).Should(Equal(n))
	}
	const chain27 = "web.crp-shop -x3-> order.crp-orders -x3-> payment.crp-payments -x3-> psp.example.com = 27"

	BeforeAll(func() {
		for _, ns := range []string{shop, orders} {
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: chainLabel}})).To(Succeed())
		}
		l := map[string]string{chainKey: chainValue, annotations.InjectionLabel: annotations.InjectionEnabled}
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: payments, Labels: l}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: batch}})).To(Succeed())
		Expect(k8sClient.Create(ctx, crp)).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(shop, "web", "order.crp-orders=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(orders, "order", "payment.crp-payments=3", nil))).To(Succeed())
		indexed(shop, 1)
		indexed(orders, 1)
		Eventually(func(g Gomega) {
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(crp), &v1alpha1.ClusterRetryPolicy{})).To(Succeed())
			labels, _ := gateWebhooks.Index.Namespace(payments)
			g.Expect(labels).To(HaveKeyWithValue(chainKey, chainValue))
		}, cacheWait).Should(Succeed())
	})
	AfterAll(func() {
		Expect(k8sClient.Delete(ctx, crp)).To(Succeed())
	})

	It("refuses the deploy in the third namespace that raises the chain to 27 (Reject), with the exact message", func() {
		err := k8sClient.Create(ctx, gateDeployment(payments, "payment", "psp.example.com=3", nil))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(gateDenied + "ClusterRetryPolicy crp-chain: " + chain27 + " > cap 10; payment.crp-payments may keep psp.example.com=1"))
	})

	It("stores it lowered under Rewrite, with retrycap.dev/rewritten-from and a warning", func() {
		setCluster(v1alpha1.EnforcementRewrite, 10)
		c, warnings := gateClient()
		Expect(c.Create(ctx, gateDeployment(payments, "payment", "psp.example.com=3", nil))).To(Succeed())
		var d appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: payments, Name: "payment"}, &d)).To(Succeed())
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.Upstreams, "psp.example.com=1"))
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.RewrittenFrom, "psp.example.com=3"))
		Expect(warnings.take()).To(Equal([]string{"ClusterRetryPolicy crp-chain rewrote retrycap.dev/upstreams of Deployment crp-payments/payment: " +
			"psp.example.com=3 -> psp.example.com=1 (" + chain27 + " > cap 10)"}))
		indexed(payments, 1)
	})

	It("names the strictest of a RetryPolicy and the ClusterRetryPolicy first, the other after it", func() {
		setCluster(v1alpha1.EnforcementReject, 10)
		rp := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: payments, Name: "pay"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 2, Enforcement: v1alpha1.EnforcementReject}}
		Expect(k8sClient.Create(ctx, rp)).To(Succeed())
		waitForPolicy(ctx, rp)
		// A second version of payment (its service) declaring 3 attempts: 3 > 2 in payments alone,
		// 27 > 10 across the chain.
		v2 := gateDeployment(payments, "payment-v2", "psp.example.com=3", nil)
		v2.Spec.Template.Annotations[annotations.Service] = "payment"
		err := k8sClient.Create(ctx, v2)
		Expect(err).To(MatchError(gateDenied + "RetryPolicy crp-payments/pay: payment -x3-> psp.example.com = 3 > cap 2; payment may keep psp.example.com=2; " +
			"also over the cap of ClusterRetryPolicy crp-chain (cap 10)"))

		// The cluster policy stricter: its message first.
		setCluster(v1alpha1.EnforcementReject, 1)
		Expect(k8sClient.Create(ctx, v2)).To(MatchError(gateDenied + "ClusterRetryPolicy crp-chain: " + chain27 + " > cap 1; no rewrite fits: " +
			"even with payment.crp-payments: psp.example.com=1, web.crp-shop -x3-> order.crp-orders -x3-> payment.crp-payments -x1-> psp.example.com = 9 > cap 1: " +
			"lower Deployment crp-shop/web retrycap.dev/upstreams order.crp-orders=3, Deployment crp-orders/order retrycap.dev/upstreams payment.crp-payments=3, " +
			"or raise ClusterRetryPolicy crp-chain spec.maxAmplification: 1; also over the cap of RetryPolicy crp-payments/pay (cap 2)"))
	})

	It("injects the proxy with the strictest policy's settings, of either kind", func() {
		// A ReplicaSet's pods (the gate judged their Deployment, and lets them through).
		yes := true
		owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "payment-5d8f", UID: "crp-test", Controller: &yes}}
		pod := func(name string) *corev1.Pod {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: payments, Name: name, OwnerReferences: owner,
					Labels:      map[string]string{"app.kubernetes.io/name": "payment"},
					Annotations: map[string]string{annotations.Service: "payment", annotations.Upstreams: "psp.example.com=1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
			}
		}
		proxyArgs := func(name string) (string, []string) {
			var p corev1.Pod
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: payments, Name: name}, &p)).To(Succeed())
			for _, c := range p.Spec.InitContainers {
				if c.Name == inject.ContainerName {
					return p.Annotations[annotations.InjectedStatus], c.Args
				}
			}
			Fail("pod " + name + " has no " + inject.ContainerName + " container")
			return "", nil
		}
		// The ClusterRetryPolicy (cap 1) is stricter than the RetryPolicy (cap 2): its settings, and
		// its graph, where order.crp-orders calls payment: not an entrypoint.
		Expect(k8sClient.Create(ctx, pod("payment-a"))).To(Succeed())
		by, args := proxyArgs("payment-a")
		Expect(by).To(Equal("crp-chain"))
		Expect(args).To(ContainElements("--service=payment", "--chain-cap=1", "--entrypoint=false"))

		// The RetryPolicy stricter: its settings, and its graph of payments alone, where nothing
		// calls payment: an entrypoint.
		setCluster(v1alpha1.EnforcementReject, 10)
		Expect(k8sClient.Create(ctx, pod("payment-b"))).To(Succeed())
		by, args = proxyArgs("payment-b")
		Expect(by).To(Equal("crp-payments/pay"))
		Expect(args).To(ContainElements("--service=payment", "--chain-cap=2", "--entrypoint=true"))
	})

	It("judges a Deployment created right after its Namespace by the ClusterRetryPolicy", func() {
		// No wait between the two: the gate waits for the namespace's labels to reach its index.
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "crp-fresh", Labels: chainLabel}})).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment("crp-fresh", "fresh", "order.crp-orders=9", nil))).To(MatchError(gateDenied +
			"ClusterRetryPolicy crp-chain: fresh.crp-fresh -x9-> order.crp-orders -x3-> payment.crp-payments -x1-> psp.example.com = 27 > cap 10; " +
			"fresh.crp-fresh may keep order.crp-orders=3"))
	})

	It("judges a namespace's workloads by the ClusterRetryPolicy once it is relabelled into its selector", func() {
		// crp-batch is not selected: its caller of order.crp-orders is a chain of its own.
		Expect(k8sClient.Create(ctx, gateDeployment(batch, "batch", "order.crp-orders=9", nil), client.DryRunAll)).To(Succeed())
		var n corev1.Namespace
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: batch}, &n)).To(Succeed())
		n.Labels = map[string]string{chainKey: chainValue}
		Expect(k8sClient.Update(ctx, &n)).To(Succeed())
		// batch -x9-> order -x3-> payment -x1-> psp (payment as rewritten) = 27 > cap 10.
		Eventually(func() error {
			return k8sClient.Create(ctx, gateDeployment(batch, "batch", "order.crp-orders=9", nil), client.DryRunAll)
		}, cacheWait).Should(MatchError(gateDenied + "ClusterRetryPolicy crp-chain: batch.crp-batch -x9-> order.crp-orders -x3-> payment.crp-payments -x1-> psp.example.com = 27 > cap 10; " +
			"batch.crp-batch may keep order.crp-orders=3"))
	})
})
