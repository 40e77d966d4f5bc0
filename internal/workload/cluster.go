package workload

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

// A ClusterRetryPolicy's graph is built by the same builder as a RetryPolicy's (build); what
// differs is the selection (namespaces by their labels, then the pod-template selector) and the
// naming: every in-cluster node is "name.ns", so that "order" of shop and "order" of orders are
// two nodes, and an upstream "payment.payments" of a workload in shop is the node the workloads
// of payments declare their edges from. Policy (policy.go) carries both differences.

// QualifiedNode is the node of service name in namespace ns in a cluster policy's graph:
// "name.ns". Every in-cluster node of such a graph has this form.
func QualifiedNode(name, ns string) string { return name + "." + ns }

// qualifiedName is an upstream name as normalised for namespace ns (NormalizeUpstream) named for
// a cluster policy's graph: a service of ns ("order") is "order.ns"; a service of another
// namespace ("payment.payments") and an external host ("api.stripe.com") stay as they are.
func qualifiedName(normalized, ns string) string {
	if strings.IndexByte(normalized, '.') < 0 {
		return QualifiedNode(normalized, ns)
	}
	return normalized
}

// ClusterScope is the namespaces a ClusterRetryPolicy selects (its namespaceSelector over the
// Namespace objects' labels). Immutable once made.
type ClusterScope struct {
	namespaces []string // sorted
}

// NewClusterScope selects, among the namespaces namespaceLabels has (namespace -> its labels),
// those p's namespaceSelector matches ({} every one). A nil or invalid selector is an error
// naming the policy and the field.
func NewClusterScope(p *v1alpha1.ClusterRetryPolicy, namespaceLabels map[string]map[string]string) (*ClusterScope, error) {
	if p.Spec.NamespaceSelector == nil {
		return nil, fmt.Errorf("ClusterRetryPolicy %s: spec.namespaceSelector is required ({} selects every namespace)", p.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("ClusterRetryPolicy %s: spec.namespaceSelector: %w", p.Name, err)
	}
	s := &ClusterScope{}
	for ns, l := range namespaceLabels {
		if sel.Matches(labels.Set(l)) {
			s.namespaces = append(s.namespaces, ns)
		}
	}
	slices.Sort(s.namespaces)
	return s, nil
}

// NewClusterScopeOf is the scope of exactly the namespaces given (for a caller that selected
// them itself).
func NewClusterScopeOf(namespaces ...string) *ClusterScope {
	s := &ClusterScope{namespaces: slices.Clone(namespaces)}
	slices.Sort(s.namespaces)
	s.namespaces = slices.Compact(s.namespaces)
	return s
}

// Has reports whether namespace ns is selected. A nil scope selects none.
func (s *ClusterScope) Has(ns string) bool {
	if s == nil {
		return false
	}
	if len(s.namespaces) == 1 {
		// A RetryPolicy's scope: asked once per workload of every build, a comparison is
		// cheaper than the generic search (which showed at 5,000 workloads).
		return s.namespaces[0] == ns
	}
	_, ok := slices.BinarySearch(s.namespaces, ns)
	return ok
}

// Namespaces are the selected namespaces, sorted (a new slice).
func (s *ClusterScope) Namespaces() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.namespaces)
}

// equal reports whether s and t select the same namespaces.
func (s *ClusterScope) equal(t *ClusterScope) bool {
	if s == nil || t == nil {
		return s.Len() == t.Len()
	}
	return slices.Equal(s.namespaces, t.namespaces)
}

// Len is the number of selected namespaces.
func (s *ClusterScope) Len() int {
	if s == nil {
		return 0
	}
	return len(s.namespaces)
}

// Analyze is graph.Analyze of r's graph with its cap, the violations explained with their mesh
// layers (ExplainMesh) and the suggestions naming the workloads behind a Service's node
// (NameWorkloads): what Analyze returns.
func (r *Result) Analyze() *graph.Analysis {
	a := graph.Analyze(r.Graph, r.Cap)
	r.ExplainMesh(a)
	r.NameWorkloads(a)
	return a
}

// Spec is the spec of r's policy.
func (r *Result) Spec() *v1alpha1.RetryPolicySpec { return r.Policy.Spec() }

// PolicyName names r's policy in messages: "ClusterRetryPolicy checkout" or "RetryPolicy
// shop/checkout".
func (r *Result) PolicyName() string { return r.Policy.Ref().String() }

// MergeServiceSets is the union of sets of different namespaces (the shared workload index keeps one per
// namespace; a cluster policy's graph resolves through those of every selected namespace). The
// sets are not modified; nil ones are skipped; nil when all are. Sets sharing a namespace must
// not be merged (the later one's Services of a name would replace the earlier's in one map and
// not in the other).
func MergeServiceSets(sets ...*ServiceSet) *ServiceSet {
	var out *ServiceSet
	n := 0
	for _, s := range sets {
		if s == nil {
			continue
		}
		if out == nil {
			// One set: share it as it is (immutable).
			out = s
			n = 1
			continue
		}
		if n == 1 {
			out = out.Clone()
		}
		n++
		maps.Copy(out.byName, s.byName)
		maps.Copy(out.byPair, s.byPair)
	}
	return out
}
