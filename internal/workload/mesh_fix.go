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
// no object declares the layer. An entrypoint whose client attempts a gateway route multiplies
// gets the route's field.

// meshSuggestion rewrites v's suggestion ("reviews: ratings=1; ...") in those units.
func (r *Result) meshSuggestion(v *graph.Violation) string {
	parts := strings.Split(v.Suggestion, "; ")
	var out []string
	for _, part := range parts {
		if strings.HasPrefix(part, "no rewrite fits: client attempts") {
			if s, ok := r.entrySuggestion(v); ok {
				out = append(out, s)
				continue
			}
		}
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

// splitSuggestion is the fix of edge node -> up (layers m) planned to carry planned tries.
func splitSuggestion(node, up string, m MeshEdge, planned int64) []string {
	app, l, tries, lower, _ := mesh.Split(m.App, m.Layers, planned)
	var out []string
	if app < m.App {
		out = append(out, fmt.Sprintf("%s: %s=%d", node, up, app))
	}
	if lower {
		rw, err := mesh.PlanRewrite(l, tries)
		if err != nil {
			out = append(out, fmt.Sprintf("%s -> %s: %v", node, up, err))
		} else {
			out = append(out, rw.Suggestion)
		}
	}
	return out
}

// entrySuggestion lowers the gateway layer on v's entrypoint's client attempts when those alone
// are over the cap (the planner cannot change client attempts, but the route's field is ours).
func (r *Result) entrySuggestion(v *graph.Violation) (string, bool) {
	l, tries, ok := r.EntryFix(v)
	if !ok {
		return "", false
	}
	rw, err := mesh.PlanRewrite(l, tries)
	if err != nil {
		return fmt.Sprintf("client -> %s: %v", v.Path[0], err), true
	}
	// The clients' own attempts stay: when they alone, times what the route gives then, still
	// exceed the cap, the chain cannot fit and the fix says so after the route's.
	if k := r.MeshEntry[v.Path[0]].Attempts() / l.Tries * tries; k > r.Cap {
		return fmt.Sprintf("%s; no rewrite fits: client attempts %d at entrypoint %s exceed cap %d", rw.Suggestion, k, v.Path[0], r.Cap), true
	}
	return rw.Suggestion, true
}

// EntryFix is the layer on v's entrypoint's client attempts to lower, and the tries it may give,
// when the entrypoint's mesh layers make v's path go over the cap (ok): what the status's
// suggestion and analyze -o patch lower.
func (r *Result) EntryFix(v *graph.Violation) (l mesh.Layer, tries int64, ok bool) {
	if len(v.Path) == 0 || len(v.Factors) == 0 {
		return mesh.Layer{}, 0, false
	}
	m, found := r.MeshEntry[v.Path[0]]
	if !found || !m.Multiplied() {
		return mesh.Layer{}, 0, false
	}
	rest := graph.Product(v.Factors[1:])
	allowed := max(r.Cap/max(rest, 1), 1)
	if allowed >= m.Attempts() {
		return mesh.Layer{}, 0, false
	}
	// The clients' own attempts (m.App) are not ours to change, only the layers: they may give
	// allowed / App tries (at least 1). Split with App taken as 1, or it would lower the client
	// attempts first and ask the route for too little (5 client attempts x 3 tries over cap 4
	// read "retry.attempts: 2 -> 1", which leaves 10).
	_, l, tries, lower, _ := mesh.Split(1, m.Layers, max(allowed/max(m.App, 1), 1))
	return l, tries, lower
}
