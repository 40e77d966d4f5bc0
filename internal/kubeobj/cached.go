package kubeobj

import (
	"maps"
	"strings"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// CachedWorkload is how the manager's cache holds a templated workload of workload.Kinds (a
// Deployment, StatefulSet, DaemonSet, CronJob, or a Job or ReplicaSet no controller owns:
// TrimForCache returns one): the workload's kind and key and its pod template's labels and the
// annotations retrycap reads (KeepTemplateAnnotation), nothing else. A typed appsv1.Deployment
// is 1,232 bytes even with an empty spec: at 20,000 workloads that struct alone was a third of
// the manager's live heap; this one is 96 (and its labels and annotations as workload.Pairs).
//
// Why it is safe: every reader of cached workloads goes through the workload index
// (kubeobj.FeedIndex reads the informers' events with WorkloadOf, which reads this type) or
// through WorkloadOf on an informer's object; no one gets a typed Deployment, StatefulSet or
// DaemonSet from the manager's cache (ListWorkloads is for the CLI's direct client and for a
// reconciler built without the index, never with CacheOptions). A Get or List of one from a
// cache built with CacheOptions fails with controller-runtime's "cache had type
// *kubeobj.CachedWorkload" error instead of returning a hollow object. The informer needs only
// the object's key (meta.Accessor: GetObjectMeta), which this type provides.
type CachedWorkload struct {
	// Kind is a templated kind of workload.Kinds (workload.KindDeployment, ..., KindCronJob).
	Kind string
	// Namespace and Name are the key (no uid or resourceVersion: nothing reads them, and the
	// informer keeps its own resourceVersion).
	Namespace, Name string
	// Labels and Annotations are the pod template's, in the builder's compact form
	// (workload.Pairs: sorted pairs in one slice, not Go maps of ~330 bytes each), shared with
	// the workload index (immutable). Annotations holds only what KeepTemplateAnnotation keeps.
	Labels, Annotations workload.Pairs
	// Extra is what the graph reads of the template's spec, nil when it reads nothing there
	// (most workloads: one pointer, not 96 bytes of fields in every cached workload).
	Extra *CachedSpec
}

// CachedSpec is what the graph reads of a pod template's spec.
type CachedSpec struct {
	// AWS is the AWS SDKs' retry variables of the containers (AWS_MAX_ATTEMPTS,
	// AWS_RETRY_MODE, of the container giving the most tries, and the container a fix names:
	// workload.AWSEnvFor), the only
	// environment the graph reads.
	AWS workload.AWSEnv
	// Proxies are the mesh proxy containers of the template (workload.ProxiesOf), the only
	// containers the mesh layers read (an already injected manifest is meshed).
	Proxies []string
}

// Workload is c as the shared builder's workload. The pairs are shared, not copied.
func (c *CachedWorkload) Workload() workload.Workload {
	w := workload.Workload{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name, Labels: c.Labels, Annotations: c.Annotations}
	if c.Extra != nil {
		w.AWS, w.Proxies = c.Extra.AWS, c.Extra.Proxies
	}
	return w
}

// GetObjectKind is runtime.Object's: the kind and its group version (workload.Kinds).
func (c *CachedWorkload) GetObjectKind() schema.ObjectKind { return typeMetaOf(c.Kind) }

func typeMetaOf(kind string) *metav1.TypeMeta {
	k, _ := workload.KindOf(kind)
	return &metav1.TypeMeta{APIVersion: k.APIVersion(), Kind: kind}
}

// OwnedObject is how the manager's cache holds a Job or ReplicaSet a controller owns
// (TrimForCache): its key alone (and, for a CronJob's Job, the CronJob's name), no workload
// (WorkloadOf reads it as none). Its owner (the
// CronJob, the Deployment) is the workload; the informer still needs the object to follow its
// lifecycle (adopted, orphaned, deleted).
type OwnedObject struct {
	// Kind is workload.KindJob or KindReplicaSet.
	Kind, Namespace, Name string
	// CronJob is, for a Job a CronJob controls, that CronJob's name: the workload its pods
	// belong to (the injector asks the index, index.Index.CronJobOf); "" otherwise.
	CronJob string
}

// GetObjectKind is runtime.Object's.
func (o *OwnedObject) GetObjectKind() schema.ObjectKind { return typeMetaOf(o.Kind) }

// DeepCopyObject is runtime.Object's.
func (o *OwnedObject) DeepCopyObject() runtime.Object {
	out := *o
	return &out
}

// GetObjectMeta is metav1.ObjectMetaAccessor's: the key, as CachedWorkload's.
func (o *OwnedObject) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}
}

