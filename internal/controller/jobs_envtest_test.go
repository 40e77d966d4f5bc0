package controller

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

func jobTemplate(name, upstreams string, lbls map[string]string) corev1.PodTemplateSpec {
	l := map[string]string{"app.kubernetes.io/name": name}
	for k, v := range lbls {
		l[k] = v
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: map[string]string{annotations.Upstreams: upstreams}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "x"}}},
	}
}

// A nightly CronJob that calls payment with 9 tries is a caller like a Deployment: counted in the
// status, named by kind in its messages; the Job it made and the ReplicaSet a Deployment made are
// not callers of their own (their owner is), whatever their copies of the template say.
var _ = Describe("RetryPolicy status: CronJobs, Jobs and ReplicaSets", func() {
	ctx := context.Background()

	It("counts a CronJob's chain and names a CronJob's invalid annotation; owned copies count nowhere", func() {
		const ns = "jobs-status"
		createNamespace(ctx, ns)
		shop := map[string]string{"app.kubernetes.io/part-of": "shop"}
		dep := deployment(ns, "payment", "ledger=2", shop)
		Expect(k8sClient.Create(ctx, dep)).To(Succeed())
		cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate("nightly", "payment=9", shop)}}}}
		Expect(k8sClient.Create(ctx, cj)).To(Succeed())
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-29000000",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: cj.UID, Controller: ptr.To(true)}}},
			Spec: batchv1.JobSpec{Template: jobTemplate("nightly", "payment=100", shop)}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		rsTmpl := jobTemplate("payment", "ledger=100", shop)
		rsTmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payment-5d8f",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "payment", UID: dep.UID, Controller: ptr.To(true)}}},
			Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: rsTmpl.Labels}, Template: rsTmpl}}
		Expect(k8sClient.Create(ctx, rs)).To(Succeed())
		waitForCachedWorkloads(ctx, ns, 2)
		Expect(k8sClient.Create(ctx, policy(ns, "batch", 4, &metav1.LabelSelector{MatchLabels: shop}))).To(Succeed())

		Eventually(func(g Gomega) {
			st, err := statusOf(ctx, ns, "batch")()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Amplification).To(Equal(int64(18)))
			g.Expect(st.WorstPath).To(Equal("nightly>payment>ledger"))
			g.Expect(st.Violations).To(Equal([]v1alpha1.Violation{{
				Path: []string{"nightly", "payment", "ledger"}, Amplification: 18,
				Message:    "client -x1-> nightly -x9-> payment -x2-> ledger = 18 > cap 4",
				Suggestion: "nightly: payment=4; payment: ledger=1",
			}}))
			g.Expect(meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady).Message).To(Equal("analysed 2 selected workload(s): 3 service(s), 2 edge(s)"))
		}).Should(Succeed())

		// A broken annotation on a CronJob is named by its kind, namespace and name.
		Eventually(func() error {
			var cur batchv1.CronJob
			if err := k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nightly"}, &cur); err != nil {
				return err
			}
			cur.Spec.JobTemplate.Spec.Template.Annotations[annotations.Upstreams] = "payment=x"
			return k8sClient.Update(ctx, &cur)
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			st, err := statusOf(ctx, ns, "batch")()
			g.Expect(err).NotTo(HaveOccurred())
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionWithinCap)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(v1alpha1.ReasonInvalidAnnotation))
			g.Expect(c.Message).To(Equal(`1 invalid annotation(s): CronJob jobs-status/nightly: annotation retrycap.dev/upstreams: token "payment=x" at column 1: attempts must be an integer 1..100; ` +
				`the valid part: amplification 2 <= cap 4 (worst path payment>ledger)`))
		}).Should(Succeed())
	})
})
