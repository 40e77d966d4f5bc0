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

// inject18: real pods of public projects through the webhook and the real API server. A pod
// Linkerd injected in its classic mode and one Kuma injected are stored without retrycap's proxy
// and say why (on main both were injected, and neither pod could ever start), and a Job's pod
// with its own native sidecar, made compliant with Pod Security "restricted", is admitted by
// the API server's own Pod Security admission after injection, the proxy after its sidecar.
var _ = Describe("inject18: pod injector, real pods with meshes and native sidecars", Ordered, func() {
	ctx := context.Background()
	const (
		meshes     = "inject18-meshes"
		restricted = "inject18-restricted"
		tail       = ": the proxy listens on 127.0.0.1:15001 and on port 15020 of every address of the pod"
	)
	BeforeAll(func() {
		for _, ns := range []struct {
			name   string
			labels map[string]string
		}{
			{meshes, map[string]string{"retrycap.dev/injection": "enabled"}},
			{restricted, map[string]string{"retrycap.dev/injection": "enabled", "pod-security.kubernetes.io/enforce": "restricted"}},
		} {
			Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: ns.labels}})).To(Succeed())
			policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4}}
			Expect(k8sClient.Create(ctx, policy)).To(Succeed())
			Eventually(func(g Gomega) {
				labels, _ := gateWebhooks.Index.Namespace(ns.name)
				g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
				g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
			}).Should(Succeed())
		}
	})

	skipped := func(path, want string) {
		pod := vendoredPod(path)
		pod.Namespace = meshes
		// What a cluster's ServiceAccount admission sets (envtest runs none): Linkerd's projected
		// token is refused without it.
		pod.Spec.ServiceAccountName = "default"
		before := pod.DeepCopy()
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Annotations).To(HaveKeyWithValue(inject.SkippedAnnotation, want))
		Expect(stored.Annotations).NotTo(HaveKey("retrycap.dev/injected"))
		var names []string
		for _, c := range append(stored.Spec.InitContainers, stored.Spec.Containers...) {
			names = append(names, c.Name)
			Expect(c.Env).NotTo(ContainElement(HaveField("Name", "HTTP_PROXY")), "container %s", c.Name)
		}
		var was []string
		for _, c := range append(before.Spec.InitContainers, before.Spec.Containers...) {
			was = append(was, c.Name)
		}
		Expect(names).To(Equal(was))
	}

	It("stores Linkerd's classic-mode pod without the proxy, saying why", func() {
		skipped("../inject/testdata/linkerd-classic-injected.yaml", "PortConflict: spec.containers[0] (container linkerd-proxy) is Linkerd's proxy as a regular container, started only after every init container, and spec.initContainers[0] (container linkerd-init) redirects every inbound TCP port but 4190,4191,4567,4568 to it: the kubelet's startup probe of the proxy on port 15020 would never be answered and the pod would never start (annotate the pod (its template) config.linkerd.io/skip-inbound-ports: \"15020\", or use Linkerd's native sidecar)"+tail)
	})

	It("stores Kuma's injected pod without the proxy, saying why", func() {
		skipped("../inject/testdata/kuma-injected.yaml", "PortConflict: spec.initContainers[1] (container kuma-sidecar) is Kuma's sidecar, whose Envoy listens on port 15001 (annotation traffic.kuma.io/transparent-proxy-config redirect.outbound.port) for its transparent proxy's outbound traffic"+tail)
	})

	It("stores a restricted Job pod with its own native sidecar, the proxy after it, past Pod Security restricted", func() {
		pod := vendoredPod("../inject/testdata/job-native-sidecar.yaml")
		pod.Namespace = restricted
		yes, no := true, false
		sc := func() *corev1.SecurityContext {
			return &corev1.SecurityContext{RunAsNonRoot: &yes, RunAsUser: ptrTo(int64(1000)), AllowPrivilegeEscalation: &no,
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
		}
		pod.Spec.InitContainers[0].SecurityContext = sc()
		pod.Spec.Containers[0].SecurityContext = sc()
		// Pod Security is in force: the same pod opted out, its sidecar left privileged-capable, is refused.
		bad := pod.DeepCopy()
		bad.Name, bad.Annotations = "probe-pss", map[string]string{"retrycap.dev/inject": "false"}
		bad.Spec.InitContainers[0].SecurityContext.Capabilities = nil
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Create(ctx, bad)).To(MatchError(ContainSubstring(`violates PodSecurity "restricted:latest": unrestricted capabilities (container "logshipper" must set securityContext.capabilities.drop=["ALL"])`)))
		}).Should(Succeed())

		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		Expect(stored.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", restricted+"/all"))
		Expect(stored.Spec.InitContainers).To(HaveLen(2))
		for i, name := range []string{"logshipper", inject.ContainerName} {
			c := stored.Spec.InitContainers[i]
			Expect(c.Name).To(Equal(name))
			Expect(c.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)), "container %s", name)
		}
		Expect(stored.Spec.InitContainers[0].Env).To(BeEmpty())
		Expect(stored.Spec.InitContainers[1].Args).To(ContainElement("--service=myjob"))
		Expect(stored.Spec.RestartPolicy).To(Equal(corev1.RestartPolicyNever))
	})
})
