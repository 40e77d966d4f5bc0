package webhook_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
	"github.com/retrycap/retrycap/internal/webhook"
)

// meshGateKumaMembership (kuma19; a case of TestGateMeshLayers, whose manager reads Kuma's
// Mesh and MeshRetry CRDs): Kuma injects by the label kuma.io/sidecar-injection, the pod's over
// its Namespace's, and reads no annotation (mesh.KumaWillInject). A Namespace labelled enabled
// makes bookinfo's chain 6 x 6 under Kuma's default MeshRetry mesh-retry-all-default: refused
// by the membership webhook. The same key as a Namespace annotation is not sent to the manager
// at all (before: sent, and refused as the same raise, which Kuma does not make). A pod template
// labelled enabled in a Namespace labelled disabled is injected (Kuma's pods webhook): the
// Deployment's update is refused by the gate; one annotated enabled is not read: admitted.
func meshGateKumaMembership(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	status := func(p *v1alpha1.RetryPolicy) func() (int64, error) { return amplificationOf(ctx, c, p) }
	meta := func(obj client.Object, field, key, value string, opts ...client.PatchOption) error {
		v := `"` + value + `"`
		if value == "" {
			v = "null"
		}
		return c.Patch(ctx, obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"`+field+`":{"`+key+`":`+v+`}}}`)), opts...)
	}

	// Kuma's mesh default (its initial MeshRetry assumed: 5 retries, 6 tries).
	m := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kuma.io/v1alpha1", "kind": "Mesh", "metadata": map[string]any{"name": "default"}, "spec": map[string]any{}}}
	g.Expect(c.Create(ctx, m)).To(Succeed())
	policy := chainWithPolicy(g, op, "kmember", nil, nil, 4, v1alpha1.EnforcementReject)
	g.Eventually(status(policy)).Should(Equal(int64(1)))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kmember"}}

	// The label: sent and refused.
	const denied = `admission webhook "membership.mesh.retrycap.dev" denied the request: `
	g.Eventually(func() string {
		return errString(meta(ns, "labels", "kuma.io/sidecar-injection", "enabled", client.DryRunAll))
	}).Should(HavePrefix(denied + `RetryPolicy kmember/bookinfo: Namespace kmember metadata.labels["kuma.io/sidecar-injection"]: unset -> "enabled" makes productpage -x6-> reviews -x6-> ratings = 36 > cap 4`))

	// The annotation, enabled then disabled: never sent (the match condition lists no Kuma
	// annotation), admitted, and the chain stays 1.
	n := webhook.MeshMembershipRequests()
	g.Expect(meta(ns, "annotations", "kuma.io/sidecar-injection", "enabled")).To(Succeed())
	g.Expect(meta(ns, "annotations", "kuma.io/mesh", "default")).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n))
	g.Expect(meta(ns, "labels", "kuma.io/sidecar-injection", "enabled", client.DryRunAll)).To(HaveOccurred())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 1))

	// The Namespace labelled disabled: no layer raised, admitted; the policy still counts 1.
	g.Expect(meta(ns, "labels", "kuma.io/sidecar-injection", "disabled")).To(Succeed())
	g.Expect(webhook.MeshMembershipRequests()).To(Equal(n + 2))
	// A pod-template annotation enabled (Kuma reads none): admitted; a label enabled in a
	// Namespace that has the label (Kuma's pods webhook): productpage's calls go through
	// kuma-sidecar, 6 x 1 > cap 4, refused by the gate.
	update := func(key string, ann bool, value string) error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: "kmember", Name: "productpage"}, &d); err != nil {
			return err
		}
		m := &d.Spec.Template.Labels
		if ann {
			m = &d.Spec.Template.Annotations
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[key] = value
		return c.Update(ctx, &d)
	}
	g.Eventually(func() error { return update("kuma.io/sidecar-injection", true, "enabled") }).Should(Succeed())
	g.Eventually(func() string { return errString(update("kuma.io/sidecar-injection", false, "enabled")) }).Should(
		HavePrefix(`admission webhook "gate.retrycap.dev" denied the request: RetryPolicy kmember/bookinfo: productpage -x6-> reviews -x1-> ratings = 6 > cap 4`))
	g.Eventually(func() error { return update("kuma.io/sidecar-injection", false, "disabled") }).Should(Succeed())
	g.Eventually(status(policy)).Should(Equal(int64(1)))
	g.Expect(c.Delete(ctx, policy)).To(Succeed())
	g.Expect(c.Delete(ctx, m)).To(Succeed())
}