// DeepCopyObject is runtime.Object's. The pairs are immutable: shared.
func (c *CachedWorkload) DeepCopyObject() runtime.Object {
	out := *c
	return &out
}

// GetObjectMeta is metav1.ObjectMetaAccessor's, what meta.Accessor (and so the informer's key
// and namespace index functions) reads: a fresh ObjectMeta with the key.
func (c *CachedWorkload) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}
}

// KeepTemplateAnnotation reports whether the cache keeps a pod-template annotation: retrycap's
// own (retrycap.dev/...: the service name and upstreams the graph reads), the mesh injection
// switches the mesh layers read (mesh.Set.InIstio, InLinkerd, Dapr's and Consul's; Kuma's are
// labels, mesh.KumaWillInject) and the marks of a template already injected
// (sidecar.istio.io/status, linkerd.io/proxy-version, kuma.io/sidecar-injected: presence only,
// so the cache keeps them with an empty value, see markOnly). Any other (prometheus.io/...,
// checksums, tooling) is read by nothing in retrycap, so a change to it is no change to the
// index either.
func KeepTemplateAnnotation(key string) bool {
	return strings.HasPrefix(key, retrycapPrefix) || key == mesh.IstioInjectAnnotation || key == mesh.LinkerdInject ||
		key == mesh.DaprEnabled || key == mesh.DaprAppID ||
		key == mesh.ConsulConnectInject || markOnly(key)
}

// markOnly: an annotation whose presence alone is read. sidecar.istio.io/status holds a JSON
// list of what Istio injected (a few hundred bytes per workload); the cache keeps the key.
func markOnly(key string) bool {
	return key == mesh.IstioSidecarStatus || key == mesh.LinkerdProxyVersion || key == mesh.KumaSidecarInjected
}

// retrycapPrefix starts every retrycap annotation (annotations.Service, Upstreams, Inject, ...).
const retrycapPrefix = "retrycap.dev/"

// cachedWorkload is the stub of a workload of kind kind.
func cachedWorkload(kind string, meta metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec) *CachedWorkload {
	c := &CachedWorkload{Kind: kind, Namespace: intern(meta.Namespace), Name: meta.Name}
	if x := (CachedSpec{AWS: workload.AWSEnvFor(&tmpl.Spec, tmpl.Annotations[annotations.Upstreams]), Proxies: workload.ProxiesOf(&tmpl.Spec)}); !x.AWS.Equal(workload.AWSEnv{}) || len(x.Proxies) > 0 {
		c.Extra = &x
	}
	c.Labels = workload.PairsOfFunc(len(tmpl.Labels), maps.All(tmpl.Labels), func(k, v string) (string, string, bool) {
		if v == c.Name {
			// app.kubernetes.io/name is often the workload's name: share that string rather
			// than intern a value no other workload has.
			return intern(k), c.Name, true
		}
		return intern(k), intern(v), true
	})
	c.Annotations = workload.PairsOfFunc(0, maps.All(tmpl.Annotations), func(k, v string) (string, string, bool) {
		if markOnly(k) {
			v = ""
		}
		return intern(k), v, KeepTemplateAnnotation(k)
	})
	return c
}

// intern returns the canonical copy of s: label keys (app.kubernetes.io/name, team), common
// values (a part-of, a version) and namespaces repeat across thousands of workloads, and each
// decoded object carries its own copy. unique's table holds its entries weakly, so names that
// go are forgotten; a string not yet shared costs one lookup.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}
