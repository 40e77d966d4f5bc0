package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// A service graph with a cycle is not a call loop (#28): the gate judges the chains that visit a
// service once, as the status does.
var _ = Describe("workload gate, a cycle between two services", Ordered, func() {
	ctx := context.Background()

	It("admits a retry on a cycle whose chains fit, and refuses the update that puts one over, with the simple chain", func() {
		const ns = "gate-cycle"
		policy := gatePolicy(ns, 4, v1alpha1.EnforcementReject)
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		// catalog calls gateway for one endpoint; gateway calls catalog for another.
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "catalog", "gateway", partOfShop))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "db", "", partOfShop))).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
			for _, name := range []string{"catalog", "db"} {
				_, ok := indexedDeployment(ns, name)
				g.Expect(ok).To(BeTrue(), "Deployment %s/%s in the workload index", ns, name)
			}
		}, cacheWait).Should(Succeed())

		// gateway -x3-> catalog = 3 <= 4: no chain goes round gateway -> catalog -> gateway (the
		// gate used to refuse it as "retry cycle ...: amplification unbounded").
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "gateway", "catalog=3", partOfShop))).To(Succeed())
		waitForUpstreams(ctx, ns, "gateway", "catalog=3")
		waitForUpstreams(ctx, ns, "catalog", "gateway")

		// catalog adds db=2: gateway -x3-> catalog -x2-> db = 6 > 4.
		Expect(setUpstreams(ctx, k8sClient, ns, "catalog", "gateway, db=2")).To(MatchError(gateDenied +
			"RetryPolicy gate-cycle/checkout: gateway -x3-> catalog -x2-> db = 6 > cap 4; catalog may keep db=1"))
		Expect(setUpstreams(ctx, k8sClient, ns, "catalog", "gateway, db=1")).To(Succeed())
	})
})
