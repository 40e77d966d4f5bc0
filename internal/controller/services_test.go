package controller

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// service is a ClusterIP Service selecting sel.
func service(ns, name string, sel map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"owner": "team-web", "retry.linkerd.io/limit": "2"}},
		Spec:       corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	}
}

var _ = Describe("RetryPolicy status with Services", func() {
	ctx := context.Background()

	It("follows a Service created, changed and deleted after the workloads", func() {
		const ns = "emojivoto-status"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "vote-bot", "web-svc=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "web", "emoji-svc=3", map[string]string{"app": "web-svc"}))).To(Succeed())
		Expect(k8sClient.Create(ctx, deployment(ns, "emoji", "", map[string]string{"app": "emoji-svc"}))).To(Succeed())
		Expect(k8sClient.Create(ctx, service(ns, "emoji-svc", map[string]string{"app": "emoji-svc"}))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 3)
		Expect(k8sClient.Create(ctx, policy(ns, "emojivoto", 4, nil))).To(Succeed())

		// vote-bot calls web-svc, which no Service names yet: a leaf.
		leaf := verdict{
			Amplification: 3, WorstPath: "vote-bot>web-svc",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "True", WithinWhy: v1alpha1.ReasonWithinCap,
			WithinMessage: "amplification 3 <= cap 4 (worst path vote-bot>web-svc)",
		}
		Eventually(verdictOfPolicy(ctx, ns, "emojivoto")).Should(Equal(leaf))

		Expect(k8sClient.Create(ctx, service(ns, "web-svc", map[string]string{"app": "web-svc"}))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "emojivoto")).Should(Equal(verdict{
			Amplification: 9, WorstPath: "vote-bot>web-svc>emoji-svc",
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "False", WithinWhy: v1alpha1.ReasonCapExceeded,
			WithinMessage: "client -x1-> vote-bot -x3-> web-svc -x3-> emoji-svc = 9 > cap 4",
		}))
		st, err := statusOf(ctx, ns, "emojivoto")()
		Expect(err).NotTo(HaveOccurred())
		Expect(st.Violations).To(Equal([]v1alpha1.Violation{{
			Path: []string{"vote-bot", "web-svc", "emoji-svc"}, Amplification: 9,
			Message:    "client -x1-> vote-bot -x3-> web-svc -x3-> emoji-svc = 9 > cap 4",
			Suggestion: "Deployment " + ns + "/web: emoji-svc=1",
		}}))
		Expect(st.Chains).To(Equal([]v1alpha1.Chain{{Entrypoint: "vote-bot", Amplification: 9, Path: []string{"vote-bot", "web-svc", "emoji-svc"}}}))

		// The manager caches Services cut down to name, labels, selector, type and the
		// retry.linkerd.io/ annotations (the mesh layer reads them).
		var cached corev1.Service
		Expect(mgrClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-svc"}, &cached)).To(Succeed())
		Expect(cached.Spec.Selector).To(Equal(map[string]string{"app": "web-svc"}))
		Expect(cached.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(cached.Spec.Ports).To(BeEmpty())
		Expect(cached.Spec.ClusterIP).To(BeEmpty())
		Expect(cached.Annotations).To(Equal(map[string]string{"retry.linkerd.io/limit": "2"}))
		Expect(cached.ManagedFields).To(BeEmpty())

		// A selector that no longer matches: web-svc is a leaf again; matching again, 9 again.
		setSelector := func(app string) {
			Eventually(func() error {
				var s corev1.Service
				if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web-svc"}, &s); err != nil {
					return err
				}
				s.Spec.Selector = map[string]string{"app": app}
				return k8sClient.Update(ctx, &s)
			}).Should(Succeed())
		}
		setSelector("web-svc-v2")
		Eventually(verdictOfPolicy(ctx, ns, "emojivoto")).Should(Equal(leaf))
		setSelector("web-svc")
		Eventually(verdictOfPolicy(ctx, ns, "emojivoto")).Should(HaveField("Amplification", int64(9)))

		// Deleted: a leaf.
		Expect(k8sClient.Delete(ctx, service(ns, "web-svc", nil))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "emojivoto")).Should(Equal(leaf))
	})

	It("says so when the policy selects nothing", func() {
		const ns = "nothing-selected"
		createNamespace(ctx, ns)
		Expect(k8sClient.Create(ctx, deployment(ns, "web", "emoji-svc=3", nil))).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 1)
		Expect(k8sClient.Create(ctx, policy(ns, "payments", 4, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}))).To(Succeed())
		Eventually(verdictOfPolicy(ctx, ns, "payments")).Should(Equal(verdict{
			Ready: "True", ReadyWhy: v1alpha1.ReasonReconciled,
			Within: "Unknown", WithinWhy: v1alpha1.ReasonNothingSelected,
			WithinMessage: `spec.selector {"matchLabels":{"team":"payments"}} selects no workload in namespace nothing-selected: nothing to check`,
		}))
	})
})
