package webhook

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// timedGatePolicy is gatePolicy with spec.maxTimeToAnswer maxT, a per-try timeout of 1s and k
// client attempts at the gateway.
func timedGatePolicy(ns string, cap int32, mode v1alpha1.Enforcement, maxT time.Duration, k int32) *v1alpha1.RetryPolicy {
	p := gatePolicy(ns, cap, mode)
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: maxT}
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Second}
	p.Spec.Entrypoints[0].ClientAttempts = k
	return p
}

// timedNamespace creates ns with policy, payment and order -> payment with the given upstreams
// (no entrypoint reaches them yet: the gateway is the request judged), and waits until the
// manager's cache has all of it. A leaf's own time is unknown, so a chain's time is set by the
// per-try timeouts above it: the workload a chain is too slow through is the caller whose tries
// are too many or too long, here the gateway.
func timedNamespace(ctx context.Context, ns string, policy *v1alpha1.RetryPolicy, order string) {
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, gateDeployment(ns, "payment", "", partOfShop))).To(Succeed())
	Expect(k8sClient.Create(ctx, gateDeployment(ns, "order", order, partOfShop))).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		for _, name := range []string{"order", "payment"} {
			_, ok := indexedDeployment(ns, name)
			g.Expect(ok).To(BeTrue(), "Deployment %s/%s in the workload index", ns, name)
		}
	}, cacheWait).Should(Succeed())
}

// With order -> payment=3/200ms and the policy's backoff (100ms, 2s), order takes 3 x 200ms +
// 300ms = 900ms; gateway -> order=3/1s takes 3 x 900ms + 300ms = 3s, the client k x 3s;
// order=2/1s: 2 x 900ms + 100ms = 1.9s.
var _ = Describe("workload gate, maxTimeToAnswer", Ordered, func() {
	ctx := context.Background()

	It("Reject: refuses a Deployment that pushes a chain over maxTimeToAnswer, with the chain, the times and what fits", func() {
		const ns = "gate-time"
		timedNamespace(ctx, ns, timedGatePolicy(ns, 30, v1alpha1.EnforcementReject, 5*time.Second, 2), "payment=3/200ms")
		err := k8sClient.Create(ctx, gateDeployment(ns, "gateway", "order=3/1s", partOfShop))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(gateDenied + "RetryPolicy gate-time/checkout: " +
			"client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s; gateway may keep order=2"))
		// What the message says fits is admitted: 2 x 1.9s = 3.8s.
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "gateway", "order=2/1s", partOfShop))).To(Succeed())
	})

	It("Reject: a chain over the cap and over the time is one message saying both", func() {
		const ns = "gate-time-both"
		timedNamespace(ctx, ns, timedGatePolicy(ns, 4, v1alpha1.EnforcementReject, 2*time.Second, 1), "payment=3/200ms")
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "gateway", "order=3/1s", partOfShop))).To(MatchError(gateDenied +
			"RetryPolicy gate-time-both/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; " +
			"gateway 3s -> order 900ms -> payment ? = 3s > maxTimeToAnswer 2s; gateway may keep order=1"))
	})

	It("Rewrite: stores the attempts that fit and the old value, and refuses when no count fits", func() {
		const ns = "gate-time-rewrite"
		timedNamespace(ctx, ns, timedGatePolicy(ns, 30, v1alpha1.EnforcementRewrite, 5*time.Second, 2), "payment=3/200ms")
		c, warnings := gateClient()
		Expect(c.Create(ctx, gateDeployment(ns, "gateway", "order=3/1s", partOfShop))).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{"RetryPolicy gate-time-rewrite/checkout rewrote retrycap.dev/upstreams of Deployment gate-time-rewrite/gateway: " +
			"order=3/1s -> order=2/1s (client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s)"}))
		var stored appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "gateway"}, &stored)).To(Succeed())
		Expect(stored.Spec.Template.Annotations).To(Equal(map[string]string{
			annotations.Upstreams:     "order=2/1s",
			annotations.RewrittenFrom: "order=3/1s",
		}))

		// A canary of the gateway calling payment itself, 2 tries of up to 3s: 2 x 3s + 100ms
		// = 6.1s, 12.2s for the client; with 1 try still 2 x 3s = 6s: no count fits, the
		// per-try timeout is what is long, and Rewrite refuses it.
		d := gateDeployment(ns, "gateway-canary", "payment=2/3s", partOfShop)
		d.Spec.Template.Annotations[annotations.Service] = "gateway"
		sts := &appsv1.StatefulSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.StatefulSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
		Expect(c.Create(ctx, sts)).To(MatchError(gateDenied + "RetryPolicy gate-time-rewrite/checkout: " +
			"client -x2-> gateway 6.1s -> payment ? = 12.2s > maxTimeToAnswer 5s; " +
			"no rewrite fits: even with gateway: payment=1, client -x2-> gateway 3s -> payment ? = 6s > maxTimeToAnswer 5s" +
			// small20: the levers, in their units.
			": lower the per-try timeout of StatefulSet gate-time-rewrite/gateway-canary retrycap.dev/upstreams payment=2/3s, RetryPolicy gate-time-rewrite/checkout spec.entrypoints[0].clientAttempts: 2, or raise RetryPolicy gate-time-rewrite/checkout spec.maxTimeToAnswer: 6s" +
			` (refused although enforcement is Rewrite: lowered as far as it goes, StatefulSet gate-time-rewrite/gateway-canary annotation retrycap.dev/upstreams="payment=1/3s" still makes client -x2-> gateway 3s -> payment ? = 6s > maxTimeToAnswer 5s)`))
	})
})
