package webhook

import (
	"context"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// The proxy resource annotations against the API server's LimitRanger: a namespace whose
// LimitRange allows at most 1 CPU per container refuses every injected pod with the default CPU
// limit (2), and admits one whose template says retrycap.dev/proxy-cpu-limit: "1", GOMAXPROCS 1.
var _ = Describe("pod injector: the proxy resource annotations and a LimitRange", Ordered, func() {
	const ns = "inject-limitrange"
	ctx := context.Background()
	pod := func(name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1"}}}}
	}

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "per-container"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
				Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}})).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
			// In the injector's cache too, which judges the proxy by it (inject18).
			g.Expect(mgrClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "per-container"}, &corev1.LimitRange{})).To(Succeed())
		}).Should(Succeed())
		// The LimitRange is in force (the API server reads it from its own cache): a pod the
		// injector leaves alone, with a container over the max, is refused.
		Eventually(func(g Gomega) {
			p := pod("probe", map[string]string{"retrycap.dev/inject": "false"})
			two := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: two, Limits: two}
			g.Expect(k8sClient.Create(ctx, p)).To(MatchError(`pods "probe" is forbidden: maximum cpu usage per Container is 1, but limit is 2`))
		}).Should(Succeed())
	})

	It("stores the pod without the proxy, naming the LimitRange whose max is below the default CPU limit", func() {
		// Before inject18 the API server refused the injected pod ("maximum cpu usage per
		// Container is 1, but limit is 2": the proxy's), so no pod of the workload was created.
		p := pod("defaults", nil)
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		Expect(stored.Spec.InitContainers).To(BeEmpty())
		// The LimitRanger's own note on what it set on the app's container, beside the skip.
		Expect(stored.Annotations).To(Equal(map[string]string{"kubernetes.io/limit-ranger": "LimitRanger plugin set: cpu request for container app; cpu limit for container app",
			inject.SkippedAnnotation: "LimitRangeConflict: LimitRange " + ns + "/per-container spec.limits[0] (type Container) max cpu is 1, and the proxy's cpu limit is 2 (set the annotation retrycap.dev/proxy-cpu-limit on the pod's template or its Namespace): the API server would refuse the pod"}))
	})

	It("admits the pod with retrycap.dev/proxy-cpu-limit: \"1\", injected, GOMAXPROCS 1", func() {
		p := pod("one-cpu", map[string]string{"retrycap.dev/proxy-cpu-limit": "1"})
		Expect(k8sClient.Create(ctx, p)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
		Expect(stored.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"))
		Expect(stored.Spec.InitContainers).To(HaveLen(1))
		sc := stored.Spec.InitContainers[0]
		Expect(sc.Name).To(Equal(inject.ContainerName))
		Expect(map[string]string{"requests.cpu": sc.Resources.Requests.Cpu().String(), "limits.cpu": sc.Resources.Limits.Cpu().String(),
			"requests.memory": sc.Resources.Requests.Memory().String(), "limits.memory": sc.Resources.Limits.Memory().String()}).
			To(Equal(map[string]string{"requests.cpu": "10m", "limits.cpu": "1", "requests.memory": "32Mi", "limits.memory": "64Mi"}))
		Expect(sc.Env[0]).To(Equal(corev1.EnvVar{Name: "GOMAXPROCS", Value: "1"}))
	})

	It("refuses a pod whose annotations break the rules, naming the annotation and the value (the gate, as for every malformed retrycap annotation)", func() {
		// Before the gate read these rules (workload.AnnotationErrors), the pod was stored without
		// the proxy and the reason only in its skip annotation.
		p := pod("request-above-limit", map[string]string{"retrycap.dev/proxy-cpu-request": "2", "retrycap.dev/proxy-cpu-limit": "1"})
		err := k8sClient.Create(ctx, p)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(Equal(`admission webhook "gate.retrycap.dev" denied the request: Pod inject-limitrange/request-above-limit: annotation retrycap.dev/proxy-cpu-request "2" is above annotation retrycap.dev/proxy-cpu-limit "1": the proxy's CPU request may not exceed its CPU limit`))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))).To(BeTrue())
	})
})

// A LimitRange's maxLimitRequestRatio of 10 for CPU: the defaults (2 / 10m, 200) would be refused
// (the pod is stored without the proxy, saying so: inject18), a CPU request annotation of 200m
// (2 / 200m, 10) is admitted.
var _ = It("pod injector: a CPU maxLimitRequestRatio of 10 admits the pod with retrycap.dev/proxy-cpu-request: 200m, not without", func() {
	ctx := context.Background()
	const ns = "inject-ratio"
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ratio"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			MaxLimitRequestRatio: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}}}}})).To(Succeed())
	Eventually(func(g Gomega) {
		labels, _ := gateWebhooks.Index.Namespace(ns)
		g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
		g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		g.Expect(mgrClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ratio"}, &corev1.LimitRange{})).To(Succeed())
	}).Should(Succeed())
	app := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	pod := func(name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: app, Limits: app}}}}}
	}
	// In force (the API server's own cache): an opted-out pod over the ratio is refused.
	Eventually(func(g Gomega) {
		p := pod("probe", map[string]string{"retrycap.dev/inject": "false"})
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
		g.Expect(k8sClient.Create(ctx, p)).To(MatchError(`pods "probe" is forbidden: cpu max limit to request ratio per Container is 10, but provided ratio is 20.000000`))
	}).Should(Succeed())
	defaults := pod("defaults", nil)
	Expect(k8sClient.Create(ctx, defaults)).To(Succeed())
	skipped := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(defaults), skipped)).To(Succeed())
	Expect(skipped.Spec.InitContainers).To(BeEmpty())
	Expect(skipped.Annotations).To(Equal(map[string]string{inject.SkippedAnnotation: "LimitRangeConflict: LimitRange " + ns + "/ratio spec.limits[0] (type Container) maxLimitRequestRatio cpu is 10, and the proxy's cpu limit 2 over its request 10m is 200 (set the annotation retrycap.dev/proxy-cpu-request on the pod's template or its Namespace): the API server would refuse the pod"}))
	p := pod("ratio-ten", map[string]string{"retrycap.dev/proxy-cpu-request": "200m"})
	Expect(k8sClient.Create(ctx, p)).To(Succeed())
	stored := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(p), stored)).To(Succeed())
	Expect(stored.Spec.InitContainers).To(HaveLen(1))
	sc := stored.Spec.InitContainers[0]
	Expect([]string{sc.Resources.Requests.Cpu().String(), sc.Resources.Limits.Cpu().String()}).To(Equal([]string{"200m", "2"}))
	Expect(sc.Env[0]).To(Equal(corev1.EnvVar{Name: "GOMAXPROCS", Value: "2"}))
})
