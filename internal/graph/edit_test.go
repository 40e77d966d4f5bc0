package graph

import (
	"reflect"
	"testing"
)

// TestEditsMatchABuild: edits that insert, reorder and remove end in the graph a builder would
// have made of the final declarations, down to node and edge order and the lookups.
func TestEditsMatchABuild(t *testing.T) {
	g := New()
	g.AddService("a")
	g.AddService("b")
	g.AddEdge("a", "x", 2, 1)
	g.AddEdge("b", "y", 3, 1)
	g.SetEntrypoint("a", 2)
	// a now calls z first, then x; y gets other values.
	if err := g.InsertEdge(0, "a", "z", 4, 2); err != nil {
		t.Fatal(err)
	}
	if !g.SetEdge("b", "y", 1, 1) {
		t.Fatal("SetEdge b->y: no such edge")
	}
	if err := g.NormalizeOrder(); err != nil {
		t.Fatal(err)
	}
	want := New()
	want.AddService("a")
	want.AddService("b")
	want.AddEdge("a", "z", 4, 2)
	want.AddEdge("a", "x", 2, 1)
	want.AddEdge("b", "y", 1, 1)
	want.SetEntrypoint("a", 2)
	same(t, g, want)

	// x no longer called: gone.
	if !g.RemoveEdge("a", "x") || g.RemoveEdge("a", "x") {
		t.Fatal("RemoveEdge a->x: want true once, then false")
	}
	if err := g.NormalizeOrder(); err != nil {
		t.Fatal(err)
	}
	want = New()
	want.AddService("a")
	want.AddService("b")
	want.AddEdge("a", "z", 4, 2)
	want.AddEdge("b", "y", 1, 1)
	want.SetEntrypoint("a", 2)
	same(t, g, want)
	if g.Has("x") {
		t.Fatal("x still a node")
	}

	if err := g.InsertEdge(0, "a", "z", 1, 1); err == nil || err.Error() != "inserting edge a->z: it exists" {
		t.Fatalf("InsertEdge of an existing edge: %v", err)
	}
	if err := g.InsertEdge(5, "a", "q", 1, 1); err == nil || err.Error() != "inserting edge a->q at 5: out of range [0, 2]" {
		t.Fatalf("InsertEdge out of range: %v", err)
	}
	g.AddDefaultEntrypoint("w", 3)
	if err := g.NormalizeOrder(); err == nil || err.Error() != `normalizing the node order: default entrypoint "w" is not a selected service` {
		t.Fatalf("NormalizeOrder with an unselected default entrypoint: %v", err)
	}
}

func same(t *testing.T, g, want *Graph) {
	t.Helper()
	if !reflect.DeepEqual(g.Services(), want.Services()) || !reflect.DeepEqual(g.Edges(), want.Edges()) || !reflect.DeepEqual(g.Entrypoints(), want.Entrypoints()) {
		t.Fatalf("edited graph\n %v %v %v\nwant\n %v %v %v", g.Services(), g.Edges(), g.Entrypoints(), want.Services(), want.Edges(), want.Entrypoints())
	}
	for i, e := range want.Edges() {
		if k, ok := g.EdgeIndex(e.From, e.To); !ok || k != i || g.EdgeAt(i) != e {
			t.Fatalf("EdgeIndex(%s, %s) = %d, %v; want %d", e.From, e.To, k, ok, i)
		}
	}
	for i, s := range want.Services() {
		if g.ServiceAt(i) != s {
			t.Fatalf("ServiceAt(%d) = %v, want %v", i, g.ServiceAt(i), s)
		}
	}
	if a, b := Analyze(g, 4), Analyze(want, 4); !reflect.DeepEqual(a, b) {
		t.Fatalf("analysis\n %+v\nwant\n %+v", a, b)
	}
}

// TestSelectAtAndUnselect: a selected node comes in at a position of the selected nodes' order
// (an upstream-only node becoming selected moves up there), and an unselected one goes where its
// first edge names it, or away: the graph a builder makes of the final declarations.
func TestSelectAtAndUnselect(t *testing.T) {
	g := New()
	g.AddService("a")
	g.AddService("c")
	g.AddEdge("a", "x", 2, 1)
	g.AddEdge("c", "b", 3, 1)
	g.SetEntrypoint("a", 2)
	// b, an upstream of c, becomes a selected service between a and c, calling y.
	if err := g.SelectAt(1, "b"); err != nil {
		t.Fatal(err)
	}
	if err := g.InsertEdge(1, "b", "y", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := g.NormalizeOrder(); err != nil {
		t.Fatal(err)
	}
	want := New()
	want.AddService("a")
	want.AddService("b")
	want.AddService("c")
	want.AddEdge("a", "x", 2, 1)
	want.AddEdge("b", "y", 1, 1)
	want.AddEdge("c", "b", 3, 1)
	want.SetEntrypoint("a", 2)
	same(t, g, want)
	if i, ok := g.NodeIndex("b"); !ok || i != 1 {
		t.Fatalf("NodeIndex(b) = %d, %v; want 1, true", i, ok)
	}

	// A new node last; then a unselected (still an entrypoint: it stays, after the edges' nodes).
	if err := g.SelectAt(3, "d"); err != nil {
		t.Fatal(err)
	}
	if !g.Unselect("a") || g.Unselect("nope") || !g.RemoveEdge("a", "x") {
		t.Fatal("Unselect a / nope, RemoveEdge a->x: want true, false, true")
	}
	if err := g.NormalizeOrder(); err != nil {
		t.Fatal(err)
	}
	want = New()
	want.AddService("b")
	want.AddService("c")
	want.AddService("d")
	want.AddEdge("b", "y", 1, 1)
	want.AddEdge("c", "b", 3, 1)
	want.SetEntrypoint("a", 2)
	same(t, g, want)
	if g.Has("x") {
		t.Fatal("x still a node")
	}

	if err := g.SelectAt(4, "e"); err == nil || err.Error() != `selecting "e" at 4: out of range [0, 3]` || g.Has("e") {
		t.Fatalf("SelectAt out of range: %v", err)
	}
}
