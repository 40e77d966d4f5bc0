package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// jobsPolicy caps every chain of the namespace's shop workloads at 4, the entrypoints left to
// the graph (the workloads nothing calls: a CronJob is one).
func jobsPolicy(ns string, mode v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
	return &v1alpha1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"},
		Spec:       v1alpha1.RetryPolicySpec{Selector: &metav1.LabelSelector{MatchLabels: partOfShop}, MaxAmplification: 4, Enforcement: mode},
	}
}

func jobsTemplate(name, upstreams string) corev1.PodTemplateSpec {
	l := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "shop"}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: l, Annotations: map[string]string{annotations.Upstreams: upstreams}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
	}
}

func nightlyCronJob(ns, upstreams string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: batchv1.CronJobSpec{Schedule: "0 2 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobsTemplate("nightly", upstreams)}}},
	}
}

// jobsNamespace creates ns with policy and payment (payment -x2-> ledger), and waits until the
// manager's cache has both.
func jobsNamespace(ctx context.Context, ns string, policy *v1alpha1.RetryPolicy) {
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	Expect(k8sClient.Create(ctx, policy)).To(Succeed())
	Expect(k8sClient.Create(ctx, gateDeployment(ns, "payment", "ledger=2", partOfShop))).To(Succeed())
	waitForPolicy(ctx, policy)
	waitForUpstreams(ctx, ns, "payment", "ledger=2")
}

// indexedKinds are the workloads of ns in the gate's index, as "Kind name".
func indexedKinds(ns string) []string {
	var out []string
	for _, w := range gateWebhooks.Index.Workloads(ns) {
		out = append(out, w.Kind+" "+w.Name)
	}
	return out
}

