package webhook

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/workload"
)

// ClusterPolicyValidatorPath serves the ClusterRetryPolicy validator (the path
// controller-runtime's builder generates; ValidatingWebhookConfiguration,
// validate-cluster.retrycap.dev).
const ClusterPolicyValidatorPath = "/validate-retrycap-dev-v1alpha1-clusterretrypolicy"

// ClusterPolicyValidator is PolicyValidator for ClusterRetryPolicies: both selectors' syntax, and
// the same warnings against the current graph of the namespaces it selects.
type ClusterPolicyValidator struct {
	index *gate.Index
	// namespaces reads the Namespaces' labels (the manager's cache, metadata only).
	namespaces client.Reader
}

var _ admission.Validator[*v1alpha1.ClusterRetryPolicy] = &ClusterPolicyValidator{}

// setupClusterPolicyValidator registers the validator on mgr's webhook server.
func setupClusterPolicyValidator(mgr ctrl.Manager, index *gate.Index) error {
	v := &ClusterPolicyValidator{index: index, namespaces: mgr.GetClient()}
	if err := ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ClusterRetryPolicy{}).WithValidator(v).Complete(); err != nil {
		return fmt.Errorf("registering the ClusterRetryPolicy validator: %w", err)
	}
	return nil
}

// ValidateCreate implements admission.Validator.
func (v *ClusterPolicyValidator) ValidateCreate(ctx context.Context, p *v1alpha1.ClusterRetryPolicy) (admission.Warnings, error) {
	return v.validate(ctx, p)
}

// ValidateUpdate implements admission.Validator; an update that leaves the spec alone is not
// validated again (see PolicyValidator.ValidateUpdate).
func (v *ClusterPolicyValidator) ValidateUpdate(ctx context.Context, oldP, newP *v1alpha1.ClusterRetryPolicy) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldP.Spec, newP.Spec) {
		return nil, nil
	}
	return v.validate(ctx, newP)
}

// ValidateDelete implements admission.Validator; deletes are never refused.
func (v *ClusterPolicyValidator) ValidateDelete(context.Context, *v1alpha1.ClusterRetryPolicy) (admission.Warnings, error) {
	return nil, nil
}

func (v *ClusterPolicyValidator) validate(ctx context.Context, p *v1alpha1.ClusterRetryPolicy) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := clusterPolicyErrors(p)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("ClusterRetryPolicy").GroupKind(), p.Name, errs)
	}

	var warnings admission.Warnings
	cap := int64(p.Spec.MaxAmplification)
	for i, e := range p.Spec.Entrypoints {
		if int64(e.ClientAttempts) > cap {
			warnings = append(warnings, fmt.Sprintf("%s: %d exceeds spec.maxAmplification %d: every chain from %s is over the cap whatever its services retry, and no rewrite can fit",
				spec.Child("entrypoints").Index(i).Child("clientAttempts"), e.ClientAttempts, cap, e.Service))
		}
	}
	if v.index == nil || !v.index.HasSynced() {
		return append(warnings, "the manager's workload cache has not synced yet: entrypoints and the current amplification were not checked"), nil
	}
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := v.namespaces.List(ctx, l); err != nil {
		return append(warnings, fmt.Sprintf("listing Namespaces: %v: entrypoints and the current amplification were not checked", err)), nil
	}
	nsLabels := make(map[string]map[string]string, len(l.Items))
	for i := range l.Items {
		nsLabels[l.Items[i].Name] = l.Items[i].Labels
	}
	s, err := workload.NewClusterScope(p, nsLabels)
	if err != nil {
		// clusterPolicyErrors refused what NewClusterScope refuses.
		return nil, apierrors.NewInternalError(err)
	}
	if s.Len() == 0 {
		warnings = append(warnings, "spec.namespaceSelector: selects no namespace (yet): nothing is checked")
	}
	var ws []workload.Workload
	var svcs []workload.Service
	for _, ns := range s.Namespaces() {
		ws = append(ws, v.index.Workloads(ns)...)
		svcs = append(svcs, v.index.Services(ns).List()...)
	}
	r, a := workload.AnalyzeCluster(p, s, ws, nil, svcs...)
	for i, e := range p.Spec.Entrypoints {
		svc, ns, _ := annotations.SplitService(e.Service)
		if !r.HasNode(workload.QualifiedNode(svc, ns)) {
			warnings = append(warnings, fmt.Sprintf("%s: %q is not the service of any workload this policy selects (yet)",
				spec.Child("entrypoints").Index(i).Child("service"), e.Service))
		}
	}
	if !a.WithinCap() {
		worst := graph.FormatAmount(a.Amplification)
		if len(a.Violations) > 0 {
			worst = a.Violations[0].Message
		}
		if more := len(a.Violations) - 1; more > 0 {
			worst += fmt.Sprintf("; and %d more paths", more)
		}
		warnings = append(warnings, fmt.Sprintf("spec.maxAmplification: the current graph already exceeds the cap (%s): deploys that raise retries on those paths will be %s",
			worst, modeConsequence(p.Spec.Enforcement)))
	}
	return warnings, nil
}

// clusterPolicyErrors are what the CRD cannot say about p: both selectors' syntax. (Its pattern
// and CEL rule already make each entrypoint "service.namespace".)
func clusterPolicyErrors(p *v1alpha1.ClusterRetryPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if p.Spec.NamespaceSelector == nil {
		errs = append(errs, field.Required(spec.Child("namespaceSelector"), "{} selects every namespace"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.Spec.NamespaceSelector,
			metav1validation.LabelSelectorValidationOptions{}, spec.Child("namespaceSelector"))...)
	}
	if p.Spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.Spec.Selector,
			metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	return errs
}
