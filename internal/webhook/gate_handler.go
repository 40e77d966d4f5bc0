package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// cacheSyncWait bounds how long a request that arrives before the informers have synced waits
// for them (the webhook server starts before the caches). Below the configurations'
// timeoutSeconds (5), so the client gets the gate's own message rather than a timeout.
const cacheSyncWait = 3 * time.Second

// waitSynced waits, up to cacheSyncWait, for the manager's cache (hasSynced) before a gate
// judges with it; not synced by then, the request is answered 503 in gate's name (ok false).
func waitSynced(ctx context.Context, hasSynced func() bool, gate string) (admission.Response, bool) {
	if hasSynced() {
		return admission.Response{}, true
	}
	wctx, cancel := context.WithTimeout(ctx, cacheSyncWait)
	defer cancel()
	if toolscache.WaitForCacheSync(wctx.Done(), hasSynced) {
		return admission.Response{}, true
	}
	return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("%s: the manager's workload cache has not synced yet; retry shortly", gate)), false
}

// WorkloadGate is the admission.Handler of the workload gate (GatePath): it reads the request,
// the namespace's RetryPolicies, the ClusterRetryPolicies and the workloads from the manager's
// cache, and applies gate.Decide.
type WorkloadGate struct {
	policies client.Reader // the manager's cache-backed client: no API call per request
	index    *index.Index
	skip     map[string]bool
	log      logr.Logger
	// mesh is the mesh watcher (nil: no mesh layers): the gate counts its current Set's layers,
	// as the controller and the mesh gate do.
	mesh MeshSource
}

// meshSet is the mesh watcher's current Set (nil without one).
func (g *WorkloadGate) meshSet() *mesh.Set {
	if g.mesh == nil {
		return nil
	}
	return g.mesh.Set()
}

// Handle implements admission.Handler.
func (g *WorkloadGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	if g.skip[req.Namespace] {
		return admission.Allowed("retrycap does not gate namespace " + req.Namespace)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if req.SubResource != "" {
		// The configurations send no subresource; one whose rules were widened ("deployments/*")
		// must not judge a status write (the API server keeps the stored spec and annotations)
		// or a Scale (not a workload) as the workload.
		return admission.Allowed("retrycap does not gate the " + req.SubResource + " subresource: it cannot change a retrycap annotation")
	}
	dec, err := decodeWorkload(req.Kind, req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err))
	}
	incoming := dec.workload
	if !dec.ok {
		// A Pod a controller owns: its workload was judged when it was created.
		return admission.Allowed("")
	}
	generated := fillIdentity(&incoming, req)
	var old *workload.Workload
	var oldOwn map[string]string
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		o, err := decodeWorkload(req.Kind, req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored %s %s/%s: %w", req.Kind.Kind, req.Namespace, req.Name, err))
		}
		if o.ok {
			fillIdentity(&o.workload, req)
			old, oldOwn = &o.workload, o.own
		}
	}

	if resp, ok := waitSynced(ctx, g.index.HasSynced, "retrycap gate"); !ok {
		return resp
	}
	var list v1alpha1.RetryPolicyList
	if err := g.policies.List(ctx, &list, client.InNamespace(incoming.Namespace)); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("retrycap gate: listing the RetryPolicies of namespace %s from the cache: %w", incoming.Namespace, err))
	}
	var clusterList v1alpha1.ClusterRetryPolicyList
	if err := g.policies.List(ctx, &clusterList); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("retrycap gate: listing the ClusterRetryPolicies from the cache: %w", err))
	}
	// No policy: Decide returns at once, with any warning about misplaced annotations.
	policies := make([]*v1alpha1.RetryPolicy, len(list.Items))
	for i := range list.Items {
		policies[i] = &list.Items[i]
	}
	var clusterPolicies []*v1alpha1.ClusterRetryPolicy
	if len(clusterList.Items) > 0 {
		// A cluster policy selects by the namespace's labels: a namespace created a moment ago
		// (kubectl apply of a Namespace and its Deployments) may not have reached the index yet,
		// and judging without its labels would let the deploy past the cluster policies.
		if err := g.waitForNamespace(ctx, incoming.Namespace); err != nil {
			return admission.Errored(http.StatusServiceUnavailable, err)
		}
		clusterPolicies = make([]*v1alpha1.ClusterRetryPolicy, len(clusterList.Items))
		for i := range clusterList.Items {
			clusterPolicies[i] = &clusterList.Items[i]
		}
	}
	// The index reads only the part of the namespaces that can change the verdict, and only if
	// some policy must judge the request.
	d := gate.Decide(gate.Input{Policies: policies, ClusterPolicies: clusterPolicies, Source: g.index.For(incoming), Incoming: incoming, Old: old,
		ObjectAnnotations: dec.own, OldObjectAnnotations: oldOwn, JobTemplateAnnotations: dec.jobTemplate, Mesh: g.meshSet()})
	for _, err := range d.PolicyErrors {
		g.log.Error(err, "ignoring a policy the gate cannot evaluate", "workload", incoming.String())
	}
	if generated != "" {
		d = renameStandIn(d, incoming.Name, generated)
	}
	return g.respond(req, d)
}

