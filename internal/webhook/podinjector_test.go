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

// Pods go through the real API server with config/webhook/manifests.yaml installed; what is
// asserted is the pod as stored.
var _ = Describe("pod injector", Ordered, func() {
	const ns = "inject-shop"
	ctx := context.Background()

	podInjectorPod := func(namespace, name string, ann map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: ann,
				Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0",
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}}}},
		}
	}
	stored := func(namespace, name string) *corev1.Pod {
		p := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, p)).To(Succeed())
		return p
	}

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"retrycap.dev/injection": "enabled"}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "checkout"},
			Spec: v1alpha1.RetryPolicySpec{
				Selector:         &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/part-of": "shop"}},
				MaxAmplification: 3,
				Entrypoints:      []v1alpha1.Entrypoint{{Service: "gateway", ClientAttempts: 1}},
			},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		// The injector reads from the manager's cache: wait until it has both.
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns) // the injector reads the labels from the index
			g.Expect(labels).To(HaveKeyWithValue("retrycap.dev/injection", "enabled"))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
		}).Should(Succeed())
	})

	It("stores a pod of an enabled namespace with the proxy sidecar and the proxy env", func() {
		Expect(k8sClient.Create(ctx, podInjectorPod(ns, "gateway", map[string]string{"retrycap.dev/upstreams": "order=3"}))).To(Succeed())
		p := stored(ns, "gateway")

		Expect(p.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/checkout"))
		Expect(p.Annotations).NotTo(HaveKey(inject.SkippedAnnotation))
		Expect(p.Spec.InitContainers).To(HaveLen(1))
		sc := p.Spec.InitContainers[0]
		Expect(sc.Name).To(Equal("retrycap-proxy"))
		Expect(sc.Image).To(Equal(suiteProxyImage))
		Expect(sc.RestartPolicy).To(HaveValue(Equal(corev1.ContainerRestartPolicyAlways)))
		// The CRD defaults, applied by the API server to the stored policy, rendered as flags.
		Expect(sc.Args).To(Equal([]string{
			"--listen=127.0.0.1:15001", "--admin=:15020", "--service=gateway", "--upstreams=order=3",
			"--entrypoint=true", "--chain-cap=3", "--default-attempts=1", "--per-try-timeout=2s",
			"--backoff-base=100ms", "--backoff-max=2s", "--retry-on=connect-failure,reset,502,503,504,unavailable",
			"--retry-methods=GET,HEAD,OPTIONS,PUT,DELETE", "--budget-percent=20", "--budget-min-per-second=10",
			"--budget-window=10s", "--breaker-failures=50", "--breaker-window=30s", "--breaker-open-for=10s",
		}))
		Expect(sc.Ports).To(ConsistOf(corev1.ContainerPort{Name: "retrycap-admin", ContainerPort: 15020, Protocol: corev1.ProtocolTCP}))
		Expect(sc.StartupProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(sc.StartupProbe.HTTPGet.Port.String()).To(Equal("retrycap-admin"))
		Expect(sc.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(sc.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(sc.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
		Expect(sc.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
		Expect(sc.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
		Expect(sc.Resources.Requests.Cpu().String()).To(Equal("10m"))
		Expect(sc.Resources.Requests.Memory().String()).To(Equal("32Mi"))
		Expect(sc.Resources.Limits.Memory().String()).To(Equal("64Mi"))

		noProxy := "localhost,127.0.0.1,::1,kubernetes,kubernetes.default,kubernetes.default.svc,kubernetes.default.svc.cluster.local,$(KUBERNETES_SERVICE_HOST),$(RETRYCAP_POD_IP)"
		Expect(p.Spec.Containers[0].Env).To(Equal([]corev1.EnvVar{
			{Name: "RETRYCAP_POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
			{Name: "LOG_LEVEL", Value: "debug"},
			{Name: "HTTP_PROXY", Value: "http://127.0.0.1:15001"},
			{Name: "http_proxy", Value: "http://127.0.0.1:15001"},
			{Name: "HTTPS_PROXY", Value: "http://127.0.0.1:15001"},
			{Name: "https_proxy", Value: "http://127.0.0.1:15001"},
			{Name: "NO_PROXY", Value: noProxy},
			{Name: "no_proxy", Value: noProxy},
		}))
	})

	It("leaves an opted-out pod untouched", func() {
		Expect(k8sClient.Create(ctx, podInjectorPod(ns, "batch", map[string]string{"retrycap.dev/inject": "false"}))).To(Succeed())
		p := stored(ns, "batch")
		Expect(p.Annotations).To(Equal(map[string]string{"retrycap.dev/inject": "false"}))
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Spec.Containers[0].Env).To(Equal([]corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}))
	})

	It("leaves a kube-system pod untouched, even one that asks for the proxy", func() {
		Expect(k8sClient.Create(ctx, podInjectorPod(metav1.NamespaceSystem, "retrycap-probe", map[string]string{"retrycap.dev/inject": "true"}))).To(Succeed())
		p := stored(metav1.NamespaceSystem, "retrycap-probe")
		Expect(p.Annotations).To(Equal(map[string]string{"retrycap.dev/inject": "true"}))
		Expect(p.Spec.InitContainers).To(BeEmpty())
		Expect(p.Spec.Containers[0].Env).To(Equal([]corev1.EnvVar{{Name: "LOG_LEVEL", Value: "debug"}}))
	})

	It("records why a pod that asked for the proxy was skipped, on the pod and as an event", func() {
		pod := podInjectorPod(ns, "reports", nil)
		pod.Labels["app.kubernetes.io/part-of"] = "analytics" // no policy selects it
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		p := stored(ns, "reports")
		Expect(p.Annotations).To(Equal(map[string]string{inject.SkippedAnnotation: "NoPolicy: no RetryPolicy in namespace " + ns + " selects the pod"}))
		Expect(p.Spec.InitContainers).To(BeEmpty())

		Eventually(func(g Gomega) {
			var evs eventsv1.EventList
			g.Expect(k8sClient.List(ctx, &evs, client.InNamespace(ns))).To(Succeed())
			var notes []string
			for _, e := range evs.Items {
				if e.Regarding.Kind == "Pod" && e.Regarding.Name == "reports" && e.Reason == "NoPolicy" {
					notes = append(notes, e.Type+" "+e.Note)
				}
			}
			g.Expect(notes).To(ConsistOf("Normal retrycap proxy not injected: no RetryPolicy in namespace " + ns + " selects the pod"))
		}).Should(Succeed())
	})
})
