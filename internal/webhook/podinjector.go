package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/inject"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/workload"
)

// PodInjectorPath serves the pod injector (MutatingWebhookConfiguration, inject.retrycap.dev).
const PodInjectorPath = "/inject-pods"

// podInjectorCacheWait bounds how long a request waits for the manager's cache (the webhook
// server can start before the informers have synced): below the configuration's timeoutSeconds
// (5), so the API server gets an answer, and with failurePolicy Ignore admits the pod as is.
const podInjectorCacheWait = 3 * time.Second

// PodInjectorOptions configures the pod injector.
type PodInjectorOptions struct {
	// ProxyImage is the sidecar image (the manager's --proxy-image); required.
	ProxyImage string
	// ManagerNamespace is never injected, like kube-system.
	ManagerNamespace string
	// Index is the gate's workload index (Webhooks.Index). Required.
	Index *index.Index
}

// The manager's permissions for the injector: it reads policies, namespaces and workloads from
// its cache and records skips as events.
// +kubebuilder:rbac:groups=retrycap.dev,resources=retrypolicies;clusterretrypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces;pods;services;limitranges,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// PodInjector is the admission.Handler of the pod injector (PodInjectorPath, pod CREATE): it
// reads the pod's namespace's labels and annotations, the namespace's RetryPolicies, the ClusterRetryPolicies
// whose scope has it and (for default entrypoints) the workloads that reach the pod from the
// manager's cache and index, applies inject.Decide and answers with a JSON patch. It
// calls the API server on a request only for a namespace's LimitRanges the cache does not have
// (limitRangeLookup), as the API server's LimitRanger does.
type PodInjector struct {
	reader   client.Reader
	index    *index.Index
	decoder  admission.Decoder
	recorder events.EventRecorder
	config   inject.Config
	log      logr.Logger
	// limitRanges reads the LimitRanges from the cache, and from the API server where the
	// cache has none (limitRangeLookup): the one read on a request that may go to it.
	limitRanges *limitRangeLookup
}

// SetupPodInjectorWithManager registers the pod injector at PodInjectorPath on the manager's
// webhook server and creates the informers it reads (RetryPolicies, ClusterRetryPolicies;
// the workloads, Services and Namespaces come from o.Index, which kubeobj.FeedIndex feeds), so
// they start with the cache rather than on the first request.
func SetupPodInjectorWithManager(mgr ctrl.Manager, o PodInjectorOptions) (*PodInjector, error) {
	if o.ProxyImage == "" {
		return nil, fmt.Errorf("registering the pod injector: the proxy image is empty (set --proxy-image)")
	}
	ctx := context.Background()
	// Namespaces' labels come from the index (kubeobj.FeedIndex watches them as metadata).
	for _, obj := range []client.Object{&v1alpha1.RetryPolicy{}, &v1alpha1.ClusterRetryPolicy{}, &corev1.LimitRange{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			return nil, fmt.Errorf("registering the pod injector: getting the informer for %T: %w", obj, err)
		}
	}
	index := o.Index
	if index == nil {
		return nil, fmt.Errorf("registering the pod injector: PodInjectorOptions.Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)")
	}
	excluded := []string{metav1.NamespaceSystem}
	if o.ManagerNamespace != "" && o.ManagerNamespace != metav1.NamespaceSystem {
		excluded = append(excluded, o.ManagerNamespace)
	}
	h := &PodInjector{
		reader:   mgr.GetCache(),
		index:    index,
		decoder:  admission.NewDecoder(mgr.GetScheme()),
		recorder: mgr.GetEventRecorder("retrycap-injector"),
		config:   inject.Config{ProxyImage: o.ProxyImage, ExcludedNamespaces: excluded},
		log:      mgr.GetLogger().WithName("webhooks").WithName("injector"),
	}
	h.limitRanges = newLimitRangeLookup(mgr.GetCache(), mgr.GetAPIReader(), h.log)
	mgr.GetWebhookServer().Register(PodInjectorPath, &webhook.Admission{Handler: h})
	return h, nil
}