// The design's finding: a Job, CronJob or standalone ReplicaSet carrying upstreams was never
// judged (its pods are owned, and its own kind was not a gate kind). They are workloads now,
// judged where their pod template is; the ReplicaSet a Deployment owns and the Job a CronJob
// owns are not (their owner is).
var _ = Describe("workload gate: Jobs, CronJobs, ReplicaSets", Ordered, func() {
	ctx := context.Background()

	Context("Reject", Ordered, func() {
		const ns = "gate-jobs"
		BeforeAll(func() { jobsNamespace(ctx, ns, jobsPolicy(ns, v1alpha1.EnforcementReject)) })

		It("refuses an over-cap CronJob, read at spec.jobTemplate.spec.template", func() {
			err := k8sClient.Create(ctx, nightlyCronJob(ns, "payment=9"))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(Equal(gateDenied + "RetryPolicy gate-jobs/batch: nightly -x9-> payment -x2-> ledger = 18 > cap 4; nightly may keep payment=2"))
			Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nightly"}, &batchv1.CronJob{}))).To(BeTrue())
		})

		It("refuses an over-cap Job and standalone ReplicaSet the same way", func() {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
				Spec: batchv1.JobSpec{Template: jobsTemplate("nightly", "payment=3")}}
			Expect(k8sClient.Create(ctx, job)).To(MatchError(gateDenied +
				"RetryPolicy gate-jobs/batch: nightly -x3-> payment -x2-> ledger = 6 > cap 4; nightly may keep payment=2"))
			tmpl := jobsTemplate("nightly", "payment=3")
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
				Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			Expect(k8sClient.Create(ctx, rs)).To(MatchError(gateDenied +
				"RetryPolicy gate-jobs/batch: nightly -x3-> payment -x2-> ledger = 6 > cap 4; nightly may keep payment=2"))
		})

		It("admits one that fits, holds it in the index as a CronJob, and refuses an update that raises it", func() {
			Expect(k8sClient.Create(ctx, nightlyCronJob(ns, "payment=2"))).To(Succeed())
			Eventually(func() []string { return indexedKinds(ns) }, cacheWait).Should(ConsistOf("Deployment payment", "CronJob nightly"))
			var cj batchv1.CronJob
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nightly"}, &cj)).To(Succeed())
			cj.Spec.JobTemplate.Spec.Template.Annotations[annotations.Upstreams] = "payment=5"
			Expect(k8sClient.Update(ctx, &cj)).To(MatchError(gateDenied +
				"RetryPolicy gate-jobs/batch: nightly -x5-> payment -x2-> ledger = 10 > cap 4; nightly may keep payment=2"))
		})

		It("does not judge a Deployment's ReplicaSet or a CronJob's Job a second time", func() {
			var dep appsv1.Deployment
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "payment"}, &dep)).To(Succeed())
			var cj batchv1.CronJob
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nightly"}, &cj)).To(Succeed())
			// The controllers' copies of a template over the cap (what an older stored template
			// of theirs could hold): their owner is the workload, judged already.
			tmpl := jobsTemplate("payment", "ledger=100")
			tmpl.Spec.RestartPolicy = corev1.RestartPolicyAlways
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payment-5d8f",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "payment", UID: dep.UID, Controller: ptrTo(true)}}},
				Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
			Expect(k8sClient.Create(ctx, rs)).To(Succeed())
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-29000000",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: cj.UID, Controller: ptrTo(true)}}},
				Spec: batchv1.JobSpec{Template: jobsTemplate("nightly", "payment=100")}}
			Expect(k8sClient.Create(ctx, job)).To(Succeed())
			// The cache has both (a standalone ReplicaSet made after them is indexed), and the
			// index still holds each workload once: the owners.
			alone := rs.DeepCopy()
			alone.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "ledger"}
			alone.Spec.Template = jobsTemplate("ledger", "audit=1")
			alone.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
			alone.Spec.Selector = &metav1.LabelSelector{MatchLabels: alone.Spec.Template.Labels}
			Expect(k8sClient.Create(ctx, alone)).To(Succeed())
			Eventually(func() []string { return indexedKinds(ns) }, cacheWait).Should(ConsistOf("Deployment payment", "CronJob nightly", "ReplicaSet ledger"))
			Consistently(func() []string { return indexedKinds(ns) }, "300ms").Should(ConsistOf("Deployment payment", "CronJob nightly", "ReplicaSet ledger"))
		})
	})

	Context("Rewrite", Ordered, func() {
		const ns = "gate-jobs-rewrite"
		BeforeAll(func() { jobsNamespace(ctx, ns, jobsPolicy(ns, v1alpha1.EnforcementRewrite)) })

		It("lowers an over-cap CronJob at its template's path, and admits the rewritten object again unchanged", func() {
			c, warnings := gateClient()
			Expect(c.Create(ctx, nightlyCronJob(ns, "payment=9"))).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{"RetryPolicy gate-jobs-rewrite/batch rewrote retrycap.dev/upstreams of CronJob gate-jobs-rewrite/nightly: " +
				"payment=9 -> payment=2 (nightly -x9-> payment -x2-> ledger = 18 > cap 4)"}))
			var stored batchv1.CronJob
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nightly"}, &stored)).To(Succeed())
			Expect(stored.Spec.JobTemplate.Spec.Template.Annotations).To(Equal(map[string]string{
				annotations.Upstreams:     "payment=2",
				annotations.RewrittenFrom: "payment=9",
			}))
			Expect(stored.Spec.Schedule).To(Equal("0 2 * * *"))
			Expect(stored.Annotations).To(BeEmpty())

			// The stored object, changed elsewhere, goes through as it is: no second rewrite, no
			// warning.
			Eventually(func() []string { return indexedKinds(ns) }, cacheWait).Should(ConsistOf("Deployment payment", "CronJob nightly"))
			stored.Spec.Schedule = "0 3 * * *"
			Expect(c.Update(ctx, &stored)).To(Succeed())
			Expect(warnings.take()).To(BeEmpty())
			var again batchv1.CronJob
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nightly"}, &again)).To(Succeed())
			Expect(again.Spec.JobTemplate.Spec.Template.Annotations).To(Equal(stored.Spec.JobTemplate.Spec.Template.Annotations))
			Expect(again.Spec.Schedule).To(Equal("0 3 * * *"))
		})

		It("lowers a Job's spec.template", func() {
			c, warnings := gateClient()
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "once"},
				Spec: batchv1.JobSpec{Template: jobsTemplate("once", "payment=3")}}
			Expect(c.Create(ctx, job)).To(Succeed())
			Expect(warnings.take()).To(Equal([]string{"RetryPolicy gate-jobs-rewrite/batch rewrote retrycap.dev/upstreams of Job gate-jobs-rewrite/once: " +
				"payment=3 -> payment=2 (once -x3-> payment -x2-> ledger = 6 > cap 4)"}))
			Expect(job.Spec.Template.Annotations).To(HaveKeyWithValue(annotations.Upstreams, "payment=2"))
		})
	})
})
