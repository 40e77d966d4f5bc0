package workload

import (
	"reflect"
	"slices"
	"sort"

	"github.com/retrycap/retrycap/internal/mesh"
)

// Incremental is a policy's graph kept from one change to the next (of either kind: a
// ClusterRetryPolicy's spans its namespaces, nodes "name.ns"): the
// controller holds one per policy and, when a workload's upstreams change, patches the change into the graph instead
// of building the namespace's graph again. At 20,000 workloads in one namespace the build is
// ~30 ms of map work on an idle core (and the garbage of a 20,000-service graph per change);
// the patch costs the changed workload's edges plus O(V+E) of integer work, and the analysis
// that follows (~2 ms) is unchanged.
//
// The patch's result is exactly the build's (TestIncrementalEqualsBuild compares them after
// every step of random sequences of changes): the same Result, and the same graph down to the
// order of its nodes and edges, on which the analysis's ties depend. It is decided locally for
// a workload that the policy selects before and after, under the same service name and valid
// both times (and, with Services, with the same labels: the same Services front it), without
// mesh layers: a change of its upstreams (added, removed, other attempts or calls, malformed)
// or of an annotation the graph does not read; and for any change of a workload the policy
// selects neither before nor after. The edges of each node it is reached under are recomputed
// from that node's workloads (a Service's node carries the edges of every workload it selects),
// and the notes on the resolution through Services are made again (one pass over the selected
// workloads' upstreams, without the graph's maps). Without Services also a selected workload
// added or removed, (de)selected by a label change, or renamed (another service name, a
// malformed one): a removal and an add, each of which patches the edges of the workload's one
// node and keeps the selected nodes in the order of their first workload (graph.SelectAt,
// graph.Unselect). Anything else is built anew: with Services a workload added, removed,
// (de)selected or relabelled (the Services' nodes and their order move), a Service changed (the
// namespace's ServiceSet is another), mesh layers (a caller's layers depend on its labels and
// the mesh's objects), a policy spec changed, for a cluster policy another set of namespaces,
// more than maxPatched workloads changed since the last call.
//
// Not safe for concurrent use; the Result it hands out is changed by the next Update.
type Incremental struct {
	r   *Result
	ref *Policy // the policy (of either kind), its scope and selector
	// ps are the workloads the graph is of (the caller's slice, sorted by Compare, not modified).
	ps   []*Parsed
	svcs *ServiceSet
	set  *mesh.Set
	// What a patch reads, made on the first patch (O(workloads + edges), about a build's cost):
	// providers are the selected workloads whose edges each node carries, sorted; first is, per
	// edge in declaration order, the upstream that names it first (the graph's edges are sorted
	// by it).
	providers map[string][]*Parsed
	first     []mention
	// With Services: callers are the selected workloads that call each upstream node, sorted;
	// noteFirst and noteTo are, per note of Result.Notes, the upstream that first names its
	// node and the node (the notes are in that order).
	callers   map[string][]*Parsed
	noteFirst []mention
	noteTo    []string
}

// mention is upstream i of workload p declared from p's j-th node (Result.Nodes): the build adds
// edges in that order.
type mention struct {
	p    *Parsed
	j, i int
}

func compareMention(a, b mention) int {
	if c := compareParsed(a.p, b.p); c != 0 {
		return c
	}
	if a.j != b.j {
		return a.j - b.j
	}
	return a.i - b.i
}

// nodes are the nodes x's edges belong to in the Result (x selected, valid).
func (in *Incremental) nodes(x *Parsed) []string {
	if in.r.NodesOf != nil {
		return in.r.NodesOf[x.key]
	}
	return []string{in.r.serviceNode(x)}
}

// maxPatched is how many changed workloads one Update patches before it builds anew: a burst of
// changes (an initial sync, a rollout of many) costs one build, not many patches.
const maxPatched = 16

// NewIncremental builds p's graph of ps (sorted by Compare, as the index keeps them; not modified)
// with the Services svcs and the mesh layers set (nil: none): BuildParsed's result.
func NewIncremental(p *Policy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) *Incremental {
	in := &Incremental{}
	in.rebuild(p, ps, svcs, set)
	return in
}