// Handle implements admission.Handler.
func (h *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("retrycap injects pods only when they are created")
	}
	pod := &corev1.Pod{}
	if err := h.decoder.Decode(req, pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("retrycap injector: decoding pod %s/%s: %w", req.Namespace, req.Name, err))
	}
	// The object in a create request may leave the namespace to the request.
	nsFromRequest := pod.Namespace == ""
	if nsFromRequest {
		pod.Namespace = req.Namespace
	}
	if slices.Contains(h.config.ExcludedNamespaces, pod.Namespace) {
		return admission.Allowed("retrycap never injects namespace " + pod.Namespace)
	}

	ctx, cancel := context.WithTimeout(ctx, podInjectorCacheWait)
	defer cancel()
	in, err := h.input(ctx, pod)
	if err != nil {
		// The failure policy (Ignore in config/webhook) decides: the pod starts without the proxy.
		h.log.Error(err, "cannot decide on injection", "namespace", pod.Namespace, "pod", podInjectorPodName(pod))
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("retrycap injector: %w", err))
	}
	d := inject.Decide(h.config, in)
	// A dry run (kubectl apply --dry-run=server) stores nothing, so it records nothing either:
	// the configuration declares sideEffects None, which is what lets the API server call the
	// injector on dry runs at all.
	h.report(pod, in, d, req.DryRun != nil && *req.DryRun)
	if !d.Injected && !d.Skip.Reason.Recorded() && d.StaleInjected == "" {
		return admission.Allowed(d.Skip.String())
	}
	before := pod.DeepCopy()
	if nsFromRequest {
		d.Pod.Namespace, before.Namespace = "", ""
	}
	boundInjectorAnnotations(d.Pod)
	// The patch is the difference between the pod as decoded and as decided, both encoded from
	// the same Go types, not between the request's raw JSON and the decided pod: a field this
	// build's k8s.io/api does not know (a cluster newer than the manager) is in the raw JSON only,
	// and the raw diff removed it from every injected pod.
	orig, err := json.Marshal(before)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("retrycap injector: encoding pod %s/%s: %w", pod.Namespace, podInjectorPodName(pod), err))
	}
	out, err := json.Marshal(d.Pod)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("retrycap injector: encoding pod %s/%s: %w", pod.Namespace, podInjectorPodName(pod), err))
	}
	resp := admission.PatchResponseFromRaw(orig, out)
	resp.Warnings = append(resp.Warnings, injectorWarnings(d.Warnings)...)
	return resp
}

// injectorWarnings are the injector's warnings as the client sees them: a pod of 1,000 containers
// that set HTTP_PROXY gets 1,000, and the API server kept the first 4 KiB and dropped the rest in
// silence; the tail is now one line saying how many, and where the first ones are kept.
func injectorWarnings(ws []string) []string {
	return gate.FitWarningsWhere(ws, gate.WarningBudget, "the pod's annotation "+inject.WarningsAnnotation+" holds the first 4 KiB, each container's env shows its own")
}

// maxInjectorAnnotation bounds each annotation the injector writes (the skip's reason, the
// warnings).
const maxInjectorAnnotation = 4096

// maxPodAnnotations is the API's limit on a pod's annotations, keys and values together.
const maxPodAnnotations = 256 << 10

// boundInjectorAnnotations clips the injector's own annotations on pod to maxInjectorAnnotation
// and to what fits beside the pod's other annotations. A skip's reason quotes the annotation it
// could not read, which may be up to 256 KiB itself: with the quote, the pod's annotations
// passed the API's limit and the pod was refused (Too long), so no pod of a ReplicaSet whose
// template carries such an annotation could be created, although the injector fails open.
func boundInjectorAnnotations(pod *corev1.Pod) {
	for _, k := range []string{inject.SkippedAnnotation, inject.WarningsAnnotation} {
		v, ok := pod.Annotations[k]
		if !ok {
			continue
		}
		room := maxPodAnnotations - len(k)
		for other, ov := range pod.Annotations {
			if other != k {
				room -= len(other) + len(ov)
			}
		}
		pod.Annotations[k] = status.Clip(v, max(0, min(maxInjectorAnnotation, room)))
	}
}

