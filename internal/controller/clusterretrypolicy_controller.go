package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/kubeobj"
	"github.com/retrycap/retrycap/internal/observed"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/workload"
)

// ClusterEventSource is the reportingController of the cluster policies' events.
const ClusterEventSource = "retrycap.dev/clusterretrypolicy-controller"

// ClusterControllerName names the ClusterRetryPolicy controller in logs and controller-runtime's
// metrics.
const ClusterControllerName = "clusterretrypolicy"

// As for RetryPolicies: the policy is read and only its status patched; Namespaces are read
// (their labels are what namespaceSelector selects), as metadata only.
// +kubebuilder:rbac:groups=retrycap.dev,resources=clusterretrypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=retrycap.dev,resources=clusterretrypolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// ClusterRetryPolicyReconciler keeps the status of each ClusterRetryPolicy equal to the analysis
// of the workloads it selects across the namespaces it selects.
type ClusterRetryPolicyReconciler struct {
	// Client reads from the manager's cache (Namespaces as metadata) and writes the status
	// subresource.
	Client client.Client
	// Recorder records events.k8s.io/v1 Events when WithinCap changes.
	Recorder events.EventRecorder
	// Now is the clock for lastTransitionTime; nil means time.Now.
	Now func() time.Time
	// Index is the workload index the RetryPolicy reconciler reads (index.Index): the graph is
	// built from its parsed workloads and Services of each selected namespace. SetupWithManager
	// requires it; a reconciler driven directly (tests of Reconcile) without one lists the
	// workloads from Client.
	Index *index.Index
	// Mesh is the source of the mesh retry layers, as for the RetryPolicy reconciler (layers
	// apply per caller's namespace); nil: none.
	Mesh MeshSource
	// Observed is the poller of the proxies' counters, as for the RetryPolicy reconciler (nodes
	// named "name.ns"); nil: none.
	Observed *Observer

	// graphs are the policies' last graphs (with the Index), patched on a change as the
	// RetryPolicy reconciler's are (workload.Incremental over the selected namespaces).
	graphs clusterGraphs
	// written are the policies' last status writes (writeStatus).
	written writtenStatuses
	// counted are the policies' last observed views and the graphs counting them.
	counted countedViews
}

// clusterGraphs are the cluster reconciler's kept graphs by policy, with the per-namespace
// Service sets their merged set was made of: merged again only when one of them is another (the
// index hands out a new set per change), so that an unchanged merge is the same set and the
// graph can be patched.
type clusterGraphs struct {
	mu sync.Mutex
	m  map[string]*clusterGraph
}

type clusterGraph struct {
	in     *workload.Incremental
	sets   []*workload.ServiceSet
	merged *workload.ServiceSet
}

func (g *clusterGraphs) get(name string) *clusterGraph {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[name]
}

func (g *clusterGraphs) put(name string, c *clusterGraph) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[string]*clusterGraph{}
	}
	g.m[name] = c
}

func (g *clusterGraphs) forget(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, name)
}

// Reconcile fetches the policy, computes its status from the cached namespaces and workloads,
// and patches the status once, only when it changed: the RetryPolicy reconciler's steps with the
// same setters.
func (r *ClusterRetryPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p v1alpha1.ClusterRetryPolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.NamespacedName)
			r.graphs.forget(req.Name)
			r.written.forget(req.NamespacedName)
			r.counted.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting ClusterRetryPolicy %s: %w", req.Name, err)
	}
	in, rebuild, err := r.compute(ctx, &p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.Result != nil {
		scope := scopeOf(ctx, r.Client, &p)
		if in.Overridden, err = overriddenOf(ctx, r.Client, workload.ForClusterRetryPolicy(&p, workload.NewClusterScopeOf(scope...)), in.Result, scope); err != nil {
			return ctrl.Result{}, err
		}
	}
	gv := r.counted.view(req.NamespacedName, r.Observed, &in, p.Generation, rebuild)
	next := p.Status.DeepCopy()
	status.Set(next, in)
	setMeshConditionOf(r.Mesh, next, p.Generation, r.now())
	setObserved(r.Observed, next, in.Result, observed.Qualified, p.Generation, r.now())
	gv.apply(next, r.now())
	// The RetryPolicies' series, namespace "": a cluster policy is named by its name alone.
	recordMetrics(req.NamespacedName, next)
	return writeStatus(ctx, &p, &p.Status, next, func() error { return r.patchStatus(ctx, &p, next) }, r.Recorder, &r.written)
}

