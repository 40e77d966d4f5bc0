package controller

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// An AWS_MAX_ATTEMPTS no SDK reads as a number on a selected workload: analyze says "not
// checked" (exit 2). Before, the status said WithinCap True ("amplification 1 <= cap 4"), the
// SDK edge counted at the policy's default as if nothing was wrong.
var _ = Describe("invalid SDK environment", func() {
	ctx := context.Background()

	It("is WithinCap False, reason InvalidEnv, naming the workload, container, variable and value", func() {
		const ns = "aws-env-invalid"
		createNamespace(ctx, ns)
		d := deployment(ns, "uploader", "s3.eu-west-1.amazonaws.com", nil)
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "AWS_MAX_ATTEMPTS", Value: "three"}}
		Expect(k8sClient.Create(ctx, d)).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 1)
		Expect(k8sClient.Create(ctx, policy(ns, "uploads", 4, nil))).To(Succeed())

		Eventually(func(g Gomega) {
			st, err := statusOf(ctx, ns, "uploads")()
			g.Expect(err).NotTo(HaveOccurred())
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonInvalidEnv))
			g.Expect(c.Message).To(Equal(`1 invalid environment value(s), the tries of their SDK's upstreams unknown: Deployment aws-env-invalid/uploader: container app: env AWS_MAX_ATTEMPTS="three": want a whole number > 0; ` +
				"the valid part: amplification 1 <= cap 4 (worst path uploader>s3.eu-west-1.amazonaws.com)"))
		}).Should(Succeed())
	})
})