// renameStandIn says the generateName object's name as the user can read it: its stand-in
// ("web-00000") is written "web-<generated>" in the message and warnings.
func renameStandIn(d gate.Decision, standIn, generated string) gate.Decision {
	d.Message = strings.ReplaceAll(d.Message, standIn, generated)
	ws := make([]string, len(d.Warnings))
	for i, w := range d.Warnings {
		ws[i] = strings.ReplaceAll(w, standIn, generated)
	}
	d.Warnings = ws
	return d
}

func (g *WorkloadGate) respond(req admission.Request, d gate.Decision) admission.Response {
	var patch []jsonpatch.JsonPatchOperation
	if d.Rewrite != nil {
		patch = annotationPatch(req.Kind.Kind, d.Rewrite)
	}
	return verdictResponse(d.Allowed, d.Message, gate.FitWarnings(d.Warnings, gate.WarningBudget), patch)
}

// verdictResponse is the response of either gate's verdict: denied with message, or allowed
// with patch (a JSON patch; nil: none); with the warnings either way.
func verdictResponse(allowed bool, message string, warnings []string, patch []jsonpatch.JsonPatchOperation) admission.Response {
	if !allowed {
		resp := admission.Denied(message)
		resp.Warnings = warnings
		return resp
	}
	resp := admission.Allowed("")
	resp.Warnings = warnings
	if len(patch) > 0 {
		resp.Patches = patch
		pt := admissionv1.PatchTypeJSONPatch
		resp.PatchType = &pt
	}
	return resp
}

// annotationPatch sets the two annotations and nothing else. A JSON patch of just these paths,
// rather than a diff against a re-marshalled typed object, so that fields this build of
// retrycap does not know are never dropped. The upstreams annotation exists (it was rewritten),
// so the annotations map exists too. The path is the kind's pod template's
// (workload.KindInfo.TemplatePointer: a CronJob's is under spec.jobTemplate.spec.template); nil
// for a kind retrycap does not read (the gate never rewrites one).
func annotationPatch(kind string, rw *gate.Rewrite) []jsonpatch.JsonPatchOperation {
	k, ok := workload.KindOf(kind)
	if !ok {
		return nil
	}
	base := k.TemplatePointer() + "/annotations/"
	return []jsonpatch.JsonPatchOperation{
		{Operation: "replace", Path: base + escapeJSONPointer(annotations.Upstreams), Value: rw.Upstreams},
		// "add" on an object member replaces an existing value.
		{Operation: "add", Path: base + escapeJSONPointer(annotations.RewrittenFrom), Value: rw.RewrittenFrom},
	}
}

func escapeJSONPointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// objectMetaOnly and templated decode only what the gate reads: a Deployment's spec is large, and
// a Pod a ReplicaSet owns must be let through fast.
// Of the pod spec, the containers' names and environment only (podSpecLite): the AWS SDK's
// retry variables and the mesh proxy containers are inputs of the graph, read as the manager's
// cache keeps them (kubeobj.CachedSpec), so the gate and the status count the same layers.
type objectMetaOnly struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     podSpecLite       `json:"spec"`
}

type templated struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Template templateLite `json:"template"`
		// JobTemplate is a CronJob's: its pod template is spec.jobTemplate.spec.template; its
		// own metadata is the Jobs' (retrycap annotations there are warned of).
		JobTemplate struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
			Spec     struct {
				Template templateLite `json:"template"`
			} `json:"spec"`
		} `json:"jobTemplate"`
	} `json:"spec"`
}

type templateLite struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     podSpecLite       `json:"spec"`
}

// template is the pod template at kind's path (workload.KindInfo.TemplatePath); an error for a
// path templated cannot hold (a row added to workload.Kinds without its decoding here).
func (t *templated) template(k workload.KindInfo) (*templateLite, error) {
	switch p := strings.Join(k.TemplatePath, "."); p {
	case "spec.template":
		return &t.Spec.Template, nil
	case "spec.jobTemplate.spec.template":
		return &t.Spec.JobTemplate.Spec.Template, nil
	default:
		return nil, fmt.Errorf("retrycap gate: no decoding of a %s's pod template at %s", k.Kind, p)
	}
}

type containerLite struct {
	Name string          `json:"name"`
	Env  []corev1.EnvVar `json:"env"`
}

type podSpecLite struct {
	InitContainers []containerLite `json:"initContainers"`
	Containers     []containerLite `json:"containers"`
}

// podSpec is the pod spec with only what podSpecLite holds.
func (p podSpecLite) podSpec() corev1.PodSpec {
	conv := func(cs []containerLite) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Env: c.Env}
		}
		return out
	}
	return corev1.PodSpec{InitContainers: conv(p.InitContainers), Containers: conv(p.Containers)}
}

