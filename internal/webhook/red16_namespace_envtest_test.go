package webhook

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// red16: a Namespace created in the same apply as its pod (kubectl apply of one file: the
// Namespace, its RetryPolicy, the pod, back to back, no wait). The injector waits for the
// Namespace in its cache, and reads its annotations from the same informer: a pod it injects
// runs in the Namespace's OpenShift UID range, never with the defaults (65532) of a Namespace
// seen without its annotations. A pod it does not inject says why (the skip annotation) or,
// the cache not having the Namespace within its wait, fails open (no proxy, no annotation).
var _ = Describe("red16: pod injector, a Namespace created with its pod", Ordered, func() {
	ctx := context.Background()
	It("injects in the Namespace's UID range or says why not, never the defaults", func() {
		injected, skipped, bare := 0, 0, 0
		for i := range 8 {
			ns := fmt.Sprintf("red16-same-apply-%d", i)
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
				Labels:      map[string]string{"retrycap.dev/injection": "enabled"},
				Annotations: map[string]string{"openshift.io/sa.scc.uid-range": "1000680000/10000"}}})).To(Succeed())
			Expect(k8sClient.Create(ctx, &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"},
				Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}})).To(Succeed())
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
			Expect(k8sClient.Create(ctx, p)).To(Succeed())
			stored := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
			switch {
			case len(stored.Spec.InitContainers) == 1:
				injected++
				sc := stored.Spec.InitContainers[0].SecurityContext
				Expect([]int64{*sc.RunAsUser, *sc.RunAsGroup}).To(Equal([]int64{1000689999, 1000689999}), "pod of %s", ns)
			case stored.Annotations[inject.SkippedAnnotation] != "":
				skipped++
				GinkgoWriter.Printf("%s: skipped: %s\n", ns, stored.Annotations[inject.SkippedAnnotation])
			default:
				bare++
			}
			Expect(stored.Spec.InitContainers).To(Or(BeEmpty(), HaveLen(1)))
		}
		GinkgoWriter.Printf("injected %d, skipped %d, failed open %d\n", injected, skipped, bare)
		Expect(injected + skipped + bare).To(Equal(8))
	})
})
