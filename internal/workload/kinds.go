package workload

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Kinds of workloads.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
	KindReplicaSet  = "ReplicaSet"
	KindJob         = "Job"
	KindCronJob     = "CronJob"
	KindPod         = "Pod"
)

// KindInfo is one kind of workload as the API names it and where its pod template is. Kinds is
// the one table of them: the reader of each side (analyze's manifests, the manager's cache, the
// gate's admission request, the fix's patch) takes the kind's API version, resource and
// template path from here, so adding a kind is one row here and one case in TemplateOf.
type KindInfo struct {
	Kind, Group, Version string
	// Resource is the plural the webhook rules and RBAC name ("cronjobs").
	Resource string
	// TemplatePath are the fields from the object's root to its pod template
	// (["spec", "jobTemplate", "spec", "template"]); nil for a Pod, whose own metadata is read.
	TemplatePath []string
	// OwnedIsCovered: an object of this kind that a controller owns is no workload of its own
	// (a Deployment's ReplicaSet, a CronJob's Job, a ReplicaSet's Pod): the controller made it
	// from its own template and recreates or reverts it, so its owner is what is judged and
	// counted. A Deployment, StatefulSet, DaemonSet or CronJob an operator owns is still judged:
	// no kind retrycap reads stands above it.
	OwnedIsCovered bool
	// New makes an empty typed object of the kind, NewList an empty typed list of them.
	New, NewList func() runtime.Object
}

// APIVersion is "batch/v1" ("v1" for the core group).
func (k KindInfo) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// TemplatePointer is the JSON pointer of the pod template's metadata annotations' parent, the
// template's metadata: "/spec/jobTemplate/spec/template/metadata" ("/metadata" for a Pod).
func (k KindInfo) TemplatePointer() string {
	if len(k.TemplatePath) == 0 {
		return "/metadata"
	}
	return "/" + strings.Join(k.TemplatePath, "/") + "/metadata"
}

// TemplateField is the pod template's path as kubectl explain names it,
// "spec.jobTemplate.spec.template" ("" for a Pod): what a message tells a user to edit.
func (k KindInfo) TemplateField() string { return strings.Join(k.TemplatePath, ".") }

// Kinds are the kinds of workloads retrycap reads, in the order the status and listings use.
var Kinds = []KindInfo{
	{Kind: KindDeployment, Group: "apps", Version: "v1", Resource: "deployments", TemplatePath: []string{"spec", "template"},
		New:     func() runtime.Object { return &appsv1.Deployment{} },
		NewList: func() runtime.Object { return &appsv1.DeploymentList{} }},
	{Kind: KindStatefulSet, Group: "apps", Version: "v1", Resource: "statefulsets", TemplatePath: []string{"spec", "template"},
		New:     func() runtime.Object { return &appsv1.StatefulSet{} },
		NewList: func() runtime.Object { return &appsv1.StatefulSetList{} }},
	{Kind: KindDaemonSet, Group: "apps", Version: "v1", Resource: "daemonsets", TemplatePath: []string{"spec", "template"},
		New:     func() runtime.Object { return &appsv1.DaemonSet{} },
		NewList: func() runtime.Object { return &appsv1.DaemonSetList{} }},
	{Kind: KindReplicaSet, Group: "apps", Version: "v1", Resource: "replicasets", TemplatePath: []string{"spec", "template"}, OwnedIsCovered: true,
		New:     func() runtime.Object { return &appsv1.ReplicaSet{} },
		NewList: func() runtime.Object { return &appsv1.ReplicaSetList{} }},
	{Kind: KindJob, Group: "batch", Version: "v1", Resource: "jobs", TemplatePath: []string{"spec", "template"}, OwnedIsCovered: true,
		New:     func() runtime.Object { return &batchv1.Job{} },
		NewList: func() runtime.Object { return &batchv1.JobList{} }},
	{Kind: KindCronJob, Group: "batch", Version: "v1", Resource: "cronjobs", TemplatePath: []string{"spec", "jobTemplate", "spec", "template"},
		New:     func() runtime.Object { return &batchv1.CronJob{} },
		NewList: func() runtime.Object { return &batchv1.CronJobList{} }},
	{Kind: KindPod, Group: "", Version: "v1", Resource: "pods", OwnedIsCovered: true,
		New:     func() runtime.Object { return &corev1.Pod{} },
		NewList: func() runtime.Object { return &corev1.PodList{} }},
}

// KindOf is the row of Kinds for kind ("CronJob"); false for a kind retrycap does not read.
func KindOf(kind string) (KindInfo, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return KindInfo{}, false
}

// KindOfGroup is the row of Kinds for a group and kind (an admission request's); false for a
// kind retrycap does not read, or one of that name in another group (Knative's Service).
func KindOfGroup(group, kind string) (KindInfo, bool) {
	k, ok := KindOf(kind)
	if !ok || k.Group != group {
		return KindInfo{}, false
	}
	return k, true
}

// TemplateOf is the kind, own metadata and pod template of a templated workload object (every
// kind of Kinds but Pod); false for any other object. The template is the object's own, not a
// copy.
func TemplateOf(obj runtime.Object) (string, *metav1.ObjectMeta, *corev1.PodTemplateSpec, bool) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return KindDeployment, &o.ObjectMeta, &o.Spec.Template, true
	case *appsv1.StatefulSet:
		return KindStatefulSet, &o.ObjectMeta, &o.Spec.Template, true
	case *appsv1.DaemonSet:
		return KindDaemonSet, &o.ObjectMeta, &o.Spec.Template, true
	case *appsv1.ReplicaSet:
		return KindReplicaSet, &o.ObjectMeta, &o.Spec.Template, true
	case *batchv1.Job:
		return KindJob, &o.ObjectMeta, &o.Spec.Template, true
	case *batchv1.CronJob:
		return KindCronJob, &o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template, true
	}
	return "", nil, nil, false
}

// Covered reports whether an object of kind with metadata meta is no workload of its own: its
// kind is OwnedIsCovered and a controller owns it.
func Covered(kind string, meta metav1.Object) bool {
	k, ok := KindOf(kind)
	return ok && k.OwnedIsCovered && metav1.GetControllerOf(meta) != nil
}

// FromTemplate is the workload of a templated object of kind kind, from its own metadata and
// its pod template's metadata and spec; false when the object is Covered (a Deployment's
// ReplicaSet, a CronJob's Job) or kind is not a templated kind of Kinds. The gate calls it with
// what it decoded of an admission request; FromObject with a typed object.
func FromTemplate(kind string, meta, tmpl metav1.ObjectMeta, spec *corev1.PodSpec) (Workload, bool) {
	k, ok := KindOf(kind)
	if !ok || k.TemplatePath == nil || Covered(kind, &meta) {
		return Workload{}, false
	}
	return fromTemplate(kind, meta, tmpl, spec), true
}
