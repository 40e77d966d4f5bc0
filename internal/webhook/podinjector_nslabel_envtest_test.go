package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// A namespace labelled retrycap.dev/injection=true (as Istio's sidecar.istio.io/inject reads) instead of
// "enabled": before, its pods were stored without the proxy, with nothing on them and no event.
// Through the real API server: a pod a policy selects is stored with the skip naming the
// namespace, the label and the value, and a Warning event; a pod no policy selects is untouched.
var _ = Describe("pod injector: a namespace label that is not enabled or disabled", Ordered, func() {
	const (
		ns   = "inject-label-true"
		skip = `InvalidNamespaceLabel: namespace inject-label-true has label retrycap.dev/injection="true": want "enabled" (inject the pods a policy selects) or "disabled"; RetryPolicy inject-label-true/web selects the pod`
	)
	ctx := context.Background()
	pod := func(name, team string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": team}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
	}

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "true"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 3,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "web"}}}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "true"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	})

	It("records the skip on a pod a policy selects, with a Warning event", func() {
		Expect(k8sClient.Create(ctx, pod("web-0", "web"))).To(Succeed())
		var p corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-0"}, &p)).To(Succeed())
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Annotations).To(Equal(map[string]string{inject.SkippedAnnotation: skip}))
		Eventually(func(g Gomega) {
			var list eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var got []string
			for _, e := range list.Items {
				got = append(got, e.Type+" "+e.Reason+" "+e.Regarding.Name+": "+e.Note)
			}
			g.Expect(got).To(ContainElement("Warning InvalidNamespaceLabel web-0: retrycap proxy not injected: " + skip[len("InvalidNamespaceLabel: "):]))
		}).Should(Succeed())
	})

	It("leaves a pod no policy selects untouched", func() {
		Expect(k8sClient.Create(ctx, pod("batch-0", "batch"))).To(Succeed())
		var p corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "batch-0"}, &p)).To(Succeed())
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Annotations).To(BeEmpty())
	})
})
