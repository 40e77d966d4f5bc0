package webhook

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// inject18: a namespace's LimitRange that the proxy's resources break. On main the injected pod
// was refused whole by the API server's LimitRanger, so no pod of the workload was created; now
// the pod is stored without the proxy, saying which LimitRange and what to set. The injector's
// judgement is checked against the LimitRanger's: the pod as main injected it (the proxy with
// its default resources, created as already injected, so the injector leaves it alone) is refused
// by the API server exactly where the injector now skips.
var _ = Describe("inject18: pod injector and the namespace's LimitRanges", Ordered, func() {
	ctx := context.Background()
	q := func(r, v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceName(r): resource.MustParse(v)}
	}
	cases := []struct {
		item    corev1.LimitRangeItem
		ann     map[string]string
		skip    string // the injector's, after "LimitRange <ns>/per-container spec.limits[0] (type Container) "
		refused string // the API server's, for the pod as main injected it
	}{
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: q("cpu", "50m")},
			skip:    "min cpu is 50m, and the proxy's cpu request is 10m (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)",
			refused: "minimum cpu usage per Container is 50m, but request is 10m"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Max: q("cpu", "1")},
			skip:    "max cpu is 1, and the proxy's cpu limit is 2 (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)",
			refused: "maximum cpu usage per Container is 1, but limit is 2"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: q("cpu", "10")},
			skip:    "maxLimitRequestRatio cpu is 10, and the proxy's cpu limit 2 over its request 10m is 200 (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)",
			refused: "cpu max limit to request ratio per Container is 10, but provided ratio is 200.000000"},
		// review18: a request of 0 the annotation sets, under a ratio (it was injected).
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: q("cpu", "10")}, ann: map[string]string{"retrycap.dev/proxy-cpu-request": "0"},
			skip:    "maxLimitRequestRatio cpu is 10, and the proxy's cpu request is 0, which no ratio admits (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)",
			refused: "cpu max limit to request ratio per Container is 10, but no request is specified or request is 0"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: q("memory", "48Mi")},
			skip:    "min memory is 48Mi, and the proxy's memory request is 32Mi (set the annotation retrycap.dev/proxy-memory-request on the pod's template or its Namespace)",
			refused: "minimum memory usage per Container is 48Mi, but request is 32Mi"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, MaxLimitRequestRatio: q("memory", "2")}},
		// Nothing of the proxy's: the LimitRanger, reinvoked after the webhook, gives it the
		// LimitRange's default request (checked below).
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: q("ephemeral-storage", "1Mi")}},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypeContainer, Min: q("cpu", "50m")}, ann: map[string]string{"retrycap.dev/proxy-cpu-request": "50m"}},
	}
	nsOf := func(i int) string { return fmt.Sprintf("inject18-lr-%d", i) }

	BeforeAll(func() {
		for i, c := range cases {
			ns := nsOf(i)
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
			policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
			Expect(k8sClient.Create(ctx, policy)).To(Succeed())
			lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "per-container"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{c.item}}}
			Expect(k8sClient.Create(ctx, lr)).To(Succeed())
			Eventually(func(g Gomega) {
				labels, _ := gateWebhooks.Index.Namespace(ns)
				g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
				g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
				g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(lr), &corev1.LimitRange{})).To(Succeed())
			}).Should(Succeed())
		}
	})

	It("skips where the LimitRanger refuses the proxy, and injects where it admits it", func() {
		for i, c := range cases {
			ns := nsOf(i)
			app := corev1.Container{Name: "app", Image: "example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("64Mi")},
					Limits: corev1.ResourceList{"cpu": resource.MustParse("200m"), "memory": resource.MustParse("96Mi")}}}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Annotations: c.ann}, Spec: corev1.PodSpec{Containers: []corev1.Container{app}}}

			// The pod as main injected it (the same decision, no LimitRange read).
			d := inject.Decide(inject.Config{ProxyImage: suiteProxyImage}, inject.Input{Pod: pod.DeepCopy(), NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"},
				Policies: []v1alpha1.RetryPolicy{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}}})
			Expect(d.Injected).To(BeTrue(), "case %d: %v", i, d.Skip)
			old := d.Pod
			old.Name = "as-main-injected"
			err := k8sClient.Create(ctx, old)
			if c.refused == "" {
				Expect(err).NotTo(HaveOccurred(), "case %d", i)
			} else {
				Expect(err).To(MatchError(ContainSubstring(c.refused)), "case %d", i)
			}

			Expect(k8sClient.Create(ctx, pod)).To(Succeed(), "case %d", i)
			stored := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
			if c.skip == "" {
				Expect(stored.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"), "case %d", i)
				Expect(stored.Spec.InitContainers).To(HaveLen(1))
				if min, ok := c.item.Min[corev1.ResourceEphemeralStorage]; ok {
					Expect(stored.Spec.InitContainers[0].Resources.Requests.StorageEphemeral().String()).To(Equal(min.String()))
				}
				continue
			}
			want := "LimitRangeConflict: LimitRange " + ns + "/per-container spec.limits[0] (type Container) " + c.skip + ": the API server would refuse the pod"
			Expect(stored.Spec.InitContainers).To(BeEmpty(), "case %d", i)
			Expect(stored.Annotations).To(HaveKeyWithValue(inject.SkippedAnnotation, want), "case %d", i)
			// And a Warning event on the pod, as a bad annotation's: the workload asked for the proxy.
			Eventually(func(g Gomega) {
				var evs eventsv1.EventList
				g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
				var got []string
				for _, e := range evs.Items {
					got = append(got, e.Type+" "+e.Regarding.Kind+"/"+e.Regarding.Name+" "+e.Reason+" "+e.Note)
				}
				g.Expect(got).To(Equal([]string{"Warning Pod/app LimitRangeConflict retrycap proxy not injected: " + strings.TrimPrefix(want, "LimitRangeConflict: ")}))
			}, cacheWait).Should(Succeed(), "case %d", i)
		}
	})
})
