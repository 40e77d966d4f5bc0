package workload

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podTemplateHashLabel is the label a Deployment's ReplicaSet adds to its pods; the ReplicaSet is
// named "<deployment>-<hash>".
const podTemplateHashLabel = "pod-template-hash"

// ForPod is the workload a pod belongs to, named as the graph names it, without an API call (so
// admission can use it for a pod that is not stored yet): a pod whose controller is a ReplicaSet
// named "<name>-<pod-template-hash>" belongs to Deployment <name>; one a StatefulSet or DaemonSet
// controls belongs to it; any other controller (a Job, a bare ReplicaSet) names the workload
// itself, with its own kind; a bare Pod is the Pod, named by its name or, before the API server
// has generated one, its generateName without the trailing "-". Labels and annotations are the
// pod's own. A CronJob's pod is its Job's here: ForPodIn tells the two apart.
func ForPod(pod *corev1.Pod) Workload {
	return ForPodIn(pod, nil)
}

// ForPodIn is ForPod with the CronJobs of the pod's namespace: a pod whose controller is a Job
// that cronJobOf places under a CronJob (nil: none) belongs to that CronJob, the workload the
// gate judged (the Job it made is covered, workload.Covered). The pod cannot say so itself: its
// labels are its template's and the Job controller's (batch.kubernetes.io/job-name), none names
// the CronJob; the caller knows the Job (CronJobOfJob).
func ForPodIn(pod *corev1.Pod, cronJobOf func(job string) (string, bool)) Workload {
	w := Workload{Kind: KindPod, Namespace: pod.Namespace, Name: pod.Name, Labels: PairsOf(pod.Labels), Annotations: PairsOf(pod.Annotations)}
	if w.Name == "" {
		w.Name = strings.TrimSuffix(pod.GenerateName, "-")
	}
	owner := metav1.GetControllerOf(pod)
	if owner == nil {
		return w
	}
	w.Kind, w.Name = owner.Kind, owner.Name
	if owner.Kind == "ReplicaSet" {
		if hash := pod.Labels[podTemplateHashLabel]; hash != "" && strings.HasSuffix(owner.Name, "-"+hash) {
			w.Kind, w.Name = KindDeployment, strings.TrimSuffix(owner.Name, "-"+hash)
		}
	}
	if owner.Kind == KindJob && cronJobOf != nil {
		if cj, ok := cronJobOf(owner.Name); ok {
			w.Kind, w.Name = KindCronJob, cj
		}
	}
	return w
}

// CronJobOfJob is the CronJob that Job job of a namespace belongs to: owner, the CronJob that
// controls the Job as the manager's cache holds it (kubeobj.OwnedObject), when it is known;
// else, the Job not yet in the cache (its first pod can be admitted before the Job's event
// arrives), by its name (CronJobOf) when has says the namespace holds that CronJob and no Job of
// that name of its own (a Job no controller owns is a workload, judged itself). A run started
// with kubectl create job --from=cronjob/NAME, named freely, is known by its owner only.
func CronJobOfJob(job, owner string, has func(kind, name string) bool) (string, bool) {
	if owner != "" {
		return owner, true
	}
	cj, ok := CronJobOf(job)
	if !ok || has(KindJob, job) || !has(KindCronJob, cj) {
		return "", false
	}
	return cj, true
}

// CronJobOf is the CronJob whose name a Job's name starts with, when the Job is named as the
// CronJob controller names the Jobs it makes: "<cronjob>-<scheduled time in minutes since the
// epoch>" (kubernetes v1.37.2 pkg/controller/cronjob: getJobName, getTimeHashInMinutes; 8 digits
// until the year 2160). The suffix may have 8 to 10 digits, as Istio's injector reads a Job's pod
// (istio pkg/kube/util.go GetDeployMetaFromPod, `(.+)-\d{8,10}$`), so that Istio's
// source_workload and the proxy's --service name a CronJob's pod alike. A name is only a hint:
// CronJobOfJob also asks that the namespace hold that CronJob.
func CronJobOf(job string) (string, bool) {
	i := strings.LastIndexByte(job, '-')
	if i <= 0 {
		return "", false
	}
	digits := job[i+1:]
	if len(digits) < 8 || len(digits) > 10 {
		return "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return job[:i], true
}
