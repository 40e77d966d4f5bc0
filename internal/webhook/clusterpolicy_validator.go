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
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/workload"
)

// ClusterPolicyValidatorPath serves the ClusterRetryPolicy validator (the path
// controller-runtime's builder generates; ValidatingWebhookConfiguration,
// validate-cluster.retrycap.dev).
const ClusterPolicyValidatorPath = "/validate-retrycap-dev-v1alpha1-clusterretrypolicy"

// ClusterPolicyValidator is PolicyValidator for ClusterRetryPolicies: both selectors' syntax, and
// the same warnings against the current graph of the namespaces it selects.
type ClusterPolicyValidator struct {
	index *index.Index
	// namespaces reads the Namespaces' labels (the manager's cache, metadata only).
	namespaces client.Reader
}

var _ admission.Validator[*v1alpha1.ClusterRetryPolicy] = &ClusterPolicyValidator{}

// setupClusterPolicyValidator registers the validator on mgr's webhook server.
func setupClusterPolicyValidator(mgr ctrl.Manager, index *index.Index) error {
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
	errs := clusterPolicyErrors(p)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("ClusterRetryPolicy").GroupKind(), p.Name, errs)
	}

	if v.index == nil || !v.index.HasSynced() {
		return specWarnings(&p.Spec.RetryPolicySpec, checkedGraph{unchecked: "the manager's workload cache has not synced yet"}), nil
	}
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := v.namespaces.List(ctx, l); err != nil {
		return specWarnings(&p.Spec.RetryPolicySpec, checkedGraph{unchecked: fmt.Sprintf("listing Namespaces: %v", err)}), nil
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
	pol := workload.ForClusterRetryPolicy(p, s)
	g := checkedGraph{node: func(entry string) string {
		n, _ := pol.Entrypoint(entry)
		return n
	}}
	if s.Len() == 0 {
		g.notes = append(g.notes, "spec.namespaceSelector: selects no namespace (yet): nothing is checked")
	}
	var ws []workload.Workload
	var svcs []workload.Service
	for _, ns := range s.Namespaces() {
		ws = append(ws, v.index.Workloads(ns)...)
		svcs = append(svcs, v.index.Services(ns).List()...)
	}
	g.r, g.a = workload.Analyze(pol, ws, nil, svcs...)
	g.notes = append(g.notes, nothingSelected(pol, g.r)...)
	return specWarnings(&p.Spec.RetryPolicySpec, g), nil
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
