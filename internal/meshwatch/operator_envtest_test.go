package meshwatch_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh/crds"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/webhook"
)

// TestOperatorMeshLayers runs the whole manager (operator.NewManager, webhooks on) against a
// real API server that has none of the mesh CRDs, installs the real ones (internal/mesh/crds)
// while it runs, and follows bookinfo's chain productpage -> reviews -> ratings through the
// RetryPolicy status and the mesh admission webhook.
func TestOperatorMeshLayers(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	op := operatortest.Start(t)
	cp, c, ctx := op.CP, op.Client, op.Ctx
	serving := cp.WebhookServing()

	// Three namespaces with the same chain, one per enforcement; Istio's sidecar in each.
	for _, ns := range []string{"bookinfo", "bookinfo-rw", "bookinfo-audit"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio-injection": "enabled"}}})).To(Succeed())
		for _, d := range []struct{ name, upstreams string }{{"productpage", "reviews=1"}, {"reviews", "ratings=1"}, {"ratings", ""}} {
			g.Expect(c.Create(ctx, deployment(ns, d.name, d.upstreams))).To(Succeed())
		}
	}
	enforcement := map[string]v1alpha1.Enforcement{"bookinfo": v1alpha1.EnforcementReject, "bookinfo-rw": v1alpha1.EnforcementRewrite, "bookinfo-audit": v1alpha1.EnforcementAudit}
	for ns, e := range enforcement {
		g.Eventually(func() error {
			return c.Create(ctx, &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
				Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 10, Enforcement: e, Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}})
		}).Should(Succeed())
	}

	// No mesh CRD: the Ingresses only (every cluster serves them; no Ingress here), so the chain
	// counts the applications' attempts only (the namespaces' Istio label counts for no mesh),
	// and the mesh webhook judges Ingresses only.
	g.Eventually(meshState(ctx, c, "bookinfo")).Should(Equal(state{
		Amplification: 1, MeshStatus: "True", MeshReason: v1alpha1.ReasonMeshAPIsRead, MeshMessage: "reads Ingress networking.k8s.io/v1",
	}))
	meshRules := func() ([]string, error) {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(ctx, types.NamespacedName{Name: webhook.MeshWebhookConfiguration}, &cfg); err != nil {
			return nil, err
		}
		var out []string
		for _, r := range cfg.Webhooks[0].Rules {
			out = append(out, strings.Join(r.APIGroups, ",")+":"+strings.Join(r.Resources, ","))
		}
		return out, nil
	}
	g.Eventually(meshRules).Should(Equal([]string{"networking.k8s.io:ingresses"}))
	var cfg admissionregistrationv1.MutatingWebhookConfiguration

	// The real CRDs, installed while the manager runs: picked up at the next re-check.
	paths, err := crds.All()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: paths, ErrorIfPathMissing: true})
	g.Expect(err).NotTo(HaveOccurred())
	const reads = "reads VirtualService networking.istio.io/v1, ServiceEntry networking.istio.io/v1, HTTPRoute gateway.networking.k8s.io/v1, GRPCRoute gateway.networking.k8s.io/v1, BackendTrafficPolicy gateway.envoyproxy.io/v1alpha1, " +
		"Mesh kuma.io/v1alpha1, MeshRetry kuma.io/v1alpha1, MeshExternalService kuma.io/v1alpha1, MeshHTTPRoute kuma.io/v1alpha1, Resiliency dapr.io/v1alpha1, ServiceRouter consul.hashicorp.com/v1alpha1, Ingress networking.k8s.io/v1"
	// Istio's default on both hops (the namespaces were labelled all along): 3 x 3.
	istioDefault := state{
		Amplification: 9, MeshStatus: "True", MeshReason: v1alpha1.ReasonMeshAPIsRead, MeshMessage: reads,
	}
	for ns := range enforcement {
		g.Eventually(meshState(ctx, c, ns)).Should(Equal(istioDefault))
	}
	g.Eventually(meshRules).Should(Equal([]string{"networking.istio.io:virtualservices,serviceentries", "gateway.networking.k8s.io:httproutes,grpcroutes", "gateway.envoyproxy.io:backendtrafficpolicies",
		"kuma.io:meshes,meshretries,meshexternalservices,meshhttproutes", "dapr.io:resiliencies", "consul.hashicorp.com:servicerouters", "networking.k8s.io:ingresses"}))

	g.Expect(c.Get(ctx, types.NamespacedName{Name: webhook.MeshWebhookConfiguration}, &cfg)).To(Succeed())
	g.Expect(cfg.OwnerReferences).To(HaveLen(1))
	g.Expect(cfg.OwnerReferences[0].Name).To(Equal("mutating-webhook-configuration"))
	g.Expect(*cfg.Webhooks[0].FailurePolicy).To(Equal(admissionregistrationv1.Ignore))
	g.Expect(*cfg.Webhooks[0].ClientConfig.URL).To(Equal("https://" + serving.Host + ":" + strconv.Itoa(serving.Port) + webhook.MeshPath))

	// Reject: a VirtualService with 3 retries on ratings makes 3 x 4 = 12 > 10. The API server
	// may call the webhook only once it has read the new configuration: a dry run until then.
	const want = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy bookinfo/bookinfo: " +
		"VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 makes productpage -x3-> reviews -x4-> ratings = 12 > cap 10; " +
		"VirtualService bookinfo/ratings may keep attempts: 2"
	g.Eventually(func() string {
		err := c.Create(ctx, virtualService("bookinfo", 3), client.DryRunAll)
		if err == nil {
			return ""
		}
		return err.Error()
	}).Should(Equal(want))
	g.Expect(c.Create(ctx, virtualService("bookinfo", 3))).To(MatchError(want))
	// What fits is admitted, and counted: 3 x 3.
	g.Expect(c.Create(ctx, virtualService("bookinfo", 2))).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo")).Should(Equal(istioDefault))

	// Rewrite: stored lowered, the old value kept.
	g.Expect(c.Create(ctx, virtualService("bookinfo-rw", 3))).To(Succeed())
	stored := &unstructured.Unstructured{}
	stored.SetAPIVersion("networking.istio.io/v1")
	stored.SetKind("VirtualService")
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "bookinfo-rw", Name: "ratings"}, stored)).To(Succeed())
	http, _, _ := unstructured.NestedSlice(stored.Object, "spec", "http")
	g.Expect(http[0].(map[string]any)["retries"]).To(Equal(map[string]any{"attempts": int64(2)}))
	g.Expect(stored.GetAnnotations()).To(Equal(map[string]string{annotations.RewrittenFrom: "spec.http[0].retries.attempts: 3"}))

	// Audit: admitted; the status shows each layer of the chain over the cap.
	g.Expect(c.Create(ctx, virtualService("bookinfo-audit", 3))).To(Succeed())
	g.Eventually(func() ([]v1alpha1.Violation, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, types.NamespacedName{Namespace: "bookinfo-audit", Name: "bookinfo"}, &p)
		return p.Status.Violations, err
	}).Should(Equal([]v1alpha1.Violation{{
		Path: []string{"productpage", "reviews", "ratings"}, Amplification: 12,
		Message: "client -x1-> productpage -x3-> reviews -x4-> ratings = 12 > cap 10; " +
			"productpage -x3-> reviews: 3 = 1 (Deployment productpage) x 3 (Istio default, no VirtualService binds reviews); " +
			"reviews -x4-> ratings: 4 = 1 (Deployment reviews) x 4 (VirtualService bookinfo-audit/ratings spec.http[0].retries.attempts: 3)",
		Suggestion: "VirtualService bookinfo-audit/ratings spec.http[0].retries.attempts: 3 -> 2",
	}}))

	// Deleting the VirtualService: Istio's default again.
	g.Expect(c.Delete(ctx, virtualService("bookinfo-audit", 3))).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(istioDefault))

	// Istio's MeshConfigs: the default revision's (istio-system/istio) and a canary revision's
	// (istio-system/istio-canary, labelled istio.io/rev: canary; its sidecars read it), the most
	// retries of the two counted, as analyze counts them (mesh.IsMeshConfig). Before, the manager
	// read istio-system/istio only: 4 where analyze says 36. A ConfigMap of that name without the
	// revision label is no MeshConfig.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "istio-system"}})).To(Succeed())
	meshConfig := func(name string, labels map[string]string, attempts int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "istio-system", Name: name, Labels: labels},
			Data: map[string]string{"mesh": "defaultHttpRetryPolicy:\n  attempts: " + strconv.Itoa(attempts) + "\n"}}
	}
	withAmplification := func(n int64) state { s := istioDefault; s.Amplification = n; return s }
	unlabelled := meshConfig("istio-canary", nil, 7) // first: its event is applied before istio's
	g.Expect(c.Create(ctx, unlabelled)).To(Succeed())
	g.Expect(c.Create(ctx, meshConfig("istio", map[string]string{"istio.io/rev": "default"}, 1))).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(withAmplification(4)))
	g.Expect(c.Delete(ctx, unlabelled)).To(Succeed())
	// The mesh gate judges the MeshConfigs (webhook configmaps.mesh.retrycap.dev): the canary's 5
	// retries put the Reject and Rewrite policies' chains over their cap (a ConfigMap is never
	// rewritten), so it is refused; admitted once both audit.
	canary := meshConfig("istio-canary", map[string]string{"istio.io/rev": "canary"}, 5)
	g.Expect(c.Create(ctx, canary.DeepCopy())).To(MatchError(`admission webhook "configmaps.mesh.retrycap.dev" denied the request: RetryPolicy bookinfo/bookinfo: ` +
		`ConfigMap istio-system/istio-canary data["mesh"] defaultHttpRetryPolicy.attempts: unset -> 5 makes productpage -x6-> reviews -x3-> ratings = 18 > cap 10; ` +
		`ConfigMap istio-system/istio-canary may keep defaultHttpRetryPolicy.attempts: 2; ` +
		`also over the cap of RetryPolicy bookinfo-rw/bookinfo (cap 10)`))
	for _, ns := range []string{"bookinfo", "bookinfo-rw"} {
		g.Eventually(func() error {
			var p v1alpha1.RetryPolicy
			if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bookinfo"}, &p); err != nil {
				return err
			}
			p.Spec.Enforcement = v1alpha1.EnforcementAudit
			return c.Update(ctx, &p)
		}).Should(Succeed())
	}
	g.Eventually(func() error { return c.Create(ctx, canary.DeepCopy(), client.DryRunAll) }).Should(Succeed())
	g.Expect(c.Create(ctx, canary.DeepCopy())).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(withAmplification(36)))
	g.Expect(c.Delete(ctx, meshConfig("istio-canary", nil, 0))).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(withAmplification(4)))
	g.Expect(c.Delete(ctx, meshConfig("istio", nil, 0))).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(istioDefault))

	// The namespace leaves the mesh: no layer.
	var ns corev1.Namespace
	g.Expect(c.Get(ctx, types.NamespacedName{Name: "bookinfo-audit"}, &ns)).To(Succeed())
	delete(ns.Labels, "istio-injection")
	g.Expect(c.Update(ctx, &ns)).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(state{
		Amplification: 1, MeshStatus: "True", MeshReason: v1alpha1.ReasonMeshAPIsRead, MeshMessage: reads,
	}))

	// Istio installed with sidecarInjectorWebhook.enableNamespacesByDefault (its injector's
	// configuration as helm renders it: internal/mesh/testdata/istio-injector/auto.yaml, its
	// failurePolicy Ignore here, as no istiod answers): its auto webhook injects every pod of the
	// unlabelled namespace, so the status counts Istio's default on both hops again, and not once
	// the configuration is deleted. Before, the watcher read no MutatingWebhookConfiguration: 1.
	raw, err := os.ReadFile("../mesh/testdata/istio-injector/auto.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	var injector admissionregistrationv1.MutatingWebhookConfiguration
	g.Expect(yaml.Unmarshal(raw, &injector)).To(Succeed())
	for i := range injector.Webhooks {
		injector.Webhooks[i].FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	}
	g.Expect(c.Create(ctx, &injector)).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(istioDefault))
	g.Expect(c.Delete(ctx, &injector)).To(Succeed())
	g.Eventually(meshState(ctx, c, "bookinfo-audit")).Should(Equal(state{
		Amplification: 1, MeshStatus: "True", MeshReason: v1alpha1.ReasonMeshAPIsRead, MeshMessage: reads,
	}))

	// Istio uninstalled (its VirtualService and ServiceEntry CRDs deleted): no longer read, and
	// its namespace label no longer makes a sidecar layer. (With the ServiceEntries still
	// served, Istio is still there: the label's layer stays.)
	for _, name := range []string{"virtualservices.networking.istio.io", "serviceentries.networking.istio.io"} {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(name)
		g.Expect(c.Delete(ctx, crd)).To(Succeed())
	}
	withoutIstio := "reads HTTPRoute gateway.networking.k8s.io/v1, GRPCRoute gateway.networking.k8s.io/v1, BackendTrafficPolicy gateway.envoyproxy.io/v1alpha1, " +
		"Mesh kuma.io/v1alpha1, MeshRetry kuma.io/v1alpha1, MeshExternalService kuma.io/v1alpha1, MeshHTTPRoute kuma.io/v1alpha1, Resiliency dapr.io/v1alpha1, ServiceRouter consul.hashicorp.com/v1alpha1, Ingress networking.k8s.io/v1"
	g.Eventually(meshState(ctx, c, "bookinfo")).Should(Equal(state{
		Amplification: 1, MeshStatus: "True", MeshReason: v1alpha1.ReasonMeshAPIsRead, MeshMessage: withoutIstio,
	}))
	g.Eventually(func() (int, error) {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		err := c.Get(ctx, types.NamespacedName{Name: webhook.MeshWebhookConfiguration}, &cfg)
		if err != nil {
			return 0, err
		}
		return len(cfg.Webhooks[0].Rules), nil
	}).Should(Equal(6))
}

type state struct {
	Amplification                       int64
	MeshStatus, MeshReason, MeshMessage string
}

func meshState(ctx context.Context, c client.Client, ns string) func() (state, error) {
	return func() (state, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bookinfo"}, &p); err != nil {
			return state{}, err
		}
		s := state{Amplification: p.Status.Amplification}
		if m := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMeshLayers); m != nil {
			s.MeshStatus, s.MeshReason, s.MeshMessage = string(m.Status), m.Reason, m.Message
		}
		return s, nil
	}
}

func virtualService(ns string, attempts int) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	data := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: ` + ns + `}
spec:
  hosts: [ratings]
  http:
  - route: [{destination: {host: ratings, subset: v1}}]
    retries: {attempts: ` + strconv.Itoa(attempts) + `}
`
	if err := yaml.Unmarshal([]byte(data), &u.Object); err != nil {
		panic(err)
	}
	return u
}

func deployment(ns, name, upstreams string) *appsv1.Deployment {
	ann := map[string]string{}
	if upstreams != "" {
		ann[annotations.Upstreams] = upstreams
	}
	lbl := map[string]string{"app.kubernetes.io/name": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl, Annotations: ann},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
			},
		},
	}
}
