package gate

import (
	"fmt"
	"slices"

	"github.com/retrycap/retrycap/internal/workload"
)

// meshVerdict is v with the mesh layers of its path (the message names them) and its plan in
// the application's terms: the plan lowers the edges' attempts, which with a mesh are the
// application's attempts times the layers' tries, while the workload's annotation sets only
// the former. A planned value n on an edge of t tries per attempt is n/t attempts; below 1, the
// layers alone exceed what the cap leaves the edge, and no rewrite of the annotation fits (it
// is lowered to 1, as far as it goes). r is the graph v was judged on.
func meshVerdict(v verdict, r *workload.Result, incoming *workload.Parsed) verdict {
	if r.Mesh() == nil {
		return v
	}
	v.layers = r.ExplainJudgement(v.judge, incoming, v.node)
	if v.plan == nil || len(v.plan.Changes) == 0 {
		return v
	}
	edges := r.IncomingEdges(incoming, v.node)
	plan := *v.plan
	plan.Changes = slices.Clone(plan.Changes)
	for i, ch := range plan.Changes {
		if ch.From != v.node {
			continue
		}
		for _, e := range edges {
			t := e.Attempts() / e.App
			if e.To != ch.To || t <= 1 {
				continue
			}
			app := ch.New / t
			if app < 1 {
				if plan.Fits {
					plan.Fits = false
					plan.Reason = fmt.Sprintf("even with %s: %s=1 the edge is %d tries (the mesh's layers) where the cap leaves it %d", v.node, ch.To, t, ch.New)
				}
				app = 1
			}
			plan.Changes[i].Old, plan.Changes[i].New = e.App, app
			break
		}
	}
	v.plan = &plan
	return v
}