// Result is the graph as of the last NewIncremental or Update.
func (in *Incremental) Result() *Result { return in.r }

func (in *Incremental) rebuild(p *Policy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) {
	*in = Incremental{r: BuildParsed(p, ps, svcs, set), ref: p, ps: ps, svcs: svcs, set: set}
}

// Update brings the Result to BuildParsed(p, ps, svcs, set): patched when the change can be
// decided locally (see Incremental), built anew otherwise (another kind or set of namespaces
// too). patched says which.
func (in *Incremental) Update(p *Policy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) (patched bool) {
	return in.update(p, ps, svcs, set)
}

func (in *Incremental) update(p *Policy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) (patched bool) {
	if !in.canPatch(p, svcs, set) {
		in.rebuild(p, ps, svcs, set)
		return false
	}
	changes, ok := diffParsed(in.ps, ps, maxPatched)
	if !ok {
		in.rebuild(p, ps, svcs, set)
		return false
	}
	for _, c := range changes {
		if !in.local(c[0], c[1]) {
			in.rebuild(p, ps, svcs, set)
			return false
		}
	}
	moved := false
	for _, c := range changes {
		old, x := c[0], c[1]
		so := old != nil && in.ref.selects(old.Workload)
		sx := x != nil && in.ref.selects(x.Workload)
		if so && sx && in.inPlace(old, x) {
			in.patch(old, x)
			continue
		}
		// Without Services any other change is a removal and an add: each leaves the Result
		// what a build of the workloads as of then gives, so both together do too.
		if so {
			in.remove(old)
			moved = true
		}
		if sx {
			in.add(x)
			moved = true
		}
	}
	in.ps, in.ref = ps, p
	in.r.Policy = p
	if moved {
		in.entrypointWarnings()
	}
	return true
}

// inPlace: old and x (the same key, both selected) are reached under the same valid service
// name, and with Services carry the same labels: the same nodes, whose edges patch recomputes.
func (in *Incremental) inPlace(old, x *Parsed) bool {
	return old.service == x.service && old.serviceErr == nil && x.serviceErr == nil &&
		(in.svcs == nil || old.Workload.Labels.Equal(x.Workload.Labels))
}

// canPatch: the same kind of policy, the same spec, namespace or selected namespaces, the same
// Services (the index hands out a new set on every change of one), no mesh layers before or
// after, a valid selector.
func (in *Incremental) canPatch(p *Policy, svcs *ServiceSet, set *mesh.Set) bool {
	if in.ref.selErr != nil || svcs != in.svcs || set != nil || in.set != nil || !p.sameGraphInput(in.ref) {
		return false
	}
	return reflect.DeepEqual(*p.spec, *in.ref.spec)
}

// local reports whether replacing old by x (the same key; nil: added or removed) is a change the
// patch decides: unselected both times (nothing changes); without Services any other (a
// selected workload added, removed, (de)selected, renamed: a removal and an add); with Services
// only one selected both times under the same valid service name and labels (the Services'
// nodes of a workload depend on its labels, and their order on every workload they front).
func (in *Incremental) local(old, x *Parsed) bool {
	so := old != nil && in.ref.selects(old.Workload)
	sx := x != nil && in.ref.selects(x.Workload)
	if !so && !sx {
		return true
	}
	if in.svcs == nil {
		return true
	}
	return so && sx && in.inPlace(old, x)
}

// diffParsed lists the pairs (old, new) of a and b (both sorted by Compare, keys unique) that
// differ: the same pointer is the same version (the index replaces an entry on a change); a nil
// side is an add or a removal. false when more than limit differ.
func diffParsed(a, b []*Parsed, limit int) ([][2]*Parsed, bool) {
	var out [][2]*Parsed
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if i < len(a) && j < len(b) && a[i] == b[j] {
			i, j = i+1, j+1
			continue
		}
		if len(out) == limit {
			return nil, false
		}
		switch {
		case j == len(b):
			out = append(out, [2]*Parsed{a[i], nil})
			i++
		case i == len(a):
			out = append(out, [2]*Parsed{nil, b[j]})
			j++
		default:
			switch c := compareParsed(a[i], b[j]); {
			case c == 0:
				out = append(out, [2]*Parsed{a[i], b[j]})
				i, j = i+1, j+1
			case c < 0:
				out = append(out, [2]*Parsed{a[i], nil})
				i++
			default:
				out = append(out, [2]*Parsed{nil, b[j]})
				j++
			}
		}
	}
	return out, true
}

