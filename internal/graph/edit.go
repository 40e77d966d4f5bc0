package graph

import (
	"fmt"
	"slices"
)

// Edits for a caller that keeps a graph up to date instead of building it again (the
// controller's policy graphs: internal/workload's Incremental). Analyze breaks ties by
// declaration order, so an edited graph must have its nodes and edges in exactly the order a
// fresh build would give them: InsertEdge takes the position, and NormalizeOrder puts the nodes
// where a builder that names its selected services first and then its edges would have named
// them. Each edit costs O(V+E) of integer work at most, no string hashing beyond the names
// edited: at 20,000 services that is well under a millisecond, where building the graph anew
// costs ~30 ms.

// EdgeIndex returns the position of from->to in declaration order.
func (g *Graph) EdgeIndex(from, to string) (int, bool) {
	f, ok1 := g.ids[from]
	t, ok2 := g.ids[to]
	if !ok1 || !ok2 {
		return 0, false
	}
	e, ok := g.edgeIdx[edgeKey(f, t)]
	return int(e), ok
}

// EdgeAt returns the edge at position i of declaration order (0 <= i < NumEdges).
func (g *Graph) EdgeAt(i int) Edge { return g.edge(int32(i)) }

// SetEdge replaces from->to's attempts and calls (values below 1 count as 1): unlike AddEdge,
// the new values count even when smaller. False when there is no such edge.
func (g *Graph) SetEdge(from, to string, attempts, calls int64) bool {
	i, ok := g.EdgeIndex(from, to)
	if !ok {
		return false
	}
	g.eAtt[i], g.eCal[i] = max(attempts, 1), max(calls, 1)
	g.dropAdjacency()
	return true
}

// InsertEdge adds from->to (values below 1 count as 1) at position pos of declaration order
// (0 <= pos <= NumEdges): the edges from pos on move one up. A node not yet in the graph is added
// last, unselected (NormalizeOrder puts it in place). An error when the edge exists or pos is out
// of range.
func (g *Graph) InsertEdge(pos int, from, to string, attempts, calls int64) error {
	if pos < 0 || pos > len(g.eFrom) {
		return fmt.Errorf("inserting edge %s->%s at %d: out of range [0, %d]", from, to, pos, len(g.eFrom))
	}
	if _, ok := g.EdgeIndex(from, to); ok {
		return fmt.Errorf("inserting edge %s->%s: it exists", from, to)
	}
	f, t := g.intern(from), g.intern(to)
	g.eFrom = slices.Insert(g.eFrom, pos, f)
	g.eTo = slices.Insert(g.eTo, pos, t)
	g.eAtt = slices.Insert(g.eAtt, pos, max(attempts, 1))
	g.eCal = slices.Insert(g.eCal, pos, max(calls, 1))
	for e := pos; e < len(g.eFrom); e++ {
		g.edgeIdx[edgeKey(g.eFrom[e], g.eTo[e])] = int32(e)
	}
	g.time.insertEdge(pos)
	g.dropAdjacency()
	return nil
}

// RemoveEdge removes from->to: the edges after it move one down; its nodes stay (NormalizeOrder
// drops those nothing names any more). False when there is no such edge.
func (g *Graph) RemoveEdge(from, to string) bool {
	i, ok := g.EdgeIndex(from, to)
	if !ok {
		return false
	}
	delete(g.edgeIdx, edgeKey(g.eFrom[i], g.eTo[i]))
	g.eFrom = slices.Delete(g.eFrom, i, i+1)
	g.eTo = slices.Delete(g.eTo, i, i+1)
	g.eAtt = slices.Delete(g.eAtt, i, i+1)
	g.eCal = slices.Delete(g.eCal, i, i+1)
	for e := i; e < len(g.eFrom); e++ {
		g.edgeIdx[edgeKey(g.eFrom[e], g.eTo[e])] = int32(e)
	}
	g.time.removeEdge(i)
	g.dropAdjacency()
	return true
}

// NormalizeOrder renumbers the nodes to the order a builder gives them that adds every selected
// service first (AddService, in their present relative order), then the edges in declaration
// order (AddEdge names from, then to), then the explicit entrypoints in the order set
// (SetEntrypoint): selected nodes first, then each other node where an edge or an entrypoint
// first names it. A node none of these names (an upstream whose last edge was removed) is
// dropped. Default entrypoints added with AddDefaultEntrypoint must name selected nodes (an error
// otherwise, and the graph is left as it was). O(V+E); nothing moves when the order is already
// that one.
func (g *Graph) NormalizeOrder() error {
	return g.normalize(-1, 0)
}