// input reads what inject.Decide needs from the cache. Workloads are read only for a pod that
// asked for the proxy (most pods of a cluster do not), from the index, and only those that can
// bear on the pod's service (its callers, transitively): never a list of the namespace.
func (h *PodInjector) input(ctx context.Context, pod *corev1.Pod) (inject.Input, error) {
	in := inject.Input{Pod: pod}
	if !h.index.HasSynced() && !toolscache.WaitForCacheSync(ctx.Done(), h.index.HasSynced) {
		return in, fmt.Errorf("the manager's workload cache has not synced yet")
	}
	if !indexedNamespace(ctx, h.index, pod.Namespace) {
		return in, fmt.Errorf("reading namespace %s from the cache: not found", pod.Namespace)
	}
	labels, _ := h.index.Namespace(pod.Namespace)
	in.NamespaceLabels = labels
	if pod.Annotations[annotations.Inject] != "true" && labels[annotations.InjectionLabel] != annotations.InjectionEnabled && !inject.BadInjectionLabel(labels) {
		return in, nil
	}
	// Its annotations (the proxy resource defaults, OpenShift's UID range) from the same
	// metadata-only informer that feeds the index (kubeobj.NamespaceMetadata, the same type and
	// kind): the index keeps labels alone.
	nsMeta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}}
	if err := h.reader.Get(ctx, client.ObjectKey{Name: pod.Namespace}, nsMeta); err != nil {
		return in, fmt.Errorf("reading namespace %s from the cache: %w", pod.Namespace, err)
	}
	in.NamespaceAnnotations = nsMeta.Annotations
	var policies v1alpha1.RetryPolicyList
	if err := h.reader.List(ctx, &policies, client.InNamespace(pod.Namespace)); err != nil {
		return in, fmt.Errorf("listing the RetryPolicies of namespace %s from the cache: %w", pod.Namespace, err)
	}
	in.Policies = policies.Items
	var clusterPolicies v1alpha1.ClusterRetryPolicyList
	if err := h.reader.List(ctx, &clusterPolicies); err != nil {
		return in, fmt.Errorf("listing the ClusterRetryPolicies from the cache: %w", err)
	}
	in.CronJobOf = func(job string) (string, bool) { return h.index.CronJobOf(pod.Namespace, job) }
	w := workload.ForPodIn(pod, in.CronJobOf)
	seen := map[string]bool{}
	var scopes []*workload.ClusterScope
	for i := range clusterPolicies.Items {
		p := &clusterPolicies.Items[i]
		scope, err := h.index.ClusterScope(p)
		if err != nil {
			h.log.Error(err, "ignoring a ClusterRetryPolicy the injector cannot evaluate", "namespace", pod.Namespace, "pod", podInjectorPodName(pod))
			continue
		}
		if !scope.Has(pod.Namespace) {
			continue
		}
		in.ClusterPolicies = append(in.ClusterPolicies, inject.ClusterPolicy{Policy: p, Scope: scope})
		scopes = append(scopes, scope)
		// The workloads reached across the policy's namespaces, once each over all policies.
		for _, x := range h.index.RelevantClusterWorkloads(w, scope) {
			if !seen[x.Key()] {
				seen[x.Key()] = true
				in.ClusterWorkloads = append(in.ClusterWorkloads, x)
			}
		}
	}
	if len(scopes) > 0 {
		in.ClusterServices = h.index.ClusterServices(func(ns string) bool {
			for _, s := range scopes {
				if s.Has(ns) {
					return true
				}
			}
			return false
		}).List()
	}
	if len(in.Policies) == 0 && len(in.ClusterPolicies) == 0 {
		return in, nil
	}
	// The LimitRanges that judge the proxy's resources (inject.Input.LimitRanges).
	limitRanges, err := h.limitRanges.List(ctx, pod.Namespace)
	if err != nil {
		return in, err
	}
	in.LimitRanges = limitRanges
	// The workloads reached from the pod's nodes (the Services fronting it, its own name) and
	// its upstreams, through Services; the namespace's Services resolve them.
	in.Workloads = h.index.RelevantWorkloads(w)
	in.Services = h.index.Services(pod.Namespace).List()
	// The mesh layers the gate counts (the index follows the mesh watcher when the injector
	// shares the workload index, as the manager does): a Gateway-routed Service is a default
	// entrypoint.
	in.Mesh = h.index.Mesh()
	return in, nil
}

