package webhook_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// meshGateTimeAdvice runs in TestGateMeshLayers: a VirtualService created with a route of 3 tries
// (counted on reviews -> ratings) and a route of one try and a timeout of 60s puts bookinfo's
// chain over maxTimeToAnswer 20s, and no count of the first route's tries fits. The refusal said
// "lower the callers' attempts": the callers were at 1, and no attempt made the 60s. It now
// names the timeouts the chain waits on and the policy's maximum at the chain's time (adv20).
func meshGateTimeAdvice(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	const ns = "adv20time"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio-injection": "enabled"}}})).To(Succeed())
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 20 * time.Second},
			// The application's own per-try timeout would bound every hop below it.
			Retry:       v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: 2 * time.Minute}},
			Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())
	g.Expect(c.Create(ctx, virtualServiceYAML(t, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: adv20time}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`))).To(Succeed())
	ratings := virtualServiceYAML(t, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: adv20time}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
    timeout: 3s
    retries: {attempts: 2, perTryTimeout: 1s}
  - route: [{destination: {host: ratings}}]
    timeout: 60s
    retries: {attempts: 0}
`)
	const want = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy adv20time/bookinfo: " +
		"VirtualService adv20time/ratings spec.http[0].retries.attempts: 2 makes productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s" +
		"; even VirtualService adv20time/ratings attempts: 0 does not fit: lower the timeouts of VirtualService adv20time/ratings spec.http[1], or raise RetryPolicy adv20time/bookinfo spec.maxTimeToAnswer: 1m0s" +
		"; the wait over maxTimeToAnswer comes from reviews -> ratings: VirtualService adv20time/ratings spec.http[1] (1 try, per-try timeout unset, timeout 1m0s)"
	// Until the watcher has the namespace, the workloads and reviews' VirtualService a dry run
	// may pass or name another chain.
	g.Eventually(dryRunDenial(op, ratings)).Should(Equal(want))
	g.Expect(c.Create(ctx, ratings)).To(MatchError(want))

	// generateName alone: the API server names the object after the mutating webhooks, and the
	// mesh gate refused every such object "VirtualService object without metadata.name" (adv20).
	// It is judged under a stand-in name, written "ratings-<generated>".
	gen := ratings.DeepCopy()
	gen.SetName("")
	gen.SetGenerateName("ratings-")
	g.Expect(c.Create(ctx, gen)).To(MatchError(strings.ReplaceAll(want, "VirtualService adv20time/ratings ", "VirtualService adv20time/ratings-<generated> ")))
	details := virtualServiceYAML(t, `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {generateName: details-, namespace: adv20time}
spec:
  hosts: [details]
  http:
  - route: [{destination: {host: details}}]
    retries: {attempts: 0}
`)
	g.Expect(c.Create(ctx, details)).To(Succeed())
	g.Expect(details.GetName()).To(HavePrefix("details-"))
	g.Expect(details.GetName()).To(HaveLen(len("details-") + 5))
}

// virtualServiceYAML is the object of a YAML manifest.
func virtualServiceYAML(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("decoding %q: %v", manifest, err)
	}
	return u
}
