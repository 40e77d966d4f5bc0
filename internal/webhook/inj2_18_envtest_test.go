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

// inj2_18: a pod's own container named retrycap-proxy (another image). On main the injector took
// the name for its own proxy: the pod was stored as it came, with no annotation and no event
// (AlreadyInjected, the ordinary skip). Through the real API server: now it is a recorded skip
// naming the container and its image, with a Warning event; a pod the injector did inject
// (created again from its dump) is still left alone in silence.
var _ = Describe("inj2_18: pod injector and a foreign container named retrycap-proxy", Ordered, func() {
	const ns = "inj2-18-foreign"
	ctx := context.Background()

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	})

	It("records the skip, naming the container and its image, with a Warning event", func() {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foreign"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}, {Name: "retrycap-proxy", Image: "someone/else:v2"}}}}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		msg := `spec.containers[1] is named retrycap-proxy but is not retrycap's proxy (image "someone/else:v2", not "` + suiteProxyImage + `", and no --listen=127.0.0.1:15001 and --service= arguments): container names are unique in a pod, so the proxy cannot be added; rename the container`
		Expect(stored.Spec.InitContainers).To(BeEmpty())
		Expect(stored.Spec.Containers).To(HaveLen(2))
		Expect(stored.Annotations).To(Equal(map[string]string{inject.SkippedAnnotation: "ContainerNameConflict: " + msg}))
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var got []string
			for _, e := range evs.Items {
				got = append(got, e.Type+" "+e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Reason+" "+e.Note)
			}
			g.Expect(got).To(Equal([]string{"Warning Pod/foreign ContainerNameConflict retrycap proxy not injected: " + msg}))
		}, cacheWait).Should(Succeed())
	})

	It("leaves a pod it injected alone, created again from its dump", func() {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "first"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Spec.InitContainers).To(HaveLen(1))
		again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again", Annotations: stored.Annotations}, Spec: *stored.Spec.DeepCopy()}
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		got := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(again), got)).To(Succeed())
		Expect(got.Annotations).To(Equal(stored.Annotations))
		Expect(got.Spec.InitContainers).To(Equal(stored.Spec.InitContainers))
	})
})
