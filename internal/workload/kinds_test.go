package workload

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestKinds pins each kind's API version, resource, template path (the JSON pointer the gate's
// patch writes under) and whether a controller's ownership covers it.
func TestKinds(t *testing.T) {
	tests := []struct {
		kind, apiVersion, resource, pointer string
		ownedIsCovered                      bool
	}{
		{KindDeployment, "apps/v1", "deployments", "/spec/template/metadata", false},
		{KindStatefulSet, "apps/v1", "statefulsets", "/spec/template/metadata", false},
		{KindDaemonSet, "apps/v1", "daemonsets", "/spec/template/metadata", false},
		{KindReplicaSet, "apps/v1", "replicasets", "/spec/template/metadata", true},
		{KindJob, "batch/v1", "jobs", "/spec/template/metadata", true},
		{KindCronJob, "batch/v1", "cronjobs", "/spec/jobTemplate/spec/template/metadata", false},
		{KindPod, "v1", "pods", "/metadata", true},
	}
	if len(tests) != len(Kinds) {
		t.Fatalf("Kinds has %d rows, the test %d", len(Kinds), len(tests))
	}
	for i, tt := range tests {
		k, ok := KindOf(tt.kind)
		if !ok {
			t.Fatalf("KindOf(%q): not found", tt.kind)
		}
		if Kinds[i].Kind != tt.kind || k.APIVersion() != tt.apiVersion || k.Resource != tt.resource ||
			k.TemplatePointer() != tt.pointer || k.OwnedIsCovered != tt.ownedIsCovered ||
			"/"+strings.ReplaceAll(k.TemplateField(), ".", "/")+"/metadata" != strings.Replace(tt.pointer, "//", "/", 1) && k.TemplatePath != nil {
			t.Errorf("%s: got row %d %s %s %s %s %v", tt.kind, i, Kinds[i].Kind, k.APIVersion(), k.Resource, k.TemplatePointer(), k.OwnedIsCovered)
		}
		if g := k.New().GetObjectKind(); g == nil {
			t.Errorf("%s: New", tt.kind)
		}
	}
	for _, c := range []struct{ group, kind string }{{"apps", "CronJob"}, {"batch", "Deployment"}, {"serving.knative.dev", "Service"}, {"argoproj.io", "Rollout"}, {"", "Deployment"}} {
		if k, ok := KindOfGroup(c.group, c.kind); ok {
			t.Errorf("KindOfGroup(%q, %q) = %+v, want none", c.group, c.kind, k)
		}
	}
	if k, ok := KindOfGroup("batch", "CronJob"); !ok || k.Kind != KindCronJob {
		t.Errorf("KindOfGroup(batch, CronJob) = %+v, %v", k, ok)
	}
}

// TestTemplateOf: each templated kind's template is the one at its TemplatePath, the object's
// own (not a copy): the cache transform and the gate read the annotations written there.
func TestTemplateOf(t *testing.T) {
	cj := &batchv1.CronJob{}
	job := &batchv1.Job{}
	rs := &appsv1.ReplicaSet{}
	for _, c := range []struct {
		obj  runtime.Object
		kind string
		tmpl *corev1.PodTemplateSpec
	}{
		{cj, KindCronJob, &cj.Spec.JobTemplate.Spec.Template},
		{job, KindJob, &job.Spec.Template},
		{rs, KindReplicaSet, &rs.Spec.Template},
	} {
		kind, _, tmpl, ok := TemplateOf(c.obj)
		if !ok || kind != c.kind || tmpl != c.tmpl {
			t.Errorf("TemplateOf(%T) = %q, %p, %v; want %q, %p", c.obj, kind, tmpl, ok, c.kind, c.tmpl)
		}
	}
	if _, _, _, ok := TemplateOf(&corev1.Pod{}); ok {
		t.Error("TemplateOf(Pod): a Pod has no template")
	}
}

// TestFromTemplate is the gate's entry: a kind outside Kinds, a Pod (no template) and an owned
// Job are no workload.
func TestFromTemplate(t *testing.T) {
	tmpl := metav1.ObjectMeta{Annotations: map[string]string{"retrycap.dev/upstreams": "payment=9"}}
	meta := metav1.ObjectMeta{Namespace: "batch", Name: "nightly"}
	if w, ok := FromTemplate(KindCronJob, meta, tmpl, &corev1.PodSpec{}); !ok || w.String() != "CronJob batch/nightly" || w.Annotations.Get("retrycap.dev/upstreams") != "payment=9" {
		t.Errorf("CronJob: %+v, %v", w, ok)
	}
	for _, kind := range []string{"Rollout", KindPod} {
		if w, ok := FromTemplate(kind, meta, tmpl, &corev1.PodSpec{}); ok {
			t.Errorf("%s: %+v", kind, w)
		}
	}
	ctrl := true
	meta.OwnerReferences = []metav1.OwnerReference{{Kind: "CronJob", Name: "nightly", Controller: &ctrl}}
	if w, ok := FromTemplate(KindJob, meta, tmpl, &corev1.PodSpec{}); ok {
		t.Errorf("a CronJob's Job: %+v", w)
	}
}
