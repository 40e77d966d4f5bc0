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

// What the injector reads from the pod's Namespace, through the API server and the manager's
// cache: the proxy resource annotations (the pod's own win; a bad value is refused naming the
// Namespace), OpenShift's UID range (the proxy's runAsUser and runAsGroup), and Istio's
// injection labels (Istio's injector would add its sidecar, on the proxy's ports, after
// retrycap's). On main the Namespace's annotations were not read (defaults, 65532) and the
// pod in the Istio namespace was injected.
var _ = Describe("pod injector: the pod's Namespace", Ordered, func() {
	ctx := context.Background()
	// namespace creates ns with the injection label, labels and annotations, and a policy that
	// selects every pod, and waits until the manager's cache has both.
	namespace := func(ns string, labels, ann map[string]string) {
		l := map[string]string{"retrycap.dev/injection": "enabled"}
		for k, v := range labels {
			l[k] = v
		}
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: l, Annotations: ann}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			got, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(got).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	}
	// create stores a pod of ns (annotations ann) and returns it as stored.
	create := func(ns, name string, ann map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		return stored
	}
	proxy := func(p *corev1.Pod) corev1.Container {
		Expect(p.Annotations).NotTo(HaveKey(inject.SkippedAnnotation))
		Expect(p.Spec.InitContainers).To(HaveLen(1))
		Expect(p.Spec.InitContainers[0].Name).To(Equal(inject.ContainerName))
		return p.Spec.InitContainers[0]
	}
	resources := func(c corev1.Container) map[string]string {
		r := c.Resources
		return map[string]string{"requests.cpu": r.Requests.Cpu().String(), "limits.cpu": r.Limits.Cpu().String(),
			"requests.memory": r.Requests.Memory().String(), "limits.memory": r.Limits.Memory().String(), "GOMAXPROCS": c.Env[0].Value}
	}
	skipped := func(p *corev1.Pod, want string) {
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Annotations).To(HaveKeyWithValue(inject.SkippedAnnotation, want))
	}

	It("applies the Namespace's proxy resource annotations; the pod's own win", func() {
		const ns = "inject-ns-resources"
		namespace(ns, nil, map[string]string{"retrycap.dev/proxy-cpu-limit": "1", "retrycap.dev/proxy-memory-limit": "96Mi"})
		Expect(resources(proxy(create(ns, "from-namespace", nil)))).To(Equal(map[string]string{
			"requests.cpu": "10m", "limits.cpu": "1", "requests.memory": "32Mi", "limits.memory": "96Mi", "GOMAXPROCS": "1"}))
		Expect(resources(proxy(create(ns, "own-memory", map[string]string{"retrycap.dev/proxy-memory-limit": "128Mi"})))).To(Equal(map[string]string{
			"requests.cpu": "10m", "limits.cpu": "1", "requests.memory": "32Mi", "limits.memory": "128Mi", "GOMAXPROCS": "1"}))
	})

	It("refuses a bad Namespace value, naming the Namespace, the annotation and the value", func() {
		const ns = "inject-ns-bad-resources"
		namespace(ns, nil, map[string]string{"retrycap.dev/proxy-memory-limit": "16Mi"})
		skipped(create(ns, "p", nil), `InvalidAnnotation: Pod inject-ns-bad-resources/p: annotation retrycap.dev/proxy-memory-limit "16Mi" of Namespace inject-ns-bad-resources is below 20Mi, the least the proxy runs in: it holds about 18 MiB idle, so it would be killed for memory (OOMKilled) before it served`)
		// The pod's own value replaces it: injected.
		Expect(resources(proxy(create(ns, "own", map[string]string{"retrycap.dev/proxy-memory-limit": "64Mi"})))["limits.memory"]).To(Equal("64Mi"))
	})

	It("runs the proxy in the Namespace's OpenShift UID range, as Istio's injector does", func() {
		const ns = "inject-ns-openshift"
		namespace(ns, nil, map[string]string{"openshift.io/sa.scc.uid-range": "1000680000/10000", "openshift.io/sa.scc.supplemental-groups": "1000680000/10000"})
		sc := proxy(create(ns, "p", nil)).SecurityContext
		Expect([]int64{*sc.RunAsUser, *sc.RunAsGroup}).To(Equal([]int64{1000689999, 1000689999}))
		Expect(*sc.RunAsNonRoot).To(BeTrue())
	})

	It("refuses a malformed UID range, naming the Namespace, the annotation and the value", func() {
		const ns = "inject-ns-openshift-bad"
		namespace(ns, nil, map[string]string{"openshift.io/sa.scc.uid-range": "1000680000"})
		skipped(create(ns, "p", nil), `InvalidAnnotation: Namespace inject-ns-openshift-bad: annotation openshift.io/sa.scc.uid-range "1000680000" is not a UID range ("<start>/<size>", as OpenShift writes it, or "<start>-<end>"): no "/" or "-"`)
	})

	It("leaves a pod of a Namespace Istio injects to Istio, unless the pod opts out of Istio", func() {
		const ns = "inject-ns-istio"
		namespace(ns, map[string]string{"istio-injection": "enabled"}, nil)
		skipped(create(ns, "meshed", nil), "PortConflict: namespace inject-ns-istio is labelled istio-injection=enabled: Istio's injector will add its sidecar istio-proxy, whose Envoy listens on 15001 and whose agent on 15020: the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod")
		proxy(create(ns, "not-meshed", map[string]string{"sidecar.istio.io/inject": "false"}))
	})
})
