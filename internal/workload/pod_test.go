package workload

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestForPod(t *testing.T) {
	yes := true
	owned := func(kind, name string, hash string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: name + "-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, Controller: &yes}}}}
		if hash != "" {
			p.Labels = map[string]string{podTemplateHashLabel: hash}
		}
		return p
	}
	notController := owned("ReplicaSet", "gateway-7d9f8c", "7d9f8c")
	notController.Name = "loose"
	notController.OwnerReferences[0].Controller = nil
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"bare pod", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "probe"}}, "Pod shop/probe"},
		{"bare pod with generateName", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: "probe-"}}, "Pod shop/probe"},
		{"deployment pod", owned("ReplicaSet", "gateway-7d9f8c", "7d9f8c"), "Deployment shop/gateway"},
		{"replicaset without the hash label", owned("ReplicaSet", "gateway-7d9f8c", ""), "ReplicaSet shop/gateway-7d9f8c"},
		{"replicaset whose name does not end in the hash", owned("ReplicaSet", "gateway", "7d9f8c"), "ReplicaSet shop/gateway"},
		{"statefulset pod", owned("StatefulSet", "db", ""), "StatefulSet shop/db"},
		{"daemonset pod", owned("DaemonSet", "agent", ""), "DaemonSet shop/agent"},
		{"job pod", owned("Job", "migrate", ""), "Job shop/migrate"},
		{"owner that is not the controller", notController, "Pod shop/loose"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ForPod(tt.pod).String(); got != tt.want {
				t.Errorf("ForPod = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestForPodInCronJob(t *testing.T) {
	yes := true
	jobPod := func(job string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", GenerateName: job + "-",
			Labels:          map[string]string{"batch.kubernetes.io/job-name": job, "job-name": job},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job, Controller: &yes}}}}
	}
	// The namespace holds CronJobs nightly and report-v2 and a Job of its own, backup-20260101;
	// the cache knows nightly-manual (kubectl create job --from=cronjob/nightly) as nightly's.
	has := func(kind, name string) bool {
		return kind == KindCronJob && (name == "nightly" || name == "report-v2" || name == "backup") || kind == KindJob && name == "backup-20260101"
	}
	cronJobs := func(job string) (string, bool) {
		owner := map[string]string{"nightly-manual": "nightly"}[job]
		return CronJobOfJob(job, owner, has)
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		has  func(string) (string, bool)
		want string
	}{
		{"a CronJob's Job (minutes since the epoch)", jobPod("nightly-29412345"), cronJobs, "CronJob shop/nightly"},
		{"a name with dashes and 10 digits", jobPod("report-v2-1764633600"), cronJobs, "CronJob shop/report-v2"},
		{"no such CronJob in the namespace", jobPod("migrate-29412345"), cronJobs, "Job shop/migrate-29412345"},
		{"CronJobs unknown (ForPod)", jobPod("nightly-29412345"), nil, "Job shop/nightly-29412345"},
		{"7 digits: not the controller's", jobPod("nightly-2941234"), cronJobs, "Job shop/nightly-2941234"},
		{"11 digits", jobPod("nightly-29412345678"), cronJobs, "Job shop/nightly-29412345678"},
		{"a suffix that is not all digits", jobPod("nightly-2941234x"), cronJobs, "Job shop/nightly-2941234x"},
		{"a manual run the cache knows as the CronJob's", jobPod("nightly-manual"), cronJobs, "CronJob shop/nightly"},
		{"a run with its own name the cache does not know", jobPod("nightly-manual2"), cronJobs, "Job shop/nightly-manual2"},
		{"a Job of its own named like a run, beside the CronJob", jobPod("backup-20260101"), cronJobs, "Job shop/backup-20260101"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ForPodIn(tt.pod, tt.has)
			if got := w.String(); got != tt.want {
				t.Errorf("ForPodIn = %q, want %q", got, tt.want)
			}
			// The pod's own labels stay: policies select the CronJob's pods by its template's.
			if got := w.Labels.Get("job-name"); got != tt.pod.Labels["job-name"] {
				t.Errorf("label job-name = %q, want the pod's %q", got, tt.pod.Labels["job-name"])
			}
		})
	}
}

func TestCronJobOf(t *testing.T) {
	for job, want := range map[string]string{
		"nightly-29412345": "nightly", "a-b-1764633600": "a-b", "x-123456789": "x",
		"-29412345": "", "nightly": "", "nightly-": "", "nightly-1234567": "", "nightly-12345678901": "", "nightly-1234567a": "",
	} {
		got, ok := CronJobOf(job)
		if got != want || ok != (want != "") {
			t.Errorf("CronJobOf(%q) = %q, %v; want %q", job, got, ok, want)
		}
	}
}
