package webhook_test

import (
	"strings"
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
)

// meshGateNewRoutes runs in TestGateMeshLayers (Istio's and the Gateway API's real CRDs): routes
// new to an edge, through the real API server (gate18).
//
//   - An HTTPRoute (GAMMA) created with a rule that sets no retry takes Istio's default, 3 tries,
//     where the call already had 3 from Istio's default route: admitted before though
//     productpage -x1-> reviews -x3-> ratings = 3 > cap 2. Reject now refuses it naming Istio's
//     default and the field; Rewrite stores the rule with retry: {attempts: 1}.
//   - A rule added to it of 2 tries (its fewest) and a request timeout of 60s beside rules of 3s:
//     no tries and no bound raised, admitted before while the chain became 60s > 20s. Refused
//     now, under Rewrite too (it lowers tries, not timeouts).
func meshGateNewRoutes(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const ns = "newroute"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio-injection": "enabled"}}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	g.Expect(c.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ratings"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 9080}}}})).To(Succeed())
	g.Expect(c.Create(ctx, fromYAML(g, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: newroute}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`))).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 2, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 20 * time.Second},
			// The workloads' own per-try timeout bounds no hop below it: the routes' do.
			Retry:       v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: 2 * time.Minute}},
			Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())

	route := func(rules string) *unstructured.Unstructured {
		return fromYAML(g, `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: newroute}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /fast}}]
    backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 3s}
    retry: {attempts: 1}
  - backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 3s}
`+rules)
	}
	const defaultDenied = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy newroute/bookinfo: " +
		"HTTPRoute newroute/ratings spec.rules[1].retry.attempts: unset (2) makes productpage -x1-> reviews -x3-> ratings = 3 > cap 2" +
		"; HTTPRoute newroute/ratings may keep attempts: 1" +
		"; HTTPRoute newroute/ratings spec.rules[1] sets no retry: its 3 tries are Istio's default (2 retries); set spec.rules[1].retry.attempts, or lower the mesh's defaultHttpRetryPolicy"
	// The gate judges once the manager's cache has the policy and workloads, and the mesh
	// watcher the Namespace and Service: until then a dry run may pass.
	g.Eventually(dryRunDenial(op, route(""))).Should(Equal(defaultDenied))
	g.Expect(c.Create(ctx, route(""))).To(MatchError(defaultDenied))

	setEnforcement := func(e v1alpha1.Enforcement) {
		g.Eventually(func() error {
			var p v1alpha1.RetryPolicy
			if err := c.Get(ctx, client.ObjectKeyFromObject(policy), &p); err != nil {
				return err
			}
			p.Spec.Enforcement = e
			return c.Update(ctx, &p)
		}).Should(Succeed())
	}
	setEnforcement(v1alpha1.EnforcementRewrite)
	g.Eventually(func() error { return c.Create(ctx, route("")) }).Should(Succeed())
	stored := route("")
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(stored), stored)).To(Succeed())
	rules, _, _ := unstructured.NestedSlice(stored.Object, "spec", "rules")
	g.Expect(rules).To(HaveLen(2))
	retry, found, _ := unstructured.NestedMap(rules[1].(map[string]any), "retry")
	g.Expect(found).To(BeTrue())
	g.Expect(retry).To(Equal(map[string]any{"attempts": int64(1)}))
	g.Expect(stored.GetAnnotations()).To(HaveKeyWithValue(annotations.RewrittenFrom, "spec.rules[1].retry: unset"))

	// A third rule of 2 tries and 60s: refused under Rewrite, then Reject, by its timeout.
	const slowRule = `    retry: {attempts: 1}
  - matches: [{path: {type: PathPrefix, value: /slow}}]
    backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 60s}
    retry: {attempts: 1}
`
	update := func(rules string) error {
		next := route(rules)
		next.SetResourceVersion(stored.GetResourceVersion())
		next.SetAnnotations(stored.GetAnnotations())
		return c.Update(ctx, next)
	}
	const slowDenied = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy newroute/bookinfo: " +
		"HTTPRoute newroute/ratings spec.rules[2]: per-try timeout unset, timeout 1m0s (a new route; the chain's worst time was 3s) makes " +
		"productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
	g.Expect(update(slowRule)).To(MatchError(slowDenied + " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"))
	setEnforcement(v1alpha1.EnforcementReject)
	g.Eventually(func() error { return update(slowRule) }).Should(MatchError(slowDenied))
	// The same rule within the maximum is admitted.
	g.Expect(update(strings.Replace(slowRule, "60s", "15s", 1))).To(Succeed())
}

// fromYAML is the object of a manifest.
func fromYAML(g *WithT, y string) *unstructured.Unstructured {
	data, err := yaml.YAMLToJSON([]byte(y))
	g.Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	g.Expect(u.UnmarshalJSON(data)).To(Succeed())
	return u
}
