package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
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

// EventSource is the reportingController of the events the reconciler records.
const EventSource = "retrycap.dev/retrypolicy-controller"

// ControllerName names the controller in logs and controller-runtime's metrics.
const ControllerName = "retrypolicy"

// conflictRetry is how soon a status patch that lost an optimistic-lock race is retried: the
// cache was behind the API server, and is normally caught up within milliseconds.
const conflictRetry = 100 * time.Millisecond

// Least privilege: workloads are only read; the policy is read and only its status patched;
// events are created (and patched, for the events.k8s.io series of a repeated event).
// +kubebuilder:rbac:groups=retrycap.dev,resources=retrypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=retrycap.dev,resources=retrypolicies/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// The other kind and the namespaces' labels: which policy's settings a workload runs (overridden.go).
// +kubebuilder:rbac:groups=retrycap.dev,resources=clusterretrypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// RetryPolicyReconciler keeps the status of each RetryPolicy equal to the analysis of the
// workloads it selects.
type RetryPolicyReconciler struct {
	// Client reads from the manager's cache and writes the status subresource.
	Client client.Client
	// Recorder records events.k8s.io/v1 Events when WithinCap changes.
	Recorder events.EventRecorder
	// Now is the clock for lastTransitionTime; nil means time.Now.
	Now func() time.Time
	// Index is the workload index (index.Index, fed by kubeobj.FeedIndex): the controller builds a
	// policy's graph from its parsed, sorted workloads, and is told of each change by it (so a
	// reconcile always sees the change that caused it). The operator shares one with the
	// webhooks. SetupWithManager requires it (a missing index is an error, not a second copy); a
	// reconciler driven directly (tests of Reconcile) without one lists the workloads from Client.
	Index *index.Index
	// Mesh is the source of the mesh retry layers (meshwatch.Watcher); nil: none, exactly as
	// without a mesh (no MeshLayers condition).
	Mesh MeshSource
	// Observed is the poller of the proxies' counters (--prometheus-url); nil: no observed
	// amplification and no ObservedWithinComputed condition.
	Observed *Observer

	// graphs are the policies' last graphs (with the Index): a change of one workload's
	// upstreams is patched into its policy's graph rather than the namespace's graph built
	// again (workload.Incremental).
	graphs policyGraphs
	// written are the policies' last status writes (writeStatus).
	written writtenStatuses
	// counted are the policies' last observed views and the graphs counting them.
	counted countedViews
}

// policyGraphs are the reconciler's kept graphs by policy. A policy is reconciled by one worker
// at a time, so its Incremental is never used concurrently; the map is shared by the workers.
type policyGraphs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*workload.Incremental
}

func (g *policyGraphs) get(k types.NamespacedName) *workload.Incremental {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[k]
}

func (g *policyGraphs) put(k types.NamespacedName, in *workload.Incremental) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil {
		g.m = map[types.NamespacedName]*workload.Incremental{}
	}
	g.m[k] = in
}

func (g *policyGraphs) forget(k types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.m, k)
}

// Reconcile fetches the policy, computes its status from the cached workloads, and patches the
// status once, only when it changed.
func (r *RetryPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p v1alpha1.RetryPolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.NamespacedName)
			r.graphs.forget(req.NamespacedName)
			r.written.forget(req.NamespacedName)
			r.counted.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting RetryPolicy %s: %w", req.NamespacedName, err)
	}
	in, rebuild, err := r.compute(ctx, &p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if in.Overridden, err = overriddenOf(ctx, r.Client, workload.ForRetryPolicy(&p), in.Result, []string{p.Namespace}); err != nil {
		return ctrl.Result{}, err
	}
	next := r.nextStatus(&p, in, rebuild)
	recordMetrics(req.NamespacedName, next)
	return writeStatus(ctx, &p, &p.Status, next, func() error { return r.patchStatus(ctx, &p, next) }, r.Recorder, &r.written)
}

// nextStatus is the status p's reconcile writes, from its computed input (no I/O): the
// analysis, the mesh condition, the observed amplification and the observed graph, which is
// compared with the declared one and then counted in the amplification (countObserved).
func (r *RetryPolicyReconciler) nextStatus(p *v1alpha1.RetryPolicy, in status.Input, rebuild *rebuilder) *v1alpha1.RetryPolicyStatus {
	gv := r.counted.view(types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, r.Observed, &in, p.Generation, rebuild)
	next := p.Status.DeepCopy()
	status.Set(next, in)
	r.setMeshCondition(next, p.Generation)
	setObserved(r.Observed, next, in.Result, observed.InNamespace(p.Namespace), p.Generation, r.now())
	gv.apply(next, r.now())
	return next
}

