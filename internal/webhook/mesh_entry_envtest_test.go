package webhook_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// meshGateEntryRoutes runs in TestGateMeshLayers (its manager, Istio's and the Gateway API's
// real CRDs): a VirtualService bound to an ingress Gateway with 20 http routes to the entrypoint
// productpage, and an HTTPRoute with a Gateway parentRef and 16 rules to it (the CRD's
// spec.rules maxItems: the API server refuses 20), each attempts: 3,
// make client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3. The gate lowered such
// routes one per round (at most 8): Reject said "even attempts: 0 does not fit" where 2 fits on
// every route, Rewrite lowered 8 and admitted the rest. Now Reject names attempts: 2, and Rewrite
// stores every route at 2 with each old value in retrycap.dev/rewritten-from.
func meshGateEntryRoutes(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "entry"
	policy := chainWithPolicy(g, op, ns, nil, nil, 3, v1alpha1.EnforcementReject)

	objects := []struct {
		obj              *unstructured.Unstructured
		n                int
		field, list, blk string
	}{
		{ingressVirtualService(ns, 20), 20, "spec.http[0].retries.attempts", "http", "retries"},
		{gatewayRoute(ns, 16, map[string]any{"attempts": int64(3)}), 16, "spec.rules[0].retry.attempts", "rules", "retry"},
	}
	for _, o := range objects {
		id := o.obj.GetKind() + " " + ns + "/" + o.obj.GetName()
		want := "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy entry/bookinfo: " + id + " " + o.field + ": 3 makes " +
			"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3; " + id + " may keep attempts: 2"
		g.Eventually(dryRunDenial(op, o.obj)).Should(Equal(want))
		g.Expect(c.Create(ctx, o.obj.DeepCopy())).To(MatchError(want))
	}

	setEnforcement(g, op, policy, v1alpha1.EnforcementRewrite)
	for _, o := range objects {
		// Until the manager's cache has Rewrite the dry run is refused.
		g.Eventually(func() error { return c.Create(ctx, o.obj.DeepCopy(), client.DryRunAll) }).Should(Succeed())
		g.Expect(c.Create(ctx, o.obj.DeepCopy())).To(Succeed())
		stored := &unstructured.Unstructured{}
		stored.SetGroupVersionKind(o.obj.GroupVersionKind())
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(o.obj), stored)).To(Succeed())
		items, _, _ := unstructured.NestedSlice(stored.Object, "spec", o.list)
		g.Expect(items).To(HaveLen(o.n))
		var idx []string
		for i, it := range items {
			a, found, err := unstructured.NestedInt64(it.(map[string]any), o.blk, "attempts")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(found).To(BeTrue())
			g.Expect(a).To(Equal(int64(2)), "%s %s[%d]", o.obj.GetName(), o.list, i)
			idx = append(idx, strconv.Itoa(i))
		}
		sort.Strings(idx) // the annotation lists the fields in pointer order: 0, 1, 10, 11, ...
		var from []string
		for _, i := range idx {
			from = append(from, fmt.Sprintf("spec.%s[%s].%s.attempts: 3", o.list, i, o.blk))
		}
		g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom, strings.Join(from, "; ")))
	}
}

