package workload

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// Fixes in the unit of the thing they change (DESIGN.md, "Real inputs, third round"): the
// planner gives each edge a number of tries, the mesh layers included; on a mesh-multiplied edge
// that number is split (mesh.Split, which analyze -o patch applies too) into an annotation value
// lower than today's and, where that is not enough, the mesh field to lower
// ("VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 -> 0"), or what to do when
// no object declares the layer. An entrypoint whose client attempts alone exceed the cap and a
// gateway route multiplies gets the route's field and the edges planned for what it leaves
// (fixplan.go: the plan -o patch applies).

// meshSuggestion rewrites v's suggestion ("reviews: ratings=1; ...") in those units. fp is
// r's combined fix (PlanFix) when a gateway route on an entrypoint is lowered, else nil: v's fix
// is then fp's (fixParts), not the graph planner's.
func (r *Result) meshSuggestion(v *graph.Violation, fp *FixPlan) string {
	parts := strings.Split(v.Suggestion, "; ")
	if fp != nil {
		parts = fp.fixParts(r, v, parts)
	}
	var out []string
	for _, part := range parts {
		node, change, ok := strings.Cut(part, ": ")
		up, val, ok2 := strings.Cut(change, "=")
		planned, err := strconv.ParseInt(val, 10, 64)
		m, meshed := r.MeshEdges[[2]string{node, up}]
		if !ok || !ok2 || err != nil || !meshed || !m.Multiplied() {
			out = append(out, part)
			continue
		}
		out = append(out, splitSuggestion(node, up, m, planned)...)
	}
	return strings.Join(out, "; ")
}

// splitSuggestion is the fix of edge node -> up (layers m) planned to carry planned tries:
// the annotation's new value, then each layer mesh.Split lowers, in its order, and each one it
// would need lower and cannot, with why.
func splitSuggestion(node, up string, m MeshEdge, planned int64) []string {
	sp := mesh.Split(m.App, m.Layers, planned)
	var out []string
	if sp.App < m.App {
		out = append(out, fmt.Sprintf("%s: %s=%d", node, up, sp.App))
	}
	for _, lf := range sp.Layers {
		// As -o patch: a field that cannot give that few is lowered as far as it goes (a Gateway
		// API rule: 2 tries), and the fix says so and why that is not enough.
		if lf.Rewrite != nil {
			out = append(out, lf.Rewrite.Suggestion)
		}
		if lf.Err != nil {
			out = append(out, fmt.Sprintf("%s -> %s: %v", node, up, lf.Err))
		}
	}
	return out
}
