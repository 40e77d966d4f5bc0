package webhook_test

import (
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/scheme"
)

// meshGateTimeoutRaise runs in TestGateMeshLayers (its manager and Istio's CRDs: one manager per
// test process, its controllers' names are process-wide): a VirtualService update that raises only retries.perTryTimeout (its tries unchanged) pushes
// bookinfo's chain over the policy's maxTimeToAnswer; Reject refuses it naming the rule, the
// timeout's change and the chain's times, Rewrite refuses it too (retrycap lowers retries, not
// timeouts), Audit admits it with the same words as a warning.
//
// Times: ratings' time is unknown, so the VirtualService's 3 tries of up to 1s bound reviews ->
// ratings at 3 x 1s + 25ms + 50ms (Envoy's backoff) = 3.075s; Istio's default 3 tries on
// productpage -> reviews (no timeout) make productpage 3 x 3.075s + 75ms = 9.3s: within 20s. With
// 4s per try: 3 x 4s + 75ms = 12.075s, productpage 36.3s.
func meshGateTimeoutRaise(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	const ns = "meshtime"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"istio-injection": "enabled"}}})).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bookinfo"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100, Enforcement: v1alpha1.EnforcementReject,
			MaxTimeToAnswer: &metav1.Duration{Duration: 20 * time.Second},
			// The workloads' own per-try timeout (1m) bounds no hop: the mesh's timeouts do.
			Retry:       v1alpha1.RetrySettings{PerTryTimeout: &metav1.Duration{Duration: time.Minute}},
			Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
	// The workloads come before the policy (the workload gate judges none of them) and the
	// VirtualService last: the mesh gate reads the timeouts of the object as sent and as stored
	// from the request, whatever the mesh watcher's copy keeps.
	for _, d := range []struct{ name, upstreams string }{{"ratings", ""}, {"reviews", "ratings=1"}, {"productpage", "reviews=1"}} {
		g.Eventually(func() error { return c.Create(ctx, bookinfoDeployment(ns, d.name, d.upstreams)) }).Should(Succeed())
	}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())
	// 2 retries: Istio's default tries, and a per-try timeout where the default has none: no
	// raise (9.3s fits besides).
	g.Expect(c.Create(ctx, timedVirtualService(ns, "1s"))).To(Succeed())

	const chain = "VirtualService meshtime/ratings spec.http[0]: per-try timeout 1s -> 4s makes " +
		"productpage 36.3s -> reviews 12.075s -> ratings ? = 36.3s > maxTimeToAnswer 20s"
	const denied = "admission webhook \"mesh.retrycap.dev\" denied the request: RetryPolicy meshtime/bookinfo: " + chain
	update := func(cl client.Client, perTry string) error {
		vs := timedVirtualService(ns, perTry)
		cur := timedVirtualService(ns, "")
		if err := cl.Get(ctx, client.ObjectKeyFromObject(vs), cur); err != nil {
			return err
		}
		vs.SetResourceVersion(cur.GetResourceVersion())
		return cl.Update(ctx, vs)
	}
	// The gate judges once the manager's cache and the mesh watcher hold the workloads and the
	// stored VirtualService: until then a dry run may pass.
	g.Eventually(func() string {
		vs := timedVirtualService(ns, "4s")
		cur := timedVirtualService(ns, "")
		if err := c.Get(ctx, client.ObjectKeyFromObject(vs), cur); err != nil {
			return err.Error()
		}
		vs.SetResourceVersion(cur.GetResourceVersion())
		if err := c.Update(ctx, vs, client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}).Should(Equal(denied))
	g.Expect(update(c, "4s")).To(MatchError(denied))
	// A lowering passes.
	g.Expect(update(c, "500ms")).To(Succeed())
	g.Expect(update(c, "1s")).To(Succeed())

	// The controller writes the policy's status: an update may conflict, and is read again.
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
	wantRewrite := denied + " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"
	g.Eventually(func() error { return update(c, "4s") }).Should(MatchError(wantRewrite))

	setEnforcement(v1alpha1.EnforcementAudit)
	var w warnings
	cfg := rest.CopyConfig(op.CP.Config)
	cfg.WarningHandler = &w
	wc, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	g.Expect(err).NotTo(HaveOccurred())
	// Until the cache has Audit the update is refused; once admitted it carries the warning.
	g.Eventually(func() error { return update(wc, "4s") }).Should(Succeed())
	g.Expect(w.take()).To(ContainElement("RetryPolicy meshtime/bookinfo: " + chain + " (admitted: enforcement is Audit)"))
}

// warnings collects the API server's warnings.
type warnings struct {
	mu  sync.Mutex
	got []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.got = append(w.got, text)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.got
	w.got = nil
	return out
}

// timedVirtualService binds ratings in ns with 2 retries of up to perTry each ("" for none).
func timedVirtualService(ns, perTry string) *unstructured.Unstructured {
	retries := map[string]any{"attempts": int64(2)}
	if perTry != "" {
		retries["perTryTimeout"] = perTry
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "ratings", "namespace": ns},
		"spec": map[string]any{
			"hosts": []any{"ratings"},
			"http": []any{map[string]any{
				"route":   []any{map[string]any{"destination": map[string]any{"host": "ratings"}}},
				"retries": retries,
			}},
		},
	}}
}