// meshGateRuleFloor runs in TestGateMeshLayers: a Gateway API rule's retry.attempts is at least
// 1 (the CRD's minimum), and the gate proposed attempts: 0, which the API server refuses (Rewrite
// then admitted the object unchanged, with a warning that it could not rewrite it). Each rewrite
// below is stored by the real API server through the real CRD:
//   - an Istio GAMMA route goes down to attempts: 1 (2 tries; without retry, Istio's default 2
//     retries apply), admitted as far as it goes;
//   - a Gateway-parented rule no BackendTrafficPolicy covers to 1 try loses its retry block.
//
// (A Linkerd GAMMA route to 1 try loses its block the same way: TestDecideMesh; the watcher reads
// linkerd.io/inject only where a Linkerd API is served, and no Linkerd CRD is pinned here.)
func meshGateRuleFloor(t *testing.T, op *operatortest.Operator) {
	c, ctx := op.Client, op.Ctx

	type check func(g *WithT, stored *unstructured.Unstructured)
	retryIs := func(want map[string]any, from string) check {
		return func(g *WithT, stored *unstructured.Unstructured) {
			rules, _, _ := unstructured.NestedSlice(stored.Object, "spec", "rules")
			g.Expect(rules).To(HaveLen(1))
			got, found, _ := unstructured.NestedMap(rules[0].(map[string]any), "retry")
			if want == nil {
				g.Expect(found).To(BeFalse(), "retry %v", got)
			} else {
				g.Expect(got).To(Equal(want))
			}
			g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom, from))
		}
	}
	for _, tc := range []struct {
		ns          string
		labels, ann map[string]string
		cap         int32
		obj         *unstructured.Unstructured
		check       check
	}{
		{"floor-istio", map[string]string{"istio-injection": "enabled"}, nil, 3,
			gammaRoute("floor-istio", map[string]any{"attempts": int64(3), "codes": []any{int64(503)}}),
			retryIs(map[string]any{"attempts": int64(1), "codes": []any{int64(503)}}, "spec.rules[0].retry.attempts: 3")},
		{"floor-gateway", nil, nil, 1,
			gatewayRoute("floor-gateway", 1, map[string]any{"attempts": int64(3), "backoff": "100ms"}),
			retryIs(nil, `spec.rules[0].retry: {"attempts":3,"backoff":"100ms"}`)},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			g := NewWithT(t)
			g.SetDefaultEventuallyTimeout(time.Minute)
			g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
			chainWithPolicy(g, op, tc.ns, tc.labels, tc.ann, tc.cap, v1alpha1.EnforcementRewrite)
			// The gate rewrites once the manager's cache has the policy and the workloads,
			// and the mesh watcher the Namespace: a dry run says what would be stored.
			g.Eventually(func() map[string]string {
				obj := tc.obj.DeepCopy()
				if err := c.Create(ctx, obj, client.DryRunAll); err != nil {
					return map[string]string{"error": err.Error()}
				}
				return obj.GetAnnotations()
			}).Should(HaveKey(annotations.RewrittenFrom))
			obj := tc.obj.DeepCopy()
			g.Expect(c.Create(ctx, obj)).To(Succeed())
			stored := &unstructured.Unstructured{}
			stored.SetGroupVersionKind(obj.GroupVersionKind())
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), stored)).To(Succeed())
			tc.check(g, stored)
		})
	}
}

// statusEntryRouteFloor runs in TestGateMeshLayers: the RetryPolicy status, written by the
// manager's controller from the objects the mesh watcher reads, names the whole fix of a chain
// whose entry route can only go down to its floor. HTTPRoute floor-status/web (a rule of Istio's
// ingress Gateway bookinfo-gateway: without retry it gets Istio's 2 retries, so 2 tries is its
// fewest) gives productpage 4 tries; productpage -x2-> reviews -x2-> ratings; cap 3. The chain
// asks the route for 1 try; at its fewest (2) the edges below must go to 1 too. Before
// (floorstatus), the status said only "client -> productpage: ... cannot give 1 try ... lower the
// callers' attempts" while analyze -o patch lowered the route and both edges.
func statusEntryRouteFloor(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "floor-status"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	gw := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
		"metadata": map[string]any{"name": "bookinfo-gateway", "namespace": ns},
		"spec": map[string]any{"gatewayClassName": "istio",
			"listeners": []any{map[string]any{"name": "http", "port": int64(80), "protocol": "HTTP"}}},
	}}
	g.Expect(c.Create(ctx, gw)).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=2"}, {"productpage", "reviews=2"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 3, Enforcement: v1alpha1.EnforcementAudit, Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, p.DeepCopy()) }).Should(Succeed())
	g.Expect(c.Create(ctx, gatewayRoute(ns, 1, map[string]any{"attempts": int64(3)}))).To(Succeed()) // Audit: admitted
	g.Eventually(func() ([]v1alpha1.Violation, error) {
		var cur v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur)
		return cur.Status.Violations, err
	}).Should(Equal([]v1alpha1.Violation{{
		Path: []string{"productpage", "reviews", "ratings"}, Amplification: 16,
		Message: "client -x4-> productpage -x2-> reviews -x2-> ratings = 16 > cap 3; " +
			"client -x4-> productpage: 4 = 1 (client attempts) x 4 (HTTPRoute floor-status/web spec.rules[0].retry.attempts: 3)",
		Suggestion: "HTTPRoute floor-status/web spec.rules[0].retry.attempts: 3 -> 1; productpage: reviews=1; reviews: ratings=1",
	}}))

	// Applied as the status says (the route through the real CRD, both annotations): within the
	// cap, 2 x 1 x 1, nothing left over.
	route := &unstructured.Unstructured{}
	route.SetGroupVersionKind(gatewayRoute(ns, 1, nil).GroupVersionKind())
	g.Eventually(func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, route); err != nil {
			return err
		}
		rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
		rules[0].(map[string]any)["retry"] = map[string]any{"attempts": int64(1)}
		if err := unstructured.SetNestedSlice(route.Object, rules, "spec", "rules"); err != nil {
			return err
		}
		return c.Update(ctx, route)
	}).Should(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error {
			var dep appsv1.Deployment
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.name}, &dep); err != nil {
				return err
			}
			dep.Spec.Template.Annotations[annotations.Upstreams] = d.upstreams
			return c.Update(ctx, &dep)
		}).Should(Succeed())
	}
	g.Eventually(func() (string, error) {
		var cur v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur)
		return fmt.Sprintf("amplification %d, %d violations", cur.Status.Amplification, len(cur.Status.Violations)), err
	}).Should(Equal("amplification 2, 0 violations"))
}

