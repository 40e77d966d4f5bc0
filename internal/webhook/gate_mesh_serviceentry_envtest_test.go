package webhook_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// googleAPIsEntry is Istio's egress task's ServiceEntry for www.googleapis.com in namespace
// egress, port 80 of the protocol given.
func googleAPIsEntry(protocol string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "ServiceEntry",
		"metadata": map[string]any{"name": "googleapis", "namespace": "egress"},
		"spec": map[string]any{
			"hosts": []any{"www.googleapis.com"}, "location": "MESH_EXTERNAL", "resolution": "DNS",
			"ports": []any{map[string]any{"number": int64(80), "name": "http-port", "protocol": protocol}},
		},
	}}
}

// meshGateServiceEntry (TestGateMeshLayers): a ServiceEntry registering an external HTTP host
// gives a sidecar's call to it Istio's default route, 3 tries. The mesh webhook (its rule for
// serviceentries from the watcher's APIs) refuses one that puts details-v2 -x3->
// www.googleapis.com over cap 2, Rewrite too (no retry field to lower), naming the entry's host
// and port and the VirtualService field that would lower it; an HTTPS port (not retried) passes,
// and its update to HTTP is refused. Before, the manager read no ServiceEntry: all admitted.
func meshGateServiceEntry(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "egress", Labels: map[string]string{"istio-injection": "enabled"}}})).To(Succeed())
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "egress", Name: "details"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 2, Enforcement: v1alpha1.EnforcementReject}}
	g.Eventually(func() error { return c.Create(ctx, policy.DeepCopy()) }).Should(Succeed())
	// Without an entry the host is outside the registry (Istio's PassthroughCluster): 1 try.
	g.Eventually(func() error {
		return c.Create(ctx, bookinfoDeployment("egress", "details-v2", "www.googleapis.com:80=1"))
	}).Should(Succeed())

	const over = "RetryPolicy egress/details: ServiceEntry egress/googleapis spec.hosts[0]: www.googleapis.com (port 80 HTTP) makes " +
		"details-v2 -x3-> www.googleapis.com = 3 > cap 2; Istio's default route retries it: a VirtualService for host www.googleapis.com may keep spec.http[].retries.attempts: 1"
	const denied = `admission webhook "mesh.retrycap.dev" denied the request: `
	g.Eventually(dryRunDenial(op, googleAPIsEntry("HTTP"))).Should(Equal(denied + over))

	setEnforcement := func(e v1alpha1.Enforcement) {
		g.Eventually(func() error {
			var p v1alpha1.RetryPolicy
			if err := c.Get(ctx, types.NamespacedName{Namespace: "egress", Name: "details"}, &p); err != nil {
				return err
			}
			p.Spec.Enforcement = e
			return c.Update(ctx, &p)
		}).Should(Succeed())
	}
	setEnforcement(v1alpha1.EnforcementRewrite)
	g.Eventually(dryRunDenial(op, googleAPIsEntry("HTTP"))).Should(Equal(denied + over +
		" (refused although enforcement is Rewrite: a ServiceEntry has no retry field to lower; declare the retries in a VirtualService for the host)"))

	// HTTPS passes through (the app's TLS): no retry, admitted; made HTTP, refused.
	setEnforcement(v1alpha1.EnforcementReject)
	g.Expect(c.Create(ctx, googleAPIsEntry("HTTPS"))).To(Succeed())
	g.Eventually(func() string {
		cur := &unstructured.Unstructured{}
		cur.SetAPIVersion("networking.istio.io/v1")
		cur.SetKind("ServiceEntry")
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "egress", Name: "googleapis"}, cur)).To(Succeed())
		u := googleAPIsEntry("HTTP")
		u.SetResourceVersion(cur.GetResourceVersion())
		if err := c.Update(ctx, u); err != nil {
			return err.Error()
		}
		return ""
	}).Should(Equal(denied + over))
}
