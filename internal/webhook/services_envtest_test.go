package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

var _ = Describe("workload gate with Services", Ordered, func() {
	ctx := context.Background()
	const ns = "emojivoto-gate"
	app := func(name string) map[string]string { return map[string]string{"app": name} }
	svc := func(name string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       corev1.ServiceSpec{Selector: app(name), Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
	}
	// indexed waits until the shared workload index has (or no longer has) Service name.
	indexed := func(name string, want bool) {
		Eventually(func() bool { return gateWebhooks.Gate.index.Services(ns).Has(ns, name) }, cacheWait).Should(Equal(want))
	}
	// webV2 is a second version of web behind Service web-svc, calling emoji-svc 3 times.
	webV2 := func() client.Object { return gateDeployment(ns, "web-v2", "emoji-svc=3", app("web-svc")) }

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "emojivoto"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Enforcement: v1alpha1.EnforcementReject}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "vote-bot", "web-svc=3", nil))).To(Succeed())
		Expect(k8sClient.Create(ctx, gateDeployment(ns, "emoji", "", app("emoji-svc")))).To(Succeed())
		Expect(k8sClient.Create(ctx, svc("emoji-svc"))).To(Succeed())
		waitForPolicy(ctx, p)
		indexed("emoji-svc", true)
		Eventually(func() int { return gateWebhooks.Gate.index.Len(ns) }, cacheWait).Should(Equal(2))
	})

	It("admits a caller of a name no Service has (a leaf), and refuses it once the Service exists", func() {
		Expect(k8sClient.Create(ctx, webV2(), client.DryRunAll)).To(Succeed())

		Expect(k8sClient.Create(ctx, svc("web-svc"))).To(Succeed())
		indexed("web-svc", true)
		err := k8sClient.Create(ctx, webV2())
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(gateDenied + "RetryPolicy emojivoto-gate/emojivoto: vote-bot -x3-> web-svc -x3-> emoji-svc = 9 > cap 4; " +
			"Deployment emojivoto-gate/web-v2 may keep emoji-svc=1"))
	})

	It("admits it again once the Service is gone", func() {
		Expect(k8sClient.Delete(ctx, svc("web-svc"))).To(Succeed())
		indexed("web-svc", false)
		Expect(k8sClient.Create(ctx, webV2())).To(Succeed())
	})

	It("validates spec.entrypoints naming a Service: no warning for emoji-svc, one for a name nothing provides", func() {
		c, warnings := gateClient()
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "entry"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 9, Enforcement: v1alpha1.EnforcementAudit,
				Entrypoints: []v1alpha1.Entrypoint{{Service: "emoji-svc", ClientAttempts: 1}, {Service: "web-svc", ClientAttempts: 1}}}}
		Expect(c.Create(ctx, p)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{
			`spec.entrypoints[1].service: "web-svc" is not the service of any workload this policy selects in namespace emojivoto-gate (yet)`,
		}))
	})
})