// compute selects the namespaces, builds the policy's graph of their workloads with the shared
// builder and analyses it. An invalid selector of either kind gives no graph. rebuild builds the
// same graph anew from the same input (nil without a graph), for countObserved.
func (r *ClusterRetryPolicyReconciler) compute(ctx context.Context, p *v1alpha1.ClusterRetryPolicy) (in status.Input, rebuild *rebuilder, err error) {
	in = status.Input{Generation: p.Generation, Selector: p.Spec.Selector, Now: metav1.NewTime(r.now())}
	if p.Spec.NamespaceSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector); err != nil {
			in.Selector, in.SelectorField, in.SelectorError = p.Spec.NamespaceSelector, "spec.namespaceSelector", err
			return in, nil, nil
		}
	}
	if p.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err != nil {
			in.SelectorError = err
			return in, nil, nil
		}
	}
	nsLabels, err := namespaceLabels(ctx, r.Client)
	if err != nil {
		return in, nil, err
	}
	s, err := workload.NewClusterScope(p, nsLabels)
	if err != nil {
		// Only a nil namespaceSelector is left, which the CRD requires: no graph.
		in.Selector, in.SelectorField, in.SelectorError = p.Spec.NamespaceSelector, "spec.namespaceSelector", err
		return in, nil, nil
	}
	if r.Index != nil {
		// Each namespace's workloads are sorted by workload.Compare, which orders by namespace
		// first: concatenated in the scope's (sorted) order they are sorted as the builder
		// wants them.
		var ps []*workload.Parsed
		var sets []*workload.ServiceSet
		for _, ns := range s.Namespaces() {
			ps = append(ps, r.Index.Parsed(ns)...)
			sets = append(sets, r.Index.Services(ns))
		}
		set := meshSetOf(r.Mesh)
		pol := workload.ForClusterRetryPolicy(p, s)
		if g := r.graphs.get(p.Name); g != nil {
			if !slices.Equal(g.sets, sets) {
				g.sets, g.merged = sets, workload.MergeServiceSets(sets...)
			}
			if !g.in.Update(pol, ps, g.merged, set) {
				log.FromContext(ctx).V(1).Info("graph built anew", "workloads", len(ps))
			}
			in.Result = g.in.Result()
		} else {
			merged := workload.MergeServiceSets(sets...)
			g := &clusterGraph{in: workload.NewIncremental(pol, ps, merged, set), sets: sets, merged: merged}
			r.graphs.put(p.Name, g)
			in.Result = g.in.Result()
		}
		in.Analysis = in.Result.Analyze() // with the mesh layers and the workloads named
		merged := r.graphs.get(p.Name).merged
		inputs := &graphInputs{generation: p.Generation, spec: p.Spec.DeepCopy(), scope: s.Namespaces(), ps: ps, svcs: merged, set: set}
		return in, &rebuilder{build: func() *workload.Result { return workload.BuildParsed(pol, ps, merged, set) }, inputs: inputs}, nil
	}
	var ws []workload.Workload
	var svcs []workload.Service
	for _, ns := range s.Namespaces() {
		nws, err := kubeobj.ListWorkloads(ctx, r.Client, ns)
		if err != nil {
			return in, nil, err
		}
		nsvcs, err := kubeobj.ListServices(ctx, r.Client, ns)
		if err != nil {
			return in, nil, err
		}
		ws, svcs = append(ws, nws...), append(svcs, nsvcs...)
	}
	pol, set := workload.ForClusterRetryPolicy(p, s), meshSetOf(r.Mesh)
	in.Result, in.Analysis = workload.Analyze(pol, ws, set, svcs...)
	return in, &rebuilder{build: func() *workload.Result { return workload.Build(pol, ws, set, svcs...) }}, nil
}

// namespaceMetaList is the list of Namespaces as metadata: the manager's cache serves it from a
// metadata-only informer (labels are all a namespaceSelector reads).
func namespaceMetaList() *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	return l
}

func namespaceMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return m
}

// namespaceLabels is every namespace's labels.
func namespaceLabels(ctx context.Context, c client.Reader) (map[string]map[string]string, error) {
	l := namespaceMetaList()
	if err := c.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing Namespaces: %w", err)
	}
	out := make(map[string]map[string]string, len(l.Items))
	for i := range l.Items {
		out[l.Items[i].Name] = l.Items[i].Labels
	}
	return out, nil
}

// patchStatus is RetryPolicyReconciler.patchStatus for a cluster policy: one merge patch with
// the resourceVersion it was computed from.
func (r *ClusterRetryPolicyReconciler) patchStatus(ctx context.Context, p *v1alpha1.ClusterRetryPolicy, next *v1alpha1.RetryPolicyStatus) error {
	patch, err := statusPatch(p.ResourceVersion, &p.Status, next)
	if err != nil {
		return fmt.Errorf("patching the status of ClusterRetryPolicy %s: %w", p.Name, err)
	}
	p.Status = *next
	if err := r.Client.Status().Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("patching the status of ClusterRetryPolicy %s: %w", p.Name, err)
	}
	return nil
}

