package workload

import (
	"cmp"
)

// The kinds of policy a workload can be selected by, as messages name them.
const (
	KindRetryPolicy        = "RetryPolicy"
	KindClusterRetryPolicy = "ClusterRetryPolicy"
)

// PolicyRef names a policy of either kind with its cap (Policy.Ref): what "the strictest
// selecting policy" is decided on, so that the gate and the injector order RetryPolicies and
// ClusterRetryPolicies by one rule (CompareRefs).
type PolicyRef struct {
	// Kind is KindRetryPolicy or KindClusterRetryPolicy.
	Kind string
	// Namespace is a RetryPolicy's namespace; empty for a ClusterRetryPolicy.
	Namespace string
	Name      string
	// Cap is the policy's spec.maxAmplification.
	Cap int32
}

// QualifiedName is how messages name the policy after its kind: "shop/checkout" for a
// RetryPolicy, "chain" for a ClusterRetryPolicy.
func (r PolicyRef) QualifiedName() string {
	if r.Kind == KindClusterRetryPolicy {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// String is "RetryPolicy shop/checkout" or "ClusterRetryPolicy chain".
func (r PolicyRef) String() string { return r.Kind + " " + r.QualifiedName() }

// CompareRefs orders policies of either kind strictest first: the lowest cap; on a tie a
// RetryPolicy before a ClusterRetryPolicy, then namespace, then name. A namespaced policy wins a
// tie because it is the narrower rule, written by the team that owns the namespace for its
// workloads (its timeouts, budget and breaker are tuned to them), while the cluster policy is
// the organisation's ceiling over many teams: with equal caps the ceiling is met either way, and
// the team's own settings are the better ones to render. Names break the remaining ties so that
// the choice never depends on the order a cache lists policies in.
func CompareRefs(a, b PolicyRef) int {
	return cmp.Or(cmp.Compare(a.Cap, b.Cap), cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)),
		cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// CompareNames orders policies of either kind by name: RetryPolicies (by namespace, then name)
// before ClusterRetryPolicies (by name), the order the admission gates list them in.
func CompareNames(a, b PolicyRef) int {
	return cmp.Or(cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)), cmp.Compare(a.QualifiedName(), b.QualifiedName()))
}

func kindRank(kind string) int {
	if kind == KindClusterRetryPolicy {
		return 1
	}
	return 0
}
