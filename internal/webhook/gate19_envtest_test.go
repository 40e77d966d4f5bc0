package webhook_test

import (
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/publicdatatest"
)

// gate19Chain creates namespace ns (labels), bookinfo's three Deployments and a RetryPolicy of
// cap, enforcement e, maxTimeToAnswer 20s and the application's per-try timeout 2m; pre are
// created before the policy (not judged by it).
func gate19Chain(g *WithT, op *operatortest.Operator, ns string, labels map[string]string, cap int32, e v1alpha1.Enforcement, pre ...client.Object) {
	c, ctx := op.Client, op.Ctx
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}})).To(Succeed())
	for _, o := range pre {
		g.Expect(c.Create(ctx, o)).To(Succeed())
	}
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: e,
			MaxTimeToAnswer: &metav1.Duration{Duration: 20 * time.Second},
			Retry:           v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: 2 * time.Minute}},
			Entrypoints:     []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, p) }).Should(Succeed())
}

// gate19Update replaces obj's spec with spec (read, then written at the stored
// resourceVersion); dryRun: the API server's dry run, whose result (after the mutating webhooks)
// is returned.
func gate19Update(op *operatortest.Operator, obj *unstructured.Unstructured, spec map[string]any, dryRun bool) (*unstructured.Unstructured, error) {
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(obj.GroupVersionKind())
	if err := op.Client.Get(op.Ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
		return nil, err
	}
	stored.Object["spec"] = spec
	var opts []client.UpdateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	err := op.Client.Update(op.Ctx, stored, opts...)
	return stored, err
}

