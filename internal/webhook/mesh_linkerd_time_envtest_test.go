package webhook_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/webhook"
)

// meshGateLinkerdRoutes runs last in TestGateMeshLayers (it makes the manager read Linkerd, which
// changes the match conditions the earlier cases count requests through): Linkerd's timeouts on
// a route other than the counted one, through the real API server and the configuration the
// manager writes.
//
// No Linkerd CRD is pinned (internal/mesh/crds): ServiceProfile's is created here, minimal and
// ours (linkerd.io/v1alpha2, spec unvalidated), so that the watcher reads Linkerd (meshwatch
// Candidates) and the manager adds Services to mesh.retrycap.dev and Linkerd's keys to
// membership.mesh.retrycap.dev.
//
// productpage -> reviews -> ratings, ratings' Service with timeout.linkerd.io/response 1s and no
// retry annotation; HTTPRoute ratings-fast (limit 3 within a request timeout of 1s) counts 4
// tries; ratings-rest sets nothing, so Linkerd gives it 1 try within the Service's timeouts.
//   - The Service's timeout raised to 30s (no retry annotation: mesh.retrycap.dev's match
//     condition passes no such Service; membership.mesh.retrycap.dev's does, timeout.linkerd.io/*
//     being among mesh.ServiceKeys): ratings-rest's 30s, over 20s: refused. Before, the membership
//     gate compared the counted layer (ratings-fast's, unchanged) and admitted it.
//   - A label nothing reads is not sent to either webhook.
//   - ratings-rest given limit 1 and a response timeout of 1s, then 15s: 2 x 15s + 25ms =
//     30.025s, refused by mesh.retrycap.dev naming the route's annotation (was admitted).
//   - ratings-rest's limit raised 1 -> 2 within a response timeout of 9s: 27.075s, lowered back
//     by Rewrite, refused by Reject; a new route of the same, refused (both were admitted).
func meshGateLinkerdRoutes(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "serviceprofiles.linkerd.io"},
		"spec": map[string]any{
			"group": "linkerd.io", "scope": "Namespaced",
			"names": map[string]any{"kind": "ServiceProfile", "listKind": "ServiceProfileList", "plural": "serviceprofiles", "singular": "serviceprofile"},
			"versions": []any{map[string]any{"name": "v1alpha2", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}},
		},
	}}
	g.Expect(c.Create(ctx, crd)).To(Succeed())
	// The manager reads Linkerd once its mesh webhook takes Services.
	g.Eventually(func() bool {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(ctx, types.NamespacedName{Name: webhook.MeshWebhookConfiguration}, &cfg); err != nil {
			return false
		}
		for _, h := range cfg.Webhooks {
			if h.Name != webhook.MeshWebhookName {
				continue
			}
			for _, r := range h.Rules {
				if len(r.Resources) == 1 && r.Resources[0] == "services" {
					return true
				}
			}
		}
		return false
	}).Should(BeTrue())

	const ns = "lkdtime"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Annotations: map[string]string{"linkerd.io/inject": "enabled"}}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ratings", Annotations: map[string]string{"timeout.linkerd.io/response": "1s"}},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": "ratings"}, Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}}
	g.Expect(c.Create(ctx, svc.DeepCopy())).To(Succeed())
	route := func(name string, anns map[string]any, path string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec": map[string]any{
				"parentRefs": []any{map[string]any{"group": "", "kind": "Service", "name": "ratings"}},
				"rules": []any{map[string]any{
					"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": path}}},
					"backendRefs": []any{map[string]any{"name": "ratings", "port": int64(9080)}},
				}},
			},
		}}
		if anns != nil {
			u.SetAnnotations(map[string]string{})
			_ = unstructured.SetNestedMap(u.Object, anns, "metadata", "annotations")
		}
		return u
	}
	g.Expect(c.Create(ctx, route("ratings-fast", map[string]any{"retry.linkerd.io/http": "5xx", "retry.linkerd.io/limit": "3", "timeout.linkerd.io/request": "1s"}, "/fast"))).To(Succeed())
	g.Expect(c.Create(ctx, route("ratings-rest", nil, "/"))).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 20 * time.Second},
			// The workloads' own per-try timeout (1m) bounds no hop: the mesh's timeouts do.
			Retry:       v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: time.Minute}},
			Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())

	annotate := func(obj client.Object, patch string, opts ...client.PatchOption) error {
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(patch)), opts...)
	}
	const svcRaise = `{"metadata":{"annotations":{"timeout.linkerd.io/response":"30s"}}}`
	const svcDenied = `admission webhook "membership.mesh.retrycap.dev" denied the request: RetryPolicy lkdtime/bookinfo: ` +
		`Service lkdtime/ratings metadata.annotations["timeout.linkerd.io/response"]: "1s" -> "30s" makes ` +
		"productpage 30s -> reviews 30s -> ratings ? = 30s > maxTimeToAnswer 20s"
	// Until the cache and the watcher hold the workloads, the routes and the Service, a dry run
	// may pass.
	g.Eventually(func() string { return errString(annotate(svc, svcRaise, client.DryRunAll)) }).Should(Equal(svcDenied))
	n := webhook.MeshMembershipRequests()
	g.Expect(annotate(svc, svcRaise)).To(MatchError(svcDenied))
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 1))
	// Within the maximum (15s): admitted; back to 1s.
	g.Expect(annotate(svc, `{"metadata":{"annotations":{"timeout.linkerd.io/response":"15s"}}}`)).To(Succeed())
	g.Expect(annotate(svc, `{"metadata":{"annotations":{"timeout.linkerd.io/response":"1s"}}}`)).To(Succeed())
	// A label no mesh reads: sent to neither webhook (mesh.retrycap.dev takes Services with a
	// retry.linkerd.io/ annotation only), admitted.
	n = webhook.MeshMembershipRequests()
	g.Expect(annotate(svc, `{"metadata":{"labels":{"team":"ratings"}}}`)).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n))

	// Another route's own response timeout raised.
	rest := route("ratings-rest", nil, "/")
	g.Expect(annotate(rest, `{"metadata":{"annotations":{"retry.linkerd.io/http":"5xx","retry.linkerd.io/limit":"1","timeout.linkerd.io/response":"1s"}}}`)).To(Succeed())
	const routeRaise = `{"metadata":{"annotations":{"timeout.linkerd.io/response":"15s"}}}`
	const routeDenied = `admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy lkdtime/bookinfo: ` +
		`HTTPRoute lkdtime/ratings-rest metadata.annotations["timeout.linkerd.io/response"]: "1s" -> "15s" (per-try timeout 1s -> 15s) makes ` +
		"productpage 30.025s -> reviews 30.025s -> ratings ? = 30.025s > maxTimeToAnswer 20s"
	g.Eventually(func() string { return errString(annotate(rest, routeRaise, client.DryRunAll)) }).Should(Equal(routeDenied))
	g.Expect(annotate(rest, routeRaise)).To(MatchError(routeDenied))
	// Rewrite refuses it too (retrycap lowers retries, not timeouts).
	setEnforcement(g, op, policy, v1alpha1.EnforcementRewrite)
	g.Eventually(func() string { return errString(annotate(rest, routeRaise, client.DryRunAll)) }).Should(Equal(routeDenied +
		" (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"))

	// Tries raised on a route other than the counted one (ratings-fast's 4 tries count):
	// ratings-rest within a response timeout of 9s (2 x 9s + 25ms = 18.025s, within 20s), its
	// limit raised 1 -> 2 (3 x 9s + 75ms = 27.075s). It changed no layer of the edge and was
	// admitted; now Rewrite lowers it back to "1" and Reject refuses it.
	g.Expect(annotate(rest, `{"metadata":{"annotations":{"timeout.linkerd.io/response":"9s"}}}`)).To(Succeed())
	limitRaise := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"retry.linkerd.io/limit":"2"}}}`))
	lowered := map[string]string{"limit": "1", "from": `metadata.annotations["retry.linkerd.io/limit"]: "2"`}
	stored := func(u *unstructured.Unstructured) map[string]string {
		a := u.GetAnnotations()
		return map[string]string{"limit": a["retry.linkerd.io/limit"], "from": a["retrycap.dev/rewritten-from"]}
	}
	g.Eventually(func() map[string]string {
		u := rest.DeepCopy()
		if err := c.Patch(ctx, u, limitRaise, client.DryRunAll); err != nil {
			return map[string]string{"error": err.Error()}
		}
		return stored(u)
	}).Should(Equal(lowered))
	u := rest.DeepCopy()
	g.Expect(c.Patch(ctx, u, limitRaise)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(rest), u)).To(Succeed())
	g.Expect(stored(u)).To(Equal(lowered))

	setEnforcement(g, op, policy, v1alpha1.EnforcementReject)
	const limitDenied = `admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy lkdtime/bookinfo: ` +
		`HTTPRoute lkdtime/ratings-rest metadata.annotations["retry.linkerd.io/limit"]: "1" -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
		`productpage 27.075s -> reviews 27.075s -> ratings ? = 27.075s > maxTimeToAnswer 20s; HTTPRoute lkdtime/ratings-rest may keep retry.linkerd.io/limit: "1"`
	g.Eventually(func() string { return errString(c.Patch(ctx, rest.DeepCopy(), limitRaise, client.DryRunAll)) }).Should(Equal(limitDenied))
	g.Expect(c.Patch(ctx, rest.DeepCopy(), limitRaise)).To(MatchError(limitDenied))
	// A new route of the same tries and timeout: judged against its fewest tries (1), refused.
	const newDenied = `admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy lkdtime/bookinfo: ` +
		`HTTPRoute lkdtime/ratings-new metadata.annotations["retry.linkerd.io/limit"]: unset (a new route) -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
		`productpage 27.075s -> reviews 27.075s -> ratings ? = 27.075s > maxTimeToAnswer 20s; HTTPRoute lkdtime/ratings-new may keep retry.linkerd.io/limit: "1"`
	g.Expect(c.Create(ctx, route("ratings-new", map[string]any{"retry.linkerd.io/http": "5xx", "retry.linkerd.io/limit": "2", "timeout.linkerd.io/response": "9s"}, "/new"))).To(MatchError(newDenied))
	g.Expect(c.Delete(ctx, policy)).To(Succeed())
}
