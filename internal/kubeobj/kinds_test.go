package kubeobj

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/retrycap/retrycap/internal/workload"
)

// TestTrimForCacheJobs: a CronJob, a Job and a ReplicaSet no controller owns are cached as the
// workload their template says (a CronJob's under spec.jobTemplate.spec.template), with their
// own group version; a CronJob's Job and a Deployment's ReplicaSet as an OwnedObject, which is
// no workload, so the owner is the one counted.
func TestTrimForCacheJobs(t *testing.T) {
	yes := true
	meta := metav1.ObjectMeta{Namespace: "batch", Name: "nightly"}
	owned := meta
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "1", Controller: &yes}}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{"app": "nightly"},
		Annotations: map[string]string{"retrycap.dev/upstreams": "payment=9", "prometheus.io/scrape": "true"},
	}}
	want := workload.Workload{Namespace: "batch", Name: "nightly",
		Labels: workload.PairsOf(map[string]string{"app": "nightly"}), Annotations: workload.PairsOf(map[string]string{"retrycap.dev/upstreams": "payment=9"})}
	tests := []struct {
		name       string
		obj        any
		kind       string // "" for an OwnedObject
		apiVersion string
	}{
		{"cronjob", &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, workload.KindCronJob, "batch/v1"},
		{"job", &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{Template: tmpl}}, workload.KindJob, "batch/v1"},
		{"replicaset", &appsv1.ReplicaSet{ObjectMeta: meta, Spec: appsv1.ReplicaSetSpec{Template: tmpl}}, workload.KindReplicaSet, "apps/v1"},
		{"cronjob's job", &batchv1.Job{ObjectMeta: owned, Spec: batchv1.JobSpec{Template: tmpl}}, "", "batch/v1"},
		{"deployment's replicaset", &appsv1.ReplicaSet{ObjectMeta: owned, Spec: appsv1.ReplicaSetSpec{Template: tmpl}}, "", "apps/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := TrimForCache(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			w, ok := WorkloadOf(out)
			if tt.kind == "" {
				o, isOwned := out.(*OwnedObject)
				if !isOwned || ok || o.Namespace != "batch" || o.Name != "nightly" {
					t.Fatalf("TrimForCache = %#v (workload %v); want an OwnedObject, no workload", out, ok)
				}
				// A Job keeps the CronJob that controls it (its pods are the CronJob's); nothing else does.
				if want := map[string]string{"cronjob's job": "nightly"}[tt.name]; o.CronJob != want {
					t.Errorf("CronJob %q, want %q", o.CronJob, want)
				}
				if got := o.GetObjectKind().GroupVersionKind().GroupVersion().String(); got != tt.apiVersion {
					t.Errorf("apiVersion %s, want %s", got, tt.apiVersion)
				}
				// A tombstone of it is no workload either.
				if _, ok := WorkloadOf(toolscache.DeletedFinalStateUnknown{Obj: out}); ok {
					t.Error("tombstone of an OwnedObject read as a workload")
				}
				return
			}
			c, isCached := out.(*CachedWorkload)
			if !isCached || !ok {
				t.Fatalf("TrimForCache = %#v; want a CachedWorkload", out)
			}
			if got := c.GetObjectKind().GroupVersionKind(); got.GroupVersion().String() != tt.apiVersion || got.Kind != tt.kind {
				t.Errorf("kind %v, want %s %s", got, tt.apiVersion, tt.kind)
			}
			want := want
			want.Kind = tt.kind
			if !reflect.DeepEqual(w, want) {
				t.Errorf("WorkloadOf = %+v\nwant %+v", w, want)
			}
		})
	}
}

// TestWatchedKinds: one informer per templated kind of workload.Kinds, and Pods as metadata.
func TestWatchedKinds(t *testing.T) {
	var got []string
	for _, o := range WatchedKinds() {
		switch o := o.(type) {
		case *metav1.PartialObjectMetadata:
			got = append(got, "meta:"+o.Kind)
		default:
			got = append(got, reflect.TypeOf(o).Elem().Name())
		}
	}
	want := []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "meta:Pod"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("WatchedKinds = %v, want %v", got, want)
	}
}