// meshGate19 runs in TestGateMeshLayers (Istio's, the Gateway API's and Envoy Gateway's CRDs):
// gate19's fixes through the real API server.
//   - A rule added to an HTTPRoute on a Gateway with 4 retries of 9s each (the chain over
//     maxTimeToAnswer 20s and the cap of 2) is stored by Rewrite with attempts 1 (before:
//     refused, "retrycap lowers retries, not timeouts").
//   - That rule's per-try 9s replaced by a request timeout of 60s is refused under Rewrite (a
//     timeout; before: admitted, the entrypoint's rules other than the counted one unseen).
//   - The VirtualService ratings updated to an empty http list (its calls back on Istio's
//     default, 3 tries, over the cap) is refused (before: admitted).
//   - Istio's bookinfo sample VirtualService reviews (v2/v3, no retries) applied over one of 1
//     try is stored with retries.attempts 0.
//   - An Envoy Gateway BackendTrafficPolicy on the Gateway with a timeout alone: 60s refused,
//     10s admitted.
func meshGate19(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "gate19"
	gate19Chain(g, op, ns, map[string]string{"istio-injection": "enabled"}, 2, v1alpha1.EnforcementRewrite)
	vs := func(name string, http []any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"hosts": []any{name}, "http": http},
		}}
	}
	oneTry := func(host string) []any {
		return []any{map[string]any{"route": []any{map[string]any{"destination": map[string]any{"host": host}}}, "retries": map[string]any{"attempts": int64(0)}}}
	}
	g.Expect(c.Create(ctx, vs("reviews", oneTry("reviews")))).To(Succeed())
	ratings := vs("ratings", oneTry("ratings"))
	g.Expect(c.Create(ctx, ratings)).To(Succeed())

	rule := func(path string, retry, timeouts map[string]any) map[string]any {
		return map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": path}}},
			"backendRefs": []any{map[string]any{"name": "productpage", "port": int64(9080)}},
			"retry":       retry, "timeouts": timeouts,
		}
	}
	fast := rule("/fast", map[string]any{"attempts": int64(1)}, map[string]any{"request": "3s"})
	slow := rule("/slow", map[string]any{"attempts": int64(4)}, map[string]any{"backendRequest": "9s"})
	long := rule("/long", map[string]any{"attempts": int64(1)}, map[string]any{"request": "60s"})
	spec := func(rules ...any) map[string]any {
		return map[string]any{"parentRefs": []any{map[string]any{"name": "bookinfo-gateway"}}, "rules": rules}
	}
	web := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec":     spec(fast),
	}}
	g.Expect(c.Create(ctx, web)).To(Succeed())

	// Rewrite lowers the new rule's attempts once the gate sees the policy and the route.
	attempts := func(u *unstructured.Unstructured, i int) int64 {
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		if len(rules) <= i {
			return -1
		}
		a, _, _ := unstructured.NestedInt64(rules[i].(map[string]any), "retry", "attempts")
		return a
	}
	g.Eventually(func() int64 {
		out, err := gate19Update(op, web, spec(fast, slow), true)
		if err != nil {
			return -1
		}
		return attempts(out, 1)
	}).Should(Equal(int64(1)))
	stored, err := gate19Update(op, web, spec(fast, slow), false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(attempts(stored, 1)).To(Equal(int64(1)))
	g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom, "spec.rules[1].retry.attempts: 4"))

	// A rule whose own 60s keeps the chain over: refused under Rewrite.
	_, err = gate19Update(op, web, spec(fast, long), false)
	g.Expect(err).To(MatchError("admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy gate19/bookinfo: HTTPRoute gate19/web spec.rules[1]: per-try timeout 9s -> unset makes " +
		"client -x2-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"))

	// The VirtualService ratings giving its calls no route.
	_, err = gate19Update(op, ratings, map[string]any{"hosts": []any{"ratings"}, "http": []any{}}, false)
	g.Expect(err).To(MatchError("admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy gate19/bookinfo: VirtualService gate19/ratings spec.http[0] no longer takes the calls reviews -> ratings (the object as sent gives them no route): " +
		"they take 3 tries (Istio default, no VirtualService binds ratings), which makes client -x2-> productpage -x1-> reviews -x3-> ratings = 6 > cap 2" +
		"; keep a route of VirtualService gate19/ratings for them with retries that fit, or lower HTTPRoute gate19/web spec.rules[0].retry.attempts (2 tries), " +
		"or raise RetryPolicy gate19/bookinfo spec.maxAmplification: 2" +
		" (refused although enforcement is Rewrite: no field of VirtualService gate19/ratings sets the tries of calls it no longer takes)"))

	// Istio's bookinfo sample reviews-v2-v3 (no retries: Istio's default, 3 tries) applied over
	// the VirtualService reviews of 1 try: Rewrite stores it with retries.attempts 0.
	samplePath, err := publicdatatest.File("istio.io/istio", "v0.0.0-20260827124520-eed52ebb66ad",
		"h1:ui9TJjRMAV/hb5ehQaZDq7IUGxuQP6dra9lapT/VjHI=", "samples/bookinfo/networking/virtual-service-reviews-v2-v3.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	data, err := os.ReadFile(samplePath)
	g.Expect(err).NotTo(HaveOccurred())
	sample := &unstructured.Unstructured{}
	g.Expect(yaml.Unmarshal(data, &sample.Object)).To(Succeed())
	sample.SetNamespace(ns)
	stored, err = gate19Update(op, sample, sample.Object["spec"].(map[string]any), false)
	g.Expect(err).NotTo(HaveOccurred())
	http, _, _ := unstructured.NestedSlice(stored.Object, "spec", "http")
	g.Expect(http).To(HaveLen(1))
	a, found, err := unstructured.NestedInt64(http[0].(map[string]any), "retries", "attempts")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(a).To(Equal(int64(0)))
	g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom, "spec.http[0].retries: unset"))

	// Envoy Gateway: a BackendTrafficPolicy on the Gateway with a timeout alone.
	const gw = "gate19gw"
	// The route (2 tries, unbounded: over maxTimeToAnswer on the application's 2m) is there
	// before the policy.
	gate19Chain(g, op, gw, nil, 100, v1alpha1.EnforcementReject, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": gw},
		"spec": map[string]any{"parentRefs": []any{map[string]any{"name": "bookinfo-gateway"}}, "rules": []any{map[string]any{
			"backendRefs": []any{map[string]any{"name": "productpage", "port": int64(9080)}},
			"retry":       map[string]any{"attempts": int64(1)},
		}}},
	}})
	btp := func(timeout string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "BackendTrafficPolicy",
			"metadata": map[string]any{"name": "gw", "namespace": gw},
			"spec": map[string]any{
				"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "bookinfo-gateway"}},
				"timeout":    map[string]any{"http": map[string]any{"requestTimeout": timeout}},
			},
		}}
	}
	const denied = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy gate19gw/bookinfo: BackendTrafficPolicy gate19gw/gw spec.timeout.http.requestTimeout: " +
		"per-try timeout unset, timeout 1m0s (a new bound, the one the chain waits on longest) makes client -x2-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
	g.Eventually(dryRunDenial(op, btp("60s"))).Should(Equal(denied))
	g.Expect(c.Create(ctx, btp("60s"))).To(MatchError(denied))
	g.Expect(c.Create(ctx, btp("10s"))).To(Succeed())
}
