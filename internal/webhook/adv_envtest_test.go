package webhook

import (
	"context"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/inject"
)

// Inputs nobody had tried, through the real API server with the shipped webhook configuration.
var _ = Describe("adversarial admission", Ordered, func() {
	ctx := context.Background()

	It("records no event for a dry-run pod create (sideEffects None), and one for the real create", func() {
		const ns = "adv-inject"
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{annotations.InjectionLabel: annotations.InjectionEnabled}}})).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue(annotations.InjectionLabel, annotations.InjectionEnabled))
		}, cacheWait).Should(Succeed())
		pod := func(name string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
		}
		// No policy in the namespace: the skip is recorded (annotation and event).
		const skipped = "NoPolicy: no RetryPolicy in namespace " + ns + " selects the pod"
		dry := pod("dry")
		Expect(k8sClient.Create(ctx, dry, client.DryRunAll)).To(Succeed())
		// The dry run still answers with what would be stored.
		Expect(dry.Annotations).To(Equal(map[string]string{inject.SkippedAnnotation: skipped}))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(dry), &corev1.Pod{}))).To(BeTrue())

		Expect(k8sClient.Create(ctx, pod("wet"))).To(Succeed())
		// Events are recorded in order: once the real create's event is there, the dry run's
		// would be too.
		notes := func(g Gomega) map[string][]string {
			var evs eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			out := map[string][]string{}
			for _, e := range evs.Items {
				out[e.Regarding.Name] = append(out[e.Regarding.Name], e.Reason+" "+e.Note)
			}
			return out
		}
		Eventually(func(g Gomega) {
			g.Expect(notes(g)).To(HaveKey("wet"))
		}, cacheWait).Should(Succeed())
		Expect(notes(Default)).To(Equal(map[string][]string{"wet": {"NoPolicy retrycap proxy not injected: no RetryPolicy in namespace " + ns + " selects the pod"}}))
	})

	It("records the skip of a pod whose malformed annotation is long, its event note clipped to the API's 1 KiB", func() {
		const ns = "adv-inject"
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func() error { return mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{}) }, cacheWait).Should(Succeed())
		// A ReplicaSet's pod: the gate (which would refuse the annotation on a bare Pod) is not
		// asked, the injector is. The skip's note quotes the 2,000-character token.
		long := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "long-rs-x",
			Annotations:     map[string]string{annotations.Upstreams: strings.Repeat("p", 2000) + "=3"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "long-rs", UID: "00000000-0000-0000-0000-000000000002", Controller: ptrTo(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
		Expect(k8sClient.Create(ctx, long)).To(Succeed())
		Expect(long.Annotations[inject.SkippedAnnotation]).To(HavePrefix(`InvalidAnnotation: annotation retrycap.dev/upstreams "pppp`))
		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Name == "long-rs" {
					notes = append(notes, e.Note)
				}
			}
			g.Expect(notes).To(HaveLen(1))
			g.Expect(len(notes[0])).To(Equal(1024))
			g.Expect(notes[0]).To(HavePrefix(`retrycap proxy not injected: annotation retrycap.dev/upstreams "pppp`))
			g.Expect(notes[0]).To(HaveSuffix(`pppp... (truncated from 4124 bytes)`))
		}, cacheWait).Should(Succeed())
	})

	It("creates the pod, skip recorded, when quoting its malformed annotation would pass the pod's 256 KiB of annotations", func() {
		const ns = "adv-inject" // policy "all" selects every pod (the spec above)
		token := strings.Repeat("q", 140000)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge-rs-x",
			Annotations:     map[string]string{annotations.Upstreams: token + "=3"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "huge-rs", UID: "00000000-0000-0000-0000-000000000003", Controller: ptrTo(true)}}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}}}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		skipped := pod.Annotations[inject.SkippedAnnotation]
		Expect(skipped).To(HavePrefix(`InvalidAnnotation: annotation retrycap.dev/upstreams "qqqq`))
		Expect(skipped).To(HaveSuffix(`qqqq... (truncated from 280114 bytes)`))
		Expect(len(skipped)).To(Equal(4096))
		Expect(pod.Annotations[annotations.Upstreams]).To(Equal(token + "=3"))
	})

	Context("annotation keys", Ordered, func() {
		const ns = "adv-keys"
		BeforeAll(func() { gateNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementReject)) })
		const miscased = gateDenied + `Deployment adv-keys/order: annotation retrycap.dev/Upstreams="payment=9": annotation keys are case-sensitive and retrycap reads only retrycap.dev/upstreams, so this value would not be counted; rename the key`

		It("refuses retrycap.dev/Upstreams (a miscased key) on a create, alone or beside the real key", func() {
			d := gateDeployment(ns, "order", "", partOfShop)
			d.Spec.Template.Annotations["retrycap.dev/Upstreams"] = "payment=9"
			Expect(k8sClient.Create(ctx, d)).To(MatchError(miscased))
			d = gateDeployment(ns, "order", "payment=1", partOfShop)
			d.Spec.Template.Annotations["retrycap.dev/Upstreams"] = "payment=9"
			Expect(k8sClient.Create(ctx, d)).To(MatchError(miscased))
		})

		It("refuses a patch of that single annotation, and warns of an unknown retrycap key", func() {
			c, warnings := gateClient()
			d := gateDeployment(ns, "order", "payment=1", partOfShop)
			Expect(c.Create(ctx, d)).To(Succeed())
			Expect(warnings.take()).To(BeEmpty())
			base := d.DeepCopy()
			d.Spec.Template.Annotations["retrycap.dev/Upstreams"] = "payment=9"
			Expect(c.Patch(ctx, d, client.MergeFrom(base))).To(MatchError(miscased))

			var stored appsv1.Deployment
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(base), &stored)).To(Succeed())
			patched := stored.DeepCopy()
			patched.Spec.Template.Annotations["retrycap.dev/upstream"] = "payment=9"
			Expect(c.Patch(ctx, patched, client.MergeFrom(&stored))).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{`Deployment adv-keys/order: annotation retrycap.dev/upstream="payment=9" is not one retrycap reads (retrycap.dev/service, retrycap.dev/upstreams, retrycap.dev/inject, retrycap.dev/proxy-{cpu,memory}-{request,limit}); it is ignored`}))
		})
	})

	It("rewrites a Deployment whose annotations would pass 256 KiB with the old value, into an object the API server stores", func() {
		const ns = "adv-rewrite"
		gateNamespace(ctx, ns, gatePolicy(ns, 4, v1alpha1.EnforcementRewrite))
		var b strings.Builder
		b.WriteString("payment=3")
		for i := 0; b.Len() < 150000; i++ {
			fmt.Fprintf(&b, ",ledger-%05d", i)
		}
		old := b.String()
		c, warnings := gateClient()
		Expect(c.Create(ctx, gateDeployment(ns, "order", old, partOfShop))).To(Succeed())
		var stored appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "order"}, &stored)).To(Succeed())
		ann := stored.Spec.Template.Annotations
		// Written back in canonical form (", " between entries).
		Expect(ann[annotations.Upstreams]).To(Equal(strings.ReplaceAll("payment=1"+strings.TrimPrefix(old, "payment=3"), ",", ", ")))
		from := ann[annotations.RewrittenFrom]
		Expect(from).To(HavePrefix("payment=3,ledger-00000,"))
		Expect(from).To(HaveSuffix(fmt.Sprintf("... (truncated from %d bytes)", len(old))))
		total := 0
		for k, v := range ann {
			total += len(k) + len(v)
		}
		Expect(total).To(BeNumerically("<=", 256<<10))
		Expect(warnings.take()).To(HaveLen(1))
	})

	It("is idempotent: the rewritten object sent again, and the original manifest applied again server-side, change nothing", func() {
		const ns = "adv-rewrite"
		c, warnings := gateClient()
		// A second workload of service order (a canary), judged on its own edge.
		refund := func() *appsv1.Deployment {
			d := gateDeployment(ns, "refund", "payment=3", partOfShop)
			d.Spec.Template.Annotations[annotations.Service] = "order"
			return d
		}
		Expect(c.Create(ctx, refund())).To(Succeed())
		Expect(warnings.take()).To(HaveLen(1))
		var first appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "refund"}, &first)).To(Succeed())
		Expect(first.Spec.Template.Annotations).To(Equal(map[string]string{annotations.Service: "order", annotations.Upstreams: "payment=1", annotations.RewrittenFrom: "payment=3"}))
		waitForUpstreams(ctx, ns, "refund", "payment=1")

		// The stored object sent back (a client's read-modify-write with nothing modified).
		again := first.DeepCopy()
		Expect(c.Update(ctx, again)).To(Succeed())
		Expect(warnings.take()).To(BeEmpty())
		Expect(again.Generation).To(Equal(first.Generation))
		Expect(again.Spec.Template.Annotations).To(Equal(first.Spec.Template.Annotations))

		// kubectl apply --server-side of the manifest that still says payment=3: rewritten the
		// same way, to the same stored object.
		manifest := refund()
		manifest.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(manifest)
		Expect(err).NotTo(HaveOccurred())
		delete(u, "status")
		Expect(c.Apply(ctx, client.ApplyConfigurationFromUnstructured(&unstructured.Unstructured{Object: u}),
			client.FieldOwner("kubectl"), client.ForceOwnership)).To(Succeed())
		Expect(warnings.take()).To(Equal([]string{"RetryPolicy adv-rewrite/checkout rewrote retrycap.dev/upstreams of Deployment adv-rewrite/refund: " +
			"payment=3 -> payment=1 (gateway -x3-> order -x3-> payment = 9 > cap 4)"}))
		var after appsv1.Deployment
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "refund"}, &after)).To(Succeed())
		Expect(after.Generation).To(Equal(first.Generation))
		Expect(after.Spec.Template.Annotations).To(Equal(first.Spec.Template.Annotations))
	})
})
