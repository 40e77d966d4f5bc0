package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// A pod made from a dump of an injected pod, or from a template that carries the injector's
// annotation, arrives with retrycap.dev/injected and no proxy container. Before, the injector
// took the annotation for proof and stored such a pod without the proxy, with no annotation,
// warning or event saying so; the policy's retry settings never ran for it. Through the real
// API server: now it is injected (annotation naming the policy rendered), and in a namespace
// that did not ask for the proxy the copied claim is removed, with a warning to the client.
var _ = Describe("pod injector: a copied retrycap.dev/injected", Ordered, func() {
	const (
		on  = "inject-copied"
		off = "inject-copied-off"
		msg = `annotation retrycap.dev/injected="shop/old" came without the retrycap-proxy container, so it was copied (from a pod template, or a dump of an injected pod), not written by an injection: it is removed and the pod decided as any other; the injector writes it on the pods it injects`
	)
	ctx := context.Background()
	pod := func(ns string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gateway", Labels: map[string]string{"app.kubernetes.io/name": "gateway"},
				Annotations: map[string]string{"retrycap.dev/injected": "shop/old", "retrycap.dev/upstreams": "order=2"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
		}
	}

	BeforeAll(func() {
		for ns, labels := range map[string]map[string]string{on: {"retrycap.dev/injection": "enabled"}, off: nil} {
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})).To(Succeed())
			policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 3}}
			Expect(k8sClient.Create(ctx, policy)).To(Succeed())
			Eventually(func(g Gomega) {
				_, known := gateWebhooks.Index.Namespace(ns)
				g.Expect(known).To(BeTrue())
				g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
			}).Should(Succeed())
		}
		Eventually(func() map[string]string { l, _ := gateWebhooks.Index.Namespace(on); return l }).Should(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
	})

	It("injects the pod of an enabled namespace, the annotation naming the policy rendered", func() {
		c, rec := gateClient()
		Expect(c.Create(ctx, pod(on))).To(Succeed())
		var p corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: on, Name: "gateway"}, &p)).To(Succeed())
		Expect(p.Spec.InitContainers).To(HaveLen(1))
		Expect(p.Spec.InitContainers[0].Name).To(Equal("retrycap-proxy"))
		Expect(p.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", on+"/all"))
		Expect(p.Annotations).To(HaveKeyWithValue(inject.WarningsAnnotation, msg))
		Expect(rec.take()).To(Equal([]string{msg}))
	})

	It("removes the claim from a pod of a namespace that did not ask for the proxy", func() {
		c, rec := gateClient()
		Expect(c.Create(ctx, pod(off))).To(Succeed())
		var p corev1.Pod
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: off, Name: "gateway"}, &p)).To(Succeed())
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Annotations).To(Equal(map[string]string{"retrycap.dev/upstreams": "order=2"}))
		Expect(rec.take()).To(Equal([]string{msg}))
	})
})