// index makes providers and first from the Result as built.
func (in *Incremental) index() {
	if in.providers != nil {
		return
	}
	g := in.r.Graph
	in.providers = make(map[string][]*Parsed, g.Len())
	in.first = make([]mention, g.NumEdges())
	if in.r.Services != nil {
		in.callers = map[string][]*Parsed{}
		for _, x := range in.r.kept {
			for i := range x.upstreams {
				to := in.r.upstreamNode(x, i)
				c := in.callers[to]
				if len(c) > 0 && c[len(c)-1] == x {
					continue // named twice by x
				}
				if len(c) == 0 {
					// The notes in the build's order: the first upstream naming each node.
					if _, ok := in.r.note(x, i); ok {
						in.noteFirst = append(in.noteFirst, mention{p: x, i: i})
						in.noteTo = append(in.noteTo, to)
					}
				}
				in.callers[to] = append(c, x)
			}
		}
	}
	for _, x := range in.r.kept {
		for j, n := range in.nodes(x) {
			in.providers[n] = append(in.providers[n], x)
			for i := range x.upstreams {
				e, _ := g.EdgeIndex(n, in.r.upstreamNode(x, i))
				if in.first[e].p == nil {
					in.first[e] = mention{x, j, i}
				}
			}
		}
	}
}

// outEdge is an edge out of a service as its providers declare it: the largest attempts and
// calls, and the upstream that names it first.
type outEdge struct {
	to       string
	att, cal int64
	first    mention
}

// outEdges are the edges out of node n that its providers ps declare, in the order they first
// name them: what build adds for them.
func (in *Incremental) outEdges(n string, ps []*Parsed, def int64) []outEdge {
	var out []outEdge
	for _, x := range ps {
		j := slices.Index(in.nodes(x), n)
		for i, u := range x.upstreams {
			a, c := edgeValues(u, def)
			a, c = max(a, 1), max(c, 1)
			to := in.r.upstreamNode(x, i)
			k := slices.IndexFunc(out, func(e outEdge) bool { return e.to == to })
			if k < 0 {
				out = append(out, outEdge{to: to, att: a, cal: c, first: mention{x, j, i}})
				continue
			}
			out[k].att, out[k].cal = max(out[k].att, a), max(out[k].cal, c)
		}
	}
	return out
}

// patch replaces selected workload old by x (same key, same service and nodes; see local) in the
// Result.
func (in *Incremental) patch(old, x *Parsed) {
	in.index()
	r := in.r
	if k, ok := slices.BinarySearchFunc(r.Selected, x.Workload, Compare); ok {
		r.Selected[k] = x.Workload
	}
	if k, ok := slices.BinarySearchFunc(r.kept, x, compareParsed); ok {
		r.kept[k] = x
	}
	r.Declaring += declares(x) - declares(old)
	in.dropError(old)
	in.addError(x)

	def := defaultAttempts(in.ref.spec)
	for _, n := range in.nodes(x) {
		if fr := r.fronts[n]; fr != nil {
			if k := slices.Index(fr, old); k >= 0 {
				fr[k] = x
			}
		}
		provs := in.providers[n]
		before := in.outEdges(n, provs, def)
		provs[slices.Index(provs, old)] = x
		in.patchEdges(n, before, in.outEdges(n, provs, def))
	}
	if r.Services != nil {
		in.patchNotes(old, x)
	}
	// New upstream-only nodes were added last, and one no edge names any more is still there:
	// the build's order has each where an edge first names it (selected nodes first, in their
	// order, which the patch does not change; then each other node where an edge first names it:
	// graph.NormalizeOrder). No default entrypoints without mesh layers, so this cannot fail.
	_ = r.Graph.NormalizeOrder()
}

