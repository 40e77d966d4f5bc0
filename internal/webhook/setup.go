package webhook

import (
	"fmt"
	"sort"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/meshwatch"
)

// Paths the webhooks are served on; config/webhook/manifests.yaml points at the same ones.
const (
	// GatePath serves the workload gate (MutatingWebhookConfiguration, gate.retrycap.dev).
	GatePath = "/gate-workloads"
	// PolicyValidatorPath serves the RetryPolicy validator: the path controller-runtime's builder
	// generates for the typed validator (ValidatingWebhookConfiguration, validate.retrycap.dev).
	PolicyValidatorPath = "/validate-retrycap-dev-v1alpha1-retrypolicy"
)

// AlwaysExcludedNamespaces are never gated: the control plane's own workloads must not depend on
// the manager being up. The webhook configurations exclude them with a namespaceSelector too.
var AlwaysExcludedNamespaces = []string{"kube-system"}

// Options configures the gate and the validator.
type Options struct {
	// ManagerNamespace is the manager's own namespace (retrycap-system in config/): never gated,
	// so that a gate with failurePolicy Fail can never block the manager's own rollout.
	ManagerNamespace string
	// ExcludedNamespaces are further namespaces the handler lets through untouched. Excluding a
	// namespace in the webhook configurations' namespaceSelector as well saves the round trip.
	ExcludedNamespaces []string
	// Index is the workload index, fed by kubeobj.FeedIndex (the operator shares one with the
	// controller). Required: SetupWithManager fails without it rather than feed a second copy.
	Index *index.Index
	// Mesh is the mesh watcher (nil: no mesh webhook): the mesh gate is served at MeshPath and
	// the manager keeps MeshWebhookConfiguration for the mesh APIs it reads.
	Mesh MeshSource
}

// Webhooks is what SetupWithManager registered.
type Webhooks struct {
	Gate      *WorkloadGate
	Validator *PolicyValidator
	// Mesh is the mesh gate (nil without Options.Mesh).
	Mesh *MeshGate
	// Index is the workload index the gate reads; pass it to the pod injector
	// (PodInjectorOptions.Index) so that both read one.
	Index *index.Index
}

// The manager's permissions for the gate and the validator: they read workloads (Pods as
// metadata), Namespaces (as metadata: their labels), Services and policies of both kinds from
// its cache.
// +kubebuilder:rbac:groups=retrycap.dev,resources=retrypolicies;clusterretrypolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces;pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets;replicasets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=get;list;watch

// SetupWithManager registers the workload gate at GatePath and the RetryPolicy validator at
// PolicyValidatorPath on the manager's webhook server, and the informers they read (Deployments,
// StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs (kubeobj.WatchedKinds), Pod metadata,
// Services, Namespace metadata, RetryPolicies,
// ClusterRetryPolicies) on its cache.
func SetupWithManager(mgr ctrl.Manager, o Options) (*Webhooks, error) {
	log := mgr.GetLogger().WithName("webhooks")
	index := o.Index
	if index == nil {
		return nil, fmt.Errorf("registering the workload gate: Options.Index is nil (make one with index.New and feed it with kubeobj.FeedIndex)")
	}
	if err := mgr.Add(baseRefresher{index}); err != nil {
		return nil, fmt.Errorf("adding the gate's prepared-graph refresh to the manager: %w", err)
	}

	skip := map[string]bool{}
	for _, ns := range AlwaysExcludedNamespaces {
		skip[ns] = true
	}
	for _, ns := range o.ExcludedNamespaces {
		skip[ns] = true
	}
	if o.ManagerNamespace != "" {
		skip[o.ManagerNamespace] = true
	}
	skipped := make([]string, 0, len(skip))
	for ns := range skip {
		skipped = append(skipped, ns)
	}
	sort.Strings(skipped)
	log.Info("the workload gate skips these namespaces (the webhook configurations' namespaceSelector excludes them too)", "namespaces", skipped)

	gh := &WorkloadGate{policies: mgr.GetClient(), index: index, skip: skip, log: log.WithName("gate"), mesh: o.Mesh}
	if o.Mesh != nil {
		// The prepared graphs count the watcher's layers, rebuilt on every change of its Set.
		index.SetMesh(o.Mesh.Set())
		o.Mesh.OnChange(func(meshwatch.Affected) { index.SetMesh(o.Mesh.Set()) })
	}
	// One budget of request bytes in flight for the webhooks that decode whole objects.
	budget := newBodyBudget(MaxInFlightBodyBytes)
	mgr.GetWebhookServer().Register(GatePath, budget.wrap(&webhook.Admission{Handler: gh}))

	validator := &PolicyValidator{index: index}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.RetryPolicy{}).WithValidator(validator).Complete(); err != nil {
		return nil, fmt.Errorf("registering the RetryPolicy validator: %w", err)
	}
	var mg *MeshGate
	if o.Mesh != nil {
		mg = &MeshGate{policies: mgr.GetClient(), index: index, mesh: o.Mesh, skip: skip, log: log.WithName("mesh")}
		mgr.GetWebhookServer().Register(MeshPath, budget.wrap(&webhook.Admission{Handler: mg}))
		mgr.GetWebhookServer().Register(MeshMembershipPath, budget.wrap(&webhook.Admission{Handler: &MeshMembershipGate{mg}})) // mesh_membership.go
		c := &meshConfigurer{reader: mgr.GetAPIReader(), writer: mgr.GetClient(), mesh: o.Mesh, log: log.WithName("mesh"), kick: make(chan struct{}, 1)}
		if err := mgr.Add(c); err != nil {
			return nil, fmt.Errorf("adding the mesh webhook's configuration to the manager: %w", err)
		}
	}
	if err := setupClusterPolicyValidator(mgr, index); err != nil {
		return nil, err
	}
	return &Webhooks{Gate: gh, Validator: validator, Mesh: mg, Index: index}, nil
}
