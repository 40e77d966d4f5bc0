package controller

import (
	"context"
	"maps"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// The chain's namespaces are prefixed: other specs of the suite use shop and payments.
const (
	crpShop     = "crp-shop"
	crpOrders   = "crp-orders"
	crpPayments = "crp-payments"
	chainLabel  = "retrycap.dev/chain"
)

func labelledNamespace(ns string, lbls map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: lbls}}
}

func clusterPolicy(name string, cap int32, nsSel map[string]string, eps ...v1alpha1.Entrypoint) *v1alpha1.ClusterRetryPolicy {
	p := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsSel}
	p.Spec.RetryPolicySpec = v1alpha1.RetryPolicySpec{MaxAmplification: cap, Entrypoints: eps}
	return p
}

// clusterStatusOf reads a cluster policy's status from the API server.
func clusterStatusOf(ctx context.Context, name string) func() (v1alpha1.RetryPolicyStatus, error) {
	return func() (v1alpha1.RetryPolicyStatus, error) {
		var p v1alpha1.ClusterRetryPolicy
		err := k8sClient.Get(ctx, types.NamespacedName{Name: name}, &p)
		return p.Status, err
	}
}

func verdictOfClusterPolicy(ctx context.Context, name string) func() (verdict, error) {
	return func() (verdict, error) {
		st, err := clusterStatusOf(ctx, name)()
		return verdictOf(st), err
	}
}

// eventsAboutCluster lists the Events regarding a cluster policy: a cluster-scoped object's
// events are in namespace default.
func eventsAboutCluster(ctx context.Context, name string) func() ([]recordedEvent, error) {
	return func() ([]recordedEvent, error) {
		var list eventsv1.EventList
		if err := k8sClient.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return nil, err
		}
		slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
		var out []recordedEvent
		for _, e := range list.Items {
			if e.Regarding.Kind == "ClusterRetryPolicy" && e.Regarding.Name == name {
				out = append(out, recordedEvent{e.Type, e.Reason, e.Action, e.Note, e.ReportingController})
			}
		}
		return out, nil
	}
}

func relabelNamespace(ctx context.Context, ns string, lbls map[string]string) {
	Eventually(func() error {
		var n corev1.Namespace
		if err := k8sClient.Get(ctx, types.NamespacedName{Name: ns}, &n); err != nil {
			return err
		}
		n.Labels = lbls
		return k8sClient.Update(ctx, &n)
	}).Should(Succeed())
}

// waitForCachedNamespace waits until the manager's cache (what the reconciler selects namespaces
// from) has namespace ns with labels lbls (and the API server's kubernetes.io/metadata.name). Without it, a loaded machine's first reconcile of a
// new cluster policy could see a namespace not yet cached or not yet labelled, and record its
// first event with the numbers of a partial graph (the spec expects exactly one such event, with
// the whole chain's numbers).
func waitForCachedNamespace(ctx context.Context, ns string, lbls map[string]string) {
	want := map[string]string{"kubernetes.io/metadata.name": ns}
	maps.Copy(want, lbls)
	Eventually(func() (map[string]string, error) {
		m := namespaceMeta()
		err := mgrClient.Get(ctx, types.NamespacedName{Name: ns}, m)
		return m.Labels, err
	}).Should(Equal(want), "namespace %s's labels in the manager's cache", ns)
}