// SelectAt makes name a selected node (adding it when absent) at position pos of the selected
// nodes' order, the other selected nodes keeping theirs (0 <= pos <= their number), and then
// normalizes the order as NormalizeOrder does: what a builder gives that adds the selected
// services in that order. For a caller that keeps the selected nodes in the order of their first
// provider when a provider comes or goes. An error when pos is out of range (the graph left as
// it was) or NormalizeOrder's.
func (g *Graph) SelectAt(pos int, name string) error {
	others := 0
	for v, sel := range g.selected {
		if sel && g.names[v] != name {
			others++
		}
	}
	if pos < 0 || pos > others {
		return fmt.Errorf("selecting %q at %d: out of range [0, %d]", name, pos, others)
	}
	v := g.intern(name)
	g.selected[v] = true
	return g.normalize(v, pos)
}

// Unselect makes name an upstream-only node: NormalizeOrder then puts it where an edge first
// names it, or drops it when none does. False when there is no such node.
func (g *Graph) Unselect(name string) bool {
	v, ok := g.ids[name]
	if !ok {
		return false
	}
	if g.selected[v] {
		g.selected[v] = false
		g.dropAdjacency()
	}
	return true
}

// normalize is NormalizeOrder with selected node at (when at >= 0) placed at position atPos of
// the selected nodes.
func (g *Graph) normalize(at int32, atPos int) error {
	n := len(g.names)
	pos := make([]int32, n) // old id -> new id + 1; 0: not named
	order := make([]int32, 0, n)
	name := func(v int32) {
		if pos[v] == 0 {
			order = append(order, v)
			pos[v] = int32(len(order))
		}
	}
	k := 0 // selected nodes named besides at (SelectAt checked atPos against their number)
	for v := range n {
		if k == atPos && at >= 0 {
			name(at)
		}
		if g.selected[v] && int32(v) != at {
			name(int32(v))
			k++
		}
	}
	if at >= 0 {
		name(at) // atPos == others
	}
	for e := range g.eFrom {
		name(g.eFrom[e])
		name(g.eTo[e])
	}
	for _, en := range g.entries {
		name(en.node)
	}
	for v := range g.extra {
		if pos[v] == 0 {
			return fmt.Errorf("normalizing the node order: default entrypoint %q is not a selected service", g.names[v])
		}
	}
	identity := len(order) == n
	for i, v := range order {
		if int(v) != i {
			identity = false
			break
		}
	}
	if identity {
		return nil
	}
	names := make([]string, len(order))
	selected := make([]bool, len(order))
	for i, v := range order {
		names[i], selected[i] = g.names[v], g.selected[v]
	}
	for v := range n {
		switch p := pos[v]; {
		case p == 0:
			delete(g.ids, g.names[v])
		case int(p-1) != v:
			g.ids[g.names[v]] = p - 1
		}
	}
	g.names, g.selected = names, selected
	// Edges whose ends moved get new keys: the old keys all go before the new ones come, since
	// an old key of one edge may be the new key of another.
	var moved []int32
	for e := range g.eFrom {
		f, t := pos[g.eFrom[e]]-1, pos[g.eTo[e]]-1
		if f != g.eFrom[e] || t != g.eTo[e] {
			delete(g.edgeIdx, edgeKey(g.eFrom[e], g.eTo[e]))
			g.eFrom[e], g.eTo[e] = f, t
			moved = append(moved, int32(e))
		}
	}
	for _, e := range moved {
		g.edgeIdx[edgeKey(g.eFrom[e], g.eTo[e])] = e
	}
	clear(g.entryOf)
	for i := range g.entries {
		g.entries[i].node = pos[g.entries[i].node] - 1
		g.entryOf[g.entries[i].node] = i
	}
	g.time.renumber(pos)
	if len(g.calledOutside) > 0 {
		co := make(map[int32]bool, len(g.calledOutside))
		for v := range g.calledOutside {
			if pos[v] > 0 {
				co[pos[v]-1] = true
			}
		}
		g.calledOutside = co
	}
	if len(g.extra) > 0 {
		extra := make(map[int32]int64, len(g.extra))
		for v, k := range g.extra {
			extra[pos[v]-1] = k
		}
		g.extra = extra
	}
	g.dropAdjacency()
	return nil
}

// NodeIndex is name's position in the order the nodes were named in.
func (g *Graph) NodeIndex(name string) (int, bool) {
	v, ok := g.ids[name]
	return int(v), ok
}

// ServiceAt is the node at position i of the order the nodes were named in (0 <= i < Len).
func (g *Graph) ServiceAt(i int) Service { return Service{Name: g.names[i], Selected: g.selected[i]} }

func edgeKey(f, t int32) uint64 { return uint64(uint32(f))<<32 | uint64(uint32(t)) }
