package webhook

import (
	"context"
	"fmt"
	"slices"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// clusterPolicies are the ClusterRetryPolicies the object bears on (MeshBearing.Consults: their
// scope has a namespace whose callers its layers reach), each with the workloads of its scope
// that can change the verdict (clusterWorkloads) and its scope's Services, from the cache. The
// error is the namespace the cache does not have yet: its labels decide the scopes.
func (g *MeshGate) clusterPolicies(ctx context.Context, ns string, bears MeshBearing, set *mesh.Set, raw, old []byte) ([]MeshClusterPolicy, error) {
	var list v1alpha1.ClusterRetryPolicyList
	if err := g.policies.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("retrycap mesh gate: listing the ClusterRetryPolicies from the cache: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	// As the workload gate: a namespace created a moment ago with the object (kubectl apply of
	// both) may not have reached the index, and judging without its labels would let the object
	// past the cluster policies.
	// ns "": a Namespace being created (mesh_membership.go), which no scope can hold yet.
	indexed := ns == ""
	if !indexed {
		wctx, cancel := context.WithTimeout(ctx, cacheSyncWait)
		indexed = indexedNamespace(wctx, g.index, ns)
		cancel()
	}
	if !indexed {
		return nil, fmt.Errorf("retrycap mesh gate: namespace %s is not in the manager's cache yet (its labels decide which ClusterRetryPolicies apply); retry shortly", ns)
	}
	// A object that does not decode is refused by DecideMesh, naming it: no workload is read.
	_, before, after, setsErr := meshSets(set, raw, old)
	var out []MeshClusterPolicy
	for i := range list.Items {
		p := &list.Items[i]
		scope, err := g.index.ClusterScope(p)
		if err != nil {
			// The validator refuses a bad selector; one stored before the webhook is the
			// policy's fault, not the object's.
			g.log.Error(err, "ignoring a ClusterRetryPolicy the mesh gate cannot evaluate")
			continue
		}
		if !bears.Consults(scope) {
			continue
		}
		c := MeshClusterPolicy{Policy: p, Scope: scope}
		if setsErr == nil {
			c.Workloads = g.clusterWorkloads(scope, bears, before, after)
			c.Services = g.index.ScopeServices(scope)
		}
		out = append(out, c)
	}
	return out, nil
}

// clusterWorkloads are the stored workloads of scope's namespaces that can bear on the verdict:
// for every workload of a namespace the layers reach whose tries on some call are higher with
// after than with before (the caller of a raised edge), the workloads the workload gate would
// judge that caller with (index.Index.RelevantClusterParsed: the services that reach it and those
// it reaches, across the scope), and likewise for every backend of a Gateway route whose client
// attempts after raises. The graph of these judges every raised edge as the graph of the whole
// scope would: the chains through a caller run only through them. Sorted by workload.Compare.
func (g *MeshGate) clusterWorkloads(scope *workload.ClusterScope, bears MeshBearing, before, after *mesh.Set) []*workload.Parsed {
	var out []*workload.Parsed
	for _, ns := range scope.Namespaces() {
		if !bears.All && !bears.Namespaces[ns] {
			continue
		}
		for _, p := range g.index.Parsed(ns) {
			w := p.Workload
			ups, err := workload.Upstreams(w, ns, 1)
			if err != nil || len(ups) == 0 {
				continue
			}
			c := w.MeshCaller()
			names := make([]string, len(ups))
			raises := false
			for i, u := range ups {
				names[i] = u.Name
				raises = raises || after.Edge(c, u.Name).Tries() > before.Edge(c, u.Name).Tries()
			}
			if raises {
				out = append(out, g.index.RelevantClusterParsed(ns, scope.Has, g.index.Nodes(w), names)...)
			}
		}
	}
	for _, b := range after.Backends() {
		if scope.Has(b.Namespace) && after.Entry(b).Tries() > before.Entry(b).Tries() {
			out = append(out, g.index.RelevantClusterParsed(b.Namespace, scope.Has, []string{b.Name}, []string{b.Name})...)
		}
	}
	slices.SortFunc(out, func(a, b *workload.Parsed) int { return workload.Compare(a.Workload, b.Workload) })
	// Several raised callers share the services around them.
	return slices.CompactFunc(out, func(a, b *workload.Parsed) bool { return a == b })
}
