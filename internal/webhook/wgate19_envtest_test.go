package webhook

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// overIntoNamespace creates ns with gateway -> order=gatewayOrder, order -> payment=order and
// payment, then policy (the workloads stored before it, so not judged by it), and waits until
// the manager's cache has all of it: the path into order is over the policy on its own.
func overIntoNamespace(ctx context.Context, ns string, policy *v1alpha1.RetryPolicy, gatewayOrder, order string) {
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8sClient.Create(ctx, gateDeployment(ns, "gateway", gatewayOrder, partOfShop))).To(Succeed())
	Expect(k8sClient.Create(ctx, gateDeployment(ns, "payment", "", partOfShop))).To(Succeed())
	Expect(k8sClient.Create(ctx, gateDeployment(ns, "order", order, partOfShop))).To(Succeed())
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		for _, name := range []string{"gateway", "order", "payment"} {
			_, ok := indexedDeployment(ns, name)
			g.Expect(ok).To(BeTrue(), "Deployment %s/%s in the workload index", ns, name)
		}
	}, cacheWait).Should(Succeed())
}

// orderCanary is a Deployment of order's service (retrycap.dev/service: order) calling payment.
func orderCanary(ns, upstreams string) *appsv1.Deployment {
	d := gateDeployment(ns, "order-canary", upstreams, partOfShop)
	d.Spec.Template.Annotations[annotations.Service] = "order"
	return d
}

// The workload gate's Rewrite stores only what Reject would admit (docs/decisions.md, wgate19),
// through the real API server: gateway -x5-> order under cap 4 (and, timed, gateway -> order
// 3 tries of 1s, two client tries, under maxTimeToAnswer 1s) is over before order calls anything.
// A create calling payment is refused under both modes (Rewrite admitted it lowered to 1, with
// a warning); an update raising order's own attempts is refused by Reject and lowered back to the
// stored value by Rewrite (the time's Rewrite refused it).
var _ = Describe("workload gate, Rewrite stores what Reject admits", Ordered, func() {
	ctx := context.Background()
	cap15 := func(ns string) string {
		return "gateway -x5-> order -x3-> payment = 15 > cap 4; no rewrite fits: even with order: payment=1, gateway -x5-> order -x1-> payment = 5 > cap 4: lower Deployment " + ns + "/gateway retrycap.dev/upstreams order=5, or raise RetryPolicy " + ns + "/checkout spec.maxAmplification: 4"
	}
	const (
		time6 = "client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s; no rewrite fits: even with order: payment=1, client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s"
		// small20: the levers of the time verdict, in their units.
		time6Levers       = ": lower the per-try timeout of Deployment wgate19-time/order-canary retrycap.dev/upstreams payment=3/200ms, RetryPolicy wgate19-time/checkout spec.entrypoints[0].clientAttempts: 2, Deployment wgate19-time/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy wgate19-time/checkout spec.maxTimeToAnswer: 1.8s"
		time6LeversUpdate = ": lower the per-try timeout of Deployment wgate19-time/order retrycap.dev/upstreams payment=3/200ms, RetryPolicy wgate19-time/checkout spec.entrypoints[0].clientAttempts: 2, Deployment wgate19-time/gateway retrycap.dev/upstreams order=3, or raise RetryPolicy wgate19-time/checkout spec.maxTimeToAnswer: 1.8s"
	)

	It("cap, Reject: refuses the create and the raising update, admits a lowering one", func() {
		const ns = "wgate19-reject"
		overIntoNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementReject), "order=5", "payment=1")
		Expect(k8sClient.Create(ctx, orderCanary(ns, "payment=3"))).To(MatchError(gateDenied + "RetryPolicy " + ns + "/checkout: " + cap15(ns)))
		Expect(setUpstreams(ctx, k8sClient, ns, "order", "payment=3")).To(MatchError(gateDenied + "RetryPolicy " + ns + "/checkout: " + cap15(ns)))
		// An update that keeps its attempts (a new label) is admitted, the chain over as stored.
		var d appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order"}, &d)).To(Succeed())
		d.Spec.Template.Labels["version"] = "v2"
		Expect(k8sClient.Update(ctx, &d)).To(Succeed())
	})

	It("cap, Rewrite: refuses the create Reject refuses, lowers the raising update back to what is stored", func() {
		const ns = "wgate19-rewrite"
		overIntoNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementRewrite), "order=5", "payment=1")
		c, warnings := gateClient()
		Expect(c.Create(ctx, orderCanary(ns, "payment=3"))).To(MatchError(gateDenied + "RetryPolicy " + ns + "/checkout: " + cap15(ns) +
			` (refused although enforcement is Rewrite: lowered as far as it goes, Deployment ` + ns + `/order-canary annotation retrycap.dev/upstreams="payment=1" still makes gateway -x5-> order -x1-> payment = 5 > cap 4)`))
		Expect(warnings.take()).To(BeEmpty())

		Expect(setUpstreams(ctx, c, ns, "order", "payment=3")).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			"RetryPolicy " + ns + "/checkout rewrote retrycap.dev/upstreams of Deployment " + ns + "/order: payment=3 -> payment=1 (gateway -x5-> order -x3-> payment = 15 > cap 4)",
			"RetryPolicy " + ns + "/checkout: " + cap15(ns) + " (admitted: enforcement is Rewrite; Deployment " + ns + "/order is lowered as far as it goes, which raises nothing over the stored object)",
		}))
		var stored appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order"}, &stored)).To(Succeed())
		Expect(stored.Spec.Template.Annotations).To(Equal(map[string]string{
			annotations.Upstreams:     "payment=1",
			annotations.RewrittenFrom: "payment=3",
		}))
	})

	It("maxTimeToAnswer, Rewrite: refuses the create, lowers the raising update back to what is stored", func() {
		const ns = "wgate19-time"
		overIntoNamespace(ctx, ns, timedGatePolicy(ns, 30, v1alpha1.EnforcementRewrite, time.Second, 2), "order=3/1s", "payment=1/200ms")
		c, warnings := gateClient()
		Expect(c.Create(ctx, orderCanary(ns, "payment=3/200ms"))).To(MatchError(gateDenied + "RetryPolicy " + ns + "/checkout: " + time6 + time6Levers +
			` (refused although enforcement is Rewrite: lowered as far as it goes, Deployment ` + ns + `/order-canary annotation retrycap.dev/upstreams="payment=1/200ms" still makes client -x2-> gateway 900ms -> order 200ms -> payment ? = 1.8s > maxTimeToAnswer 1s)`))

		Expect(setUpstreams(ctx, c, ns, "order", "payment=3/200ms")).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			"RetryPolicy " + ns + "/checkout rewrote retrycap.dev/upstreams of Deployment " + ns + "/order: payment=3/200ms -> payment=1/200ms (client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 1s)",
			"RetryPolicy " + ns + "/checkout: " + time6 + time6LeversUpdate + " (admitted: enforcement is Rewrite; Deployment " + ns + "/order is lowered as far as it goes, which raises nothing over the stored object)",
		}))
		var stored appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order"}, &stored)).To(Succeed())
		Expect(stored.Spec.Template.Annotations).To(Equal(map[string]string{
			annotations.Upstreams:     "payment=1/200ms",
			annotations.RewrittenFrom: "payment=3/200ms",
		}))
	})
})
