package webhook

import (
	"context"
	"encoding/json"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// The injector's JSON patch applied, as the API server applies it, to the request's raw pod:
// with the arrays and maps it extends absent or present but empty, and with fields this build's
// k8s.io/api does not know (what a cluster newer than the manager sends).
var _ = Describe("pod injector: the JSON patch against the raw pod", Ordered, func() {
	const ns = "inject-patch"
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

	// patched answers the raw pod and applies the answer's patch to it.
	patched := func(raw string) (ops []string, out map[string]any) {
		resp := podInjector.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "patch", Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: ns, Object: runtime.RawExtension{Raw: []byte(raw)}}})
		Expect(resp.Allowed).To(BeTrue(), "%v", resp.Result)
		for _, op := range resp.Patches {
			ops = append(ops, op.Operation+" "+op.Path)
		}
		p, err := json.Marshal(resp.Patches)
		Expect(err).NotTo(HaveOccurred())
		decoded, err := jsonpatch.DecodePatch(p)
		Expect(err).NotTo(HaveOccurred())
		applied, err := decoded.Apply([]byte(raw))
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(applied, &out)).To(Succeed())
		return ops, out
	}
	// injected checks the patched pod: the proxy appended, the env set, the annotation written.
	injected := func(out map[string]any, initContainers int) {
		b, err := json.Marshal(out)
		Expect(err).NotTo(HaveOccurred())
		var pod corev1.Pod
		Expect(json.Unmarshal(b, &pod)).To(Succeed())
		Expect(pod.Spec.InitContainers).To(HaveLen(initContainers))
		Expect(pod.Spec.InitContainers[initContainers-1].Name).To(Equal("retrycap-proxy"))
		var names []string
		for _, e := range pod.Spec.Containers[0].Env {
			names = append(names, e.Name)
		}
		Expect(strings.Join(names, ",")).To(Equal("RETRYCAP_POD_IP,HTTP_PROXY,http_proxy,HTTPS_PROXY,https_proxy,NO_PROXY,no_proxy"))
		Expect(pod.Annotations).To(HaveKeyWithValue("retrycap.dev/injected", ns+"/all"))
	}

	It("adds the arrays a pod leaves out", func() {
		ops, out := patched(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"absent","namespace":"` + ns + `"},"spec":{"containers":[{"name":"app","image":"x"}]}}`)
		Expect(ops).To(ConsistOf("add /metadata/annotations", "add /spec/initContainers", "add /spec/containers/0/env"))
		injected(out, 1)
	})

	It("fills the arrays and maps a pod gives empty, and appends to a non-empty initContainers", func() {
		ops, out := patched(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty","namespace":"` + ns + `","annotations":{}},` +
			`"spec":{"initContainers":[],"containers":[{"name":"app","image":"x","env":[]}]}}`)
		Expect(ops).To(ConsistOf("add /metadata/annotations", "add /spec/initContainers", "add /spec/containers/0/env"))
		injected(out, 1)
		ops, out = patched(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"one-init","namespace":"` + ns + `"},` +
			`"spec":{"initContainers":[{"name":"migrate","image":"m"}],"containers":[{"name":"app","image":"x"}]}}`)
		Expect(ops).To(ConsistOf("add /metadata/annotations", "add /spec/initContainers/1", "add /spec/containers/0/env"))
		injected(out, 2)
	})

	It("keeps fields this build does not know, where the pod has them", func() {
		ops, out := patched(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"future","namespace":"` + ns + `"},` +
			`"spec":{"futurePodField":"kept","containers":[{"name":"app","image":"x","futureContainerField":{"a":1}}]}}`)
		Expect(ops).To(ConsistOf("add /metadata/annotations", "add /spec/initContainers", "add /spec/containers/0/env"))
		injected(out, 1)
		spec := out["spec"].(map[string]any)
		Expect(spec).To(HaveKeyWithValue("futurePodField", "kept"))
		Expect(spec["containers"].([]any)[0]).To(HaveKeyWithValue("futureContainerField", map[string]any{"a": float64(1)}))
	})
})
