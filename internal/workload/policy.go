package workload

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
)

// Policy is a retry policy of either kind as every pure package sees it (the graph builder, the
// admission gates, the injector, the status setters, analyze): a spec over a set of namespaces.
// A RetryPolicy is a policy over its own namespace whose nodes are the plain service names; a
// ClusterRetryPolicy is a policy over the namespaces its namespaceSelector selects whose nodes
// are "name.ns" (QualifiedNode). ForRetryPolicy and ForClusterRetryPolicy adapt the two API
// types; they are the only place that tells the kinds apart, so a caller never branches on the
// kind: it asks the Policy for its reference (Ref, ordered by CompareRefs), spec, selection
// (Selects), scope and node names (Node, UpstreamNode, Entrypoint).
//
// Immutable once made and safe for concurrent use; use it through its pointer (a RetryPolicy's
// scope lives inside it).
type Policy struct {
	ref  PolicyRef
	spec *v1alpha1.RetryPolicySpec
	obj  runtime.Object
	// scope is the namespaces whose workloads the policy selects: &own for a RetryPolicy.
	scope *ClusterScope
	own   ClusterScope
	one   [1]string
	// nsSel is a ClusterRetryPolicy's spec.namespaceSelector (nil for a RetryPolicy).
	nsSel *metav1.LabelSelector
	// qualified: nodes are named "name.ns" (a graph across namespaces).
	qualified bool
	// sel is the pod-template selector (nil: every workload of the scope); selErr an invalid
	// one, which selects nothing and is reported by Selects and the builder.
	sel    labels.Selector
	selErr error
}

// ForRetryPolicy is p as a Policy over its namespace. An invalid spec.selector is not an error
// here: Selects returns it and a graph built for the policy reports it (Result.Errors), naming
// the policy and the field, as the validator does.
func ForRetryPolicy(p *v1alpha1.RetryPolicy) *Policy {
	x := &Policy{ref: PolicyRef{Kind: KindRetryPolicy, Namespace: p.Namespace, Name: p.Name, Cap: p.Spec.MaxAmplification},
		spec: &p.Spec, obj: p}
	x.one[0] = p.Namespace
	x.own.namespaces = x.one[:]
	x.scope = &x.own
	if p.Spec.Selector != nil {
		x.sel, x.selErr = metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if x.selErr != nil {
			x.selErr = fmt.Errorf("RetryPolicy %s/%s: spec.selector: %w", p.Namespace, p.Name, x.selErr)
		}
	}
	return x
}

// ForClusterRetryPolicy is p as a Policy over the namespaces of s (NewClusterScope; nil selects
// none), as ForRetryPolicy.
func ForClusterRetryPolicy(p *v1alpha1.ClusterRetryPolicy, s *ClusterScope) *Policy {
	if s == nil {
		s = &ClusterScope{}
	}
	x := &Policy{ref: PolicyRef{Kind: KindClusterRetryPolicy, Name: p.Name, Cap: p.Spec.MaxAmplification},
		spec: &p.Spec.RetryPolicySpec, obj: p, scope: s, nsSel: p.Spec.NamespaceSelector, qualified: true}
	if p.Spec.Selector != nil {
		x.sel, x.selErr = metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if x.selErr != nil {
			x.selErr = fmt.Errorf("ClusterRetryPolicy %s: spec.selector: %w", p.Name, x.selErr)
		}
	}
	return x
}

// Ref names the policy with its kind and cap.
func (p *Policy) Ref() PolicyRef { return p.ref }

// Spec is the policy's spec (a ClusterRetryPolicy's inline RetryPolicySpec). Not to be modified.
func (p *Policy) Spec() *v1alpha1.RetryPolicySpec { return p.spec }

// Object is the API object the policy was made from (*v1alpha1.RetryPolicy or
// *v1alpha1.ClusterRetryPolicy): what an event about the policy is recorded on.
func (p *Policy) Object() runtime.Object { return p.obj }

// Scope is the namespaces whose workloads the policy selects: a RetryPolicy's own one.
func (p *Policy) Scope() *ClusterScope { return p.scope }

// NamespaceSelector is what chose the scope's namespaces: a ClusterRetryPolicy's
// spec.namespaceSelector; nil for a RetryPolicy, whose scope is its own namespace.
func (p *Policy) NamespaceSelector() *metav1.LabelSelector { return p.nsSel }