// report logs every decision and, unless dryRun, records, as an event, each skip of a pod that asked for the
// proxy (inject.Reason.Recorded) and each opt-out in an enabled namespace. The pod does not exist
// yet (a ReplicaSet's pods have no name at admission), so the event regards the pod's controller
// (kubectl describe replicaset/... shows it), else the bare pod by name, else the policy; the
// policy involved is the related object. Skips of pods nobody asked to inject (the bulk of a
// cluster) are logged at V(1) only: an event for each would flood the event store.
func (h *PodInjector) report(pod *corev1.Pod, in inject.Input, d inject.Decision, dryRun bool) {
	log := h.log.WithValues("namespace", pod.Namespace, "pod", podInjectorPodName(pod))
	if dryRun {
		log = log.WithValues("dryRun", true)
	}
	if d.Policy != nil {
		log = log.WithValues("policy", d.Policy.String())
	}
	if d.Injected {
		log.V(1).Info("injected the retrycap proxy", "warnings", d.Warnings)
		if len(d.Warnings) > 0 && !dryRun {
			h.event(pod, d, corev1.EventTypeWarning, "InjectedWithWarnings", fmt.Sprintf("injected the retrycap proxy, but: %v", d.Warnings))
		}
		return
	}
	optedOutInEnabled := d.Skip.Reason == inject.OptedOut && in.NamespaceLabels[annotations.InjectionLabel] == annotations.InjectionEnabled
	if !d.Skip.Reason.Recorded() && !optedOutInEnabled {
		log.V(1).Info("not injected", "reason", d.Skip.Reason, "message", d.Skip.Message)
		return
	}
	log.Info("not injected", "reason", d.Skip.Reason, "message", d.Skip.Message)
	if dryRun {
		return
	}
	typ := corev1.EventTypeNormal
	if d.Skip.Reason == inject.InvalidAnnotation || d.Skip.Reason == inject.InvalidPolicy || d.Skip.Reason == inject.InvalidNamespaceLabel || d.Skip.Reason == inject.LimitRangeConflict ||
		d.Skip.Reason == inject.ContainerNameConflict {
		typ = corev1.EventTypeWarning
	}
	h.event(pod, d, typ, string(d.Skip.Reason), "retrycap proxy not injected: "+d.Skip.Message)
}

func (h *PodInjector) event(pod *corev1.Pod, d inject.Decision, typ, reason, note string) {
	var regarding, related runtime.Object
	if d.Policy != nil {
		related = d.Policy.Object()
	}
	switch owner := metav1.GetControllerOf(pod); {
	case owner != nil:
		regarding = &corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: pod.Namespace, Name: owner.Name, UID: owner.UID}
	case pod.Name != "":
		regarding = &corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name}
	case related != nil:
		regarding, related = related, nil
	default:
		return // a nameless bare pod and no policy: the log line is the record
	}
	// The note quotes the pod's annotations, which may be long: over the API's limit the event
	// would be refused, and the skip go unrecorded.
	h.recorder.Eventf(regarding, related, typ, reason, "Inject", "%s", status.Clip(note, status.MaxEventNote))
}

// podInjectorPodName is the pod's name, or its generateName before the API server made one.
func podInjectorPodName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName
}