// writeStatus is the end of both reconcilers: nothing when next equals the stored status cur
// (unless the cache is behind the policy's last write: skipWrite); else one patch (a conflict
// with a newer version is retried after conflictRetry, not an error) and the WithinCap event
// when the condition changed; a policy deleted before its patch is done with (no error). obj
// is the policy as read (its resourceVersion is cur's, and after the patch the written one's).
func writeStatus(ctx context.Context, obj client.Object, cur, next *v1alpha1.RetryPolicyStatus, patch func() error, rec events.EventRecorder, w *writtenStatuses) (ctrl.Result, error) {
	key := client.ObjectKeyFromObject(obj)
	if skipWrite(cur, next, obj.GetResourceVersion(), w.get(key)) {
		return ctrl.Result{}, nil
	}
	old := cur.DeepCopy()
	if err := patch(); err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("status patch lost a race with a newer version; retrying", "error", err.Error())
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		if apierrors.IsNotFound(err) {
			// Deleted while it was reconciled: there is no status to write, and its delete
			// event brings a reconcile that forgets it. Not an error (it was logged and
			// retried as "Reconciler error"); the series recorded for it go now.
			log.FromContext(ctx).V(1).Info("policy deleted before its status was written", "error", err.Error())
			forgetMetrics(key)
			w.forget(key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	w.put(key, written{rv: obj.GetResourceVersion(), status: next.DeepCopy()})
	if typ, reason, note, ok := status.WithinCapEvent(old, next); ok {
		rec.Eventf(obj, nil, typ, reason, "Analyze", "%s", status.Clip(note, status.MaxEventNote))
	}
	return ctrl.Result{}, nil
}

// written is a policy's last status write: the status and the resourceVersion the API server
// gave the policy with it.
type written struct {
	rv     string
	status *v1alpha1.RetryPolicyStatus
}

// writtenStatuses are the reconciler's last writes by policy.
type writtenStatuses struct {
	mu sync.Mutex
	m  map[types.NamespacedName]written
}

func (w *writtenStatuses) get(k types.NamespacedName) *written {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x, ok := w.m[k]; ok {
		return &x
	}
	return nil
}

func (w *writtenStatuses) put(k types.NamespacedName, x written) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]written{}
	}
	w.m[k] = x
}

func (w *writtenStatuses) forget(k types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, k)
}

// skipWrite says whether next need not be written: it equals the cached status cur (of
// resourceVersion curRV), and the cache is not behind this reconciler's last write last (nil:
// none), or that write was next too. Without the second half a change and its undoing in quick
// succession (a Deployment created, then deleted) left the first's status in place: the
// reconcile of the undoing read the policy from a cache that had not yet seen the first write,
// found next equal to the status before it, and wrote nothing (managerscale -rollouts, main at
// 1a3ed84: twice in 15 rollouts). A stale cache now costs a patch that conflicts and is retried.
func skipWrite(cur, next *v1alpha1.RetryPolicyStatus, curRV string, last *written) bool {
	if !equality.Semantic.DeepEqual(cur, next) {
		return false
	}
	return last == nil || last.rv == curRV || equality.Semantic.DeepEqual(last.status, next)
}

// compute builds the policy's graph from the cached workloads of its namespace with the shared
// builder and analyses it. rebuild builds the same graph anew from the same input (nil without
// a graph), for countObserved.
func (r *RetryPolicyReconciler) compute(ctx context.Context, p *v1alpha1.RetryPolicy) (in status.Input, rebuild *rebuilder, err error) {
	in = status.Input{Generation: p.Generation, Selector: p.Spec.Selector, Now: metav1.NewTime(r.now())}
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	if p.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err != nil {
			in.SelectorError = err
			r.graphs.forget(key)
			return in, nil, nil
		}
	}
	if r.Index != nil {
		// Parsed once per workload version, kept sorted, with the namespace's Services (the
		// graph's nodes are the names callers use). The policy's last graph is patched when the
		// change is one the patch decides (a workload's upstreams): building the graph of
		// 20,000 workloads costs ~30 ms and its garbage, the patch well under 1 ms.
		ps, svcs, set := r.Index.Parsed(p.Namespace), r.Index.Services(p.Namespace), r.meshSet()
		pol := workload.ForRetryPolicy(p)
		if g := r.graphs.get(key); g != nil {
			if !g.Update(pol, ps, svcs, set) {
				log.FromContext(ctx).V(1).Info("graph built anew", "workloads", len(ps))
			}
			in.Result = g.Result()
		} else {
			g := workload.NewIncremental(pol, ps, svcs, set)
			r.graphs.put(key, g)
			in.Result = g.Result()
		}
		// The violations' messages name each factor's mesh layers, and a fix on an edge out of
		// a Service's node names the workloads, as workload.Analyze does.
		in.Analysis = in.Result.Analyze()
		inputs := &graphInputs{generation: p.Generation, spec: p.Spec.DeepCopy(), ps: ps, svcs: svcs, set: set}
		return in, &rebuilder{build: func() *workload.Result { return workload.BuildParsed(pol, ps, svcs, set) }, inputs: inputs}, nil
	}
	ws, err := kubeobj.ListWorkloads(ctx, r.Client, p.Namespace)
	if err != nil {
		return in, nil, err
	}
	svcs, err := kubeobj.ListServices(ctx, r.Client, p.Namespace)
	if err != nil {
		return in, nil, err
	}
	pol, set := workload.ForRetryPolicy(p), r.meshSet()
	in.Result, in.Analysis = workload.Analyze(pol, ws, set, svcs...)
	return in, &rebuilder{build: func() *workload.Result { return workload.Build(pol, ws, set, svcs...) }}, nil
}

