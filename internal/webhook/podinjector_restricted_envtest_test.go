package webhook

import (
	"bufio"
	"bytes"
	"context"
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/inject"
)

// The injected pod as the API server's own admission judges it, after the webhook: Pod Security
// "restricted" (enforced by the namespace's label), a ResourceQuota on CPU and memory requests
// and limits, which refuses a pod with any container that lacks one, and a LimitRange's
// per-container max. The app is a real
// one (microservices-demo's checkoutservice, vendored in internal/inject/testdata) that passes
// both on its own. And a Windows pod, whose containers may not carry the proxy's Linux security
// context.
var _ = Describe("pod injector: what the API server's admission and validation say of the injected pod", Ordered, func() {
	const ns = "inject-restricted"
	ctx := context.Background()
	optedOut := func(name string, c corev1.Container) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{"retrycap.dev/inject": "false"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	restricted := func() *corev1.SecurityContext {
		return &corev1.SecurityContext{RunAsNonRoot: ptrTo(true), RunAsUser: ptrTo(int64(1000)), AllowPrivilegeEscalation: ptrTo(false),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	}
	limits := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")}

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
			"retrycap.dev/injection": "enabled", "pod-security.kubernetes.io/enforce": "restricted"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		hard := corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("10"), corev1.ResourceLimitsCPU: resource.MustParse("10"),
			corev1.ResourceRequestsMemory: resource.MustParse("10Gi"), corev1.ResourceLimitsMemory: resource.MustParse("10Gi")}
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "compute"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
		Expect(k8sClient.Create(ctx, quota)).To(Succeed())
		// envtest runs no quota controller: the status it would write (hard, nothing used yet).
		used := corev1.ResourceList{}
		for r := range hard {
			used[r] = resource.MustParse("0")
		}
		quota.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: used}
		Expect(k8sClient.Status().Update(ctx, quota)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
		// Both are in force before the injected pod is tried (else it could pass for not being
		// judged): a pod the injector leaves alone is refused by each.
		Eventually(func(g Gomega) {
			err := k8sClient.Create(ctx, optedOut("probe-pss", corev1.Container{Name: "app", Image: "example/app:v1",
				Resources: corev1.ResourceRequirements{Requests: limits, Limits: limits}}))
			g.Expect(err).To(MatchError(ContainSubstring(`violates PodSecurity "restricted:latest"`)))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Create(ctx, optedOut("probe-quota", corev1.Container{Name: "app", Image: "example/app:v1", SecurityContext: restricted()}))
			g.Expect(err).To(MatchError(ContainSubstring("failed quota: compute: must specify limits.cpu for: app; limits.memory for: app; requests.cpu for: app; requests.memory for: app")))
		}).Should(Succeed())
		// A per-container max of 2 CPUs, as multi-tenant namespaces set beside the quota (after
		// the quota's probe: its defaults, the max, would fill the probe's limits): the sidecar's
		// CPU limit (2) fits it.
		Expect(k8sClient.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "per-container"},
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
				Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}})).To(Succeed())
		over := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		Eventually(func(g Gomega) {
			err := k8sClient.Create(ctx, optedOut("probe-limitrange", corev1.Container{Name: "app", Image: "example/app:v1", SecurityContext: restricted(),
				Resources: corev1.ResourceRequirements{Requests: over, Limits: over}}))
			g.Expect(err).To(MatchError(ContainSubstring("maximum cpu usage per Container is 2, but limit is 3")))
		}).Should(Succeed())
	})

	It("stores a real restricted app with the proxy, which passes Pod Security restricted and the quota", func() {
		pod := vendoredPod("../inject/testdata/checkoutservice.yaml")
		pod.Namespace = ns
		// Restricted also wants a seccomp profile, which the chart leaves to the cluster.
		pod.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"))
		Expect(stored.Spec.InitContainers).To(HaveLen(1))
		sc := stored.Spec.InitContainers[0]
		Expect(sc.Name).To(Equal(inject.ContainerName))
		Expect(sc.Resources.Limits.Cpu().String()).To(Equal("2"))
		Expect(sc.Resources.Limits.Memory().String()).To(Equal("64Mi"))
		// The quota counted it: the app's 100m + 64Mi and 200m + 128Mi, and the sidecar's.
		Eventually(func(g Gomega) {
			q := &corev1.ResourceQuota{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "compute"}, q)).To(Succeed())
			g.Expect(q.Status.Used).To(HaveLen(4))
			g.Expect(map[string]string{"requests.cpu": ptrTo(q.Status.Used[corev1.ResourceRequestsCPU]).String(),
				"requests.memory": ptrTo(q.Status.Used[corev1.ResourceRequestsMemory]).String(),
				"limits.cpu":      ptrTo(q.Status.Used[corev1.ResourceLimitsCPU]).String(),
				"limits.memory":   ptrTo(q.Status.Used[corev1.ResourceLimitsMemory]).String()}).
				To(Equal(map[string]string{"requests.cpu": "110m", "requests.memory": "96Mi", "limits.cpu": "2200m", "limits.memory": "192Mi"}))
		}).Should(Succeed())
	})

	// A namespace with no Pod Security label and no quota, for what the API server validates.
	const plain = "inject-validation"
	plainNamespace := func() {
		if err := k8sClient.Get(ctx, client.ObjectKey{Name: plain}, &corev1.Namespace{}); err == nil {
			return
		}
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: plain, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: plain, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(plain)
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	}

	It("stores a Windows pod without the proxy, saying why, instead of a pod the API server refuses", func() {
		plainNamespace()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: plain, Name: "iis"},
			Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: []corev1.Container{{Name: "iis", Image: "mcr.microsoft.com/windows/servercore/iis:windowsservercore-ltsc2022"}}}}
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Spec.InitContainers).To(BeEmpty())
		Expect(stored.Annotations).To(Equal(map[string]string{inject.SkippedAnnotation: `WindowsPod: spec.os.name is "windows": the API server refuses the proxy's Linux security context (runAsUser, seccompProfile, capabilities) in a Windows pod, and its image is a Linux one`}))
	})
})