// patchEdges replaces node s's out-edges before by after (outEdges of its providers before and
// after the change) in the graph. Edges that keep their first upstream keep their place and take
// the new values; the others go, and the new ones come in at the place of their first upstream.
func (in *Incremental) patchEdges(s string, before, after []outEdge) {
	g := in.r.Graph
	for _, b := range before {
		k := slices.IndexFunc(after, func(a outEdge) bool { return a.to == b.to })
		if k >= 0 && compareMention(after[k].first, b.first) == 0 {
			g.SetEdge(s, b.to, after[k].att, after[k].cal)
			e, _ := g.EdgeIndex(s, b.to)
			in.first[e] = after[k].first
			after[k].to = "" // placed
			continue
		}
		e, _ := g.EdgeIndex(s, b.to)
		g.RemoveEdge(s, b.to)
		in.first = slices.Delete(in.first, e, e+1)
	}
	for _, a := range after {
		if a.to == "" {
			continue
		}
		e, _ := slices.BinarySearchFunc(in.first, a.first, compareMention)
		// The edge cannot exist (before listed every edge out of s), nor pos be out of range.
		_ = g.InsertEdge(e, s, a.to, a.att, a.cal)
		in.first = slices.Insert(in.first, e, a.first)
	}
}

// declares is 1 when x carries a non-blank upstreams annotation (Result.Declaring), else 0.
func declares(x *Parsed) int {
	if x.declares() {
		return 1
	}
	return 0
}

