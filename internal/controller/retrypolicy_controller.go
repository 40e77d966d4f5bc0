package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/cluster"
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
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// RetryPolicyReconciler keeps the status of each RetryPolicy equal to the analysis of the
// workloads it selects.
type RetryPolicyReconciler struct {
	// Client reads from the manager's cache and writes the status subresource.
	Client client.Client
	// Recorder records events.k8s.io/v1 Events when WithinCap changes.
	Recorder events.EventRecorder
	// Now is the clock for lastTransitionTime; nil means time.Now.
	Now func() time.Time
}

// Reconcile fetches the policy, computes its status from the cached workloads, and patches the
// status once, only when it changed.
func (r *RetryPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p v1alpha1.RetryPolicy
	if err := r.Client.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("getting RetryPolicy %s: %w", req.NamespacedName, err)
	}
	in, err := r.compute(ctx, &p)
	if err != nil {
		return ctrl.Result{}, err
	}
	next := p.Status.DeepCopy()
	status.Set(next, in)
	recordMetrics(req.NamespacedName, next)
	if equality.Semantic.DeepEqual(&p.Status, next) {
		return ctrl.Result{}, nil
	}
	old := p.Status.DeepCopy()
	if err := r.patchStatus(ctx, &p, next); err != nil {
		if apierrors.IsConflict(err) {
			log.FromContext(ctx).V(1).Info("status patch lost a race with a newer version; retrying", "error", err.Error())
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	if typ, reason, note, ok := status.WithinCapEvent(old, next); ok {
		r.Recorder.Eventf(&p, nil, typ, reason, "Analyze", "%s", note)
	}
	return ctrl.Result{}, nil
}

// compute builds the policy's graph from the cached workloads of its namespace with the shared
// builder and analyses it.
func (r *RetryPolicyReconciler) compute(ctx context.Context, p *v1alpha1.RetryPolicy) (status.Input, error) {
	in := status.Input{Generation: p.Generation, Selector: p.Spec.Selector, Now: metav1.NewTime(r.now())}
	if p.Spec.Selector != nil {
		if _, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err != nil {
			in.SelectorError = err
			return in, nil
		}
	}
	ws, err := cluster.ListWorkloads(ctx, r.Client, p.Namespace)
	if err != nil {
		return in, err
	}
	svcs, err := cluster.ListServices(ctx, r.Client, p.Namespace)
	if err != nil {
		return in, err
	}
	in.Result, in.Analysis = workload.Analyze(p, ws, svcs...)
	return in, nil
}

// patchStatus sends one merge patch of the status, with the resourceVersion it was computed
// from: a status computed from a stale cache is refused (Conflict) instead of overwriting a
// newer one, and no event is recorded for it.
func (r *RetryPolicyReconciler) patchStatus(ctx context.Context, p *v1alpha1.RetryPolicy, next *v1alpha1.RetryPolicyStatus) error {
	base := p.DeepCopy()
	p.Status = *next
	if err := r.Client.Status().Patch(ctx, p, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
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
// do not bring it back), the workloads (labels, retrycap annotations and existence only),
// mapping a workload to the policies of its namespace that select it, and the Services (name,
// selector and type only, cut down by cluster.ServiceTransform in the manager's cache), mapping a
// Service to every policy of its namespace: which workloads a Service fronts is the graph's to
// say.
func (r *RetryPolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder(EventSource)
	}
	toPolicies := handler.EnqueueRequestsFromMapFunc(r.policiesFor)
	onlyGraphInput := builder.WithPredicates(graphInputChanged())
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&v1alpha1.RetryPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.Deployment{}, toPolicies, onlyGraphInput).
		Watches(&appsv1.StatefulSet{}, toPolicies, onlyGraphInput).
		Watches(&appsv1.DaemonSet{}, toPolicies, onlyGraphInput).
		Watches(&corev1.Pod{}, toPolicies, onlyGraphInput, builder.OnlyMetadata).
		Watches(cluster.ServiceObject(), handler.EnqueueRequestsFromMapFunc(r.namespacePolicies), builder.WithPredicates(serviceInputChanged())).
		Complete(r)
	if err != nil {
		return fmt.Errorf("setting up the %s controller: %w", ControllerName, err)
	}
	return nil
}

// policiesFor maps a workload to the policies of its namespace that select it. On an update
// controller-runtime maps the old and the new version, so a policy a label change deselects is
// reconciled too. A policy with an invalid selector is not mapped: its status does not depend
// on workloads.
func (r *RetryPolicyReconciler) policiesFor(ctx context.Context, obj client.Object) []reconcile.Request {
	w, ok := cluster.WorkloadOf(obj)
	if !ok {
		return nil
	}
	var list v1alpha1.RetryPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(w.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing the RetryPolicies of a workload's namespace", "workload", w.String())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		p := &list.Items[i]
		if selects, err := workload.Selects(p, w); err == nil && selects {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return out
}

// namespacePolicies maps a Service to every policy of its namespace.
func (r *RetryPolicyReconciler) namespacePolicies(ctx context.Context, obj client.Object) []reconcile.Request {
	var list v1alpha1.RetryPolicyList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing the RetryPolicies of a Service's namespace", "service", obj.GetNamespace()+"/"+obj.GetName())
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}}
	}
	return out
}

// serviceInputChanged passes creates and deletes of Services, and updates that change what the
// graph reads: the selector or whether the type is ExternalName.
func serviceInputChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			a, okA := cluster.ServiceOf(e.ObjectOld)
			b, okB := cluster.ServiceOf(e.ObjectNew)
			return okA != okB || a.ExternalName != b.ExternalName || !maps.Equal(a.Selector, b.Selector)
		},
	}
}

// graphInputChanged passes creates and deletes of workloads, and updates that change what the
// graph reads (labels, retrycap.dev/service, retrycap.dev/upstreams, or whether a Pod is bare):
// a rollout of a new image or a scale never causes a reconcile.
func graphInputChanged() predicate.Funcs {
	isWorkload := func(obj client.Object) bool { _, ok := cluster.WorkloadOf(obj); return ok }
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return isWorkload(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return isWorkload(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return isWorkload(e.Object) },
		UpdateFunc: func(e event.UpdateEvent) bool {
			a, okA := cluster.WorkloadOf(e.ObjectOld)
			b, okB := cluster.WorkloadOf(e.ObjectNew)
			if okA != okB {
				return true
			}
			return okA && !sameGraphInput(a, b)
		},
	}
}