// patchStatus sends one merge patch of the status, with the resourceVersion it was computed
// from: a status computed from a stale cache is refused (Conflict) instead of overwriting a
// newer one, and no event is recorded for it.
func (r *RetryPolicyReconciler) patchStatus(ctx context.Context, p *v1alpha1.RetryPolicy, next *v1alpha1.RetryPolicyStatus) error {
	patch, err := statusPatch(p.ResourceVersion, &p.Status, next)
	if err != nil {
		return fmt.Errorf("patching the status of RetryPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	p.Status = *next
	if err := r.Client.Status().Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("patching the status of RetryPolicy %s/%s: %w", p.Namespace, p.Name, err)
	}
	return nil
}

func (r *RetryPolicyReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager watches RetryPolicies (spec changes only: the controller's own status writes
// do not bring it back) and the workload index: a changed workload (labels, retrycap
// annotations and existence only) is mapped to the policies of its namespace that select it, a
// changed Service (selector and type only; cut down by the manager's cache transform) to every
// policy of its namespace: which workloads a Service fronts is the graph's to say.
func (r *RetryPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(EventSource)
	}
	if r.Index == nil {
		return fmt.Errorf("setting up the %s controller: Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)", ControllerName)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1alpha1.RetryPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(&indexSource{index: r.Index, workloadPolicies: r.policiesFor, servicePolicies: r.namespacePolicies}).
		// The other policies and the namespace's labels decide which policy's settings a
		// selected workload's proxy runs (overridden.go): a change of either reconciles the
		// policies it may concern. Spec changes only, as for the policy itself.
		Watches(&v1alpha1.RetryPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return retryPoliciesIn(ctx, r.Client, o.GetNamespace())
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ClusterRetryPolicy{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			p, ok := o.(*v1alpha1.ClusterRetryPolicy)
			if !ok {
				return nil
			}
			return retryPoliciesIn(ctx, r.Client, scopeOf(ctx, r.Client, p)...)
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesMetadata(&corev1.Namespace{}, handler.Funcs{
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
					return
				}
				for _, req := range retryPoliciesIn(ctx, r.Client, e.ObjectNew.GetName()) {
					q.Add(req)
				}
			},
		})
	if r.Mesh != nil {
		b = b.WatchesRawSource(&meshChanges{r: r})
	}
	if r.Observed != nil {
		b = b.WatchesRawSource(r.observedSource())
	}
	err := b.Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the %s controller: %w", ControllerName, err)
	}
	return nil
}

// indexSource is a controller's source of workload changes: the index tells it of each change
// after applying it, so the reconcile it causes reads the index with the change in. (Watching
// the informers directly, the controller's handler could run before the index's.) It is synced
// when the index is, and the controller starts its workers only then. Both reconcilers use it,
// each with its mapping of a workload and of a Service to its policies.
type indexSource struct {
	index            *index.Index
	workloadPolicies func(context.Context, workload.Workload) []reconcile.Request
	servicePolicies  func(context.Context, workload.Service) []reconcile.Request
}

func (s *indexSource) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	s.index.OnChange(func(c index.Change) {
		if c.Service != nil {
			// The index tells only of changes to a selector or a type.
			for _, req := range s.servicePolicies(ctx, *c.Service) {
				q.Add(req)
			}
			return
		}
		old, new := c.Old, c.New
		if old != nil && new != nil && sameGraphInput(*old, *new) {
			return
		}
		// On an update both versions are mapped, so a policy a label change deselects is
		// reconciled too.
		for _, w := range []*workload.Workload{old, new} {
			if w == nil {
				continue
			}
			for _, req := range s.workloadPolicies(ctx, *w) {
				q.Add(req)
			}
		}
	})
	return nil
}

func (s *indexSource) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.index.HasSynced) {
		return fmt.Errorf("waiting for the workload index to sync: %w", ctx.Err())
	}
	return nil
}

func (s *indexSource) String() string { return "workload index" }

// policiesFor maps a workload to the policies of its namespace that select it. A policy with an
// invalid selector is not mapped: its status does not depend on workloads.
func (r *RetryPolicyReconciler) policiesFor(ctx context.Context, w workload.Workload) []reconcile.Request {
	var list v1alpha1.RetryPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(w.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing the RetryPolicies of a workload's namespace", "workload", w.String())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		if selects, err := workload.ForRetryPolicy(p).Selects(w); err == nil && selects {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return out
}

// namespacePolicies maps a Service of namespace ns to every policy of ns.
func (r *RetryPolicyReconciler) namespacePolicies(ctx context.Context, svc workload.Service) []reconcile.Request {
	var list v1alpha1.RetryPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(svc.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing the RetryPolicies of a Service's namespace", "service", svc.Namespace+"/"+svc.Name)
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}}
	}
	return out
}