// chainWithPolicy creates namespace ns (labels, annotations), bookinfo's chain productpage ->
// reviews -> ratings in it, then a RetryPolicy "bookinfo" of cap and enforcement with entrypoint
// productpage (after the workloads: the workload gate judges none of them).
func chainWithPolicy(g *WithT, op *operatortest.Operator, ns string, labels, ann map[string]string, cap int32, e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
	c, ctx := op.Client, op.Ctx
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels, Annotations: ann}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: e, Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, p.DeepCopy()) }).Should(Succeed())
	return p
}

// setEnforcement updates p's enforcement (the controller writes its status: an update may
// conflict, and is read again).
func setEnforcement(g *WithT, op *operatortest.Operator, p *v1alpha1.RetryPolicy, e v1alpha1.Enforcement) {
	g.Eventually(func() error {
		var cur v1alpha1.RetryPolicy
		if err := op.Client.Get(op.Ctx, client.ObjectKeyFromObject(p), &cur); err != nil {
			return err
		}
		cur.Spec.Enforcement = e
		return op.Client.Update(op.Ctx, &cur)
	}).Should(Succeed())
}

// ingressVirtualService is VirtualService ns/front bound to ingress Gateway bookinfo-gateway,
// with n http routes to productpage, each retries.attempts: 3.
func ingressVirtualService(ns string, n int) *unstructured.Unstructured {
	var http []any
	for i := range n {
		http = append(http, map[string]any{
			"match":   []any{map[string]any{"uri": map[string]any{"prefix": fmt.Sprintf("/v%d/", i)}}},
			"route":   []any{map[string]any{"destination": map[string]any{"host": "productpage"}}},
			"retries": map[string]any{"attempts": int64(3)},
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "front", "namespace": ns},
		"spec":     map[string]any{"hosts": []any{"bookinfo.example.com"}, "gateways": []any{"bookinfo-gateway"}, "http": http},
	}}
}

// gatewayRoute is HTTPRoute ns/web with a parentRef to Gateway bookinfo-gateway and n rules to
// productpage, each with retry.
func gatewayRoute(ns string, n int, retry map[string]any) *unstructured.Unstructured {
	var rules []any
	for i := range n {
		rules = append(rules, map[string]any{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": fmt.Sprintf("/v%d/", i)}}},
			"backendRefs": []any{map[string]any{"name": "productpage", "port": int64(9080)}},
			"retry":       deepCopyMap(retry),
		})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec":     map[string]any{"parentRefs": []any{map[string]any{"name": "bookinfo-gateway"}}, "rules": rules},
	}}
}

// gammaRoute is GAMMA HTTPRoute ns/ratings (parentRef Service ratings) with one rule, retry.
func gammaRoute(ns string, retry map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
		"metadata": map[string]any{"name": "ratings", "namespace": ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"group": "", "kind": "Service", "name": "ratings", "port": int64(9080)}},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": "ratings", "port": int64(9080)}}, "retry": deepCopyMap(retry)}},
		},
	}}
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