// patchNotes brings the notes to what addNotes makes after old is replaced by x: only the notes
// on the nodes either version calls can change (come, go, or move to where their first caller
// now names them); their text depends on the Service and the workloads it fronts, which an
// upstream change does not touch.
func (in *Incremental) patchNotes(old, x *Parsed) {
	r := in.r
	var names []string
	for i := range old.upstreams {
		names = append(names, r.upstreamNode(old, i))
	}
	for i := range x.upstreams {
		names = append(names, r.upstreamNode(x, i))
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, t := range names {
		c := slices.DeleteFunc(in.callers[t], func(p *Parsed) bool { return p == old })
		if in.upstreamIndex(x, t) >= 0 {
			k, _ := slices.BinarySearchFunc(c, x, compareParsed)
			c = slices.Insert(c, k, x)
		}
		if len(c) == 0 {
			delete(in.callers, t)
		} else {
			in.callers[t] = c
		}
		if k := slices.Index(in.noteTo, t); k >= 0 {
			r.Notes = slices.Delete(r.Notes, k, k+1)
			in.noteFirst = slices.Delete(in.noteFirst, k, k+1)
			in.noteTo = slices.Delete(in.noteTo, k, k+1)
		}
		if len(c) == 0 {
			continue
		}
		m := mention{p: c[0], i: in.upstreamIndex(c[0], t)}
		text, ok := r.note(m.p, m.i)
		if !ok {
			continue
		}
		k, _ := slices.BinarySearchFunc(in.noteFirst, m, compareMention)
		r.Notes = slices.Insert(r.Notes, k, text)
		in.noteFirst = slices.Insert(in.noteFirst, k, m)
		in.noteTo = slices.Insert(in.noteTo, k, t)
	}
	if len(r.Notes) == 0 {
		r.Notes = nil // as built
	}
}

// errorOf is the error build reports for selected x: its service annotation's, else its
// upstreams annotation's (nil: none).
func errorOf(x *Parsed) error {
	if x.serviceErr != nil {
		return x.serviceErr
	}
	return x.upstreamsErr
}

// dropError removes selected old's error from Result.Errors.
func (in *Incremental) dropError(old *Parsed) {
	r := in.r
	if err := errorOf(old); err != nil {
		r.Errors = slices.DeleteFunc(r.Errors, func(e error) bool { return e == err })
		if len(r.Errors) == 0 {
			r.Errors = nil // as built: no errors is nil
		}
	}
}

// addError puts selected x's error where build reports it: the errors are in the order of the
// workloads (one at most per workload; a bad selector, first, is never patched).
func (in *Incremental) addError(x *Parsed) {
	r := in.r
	err := errorOf(x)
	if err == nil {
		return
	}
	k := slices.IndexFunc(r.Errors, func(e error) bool {
		ae, ok := e.(*AnnotationError)
		return ok && Compare(ae.Workload, x.Workload) > 0
	})
	if k < 0 {
		k = len(r.Errors)
	}
	r.Errors = slices.Insert(r.Errors, k, err)
}

// remove takes selected workload old out of the Result (without Services: its one node is its
// service name's): its edges go from its node (the node's other providers' stay, with their own
// values), and the node is no longer selected when old was its last provider, or moves to where
// its new first provider puts it.
func (in *Incremental) remove(old *Parsed) {
	in.index()
	r := in.r
	in.dropError(old)
	if old.serviceErr != nil {
		return // not in the graph
	}
	if k, ok := slices.BinarySearchFunc(r.kept, old, compareParsed); ok {
		r.kept = slices.Delete(r.kept, k, k+1)
		r.Selected = slices.Delete(r.Selected, k, k+1)
	}
	if len(r.kept) == 0 {
		r.kept, r.Selected = nil, nil // as built
	}
	delete(r.ServiceOf, old.key)
	r.Declaring -= declares(old)
	s := r.serviceNode(old)
	provs := in.providers[s]
	before := in.outEdges(s, provs, defaultAttempts(in.ref.spec))
	i := slices.Index(provs, old)
	provs = slices.Delete(provs, i, i+1)
	in.patchEdges(s, before, in.outEdges(s, provs, defaultAttempts(in.ref.spec)))
	if len(provs) == 0 {
		delete(in.providers, s)
		r.Graph.Unselect(s)
		_ = r.Graph.NormalizeOrder() // no default entrypoints without mesh layers
		return
	}
	in.providers[s] = provs
	_ = r.Graph.NormalizeOrder()
	if i == 0 {
		in.place(s)
	}
}

// add puts selected workload x into the Result (without Services; see remove).
func (in *Incremental) add(x *Parsed) {
	in.index()
	r := in.r
	in.addError(x)
	if x.serviceErr != nil {
		return
	}
	k, _ := slices.BinarySearchFunc(r.kept, x, compareParsed)
	r.kept = slices.Insert(r.kept, k, x)
	r.Selected = slices.Insert(r.Selected, k, x.Workload)
	s := r.serviceNode(x)
	r.ServiceOf[x.key] = s
	r.Declaring += declares(x)
	provs := in.providers[s]
	before := in.outEdges(s, provs, defaultAttempts(in.ref.spec))
	i, _ := slices.BinarySearchFunc(provs, x, compareParsed)
	provs = slices.Insert(provs, i, x)
	in.providers[s] = provs
	in.patchEdges(s, before, in.outEdges(s, provs, defaultAttempts(in.ref.spec)))
	_ = r.Graph.NormalizeOrder()
	if i == 0 {
		in.place(s)
	}
}

// place moves selected node s (its providers set, the graph's order normalized otherwise) to
// where the build adds it: the selected nodes are in the order of their first providers
// (AddService in the order of the sorted workloads), all of them before the others.
func (in *Incremental) place(s string) {
	g := in.r.Graph
	m := len(in.providers) - 1 // the selected nodes besides s
	cur := m                   // s's position among them when it is not yet selected: none skipped
	if g.IsSelected(s) {
		cur, _ = g.NodeIndex(s)
	}
	first := in.providers[s][0]
	pos := sort.Search(m, func(i int) bool {
		if i >= cur {
			i++
		}
		return compareParsed(in.providers[g.ServiceAt(i).Name][0], first) > 0
	})
	// In range and no default entrypoints without mesh layers: this cannot fail.
	_ = g.SelectAt(pos, s)
}

// entrypointWarnings are the build's warnings without Services and mesh layers: an entrypoint no
// selected workload provides.
func (in *Incremental) entrypointWarnings() {
	r := in.r
	r.Warnings = nil
	for _, e := range in.ref.spec.Entrypoints {
		if node, _ := in.ref.Entrypoint(e.Service); !r.HasNode(node) {
			r.Warnings = append(r.Warnings, entrypointWarning(e.Service))
		}
	}
}

// upstreamIndex is the first of x's upstreams whose node is t; -1 when none is.
func (in *Incremental) upstreamIndex(x *Parsed, t string) int {
	for i := range x.upstreams {
		if in.r.upstreamNode(x, i) == t {
			return i
		}
	}
	return -1
}