// The pod-level resources golden case (internal/inject/testdata/pod-level-resources.yaml): its
// pod requests exactly what its containers do, which the API server checks against the sum of
// the containers' requests, the sidecar's included.
var _ = It("pod injector: stores a pod with pod-level resources that its containers' requests fill, the proxy's added to the pod's", func() {
	ctx := context.Background()
	const ns = "inject-podlevel"
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Eventually(func(g Gomega) {
		labels, _ := gateWebhooks.Index.Namespace(ns)
		g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
		g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
	}).Should(Succeed())
	pod := vendoredPod("../inject/testdata/pod-level-resources.yaml")
	pod.Namespace = ns
	Expect(k8sClient.Create(ctx, pod)).To(Succeed())
	stored := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
	Expect(stored.Spec.InitContainers).To(HaveLen(1))
	Expect(stored.Status.QOSClass).To(Equal(corev1.PodQOSGuaranteed))
	Expect(map[string]string{"requests.cpu": stored.Spec.Resources.Requests.Cpu().String(), "requests.memory": stored.Spec.Resources.Requests.Memory().String(),
		"limits.cpu": stored.Spec.Resources.Limits.Cpu().String(), "limits.memory": stored.Spec.Resources.Limits.Memory().String()}).
		To(Equal(map[string]string{"requests.cpu": "1010m", "requests.memory": "132Mi", "limits.cpu": "1010m", "limits.memory": "132Mi"}))
})

// vendoredPod is the first document of a golden input of internal/inject: a real pod spec.
func vendoredPod(path string) *corev1.Pod {
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	doc, err := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data))).Read()
	Expect(err).NotTo(HaveOccurred())
	pod := &corev1.Pod{}
	Expect(utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), len(doc)).Decode(pod)).To(Succeed())
	return pod
}