// decoded is what the gate reads of an admission object.
type decoded struct {
	// workload is the object's workload (its pod template's labels and annotations); ok is false
	// for an object that is none (a kind retrycap does not read, or one a controller owns).
	workload workload.Workload
	ok       bool
	// own are the annotations of a templated workload's own metadata (nil for a Pod), and
	// jobTemplate those of a CronJob's spec.jobTemplate.metadata: where retrycap does not read
	// them, for the gate's warnings.
	own, jobTemplate map[string]string
}

// decodeWorkload reads the workload of a raw admission object, of a kind of workload.Kinds, through
// workload.FromTemplate or FromObject (the one place that says what a workload is: a Job or
// ReplicaSet a controller owns is not one), and the annotations of a templated workload's own
// metadata and of a CronJob's job template; not ok for such an owned object, or any other kind.
func decodeWorkload(gvk metav1.GroupVersionKind, raw []byte) (decoded, error) {
	if len(raw) == 0 {
		return decoded{}, fmt.Errorf("the request carries no object")
	}
	k, ok := workload.KindOfGroup(gvk.Group, gvk.Kind)
	if !ok {
		return decoded{}, nil
	}
	if k.TemplatePath == nil {
		var m objectMetaOnly
		if err := json.Unmarshal(raw, &m); err != nil {
			return decoded{}, err
		}
		w, ok := workload.FromObject(&corev1.Pod{ObjectMeta: m.Metadata, Spec: m.Spec.podSpec()})
		return decoded{workload: w, ok: ok}, nil
	}
	var t templated
	if err := json.Unmarshal(raw, &t); err != nil {
		return decoded{}, err
	}
	tmpl, err := t.template(k)
	if err != nil {
		return decoded{}, err
	}
	spec := tmpl.Spec.podSpec()
	w, ok := workload.FromTemplate(k.Kind, t.Metadata, tmpl.Metadata, &spec)
	d := decoded{workload: w, ok: ok, own: t.Metadata.Annotations}
	if k.Kind == workload.KindCronJob {
		d.jobTemplate = t.Spec.JobTemplate.Metadata.Annotations
	}
	return d, nil
}

// fillIdentity completes what a create may leave out of the object: its namespace (taken from
// the request path) and, for a name still to be generated (the API server generates it after the
// mutating webhooks), a stand-in. The stand-in is generateName (cut to 58 bytes, as the API
// server cuts it) and "00000", a suffix the API server's generator never makes (its alphabet has
// no 0): the stand-in "web" from "web-" was the key of a stored Deployment web, which the gate
// then left out of the graph (a generateName web- over the cap through web was admitted), and
// the service of a workload named by its name alone, which the stored web's callers then
// reached. fillIdentity returns how messages write the name: "web-<generated>" ("" for a named
// object).
func fillIdentity(w *workload.Workload, req admission.Request) string {
	if w.Namespace == "" {
		w.Namespace = req.Namespace
	}
	if w.Name == "" {
		w.Name = req.Name
	}
	if w.Name != "" {
		return ""
	}
	var m objectMetaOnly
	if json.Unmarshal(req.Object.Raw, &m) != nil || m.Metadata.GenerateName == "" {
		return ""
	}
	base := m.Metadata.GenerateName
	if len(base) > maxGeneratedBase {
		base = base[:maxGeneratedBase]
	}
	w.Name = base + standInSuffix
	return base + "<generated>"
}

// maxGeneratedBase is how much of generateName the API server keeps (63 - 5, its random
// suffix: k8s.io/apiserver/pkg/storage/names); standInSuffix is 5 characters its generator
// (alphabet "bcdfghjklmnpqrstvwxz2456789") never makes, so no generated name is the stand-in.
const (
	maxGeneratedBase = 58
	standInSuffix    = "00000"
)

// namespaceWait is how often waitForNamespace looks again.
const namespaceWait = 10 * time.Millisecond

// waitForNamespace waits, up to cacheSyncWait, until the index has namespace ns's labels.
func (g *WorkloadGate) waitForNamespace(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, cacheSyncWait)
	defer cancel()
	if !indexedNamespace(ctx, g.index, ns) {
		return fmt.Errorf("retrycap gate: namespace %s is not in the manager's cache yet (its labels decide which ClusterRetryPolicies apply); retry shortly", ns)
	}
	return nil
}

// indexedNamespace reports whether the index has namespace ns, polling until ctx ends: the
// Namespace informer may not have delivered a namespace created a moment ago.
func indexedNamespace(ctx context.Context, x *index.Index, ns string) bool {
	if _, ok := x.Namespace(ns); ok {
		return true
	}
	t := time.NewTicker(namespaceWait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			if _, ok := x.Namespace(ns); ok {
				return true
			}
		}
	}
}
