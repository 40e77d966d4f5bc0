package graph

import (
	"slices"
	"testing"
)

// TestMarkCalled: a service called only by an edge left out of the graph (the gate's judged
// build drops the incoming workload's siblings' calls) is no default entrypoint, for the
// analysis, the prepared judgement and a loop nothing in the graph calls.
func TestMarkCalled(t *testing.T) {
	for _, tc := range []struct {
		name       string
		mark       []string
		wantWorst  []string
		wantAmp    int64
		wantJudgeB bool // Judge(b) over the cap 2
	}{
		{name: "unmarked: the loop is entered at b", wantWorst: []string{"b", "c"}, wantAmp: 3, wantJudgeB: true},
		{name: "b marked called: only a enters", mark: []string{"b"}, wantWorst: []string{"a", "d"}, wantAmp: 2, wantJudgeB: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// a -x2-> d; b -x3-> c -x1-> b (a loop nothing in the graph calls).
			g := New()
			for _, s := range []string{"a", "b", "c", "d"} {
				g.AddService(s)
			}
			g.AddEdge("a", "d", 2, 1)
			g.AddEdge("b", "c", 3, 1)
			g.AddEdge("c", "b", 1, 1)
			for _, m := range tc.mark {
				g.MarkCalled(m)
			}
			a := Analyze(g, 2)
			if a.Amplification != tc.wantAmp || !slices.Equal(a.WorstPath, tc.wantWorst) {
				t.Fatalf("Analyze = %d %v, want %d %v", a.Amplification, a.WorstPath, tc.wantAmp, tc.wantWorst)
			}
			if got := Judge(g, 2, "b").Over; got != tc.wantJudgeB {
				t.Fatalf("Judge(b).Over = %v, want %v", got, tc.wantJudgeB)
			}
		})
	}
}
