package webhook

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
)

// A CronJob's pod is created by a Job the CronJob created: the proxy must carry the CronJob's
// identity (the workload the gate judged and the policy lists), not the Job's, which is named
// anew on every run. envtest runs no controllers, so the Job and its pod are created here as the
// CronJob and Job controllers make them (owner references, the Job's name, the pod's labels).
var _ = Describe("pod injector: a CronJob's pod", Ordered, func() {
	const ns = "inject-cron"
	ctx := context.Background()
	partOf := map[string]string{"app.kubernetes.io/part-of": "shop"}
	// The template names no app.kubernetes.io/name: the service is the workload's name.
	template := func() corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: partOf, Annotations: map[string]string{annotations.Upstreams: "payment=2"}},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
		}
	}
	// jobPod is the pod the Job controller creates for job: the template's labels and its own.
	jobPod := func(job *batchv1.Job) *corev1.Pod {
		tmpl := template()
		labels := map[string]string{"batch.kubernetes.io/job-name": job.Name, "job-name": job.Name,
			"batch.kubernetes.io/controller-uid": string(job.UID), "controller-uid": string(job.UID)}
		for k, v := range tmpl.Labels {
			labels[k] = v
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: job.Name + "-", Labels: labels, Annotations: tmpl.Annotations,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
			Spec: tmpl.Spec,
		}
	}
	proxyArgs := func(service string, entrypoint bool) []string {
		ep := "--entrypoint=false"
		if entrypoint {
			ep = "--entrypoint=true"
		}
		return []string{
			"--listen=127.0.0.1:15001", "--admin=:15020", "--service=" + service, "--upstreams=payment=2",
			ep, "--chain-cap=4", "--default-attempts=1", "--per-try-timeout=2s",
			"--backoff-base=100ms", "--backoff-max=2s", "--retry-on=connect-failure,reset,502,503,504,unavailable",
			"--retry-methods=GET,HEAD,OPTIONS,PUT,DELETE", "--budget-percent=20", "--budget-min-per-second=10",
			"--budget-window=10s", "--breaker-failures=50", "--breaker-window=30s", "--breaker-open-for=10s",
		}
	}
	// admit creates the pod of job through the real webhooks and returns it as stored.
	admit := func(job *batchv1.Job) *corev1.Pod {
		pod := jobPod(job)
		Expect(k8sClient.Create(ctx, pod)).To(Succeed())
		stored := &corev1.Pod{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), stored)).To(Succeed())
		return stored
	}
	var cronJob batchv1.CronJob

	BeforeAll(func() {
		Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{annotations.InjectionLabel: annotations.InjectionEnabled}}})).To(Succeed())
		policy := &v1alpha1.RetryPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"},
			Spec: v1alpha1.RetryPolicySpec{Selector: &metav1.LabelSelector{MatchLabels: partOf}, MaxAmplification: 4,
				Entrypoints: []v1alpha1.Entrypoint{{Service: "nightly", ClientAttempts: 1}}},
		}
		Expect(k8sClient.Create(ctx, policy)).To(Succeed())
		cronJob = batchv1.CronJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
			Spec:       batchv1.CronJobSpec{Schedule: "0 2 * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template()}}},
		}
		Expect(k8sClient.Create(ctx, &cronJob)).To(Succeed())
		Eventually(func(g Gomega) {
			labels, _ := gateWebhooks.Index.Namespace(ns)
			g.Expect(labels).To(HaveKeyWithValue(annotations.InjectionLabel, annotations.InjectionEnabled))
			g.Expect(mgrClient.Get(ctx, client.ObjectKeyFromObject(policy), &v1alpha1.RetryPolicy{})).To(Succeed())
			g.Expect(indexedKinds(ns)).To(ConsistOf("CronJob nightly"))
		}, cacheWait).Should(Succeed())
	})

	It("names the proxy of a pod of the CronJob's Job after the CronJob: its service, and the entrypoint the policy lists", func() {
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-29412345",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: cronJob.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
			Spec: batchv1.JobSpec{Template: template()},
		}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		p := admit(job)
		Expect(p.Annotations).To(HaveKeyWithValue(annotations.InjectedStatus, ns+"/batch"))
		Expect(p.Spec.InitContainers).To(HaveLen(1))
		Expect(p.Spec.InitContainers[0].Args).To(Equal(proxyArgs("nightly", true)))
	})

	It("names the proxy of a run started by hand from the CronJob (any name, owned by it) after the CronJob, once the cache has the Job", func() {
		// kubectl create job --from=cronjob/nightly nightly-manual sets the CronJob as controller.
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly-manual",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: cronJob.UID, Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true)}}},
			Spec: batchv1.JobSpec{Template: template()},
		}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() string { cj, _ := gateWebhooks.Index.CronJobOf(ns, "nightly-manual"); return cj }, cacheWait).Should(Equal("nightly"))
		p := admit(job)
		Expect(p.Spec.InitContainers).To(HaveLen(1))
		Expect(p.Spec.InitContainers[0].Args).To(Equal(proxyArgs("nightly", true)))
	})

	It("keeps a Job no CronJob of that name made as its own workload, even with a timestamp-like suffix", func() {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "migrate-29412345"}, Spec: batchv1.JobSpec{Template: template()}}
		Expect(k8sClient.Create(ctx, job)).To(Succeed())
		Eventually(func() []string { return indexedKinds(ns) }, cacheWait).Should(ConsistOf("CronJob nightly", "Job migrate-29412345"))
		p := admit(job)
		Expect(p.Spec.InitContainers).To(HaveLen(1))
		Expect(p.Spec.InitContainers[0].Args).To(Equal(proxyArgs("migrate-29412345", false)))
	})
})
