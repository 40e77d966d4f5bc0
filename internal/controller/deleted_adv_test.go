package controller

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// deletingClient is a policy deleted while its reconcile runs: it reads the policy with an
// empty status (so the reconcile has something to write) and deletes it just before the status
// patch.
type deletingClient struct{ client.Client }

func (c deletingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if p, ok := obj.(*v1alpha1.RetryPolicy); ok {
		p.Status = v1alpha1.RetryPolicyStatus{}
	}
	return nil
}

func (c deletingClient) Status() client.SubResourceWriter {
	return deletingStatus{SubResourceWriter: c.Client.Status(), c: c.Client}
}

type deletingStatus struct {
	client.SubResourceWriter
	c client.Client
}

func (s deletingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	gone := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	if err := s.c.Delete(ctx, gone); err != nil {
		return err
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

var _ = Describe("a policy deleted while its reconcile runs", func() {
	ctx := context.Background()

	It("ends the reconcile without an error and without an event: the status has no object to go to", func() {
		const ns = "adv-deleted"
		createNamespace(ctx, ns)
		shop := map[string]string{"app.kubernetes.io/part-of": "shop"}
		Expect(k8sClient.Create(ctx, deployment(ns, "gateway", "order=3", shop))).To(Succeed())
		Expect(k8sClient.Create(ctx, policy(ns, "checkout", 2, &metav1.LabelSelector{MatchLabels: shop}))).To(Succeed())

		// A reconciler of its own, driven directly, on the API server (no cache, no index).
		rec := events.NewFakeRecorder(10)
		r := &RetryPolicyReconciler{Client: deletingClient{k8sClient}, Recorder: rec}
		res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "checkout"}})
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(ctrl.Result{}))
		Expect(rec.Events).To(BeEmpty())
		var p v1alpha1.RetryPolicy
		err = k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "checkout"}, &p)
		Expect(err).To(MatchError(ContainSubstring(`retrypolicies.retrycap.dev "checkout" not found`)))
	})
})