var _ = Describe("ClusterRetryPolicy status", func() {
	ctx := context.Background()

	It("caps a chain across three namespaces, follows a namespace relabelled out and back, and leaves a RetryPolicy's leaf alone", func() {
		checkout := map[string]string{chainLabel: "checkout"}
		for _, ns := range []string{crpShop, crpOrders, crpPayments} {
			Expect(k8sClient.Create(ctx, labelledNamespace(ns, checkout))).To(Succeed())
		}
		// A namespace outside the chain, with a workload the policy must not see.
		Expect(k8sClient.Create(ctx, labelledNamespace("crp-other", map[string]string{chainLabel: "other"}))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment("crp-other", "web", "order."+crpOrders+"=9", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(crpShop, "web", "order."+crpOrders+"=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(crpOrders, "order", "payment."+crpPayments+".svc.cluster.local=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(crpPayments, "payment", "", nil))).To(Succeed())
		for _, ns := range []string{crpShop, crpOrders, crpPayments, "crp-other"} {
			waitForCachedWorkloads(ctx, ns, 1)
		}
		for _, ns := range []string{crpShop, crpOrders, crpPayments} {
			waitForCachedNamespace(ctx, ns, checkout)
		}
		// A RetryPolicy of orders: payment.crp-payments is a leaf of its graph.
		Expect(k8sClient.Create(ctx, policy(crpOrders, "orders", 4, nil))).To(Succeed())
		ordersOwn := verdict{
			Amplification: 3, WorstPath: "order>payment." + crpPayments,
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 3 <= cap 4 (worst path order>payment." + crpPayments + ")",
		}
		Eventually(verdictOfPolicy(ctx, crpOrders, "orders")).Should(Equal(ordersOwn))

		Expect(k8sClient.Create(ctx, clusterPolicy("checkout", 4, checkout, v1alpha1.Entrypoint{Service: "web." + crpShop, ClientAttempts: 3}))).To(Succeed())
		msg := "client -x3-> web.crp-shop -x3-> order.crp-orders -x3-> payment.crp-payments = 27 > cap 4"
		Eventually(verdictOfClusterPolicy(ctx, "checkout")).Should(Equal(verdict{
			Amplification: 27, WorstPath: "web.crp-shop>order.crp-orders>payment.crp-payments",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded, WithinMessage: msg,
		}))
		st, err := clusterStatusOf(ctx, "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Services).To(Equal(int32(3)))
		Expect(st.Edges).To(Equal(int32(2)))
		Expect(st.Violations).To(Equal([]v1alpha1.Violation{{
			Path:          []string{"web.crp-shop", "order.crp-orders", "payment.crp-payments"},
			Amplification: 27, Message: msg,
			Suggestion: "web.crp-shop: order.crp-orders=1; order.crp-orders: payment.crp-payments=1",
		}}))
		Expect(st.Chains).To(Equal([]v1alpha1.Chain{{Entrypoint: "web.crp-shop", Amplification: 27, Path: []string{"web.crp-shop", "order.crp-orders", "payment.crp-payments"}}}))
		Eventually(eventsAboutCluster(ctx, "checkout")).Should(Equal([]recordedEvent{
			{"Warning", v1alpha1.ReasonCapExceeded, "Analyze", msg, ClusterEventSource},
		}))
		Expect(gauge("retrycap_policy_amplification", "", "checkout")).To(Equal(27.0))
		Expect(gauge("retrycap_policy_within_cap", "", "checkout")).To(Equal(0.0))

		// orders relabelled out of the selector: order.crp-orders is a leaf of the cluster graph.
		relabelNamespace(ctx, crpOrders, map[string]string{chainLabel: "none"})
		Eventually(verdictOfClusterPolicy(ctx, "checkout")).Should(Equal(verdict{
			Amplification: 9, WorstPath: "web.crp-shop>order.crp-orders",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x3-> web.crp-shop -x3-> order.crp-orders = 9 > cap 4",
		}))
		st, err = clusterStatusOf(ctx, "checkout")()
		Expect(err).NotTo(HaveOccurred())
		Expect([]int32{st.Services, st.Edges}).To(Equal([]int32{3, 1}), "web and payment selected, order.crp-orders a leaf")

		// Back in: 27 again. Then a workload change in a selected namespace is followed.
		relabelNamespace(ctx, crpOrders, checkout)
		Eventually(verdictOfClusterPolicy(ctx, "checkout")).Should(HaveField("Amplification", int64(27)))
		setUpstreams(ctx, crpShop, "web", "order."+crpOrders+"=1")
		Eventually(verdictOfClusterPolicy(ctx, "checkout")).Should(Equal(verdict{
			Amplification: 9, WorstPath: "web.crp-shop>order.crp-orders>payment.crp-payments",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x3-> web.crp-shop -x1-> order.crp-orders -x3-> payment.crp-payments = 9 > cap 4",
		}))
		setUpstreams(ctx, crpOrders, "order", "payment."+crpPayments+"=1")
		Eventually(verdictOfClusterPolicy(ctx, "checkout")).Should(Equal(verdict{
			Amplification: 3, WorstPath: "web.crp-shop>order.crp-orders>payment.crp-payments",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 3 <= cap 4 (worst path web.crp-shop>order.crp-orders>payment.crp-payments)",
		}))
		Eventually(eventsAboutCluster(ctx, "checkout")).Should(Equal([]recordedEvent{
			{"Warning", v1alpha1.ReasonCapExceeded, "Analyze", msg, ClusterEventSource},
			{"Normal", v1alpha1.ReasonWithinCap, "Analyze", "amplification 3 <= cap 4 (worst path web.crp-shop>order.crp-orders>payment.crp-payments)", ClusterEventSource},
		}))

		// The RetryPolicy of orders saw its own namespace throughout: order's attempts are
		// now 1, payment.crp-payments still a leaf.
		Eventually(verdictOfPolicy(ctx, crpOrders, "orders")).Should(Equal(verdict{
			Amplification: 1, WorstPath: "order>payment." + crpPayments,
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 1 <= cap 4 (worst path order>payment." + crpPayments + ")",
		}))

		// Deleted: its series go.
		Expect(k8sClient.Delete(ctx, clusterPolicy("checkout", 4, nil))).To(Succeed())
		Eventually(func() (bool, error) { return hasSeries("retrycap_policy_amplification", "", "checkout") }).Should(BeFalse())
	})

	It("reports an invalid namespaceSelector as Ready False naming the field", func() {
		p := clusterPolicy("bad-nssel", 4, nil)
		p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Eventually(func() (string, error) {
			st, err := clusterStatusOf(ctx, "bad-nssel")()
			for _, c := range st.Conditions {
				if c.Type == v1alpha1.ConditionReady {
					return c.Reason + ": " + c.Message, err
				}
			}
			return "", err
		}).Should(Equal(`InvalidSelector: spec.namespaceSelector {"matchExpressions":[{"key":"team","operator":"Near"}]} is invalid: "Near" is not a valid label selector operator`))
		Expect(verdictOfClusterPolicy(ctx, "bad-nssel")()).To(HaveField("WithinMessage", "no graph: spec.namespaceSelector is invalid (see condition Ready)"))
	})
})