// String is the policy's reference: "RetryPolicy shop/checkout", "ClusterRetryPolicy chain".
func (p *Policy) String() string { return p.ref.String() }

// Selects reports whether p selects w: w's namespace is in p's scope and p's selector (nil:
// every workload) matches its pod-template labels. An invalid selector is the error, naming the
// policy and the field.
func (p *Policy) Selects(w Workload) (bool, error) {
	if p.selErr != nil {
		return false, p.selErr
	}
	return p.selects(w), nil
}

// SelectorErr is the policy's invalid selector (naming the policy and the field), nil when it
// is valid: such a policy selects nothing.
func (p *Policy) SelectorErr() error { return p.selErr }

// selects is Selects for a policy whose selector is valid.
func (p *Policy) selects(w Workload) bool {
	return p.scope.Has(w.Namespace) && (p.sel == nil || p.sel.Matches(w.Labels))
}

// Node is the node of service svc of namespace ns in p's graph: "svc.ns" in a
// ClusterRetryPolicy's; in a RetryPolicy's svc for a service of its namespace, and "svc.ns" (a
// leaf, as an upstream annotation names it) for one of another.
func (p *Policy) Node(svc, ns string) string {
	if p.qualified || ns != p.ref.Namespace {
		return QualifiedNode(svc, ns)
	}
	return svc
}

// UpstreamNode is the upstream name (as a workload of namespace ns writes it) as p's graph names
// it: normalised (NormalizeUpstream), and for a ClusterRetryPolicy an in-namespace name
// qualified (QualifiedName).
func (p *Policy) UpstreamNode(name, ns string) string {
	n := NormalizeUpstream(name, ns)
	if p.qualified {
		return qualifiedName(n, ns)
	}
	return n
}

// Entrypoint is spec.entrypoints' service as p's graph names it and the Service it names for
// the mesh layers: for a RetryPolicy the bare service of its namespace; for a
// ClusterRetryPolicy "service.namespace" (also written with .svc[.cluster.local]) is node
// "service.namespace", and a bare name stays a bare (unmatched) node.
func (p *Policy) Entrypoint(service string) (string, mesh.ServiceRef) {
	if !p.qualified {
		return service, mesh.ServiceRef{Namespace: p.ref.Namespace, Name: service}
	}
	if svc, ns, ok := annotations.SplitService(service); ok {
		return QualifiedNode(svc, ns), mesh.ServiceRef{Namespace: ns, Name: svc}
	}
	return service, mesh.ServiceRef{Name: service}
}

// nodes are the names (of services of namespace ns) as p's graph names them: names itself for a
// RetryPolicy (no copy), a new slice of "name.ns" for a ClusterRetryPolicy.
func (p *Policy) nodes(names []string, ns string) []string {
	if !p.qualified {
		return names
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QualifiedNode(n, ns)
	}
	return q
}

// serviceNode is x's service name as p's graph names it (see Node), cached on x.
func (p *Policy) serviceNode(x *Parsed) string {
	if p.qualified {
		return x.qualified().service
	}
	return x.service
}

// upstreamNode is x's i-th upstream as p's graph names it (see UpstreamNode), cached on x.
func (p *Policy) upstreamNode(x *Parsed, i int) string {
	if p.qualified {
		return x.qualified().upstreams[i]
	}
	return x.upstreams[i].Name
}

// upstreamService is the Service x's i-th upstream resolves through: one of x's namespace for an
// in-namespace name; for a policy across namespaces also one of another namespace of its scope
// ("name.ns"), a name into a namespace outside it resolving to none (a leaf).
func (p *Policy) upstreamService(svcs *ServiceSet, x *Parsed, i int) (Service, bool) {
	name, ns := x.upstreams[i].Name, x.Workload.Namespace
	if p.qualified {
		if svc, sns, ok := annotations.SplitService(name); ok {
			if !p.scope.Has(sns) {
				return Service{}, false
			}
			name, ns = svc, sns
		}
	}
	return svcs.Get(ns, name)
}

// sameGraphInput reports whether a graph built for p is built for q too, spec aside: the same
// kind, naming and namespaces (what Incremental may patch across).
func (p *Policy) sameGraphInput(q *Policy) bool {
	return p.qualified == q.qualified && p.scope.equal(q.scope)
}
