package mesh

// LayerFix is one layer's part of an edge's fix (Split).
type LayerFix struct {
	Layer Layer
	// Tries is what the fix asks of the layer: what it gives under the fix when the edge fits,
	// else the fewest the edge needed of it.
	Tries int64
	// Give is the tries the layer gives under the fix: Tries, its field's fewest when it cannot
	// give that few (a Gateway API rule: 2, MinTries), Layer.Tries when it cannot be lowered at
	// all (Rewrite nil).
	Give int64
	// Rewrite changes the layer's field to Give tries; nil when no object's field can (Err says
	// what to do instead).
	Rewrite *Rewrite
	// Err is why the layer does not give Tries; nil when it does.
	Err error
}

// EdgeSplit is a planned edge value divided between the caller's attempts and the mesh's
// layers on the edge (Split).
type EdgeSplit struct {
	// App is the caller's attempts under the fix.
	App int64
	// Layers are the layers the fix lowers, and, when the edge does not fit, those it would need
	// lower and cannot, in the order Split chose them.
	Layers []LayerFix
	// Meshed is false when no layer gives more than 1 try (App alone is the planned value).
	Meshed bool
	// Carries is what the edge carries under the fix: App times what every layer gives.
	Carries int64
	// Fits: Carries is at most the planned value.
	Fits bool
}

// Split divides a planned edge value between the caller's own attempts (app) and the mesh's
// layers on the edge (DESIGN.md, "Mesh retry layers"), lowering as many layers as the value
// needs, in this order:
//
//  1. app, when above 1: the retrycap.dev/upstreams annotation (retrycap's own number: its proxy
//     makes those attempts, the gate rewrites it, one line of the patch), to planned over the
//     layers' tries, at least 1. A caller whose attempts are not ours to change (an entrypoint's
//     clients: workload.Result.PlanFix) is split with app 1.
//  2. then the layers, one at a time, each at most once: a layer whose field alone brings the
//     edge within planned, the one that keeps the most tries that way (then the largest layer,
//     then the first in order of application); when none can alone, the one whose fewest tries
//     lower the edge most (same ties), to its fewest (mesh.LowestRewrite), and again.
//  3. a layer no object's field can lower (a mesh default, a ConfigMap's YAML, a GRPCRoute) is
//     never lowered by the fix: it is named, with what to do instead, only when every layer
//     that can be lowered is at its fewest and the edge is still over planned (Fits false).
//
// Why: one change per edge where one change does it (the fix a user reads and applies), the
// annotation before a shared mesh object (a VirtualService route lowers every caller's tries),
// and never a number the patch cannot write. Whenever app at 1 and every layer at its fewest
// is within planned, the split is (Fits): the layers end at their fewest or at a value that
// brings the edge within planned, and the loop stops only then or when none can go lower.
// The status's fix text, the gate's suggestion and analyze -o patch all split edges here.
func Split(app int64, layers []Layer, planned int64) EdgeSplit {
	t := Edge{Layers: layers}.Tries()
	if t <= 1 {
		return EdgeSplit{App: planned, Carries: planned, Fits: true}
	}
	planned = max(planned, 1)
	s := EdgeSplit{App: max(app, 1), Meshed: true}
	if app > 1 {
		s.App = min(app, max(planned/t, 1)) // never raised (planned above app x t: nothing to lower)
	}
	rest := max(planned/s.App, 1) // the most the layers may give together
	give := make([]int64, len(layers))
	for i, l := range layers {
		give[i] = l.Tries
	}
	done := make([]bool, len(layers))
	prod := t
	type cand struct {
		i     int
		want  int64
		after int64
		rw    *Rewrite
		g     int64
		err   error
	}
	better := func(a, b cand, keepMore bool) bool { // a before b
		if a.after != b.after {
			return (a.after > b.after) == keepMore
		}
		if layers[a.i].Tries != layers[b.i].Tries {
			return layers[a.i].Tries > layers[b.i].Tries
		}
		return a.i < b.i
	}
	for prod > rest {
		var finish, step *cand
		var stuck []cand
		for i, l := range layers {
			if done[i] || give[i] <= 1 {
				continue
			}
			other := prod / give[i]
			want := max(rest/other, 1)
			rw, g, err := LowestRewrite(l, want)
			c := cand{i: i, want: want, after: other * g, rw: rw, g: g, err: err}
			switch {
			case rw == nil:
				stuck = append(stuck, c)
			case c.after <= rest:
				if finish == nil || better(c, *finish, true) {
					finish = &c
				}
			default:
				if step == nil || better(c, *step, false) {
					step = &c
				}
			}
		}
		c := finish
		if c == nil {
			c = step
		}
		if c == nil {
			// Nothing left that the fix can lower: the layers that cannot be say what to do.
			for _, x := range stuck {
				s.Layers = append(s.Layers, LayerFix{Layer: layers[x.i], Tries: x.want, Give: layers[x.i].Tries, Err: x.err})
			}
			break
		}
		done[c.i] = true
		give[c.i] = c.g
		prod = c.after
		s.Layers = append(s.Layers, LayerFix{Layer: layers[c.i], Tries: c.want, Give: c.g, Rewrite: c.rw, Err: c.err})
	}
	s.Carries = s.App * prod
	s.Fits = prod <= rest
	if s.Fits {
		// A layer lowered to its fewest on the way is asked for what it gives: the edge fits,
		// so its "cannot give fewer" is no reason of anything.
		for i := range s.Layers {
			s.Layers[i].Tries, s.Layers[i].Err = s.Layers[i].Give, nil
		}
	}
	return s
}

// Fewest is the fewest tries an edge through layers can carry under a fix (Split with app 1 and
// 1 planned: every field at its fewest, a layer no object's field lowers as it is): what the
// whole-graph planner keeps room for below an edge (graph.PlanRewriteFloors). byHand counts a
// layer no object's field lowers as 1 try instead: what its fix asks the user to do by hand
// (declare a VirtualService route with attempts 0, change the MeshConfig's YAML) gives 1.
func Fewest(layers []Layer) (fewest, byHand int64) {
	fewest, byHand = 1, 1
	var rest []Layer
	for _, l := range layers {
		switch {
		case l.Tries <= 1:
		case l.Object == "" || l.FieldPath == "":
			// No field to rewrite (plan refuses it whatever the tries): known without building
			// the refusal's text, which the status path would do for every edge of a graph
			// under a mesh's default.
			fewest *= l.Tries
		default:
			rest = append(rest, l)
		}
	}
	if len(rest) == 0 {
		return fewest, byHand
	}
	// Asked for 1, Split lowers every layer it can to its fewest, each on its own.
	for _, lf := range Split(1, rest, 1).Layers {
		fewest *= lf.Give
		if lf.Rewrite != nil {
			byHand *= lf.Give
		}
	}
	return fewest, byHand
}
