package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// inj2_18: a ResourceQuota the proxy's requests push over. The injector does not judge quota
// headroom (docs/decisions.md, inj2_18: the used amount is a race with every other pod of the
// namespace); this pins the API server's refusal that docs/troubleshooting.md quotes, and that
// the same pod without the proxy fits. envtest runs no quota controller, so the quota's status
// (hard, and 100m already used) is written here, as the controller would.
var _ = Describe("inj2_18: pod injector and a ResourceQuota the proxy pushes over", Ordered, func() {
	const ns = "inj2-18-quota"
	ctx := context.Background()
	cpu := func(v string) corev1.ResourceList { return corev1.ResourceList{"requests.cpu": resource.MustParse(v)} }

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: cpu("200m")}}
		Expect(k8sClient.Create(ctx, rq)).To(Succeed())
		rq.Status = corev1.ResourceQuotaStatus{Hard: cpu("200m"), Used: cpu("100m")}
		Expect(k8sClient.Status().Update(ctx, rq)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	})

	It("is refused with exceeded quota, the request counting the proxy's 10m; without the proxy it fits", func() {
		pod := func(ann map[string]string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Annotations: ann},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("100m")}}}}}}
		}
		// The quota admission reads the quota from its own informer: polled until it has the status.
		Eventually(func() error {
			err := k8sClient.Create(ctx, pod(nil))
			if err == nil {
				_ = k8sClient.Delete(ctx, pod(nil))
			}
			return err
		}, cacheWait).Should(MatchError(`pods "app" is forbidden: exceeded quota: compute, requested: requests.cpu=110m, used: requests.cpu=100m, limited: requests.cpu=200m`))
		Expect(k8sClient.Create(ctx, pod(map[string]string{"retrycap.dev/inject": "false"}))).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, stored)).To(Succeed())
		Expect(stored.Spec.InitContainers).To(BeEmpty())
	})
})
