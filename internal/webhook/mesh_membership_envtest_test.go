package webhook_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/scheme"
	"github.com/retrycap/retrycap/internal/webhook"
)

// meshGateMembership (a case of TestGateMeshLayers: one manager per test binary): the mesh gate
// judges the labels of Namespaces and Services that put workloads into a retry layer, in
// webhook membership.mesh.retrycap.dev of retrycap-mesh, whose match condition passes only a
// write that changes one of the keys internal/mesh reads. Before, `kubectl label namespace
// member istio-injection=enabled` was admitted with a cap-4 policy's chain at 9 (the status
// counted it at the next reconcile), while the same raise through a VirtualService was refused:
// without the webhook in retrycap-mesh, the first dry run below stays admitted ("") until the
// Eventually times out.
func meshGateMembership(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	status := func(p *v1alpha1.RetryPolicy) func() (int64, error) { return amplificationOf(ctx, c, p) }
	label := func(c client.Client, obj client.Object, key, value string, opts ...client.PatchOption) error {
		v := `"` + value + `"`
		if value == "" {
			v = "null"
		}
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+key+`":`+v+`}}}`)), opts...)
	}

	// productpage -x1-> reviews -x1-> ratings in an unmeshed namespace, cap 4.
	policy := chainWithPolicy(g, op, "member", nil, nil, 4, v1alpha1.EnforcementReject)
	g.Eventually(status(policy)).Should(Equal(int64(1)))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "member"}}

	// istio-injection=enabled: Istio's default 3 tries on both hops, 9 > cap 4: refused.
	const denied = `admission webhook "membership.mesh.retrycap.dev" denied the request: `
	const over = `RetryPolicy member/bookinfo: Namespace member metadata.labels["istio-injection"]: unset -> "enabled" makes productpage -x3-> reviews -x3-> ratings = 9 > cap 4`
	g.Eventually(func() string { return errString(label(c, ns, "istio-injection", "enabled", client.DryRunAll)) }).Should(Equal(denied + over))
	g.Expect(label(c, ns, "istio-injection", "enabled")).To(MatchError(denied + over))

	// A label internal/mesh does not read never reaches the webhook (the API server evaluates the
	// match condition); one it reads does, each time.
	n := webhook.MeshMembershipRequests()
	g.Expect(label(c, ns, "team", "checkout")).To(Succeed())
	g.Expect(label(c, ns, "team", "")).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n))
	g.Expect(label(c, ns, "istio-injection", "enabled", client.DryRunAll)).To(HaveOccurred())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 1))

	// Rewrite: a label is never rewritten: refused, saying so.
	setEnforcement(g, op, policy, v1alpha1.EnforcementRewrite)
	g.Eventually(func() string { return errString(label(c, ns, "istio-injection", "enabled", client.DryRunAll)) }).Should(Equal(denied + over +
		" (refused although enforcement is Rewrite: retrycap does not rewrite a Namespace's labels or annotations, whose owner would write them back; lower the mesh's retries on the chain or leave the change out)"))

	// Audit: admitted with the warning, and counted.
	setEnforcement(g, op, policy, v1alpha1.EnforcementAudit)
	var w warnings
	wcfg := rest.CopyConfig(op.CP.Config)
	wcfg.WarningHandler = &w
	wc, err := client.New(wcfg, client.Options{Scheme: scheme.New()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() error { return label(wc, ns, "istio-injection", "enabled") }).Should(Succeed())
	g.Expect(w.take()).To(Equal([]string{over + " (admitted: enforcement is Audit)"}))
	g.Eventually(status(policy)).Should(Equal(int64(9)))

	// Leaving the mesh only lowers tries: admitted under Reject (sent: the key changes).
	setEnforcement(g, op, policy, v1alpha1.EnforcementReject)
	n = webhook.MeshMembershipRequests()
	g.Expect(label(c, ns, "istio-injection", "")).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 1))
	g.Eventually(status(policy)).Should(Equal(int64(1)))

	// Within the cap: admitted.
	g.Eventually(func() error {
		var cur v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), &cur); err != nil {
			return err
		}
		cur.Spec.MaxAmplification = 9
		return c.Update(ctx, &cur)
	}).Should(Succeed())
	g.Eventually(func() error { return label(c, ns, "istio-injection", "enabled", client.DryRunAll) }).Should(Succeed())
	g.Expect(label(c, ns, "istio-injection", "enabled")).To(Succeed())
	g.Eventually(status(policy)).Should(Equal(int64(9)))
	g.Expect(c.Delete(ctx, policy)).To(Succeed())

	// Ambient: ztunnel retries nothing, so the chain is 1 x 1; istio.io/use-waypoint on Service
	// reviews sends productpage's calls through waypoint (Istio's default 3 tries): 3 > cap 2.
	amb := chainWithPolicy(g, op, "member-ambient", map[string]string{"istio.io/dataplane-mode": "ambient"}, nil, 2, v1alpha1.EnforcementReject)
	g.Eventually(status(amb)).Should(Equal(int64(1)))
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "member-ambient", Name: "reviews"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app.kubernetes.io/name": "reviews"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	g.Expect(c.Create(ctx, svc.DeepCopy())).To(Succeed())
	const overSvc = `RetryPolicy member-ambient/bookinfo: Service member-ambient/reviews metadata.labels["istio.io/use-waypoint"]: unset -> "waypoint" makes productpage -x3-> reviews -x1-> ratings = 3 > cap 2`
	g.Eventually(func() string { return errString(label(c, svc, "istio.io/use-waypoint", "waypoint", client.DryRunAll)) }).Should(Equal(denied + overSvc))
	g.Expect(label(c, svc, "istio.io/use-waypoint", "waypoint")).To(MatchError(denied + overSvc))
	// The same Service created with the label: judged on create.
	g.Expect(c.Delete(ctx, svc.DeepCopy())).To(Succeed())
	labelled := svc.DeepCopy()
	labelled.Labels = map[string]string{"istio.io/use-waypoint": "waypoint"}
	g.Expect(c.Create(ctx, labelled)).To(MatchError(denied + overSvc))
	g.Expect(c.Delete(ctx, amb)).To(Succeed())
}

// amplificationOf polls p's status.amplification (for Eventually).
func amplificationOf(ctx context.Context, c client.Client, p *v1alpha1.RetryPolicy) func() (int64, error) {
	return func() (int64, error) {
		var cur v1alpha1.RetryPolicy
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &cur)
		return cur.Status.Amplification, err
	}
}
