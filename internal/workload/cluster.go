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
	"github.com/retrycap/retrycap/internal/mesh"
)

// A ClusterRetryPolicy's graph is built by the same builder as a RetryPolicy's (build); what
// differs is the selection (namespaces by their labels, then the pod-template selector) and the
// naming: every in-cluster node is "name.ns", so that "order" of shop and "order" of orders are
// two nodes, and an upstream "payment.payments" of a workload in shop is the node the workloads
// of payments declare their edges from.

// policyRef is the policy a graph is built for and how it names nodes: a RetryPolicy (policy),
// or a ClusterRetryPolicy (cluster, its namespaces scope).
type policyRef struct {
	spec    *v1alpha1.RetryPolicySpec
	policy  *v1alpha1.RetryPolicy
	cluster *v1alpha1.ClusterRetryPolicy
	scope   *ClusterScope
}

func namespaced(p *v1alpha1.RetryPolicy) policyRef { return policyRef{spec: &p.Spec, policy: p} }

func clustered(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope) policyRef {
	if s == nil {
		s = &ClusterScope{}
	}
	return policyRef{spec: &p.Spec.RetryPolicySpec, cluster: p, scope: s}
}

// QualifiedNode is the node of service name in namespace ns in a cluster policy's graph:
// "name.ns". Every in-cluster node of such a graph has this form.
func QualifiedNode(name, ns string) string { return name + "." + ns }

// QualifiedName is an upstream name as normalised for namespace ns (NormalizeUpstream) named for
// a cluster policy's graph: a service of ns ("order") is "order.ns"; a service of another
// namespace ("payment.payments") and an external host ("api.stripe.com") stay as they are.
func QualifiedName(normalized, ns string) string {
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

// Len is the number of selected namespaces.
func (s *ClusterScope) Len() int {
	if s == nil {
		return 0
	}
	return len(s.namespaces)
}

// ClusterMatcher returns whether p selects a workload: its namespace is in s, and p's pod-template
// selector (nil: every workload) matches its labels. An invalid selector is an error naming the
// policy and the field.
func ClusterMatcher(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope) (func(Workload) bool, error) {
	if p.Spec.Selector == nil {
		return func(w Workload) bool { return s.Has(w.Namespace) }, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("ClusterRetryPolicy %s: spec.selector: %w", p.Name, err)
	}
	return func(w Workload) bool { return s.Has(w.Namespace) && sel.Matches(w.Labels) }, nil
}

// BuildCluster is BuildMesh for a ClusterRetryPolicy over the namespaces s selects (set nil: no
// mesh layers): ws and svcs may span any namespaces, only the selected ones count. Nodes are
// "name.ns"; an upstream into a selected namespace resolves through that namespace's Services
// (as an in-namespace one does), one into an unselected namespace is a leaf; mesh layers apply
// per caller's namespace; entrypoints name "service.namespace", and without them the default
// entrypoints are the selected nodes nobody calls.
func BuildCluster(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope, ws []Workload, set *mesh.Set, svcs ...Service) *Result {
	selects, err := ClusterMatcher(p, s)
	sel := parseSelected(ws, selects, err)
	return build(clustered(p, s), sel, err, NewServiceSet(svcs), set)
}

// BuildClusterParsed is BuildCluster over workloads parsed beforehand (from several namespaces,
// e.g. the shared workload index per selected namespace, concatenated: sorted by Compare they are not
// sorted again) and Services indexed beforehand (nil: none).
func BuildClusterParsed(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) *Result {
	selects, err := ClusterMatcher(p, s)
	sel := selectParsed(ps, selects, err)
	return build(clustered(p, s), sel, err, svcs, set)
}

// BuildClusterJudged is BuildJudgedParsed for a cluster policy: incoming in place of its stored
// version, the workloads sharing a node with it (same namespace) contributing no edges; ps from
// several namespaces, sorted by Compare, not modified.
func BuildClusterJudged(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope, ps []*Parsed, incoming *Parsed, svcs *ServiceSet, set *mesh.Set) *Result {
	return BuildClusterParsed(p, s, judged(ps, incoming, svcs), svcs, set)
}

// AnalyzeCluster is BuildCluster followed by graph.Analyze with the policy's cap, as AnalyzeMesh.
func AnalyzeCluster(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope, ws []Workload, set *mesh.Set, svcs ...Service) (*Result, *graph.Analysis) {
	r := BuildCluster(p, s, ws, set, svcs...)
	return r, r.Analyze()
}

// Analyze is graph.Analyze of r's graph with its cap, the violations explained with their mesh
// layers (ExplainMesh) and the suggestions naming the workloads behind a Service's node
// (NameWorkloads): what Analyze and AnalyzeCluster return.
func (r *Result) Analyze() *graph.Analysis {
	a := graph.Analyze(r.Graph, r.Cap)
	r.ExplainMesh(a)
	r.NameWorkloads(a)
	return a
}

// NewClusterBase is NewBase for a cluster policy: its graph of ps (several namespaces, sorted by
// Compare) analysed once, against which Base.Judge judges an incoming workload of a selected
// namespace as BuildClusterJudged would.
func NewClusterBase(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope, ps []*Parsed, svcs *ServiceSet) *Base {
	return newBase(BuildClusterParsed(p, s, ps, svcs, nil))
}

// Spec is the spec of r's policy, of either kind.
func (r *Result) Spec() *v1alpha1.RetryPolicySpec {
	if r.ClusterPolicy != nil {
		return &r.ClusterPolicy.Spec.RetryPolicySpec
	}
	return &r.Policy.Spec
}

// PolicyName names r's policy in messages: "ClusterRetryPolicy checkout" or "RetryPolicy
// shop/checkout".
func (r *Result) PolicyName() string {
	if r.ClusterPolicy != nil {
		return ClusterPolicyName(r.ClusterPolicy)
	}
	return PolicyName(r.Policy)
}

// PolicyName is "RetryPolicy shop/checkout".
func PolicyName(p *v1alpha1.RetryPolicy) string { return "RetryPolicy " + p.Namespace + "/" + p.Name }

// ClusterPolicyName is "ClusterRetryPolicy checkout".
func ClusterPolicyName(p *v1alpha1.ClusterRetryPolicy) string { return "ClusterRetryPolicy " + p.Name }

// RaisesClusterRetries is RaisesRetries for a cluster policy: names are read in the workload's
// own namespace (old and incoming are versions of one workload), which compares them exactly as
// the cluster graph's "name.ns" nodes would.
func RaisesClusterRetries(p *v1alpha1.ClusterRetryPolicy, old, incoming Workload) (bool, error) {
	rp := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: incoming.Namespace}, Spec: p.Spec.RetryPolicySpec}
	return RaisesRetries(rp, old, incoming)
}

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
