package workload

import (
	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// BuildParsedMesh is BuildParsed with the retry layers of set (nil: exactly BuildParsed), as
// BuildMesh is Build's: the manager's controller and mesh webhook build from the shared index.
func BuildParsedMesh(p *v1alpha1.RetryPolicy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) *Result {
	selects, err := Matcher(p)
	sel := selectParsed(ps, selects, err)
	return build(namespaced(p), sel, err, svcs, set)
}
