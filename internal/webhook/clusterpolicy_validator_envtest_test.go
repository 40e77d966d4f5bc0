package webhook

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

var _ = Describe("ClusterRetryPolicy validator", Ordered, func() {
	ctx := context.Background()
	chain := map[string]string{"retrycap.dev/chain": "validate-cluster"}
	var created []*v1alpha1.ClusterRetryPolicy

	BeforeAll(func() {
		// web (vc-shop) -x3-> order (vc-orders) -x3-> payment (vc-payments): 2 x 3 x 3 = 18.
		for _, ns := range []string{"vc-shop", "vc-orders", "vc-payments"} {
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: chain}})).To(Succeed())
		}
		Expect(k8sClient.Create(ctx, gateDeployment("vc-shop", "web", "order.vc-orders=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment("vc-orders", "order", "payment.vc-payments=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment("vc-payments", "payment", "", nil))).To(Succeed())
		waitForUpstreams(ctx, "vc-orders", "order", "payment.vc-payments=3")
		waitForUpstreams(ctx, "vc-shop", "web", "order.vc-orders=3")
	})
	AfterAll(func() {
		for _, p := range created {
			Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, p))).To(Succeed())
		}
	})

	policy := func(name string, cap int32) *v1alpha1.ClusterRetryPolicy {
		p := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: chain}
		p.Spec.MaxAmplification = cap
		p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "web.vc-shop", ClientAttempts: 2}}
		created = append(created, p)
		return p
	}

	It("refuses bad selectors of either kind, naming each field", func() {
		p := policy("vc-bad", 20)
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Within"}}}
		p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}
		err := k8sClient.Create(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(`admission webhook "validate-cluster.retrycap.dev" denied the request: ClusterRetryPolicy.retrycap.dev "vc-bad" is invalid: [` +
			`spec.namespaceSelector.matchExpressions[0].operator: Invalid value: "Within": not a valid selector operator, ` +
			`spec.selector.matchExpressions[0].values: Required value: must be specified when ` + "`operator`" + ` is 'In' or 'NotIn']`))
	})

	It("admits with warnings: client attempts above the cap, an entrypoint of no selected workload, the cap already exceeded across namespaces", func() {
		c, warnings := gateClient()
		p := policy("vc-warned", 1)
		p.Spec.Entrypoints = append(p.Spec.Entrypoints, v1alpha1.Entrypoint{Service: "mobile.vc-shop", ClientAttempts: 1})
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			"spec.entrypoints[0].clientAttempts: 2 exceeds spec.maxAmplification 1: every chain from web.vc-shop is over the cap whatever its services retry, and no rewrite can fit",
			`spec.entrypoints[1].service: "mobile.vc-shop" is not the service of any workload this policy selects (yet)`,
			"spec.maxAmplification: the current graph already exceeds the cap (client -x2-> web.vc-shop -x3-> order.vc-orders -x3-> payment.vc-payments = 18 > cap 1): deploys that raise retries on those paths will be refused",
		}))
	})

	It("warns of a maxTimeToAnswer the chain across namespaces already exceeds, under Rewrite", func() {
		c, warnings := gateClient()
		p := policy("vc-slow", 20)
		p.Spec.Enforcement = v1alpha1.EnforcementRewrite
		p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: 1500 * time.Millisecond}
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			"spec.maxTimeToAnswer: the current graph already exceeds it (client -x2-> web.vc-shop 6.3s -> order.vc-orders 6.3s -> payment.vc-payments ? = 12.6s > maxTimeToAnswer 1.5s): deploys that lengthen those chains will be rewritten where fewer attempts fit, else refused",
		}))
	})

	It("admits a policy the graph fits without warnings, and one that selects no namespace with a warning", func() {
		c, warnings := gateClient()
		Expect(c.Create(ctx, policy("vc-fits", 20))).To(Succeed())
		Expect(warnings.take()).To(BeEmpty())
		none := policy("vc-none", 20)
		none.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"retrycap.dev/chain": "nowhere"}}
		none.Spec.Entrypoints = nil
		Expect(c.Create(ctx, none)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{"spec.namespaceSelector: selects no namespace (yet): nothing is checked"}))
	})

	It("warns of a selector that selects no workload in the namespaces it selects", func() {
		c, warnings := gateClient()
		typo := policy("vc-typo", 20)
		typo.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "frontnd"}}
		typo.Spec.Entrypoints = nil
		Expect(c.Create(ctx, typo)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			`spec.selector {"matchLabels":{"tier":"frontnd"}} selects no workload in namespaces vc-orders, vc-payments, vc-shop (yet): nothing is checked`,
		}))
	})
})
