package webhook

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/workload"
)

// PolicyValidator validates RetryPolicies for what the CRD's OpenAPI bounds and CEL rules cannot
// say: the label selector's syntax (operators, values, keys), and, as warnings, facts about the
// policy against the current graph (from the manager's cache): an entrypoint no selected workload
// provides, client attempts above the cap (no rewrite can fit), a cap the graph already exceeds.
type PolicyValidator struct {
	index *index.Index
}

var _ admission.Validator[*v1alpha1.RetryPolicy] = &PolicyValidator{}

// ValidateCreate implements admission.Validator.
func (v *PolicyValidator) ValidateCreate(_ context.Context, p *v1alpha1.RetryPolicy) (admission.Warnings, error) {
	return v.validate(p)
}

// ValidateUpdate implements admission.Validator. An update that leaves the spec alone (labels,
// finalizers) is not validated again: a policy stored before the webhook existed must still be
// deletable, and the controller's metadata updates should not collect warnings.
func (v *PolicyValidator) ValidateUpdate(_ context.Context, oldP, newP *v1alpha1.RetryPolicy) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(oldP.Spec, newP.Spec) {
		return nil, nil
	}
	return v.validate(newP)
}

// ValidateDelete implements admission.Validator; deletes are never refused.
func (v *PolicyValidator) ValidateDelete(context.Context, *v1alpha1.RetryPolicy) (admission.Warnings, error) {
	return nil, nil
}

func (v *PolicyValidator) validate(p *v1alpha1.RetryPolicy) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if p.Spec.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(p.Spec.Selector,
			metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("RetryPolicy").GroupKind(), p.Name, errs)
	}

	if v.index == nil || !v.index.HasSynced() {
		return specWarnings(&p.Spec, checkedGraph{unchecked: "the manager's workload cache has not synced yet"}), nil
	}
	pol := workload.ForRetryPolicy(p)
	r, a := workload.Analyze(pol, v.index.Workloads(p.Namespace), nil, v.index.Services(p.Namespace).List()...)
	node := func(entry string) string {
		n, _ := pol.Entrypoint(entry)
		return n
	}
	return specWarnings(&p.Spec, checkedGraph{r: r, a: a, node: node, where: " in namespace " + p.Namespace, notes: nothingSelected(pol, r)}), nil
}

// nothingSelected is the note of a policy that selects no workload of its scope today (the
// status's NothingSelected, said at admission as the cluster policy's empty scope is): a
// selector with a typo passed in silence and reported only in the status.
func nothingSelected(pol *workload.Policy, r *workload.Result) []string {
	if len(r.Selected) > 0 || pol.Scope().Len() == 0 {
		return nil
	}
	return []string{strings.TrimSuffix(status.NothingSelectedMessage(pol), ": nothing to check") + " (yet): nothing is checked"}
}

// checkedGraph is what a validator checked a policy's spec against: its current graph (r, a),
// or why it could not (unchecked), and its own notes on the selection.
type checkedGraph struct {
	// unchecked says why the graph was not checked ("": it was, r and a are set).
	unchecked string
	// notes come after the client attempts' warnings, before the graph's ("selects no namespace").
	notes []string
	r     *workload.Result
	a     *graph.Analysis
	// node is an entrypoint's node in r, where says where its workloads were looked for in the
	// warning (" in namespace shop", or "" for a cluster policy).
	node  func(service string) string
	where string
}

// specWarnings are the warnings of a policy's spec, of either kind: client attempts above the
// cap (always), then what g says: the entrypoints no selected workload provides and a cap the
// current graph already exceeds, or why those were not checked.
func specWarnings(spec *v1alpha1.RetryPolicySpec, g checkedGraph) admission.Warnings {
	path := field.NewPath("spec")
	var warnings admission.Warnings
	cap := int64(spec.MaxAmplification)
	for i, e := range spec.Entrypoints {
		if int64(e.ClientAttempts) > cap {
			warnings = append(warnings, fmt.Sprintf("%s: %d exceeds spec.maxAmplification %d: every chain from %s is over the cap whatever its services retry, and no rewrite can fit",
				path.Child("entrypoints").Index(i).Child("clientAttempts"), e.ClientAttempts, cap, e.Service))
		}
	}
	if g.unchecked != "" {
		return append(warnings, g.unchecked+": entrypoints and the current amplification were not checked")
	}
	warnings = append(warnings, g.notes...)
	for i, e := range spec.Entrypoints {
		if !g.r.HasNode(g.node(e.Service)) {
			warnings = append(warnings, fmt.Sprintf("%s: %q is not the service of any workload this policy selects%s (yet)",
				path.Child("entrypoints").Index(i).Child("service"), e.Service, g.where))
		}
	}
	if !g.a.WithinCap() {
		worst := graph.FormatAmount(g.a.Amplification)
		if len(g.a.Violations) > 0 {
			worst = g.a.Violations[0].Message
		}
		if more := len(g.a.Violations) - 1; more > 0 {
			worst += fmt.Sprintf("; and %d more paths", more)
		}
		warnings = append(warnings, fmt.Sprintf("spec.maxAmplification: the current graph already exceeds the cap (%s): deploys that raise retries on those paths will be %s",
			worst, modeConsequence(spec.Enforcement)))
	}
	// The same for spec.maxTimeToAnswer, which the gate enforces alike: before, a policy whose
	// chains were already over it was admitted without a word, and only the status said so
	// (WithinMaxTime False).
	if spec.MaxTimeToAnswer != nil {
		if ta := g.r.AnalyzeTime(); ta != nil && ta.OverMax() {
			worst := ta.Violations[0].Message
			if more := max(ta.ViolationsTotal, len(ta.Violations)) - 1; more > 0 {
				worst += fmt.Sprintf("; and %d more chains", more)
			}
			consequence := modeConsequence(spec.Enforcement)
			if spec.Enforcement == v1alpha1.EnforcementRewrite {
				consequence = "rewritten where fewer attempts fit, else refused"
			}
			warnings = append(warnings, fmt.Sprintf("spec.maxTimeToAnswer: the current graph already exceeds it (%s): deploys that lengthen those chains will be %s",
				worst, consequence))
		}
	}
	return warnings
}

func modeConsequence(e v1alpha1.Enforcement) string {
	switch e {
	case v1alpha1.EnforcementRewrite:
		return "rewritten"
	case v1alpha1.EnforcementAudit:
		return "admitted with a warning"
	}
	return "refused"
}
