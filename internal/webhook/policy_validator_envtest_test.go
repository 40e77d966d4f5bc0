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

var _ = Describe("RetryPolicy validator", Ordered, func() {
	const ns = "validate-shop"
	ctx := context.Background()

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// 2 x 3 x 3 = 18 today.
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "gateway", "order=3", partOfShop))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "order", "payment=3", partOfShop))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "payment", "", partOfShop))).To(Succeed())
		waitForUpstreams(ctx, ns, "order", "payment=3")
	})

	policy := func(name string) *v1alpha1.RetryPolicy {
		p := gatePolicy(ns, 20, v1alpha1.EnforcementReject)
		p.Name = name
		p.Spec.Entrypoints[0].ClientAttempts = 2
		return p
	}

	It("refuses a selector with an unknown operator, or In without values, naming each field", func() {
		p := policy("bad-selector")
		p.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app.kubernetes.io/part-of", Operator: "Within", Values: []string{"shop"}},
			{Key: "tier", Operator: metav1.LabelSelectorOpIn},
			{Key: "bad key!", Operator: metav1.LabelSelectorOpExists},
		}}
		err := k8sClient.Create(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(`admission webhook "validate.retrycap.dev" denied the request: RetryPolicy.retrycap.dev "bad-selector" is invalid: [` +
			`spec.selector.matchExpressions[0].operator: Invalid value: "Within": not a valid selector operator, ` +
			`spec.selector.matchExpressions[1].values: Required value: must be specified when ` + "`operator`" + ` is 'In' or 'NotIn', ` +
			`spec.selector.matchExpressions[2].key: Invalid value: "bad key!": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')]`))
	})

	It("admits a valid policy with warnings: an unknown entrypoint, client attempts above the cap, a cap already exceeded", func() {
		c, warnings := gateClient()
		p := policy("warned")
		p.Spec.MaxAmplification = 1
		p.Spec.Entrypoints = append(p.Spec.Entrypoints, v1alpha1.Entrypoint{Service: "mobile-bff", ClientAttempts: 1})
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			"spec.entrypoints[0].clientAttempts: 2 exceeds spec.maxAmplification 1: every chain from gateway is over the cap whatever its services retry, and no rewrite can fit",
			`spec.entrypoints[1].service: "mobile-bff" is not the service of any workload this policy selects in namespace validate-shop (yet)`,
			"spec.maxAmplification: the current graph already exceeds the cap (client -x2-> gateway -x3-> order -x3-> payment = 18 > cap 1): deploys that raise retries on those paths will be refused",
		}))
	})

	// A maxTimeToAnswer the current chains already exceed is said at admission, as a cap already
	// exceeded is (before: admitted without a word; only the status's WithinMaxTime said so).
	It("warns of a maxTimeToAnswer the current graph already exceeds, with the worst chain", func() {
		c, warnings := gateClient()
		p := policy("slow")
		p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: 1500 * time.Millisecond}
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			"spec.maxTimeToAnswer: the current graph already exceeds it (client -x2-> gateway 6.3s -> order 6.3s -> payment ? = 12.6s > maxTimeToAnswer 1.5s): deploys that lengthen those chains will be refused",
		}))
	})

	// A selector that selects no workload (a typo, or workloads not deployed yet): before, only
	// the status said so (WithinCap Unknown, NothingSelected); the cluster policy's validator
	// already warned of an empty scope, the RetryPolicy's said nothing.
	It("warns of a selector that selects no workload, naming it and the namespace", func() {
		c, warnings := gateClient()
		p := policy("typo")
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "sohp"}}
		p.Spec.Entrypoints = nil
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			`spec.selector {"matchLabels":{"app.kubernetes.io/part-of":"sohp"}} selects no workload in namespace validate-shop (yet): nothing is checked`,
		}))
	})

	It("admits a policy the graph fits without warnings, and does not re-validate a metadata-only update", func() {
		c, warnings := gateClient()
		p := policy("fits")
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(BeEmpty())
		p.Labels = map[string]string{"team": "payments"}
		Expect(c.Update(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(BeEmpty())
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), p)).To(Satisfy(apierrors.IsNotFound))
	})
})
