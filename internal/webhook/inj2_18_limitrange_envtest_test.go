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

// inj2_18: a LimitRange item of type Pod (the sums over the pod's containers). On main it was not
// judged: the injected pod was refused whole by the LimitRanger, so no pod of the workload was
// created. The injector's judgement is checked against the real LimitRanger's: the pod as main
// injected it is refused exactly where the injector now skips, and a pod the LimitRange refuses
// without the proxy is not blamed on it (injected, and refused by the API server as before).
var _ = Describe("inj2_18: pod injector and LimitRange items of type Pod", Ordered, func() {
	ctx := context.Background()
	q := func(r, v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceName(r): resource.MustParse(v)}
	}
	both := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{"cpu": resource.MustParse(cpu), "memory": resource.MustParse(mem)}
	}
	cases := []struct {
		item     corev1.LimitRangeItem
		podLevel *corev1.ResourceRequirements
		skip     string // the injector's, after "LimitRange <ns>/per-pod spec.limits[0] (type Pod) "
		refused  string // the API server's, for the pod as main injected it
		always   bool   // refused without the proxy too: the injector injects, the API server refuses
		defaults bool   // an item of type Container first, whose defaults the LimitRanger gives the app before the injector sees it
	}{
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: q("cpu", "1")},
			skip:    "max cpu is 1, and the pod's cpu limit is 2200m with the proxy (whose limit is 2), 200m without it (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)",
			refused: "maximum cpu usage per Pod is 1, but limit is 2200m"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: q("memory", "128Mi")},
			skip:    "max memory is 128Mi, and the pod's memory limit is 160Mi with the proxy (whose limit is 64Mi), 96Mi without it (set the annotation retrycap.dev/proxy-memory-limit on the pod's template or its Namespace)",
			refused: "maximum memory usage per Pod is 128Mi, but limit is 160Mi"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, MaxLimitRequestRatio: q("cpu", "4")},
			skip:    "maxLimitRequestRatio cpu is 4, and the pod's cpu limit over its request is 20 with the proxy (2200m over 110m), 2 without it (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace)",
			refused: "cpu max limit to request ratio per Pod is 4, but provided ratio is 20.000000"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: q("cpu", "1")},
			podLevel: &corev1.ResourceRequirements{Requests: both("1", "128Mi"), Limits: both("1", "128Mi")},
			skip:     "max cpu is 1, and the pod's cpu limit is 1010m with the proxy (whose limit is 2), 1 without it (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)",
			refused:  "maximum cpu usage per Pod is 1, but limit is 1010m"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: q("cpu", "3"), Min: q("memory", "64Mi")}},
		// The app sets nothing: the LimitRanger's defaults (before the webhooks) are what the
		// injector sums.
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Max: q("cpu", "1")}, defaults: true,
			skip:    "max cpu is 1, and the pod's cpu limit is 2300m with the proxy (whose limit is 2), 300m without it (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace)",
			refused: "maximum cpu usage per Pod is 1, but limit is 2300m"},
		{item: corev1.LimitRangeItem{Type: corev1.LimitTypePod, Min: q("cpu", "1")},
			refused: "minimum cpu usage per Pod is 1, but request is 110m", always: true},
	}
	nsOf := func(i int) string { return fmt.Sprintf("inj2-18-podlr-%d", i) }

	BeforeAll(func() {
		for i, c := range cases {
			ns := nsOf(i)
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
			policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
			Expect(k8sClient.Create(ctx, policy)).To(Succeed())
			items := []corev1.LimitRangeItem{c.item}
			if c.defaults {
				items = []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Default: both("300m", "96Mi"), DefaultRequest: both("150m", "64Mi")}, c.item}
			}
			lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "per-pod"}, Spec: corev1.LimitRangeSpec{Limits: items}}
			Expect(k8sClient.Create(ctx, lr)).To(Succeed())
			Eventually(func(g Gomega) {
				labels, _ := gateWebhooks.Index.Namespace(ns)
				g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
				g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
				g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(lr), &corev1.LimitRange{})).To(Succeed())
			}).Should(Succeed())
		}
	})

	It("skips where the LimitRanger refuses the pod for the proxy, and only there", func() {
		for i, c := range cases {
			ns := nsOf(i)
			app := corev1.Container{Name: "app", Image: "example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: both("100m", "64Mi"), Limits: both("200m", "96Mi")}}
			if c.podLevel != nil || c.defaults {
				app.Resources = corev1.ResourceRequirements{}
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: corev1.PodSpec{Containers: []corev1.Container{app}, Resources: c.podLevel}}

			// The pod as main injected it (the same decision, no LimitRange read).
			asMain := pod.DeepCopy()
			if c.defaults {
				// As the LimitRanger gives it before the webhooks (the decision below is main's,
				// made without the API server).
				asMain.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: both("150m", "64Mi"), Limits: both("300m", "96Mi")}
			}
			d := inject.Decide(inject.Config{ProxyImage: suiteProxyImage}, inject.Input{Pod: asMain, NamespaceLabels: map[string]string{"retrycap.dev/injection": "enabled"},
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

			err = k8sClient.Create(ctx, pod)
			if c.always {
				// Injected (not the proxy's doing), and refused by the LimitRanger as before.
				Expect(err).To(MatchError(ContainSubstring(c.refused)), "case %d", i)
				continue
			}
			Expect(err).NotTo(HaveOccurred(), "case %d", i)
			stored := &corev1.Pod{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
			if c.skip == "" {
				Expect(stored.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"), "case %d", i)
				Expect(stored.Spec.InitContainers).To(HaveLen(1))
				continue
			}
			at := "0"
			if c.defaults {
				at = "1"
			}
			want := "LimitRangeConflict: LimitRange " + ns + "/per-pod spec.limits[" + at + "] (type Pod) " + c.skip + ": the API server would refuse the pod"
			Expect(stored.Spec.InitContainers).To(BeEmpty(), "case %d", i)
			Expect(stored.Annotations).To(HaveKeyWithValue(inject.SkippedAnnotation, want), "case %d", i)
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
