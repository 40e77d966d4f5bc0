package controller

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// Two policies may select one workload (a team's RetryPolicy under the organisation's
// ClusterRetryPolicy, or two RetryPolicies whose selectors overlap). Every selecting policy's
// cap is enforced at admission, but the injector renders one policy's settings, the strictest's
// (workload.CompareRefs): the others' spec.retry, budget, breaker and observability do not run
// for that workload. Their Ready condition says so (workload.Overridden), from the policies in
// the cache; the reconcilers watch the other policies (and namespace labels, which move a
// ClusterRetryPolicy's scope) so that the warning follows them.

// policiesOver are the policies of either kind, other than self, that may select a workload of
// one of namespaces: the RetryPolicies of those namespaces and the ClusterRetryPolicies whose
// scope has one of them, each with its scope from the namespaces' labels (listed only when there
// is a ClusterRetryPolicy: a reconcile of the common case, one policy per namespace and none of
// the cluster kind, lists two small lists from the cache and nothing else).
func policiesOver(ctx context.Context, c client.Reader, self workload.PolicyRef, namespaces []string) ([]*workload.Policy, error) {
	var out []*workload.Policy
	for _, ns := range namespaces {
		var rps v1alpha1.RetryPolicyList
		if err := c.List(ctx, &rps, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing the RetryPolicies of namespace %s: %w", ns, err)
		}
		for i := range rps.Items {
			if p := workload.ForRetryPolicy(&rps.Items[i]); p.Ref() != self {
				out = append(out, p)
			}
		}
	}
	var crps v1alpha1.ClusterRetryPolicyList
	if err := c.List(ctx, &crps); err != nil {
		return nil, fmt.Errorf("listing the ClusterRetryPolicies: %w", err)
	}
	if len(crps.Items) == 0 {
		return out, nil
	}
	nsLabels, err := namespaceLabels(ctx, c)
	if err != nil {
		return nil, err
	}
	for i := range crps.Items {
		s, err := workload.NewClusterScope(&crps.Items[i], nsLabels)
		if err != nil {
			continue // an invalid namespaceSelector selects nothing
		}
		if p := workload.ForClusterRetryPolicy(&crps.Items[i], s); p.Ref() != self {
			out = append(out, p)
		}
	}
	return out, nil
}

// overriddenOf is workload.Overridden for pol's selected workloads in namespaces.
func overriddenOf(ctx context.Context, c client.Reader, pol *workload.Policy, r *workload.Result, namespaces []string) (string, error) {
	if r == nil || len(r.Selected) == 0 {
		return "", nil
	}
	others, err := policiesOver(ctx, c, pol.Ref(), namespaces)
	if err != nil {
		return "", err
	}
	return workload.Overridden(pol, r.Selected, others), nil
}

// retryPoliciesIn maps namespaces to their RetryPolicies (the RetryPolicy reconciler's map of a
// changed policy of either kind or namespace's labels).
func retryPoliciesIn(ctx context.Context, c client.Reader, namespaces ...string) []reconcile.Request {
	var out []reconcile.Request
	for _, ns := range namespaces {
		var list v1alpha1.RetryPolicyList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			log.FromContext(ctx).Error(err, "listing the RetryPolicies of a namespace", "namespace", ns)
			continue
		}
		for i := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: list.Items[i].Name}})
		}
	}
	return out
}

// scopeOf is the namespaces a ClusterRetryPolicy selects now (none when its selector is invalid).
func scopeOf(ctx context.Context, c client.Reader, p *v1alpha1.ClusterRetryPolicy) []string {
	nsLabels, err := namespaceLabels(ctx, c)
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the Namespaces for a ClusterRetryPolicy's scope", "policy", p.Name)
		return nil
	}
	s, err := workload.NewClusterScope(p, nsLabels)
	if err != nil {
		return nil
	}
	return s.Namespaces()
}