func (r *ClusterRetryPolicyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager watches ClusterRetryPolicies (spec changes only), Namespaces (metadata only:
// a namespace created, deleted or relabelled maps to the cluster policies that select it before
// or after), and the workload index: a changed workload maps to the cluster policies selecting
// it (its namespace, then the pod-template selector), a changed Service to those selecting its
// namespace.
func (r *ClusterRetryPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(ClusterEventSource)
	}
	if r.Index == nil {
		return fmt.Errorf("setting up the %s controller: Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)", ClusterControllerName)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ClusterControllerName).
		For(&v1alpha1.ClusterRetryPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(&corev1.Namespace{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueue(q, r.policiesSelecting(ctx, e.Object.GetLabels()))
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
					return
				}
				r.enqueue(q, r.policiesSelecting(ctx, e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()))
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				r.enqueue(q, r.policiesSelecting(ctx, e.Object.GetLabels()))
			},
		}).
		WatchesRawSource(&indexSource{index: r.Index, workloadPolicies: r.policiesFor, servicePolicies: r.servicePolicies}).
		// The other policies decide which policy's settings a selected workload's proxy runs
		// (overridden.go): a RetryPolicy's spec concerns the cluster policies whose scope has
		// its namespace, a cluster policy's every other one.
		Watches(&v1alpha1.RetryPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			labels, _ := r.Index.Namespace(o.GetNamespace())
			return r.policiesSelecting(ctx, labels)
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ClusterRetryPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			var list v1alpha1.ClusterRetryPolicyList
			if err := r.Client.List(ctx, &list); err != nil {
				log.FromContext(ctx).Error(err, "listing the ClusterRetryPolicies")
				return nil
			}
			var out []reconcile.Request
			for i := range list.Items {
				if list.Items[i].Name != o.GetName() {
					out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
				}
			}
			return out
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	if r.Mesh != nil {
		b = b.WatchesRawSource(&clusterMeshChanges{r: r})
	}
	if r.Observed != nil {
		b = b.WatchesRawSource(r.observedSource())
	}
	if err := b.Complete(r); err != nil {
		return fmt.Errorf("setting up the %s controller: %w", ClusterControllerName, err)
	}
	return nil
}

func (r *ClusterRetryPolicyReconciler) enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// policiesSelecting maps namespace labels (each of several versions) to the cluster policies
// whose namespaceSelector matches any. A policy with an invalid selector is not mapped.
func (r *ClusterRetryPolicyReconciler) policiesSelecting(ctx context.Context, versions ...map[string]string) []reconcile.Request {
	var list v1alpha1.ClusterRetryPolicyList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing the ClusterRetryPolicies")
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NamespaceSelector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
		if err != nil {
			continue
		}
		for _, l := range versions {
			if sel.Matches(labels.Set(l)) {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
				break
			}
		}
	}
	return out
}

// nsLabelsOf is namespace ns's labels from the cache; false when it is not there.
func (r *ClusterRetryPolicyReconciler) nsLabelsOf(ctx context.Context, ns string) (map[string]string, bool) {
	m := namespaceMeta()
	if err := r.Client.Get(ctx, types.NamespacedName{Name: ns}, m); err != nil {
		if !apierrors.IsNotFound(err) {
			log.FromContext(ctx).Error(err, "getting a workload's Namespace", "namespace", ns)
		}
		return nil, false
	}
	return m.Labels, true
}

// policiesFor maps a workload to the cluster policies that select it: its namespace, then the
// pod-template selector.
func (r *ClusterRetryPolicyReconciler) policiesFor(ctx context.Context, w workload.Workload) []reconcile.Request {
	l, ok := r.nsLabelsOf(ctx, w.Namespace)
	if !ok {
		return nil
	}
	var list v1alpha1.ClusterRetryPolicyList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing the ClusterRetryPolicies", "workload", w.String())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		s, err := workload.NewClusterScope(p, map[string]map[string]string{w.Namespace: l})
		if err != nil {
			continue
		}
		if ok, err := workload.ForClusterRetryPolicy(p, s).Selects(w); err == nil && ok {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
		}
	}
	return out
}

// servicePolicies maps a Service to the cluster policies selecting its namespace.
func (r *ClusterRetryPolicyReconciler) servicePolicies(ctx context.Context, svc workload.Service) []reconcile.Request {
	l, ok := r.nsLabelsOf(ctx, svc.Namespace)
	if !ok {
		return nil
	}
	return r.policiesSelecting(ctx, l)
}
