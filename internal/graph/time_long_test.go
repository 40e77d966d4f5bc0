package graph

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTimeLongChains: 1000 services in a line, or in a ring (one cycle of 1000, past the exact
// search's 16 services), every hop 3 tries of 1h: the sums pass Go's longest duration and
// saturate at "unbounded", said to be an overflow, never a wrapped small figure; with 1s per try
// the chain stays exact (a 1000-hop line of 3 x 1s under 3 x 1s is 3s at the top: each per-try
// timeout bounds what is under it). A Linkerd layer on every hop (its last try unbounded) leaves
// the line unbounded for want of a timeout, not by overflow.
func TestTimeLongChains(t *testing.T) {
	const n = 1000
	name := func(i int) string { return fmt.Sprintf("s%04d", i) }
	type want struct{ worst, why string }
	build := func(ring bool, h Hop) *TimeAnalysis {
		g := New()
		for i := range n - 1 {
			g.AddEdge(name(i), name(i+1), h[0].Tries, 1)
		}
		if ring {
			g.AddEdge(name(n-1), name(0), h[0].Tries, 1)
		}
		g.SetEntrypoint(name(0), 2)
		for i := range n - 1 {
			g.SetHop(name(i), name(i+1), h)
		}
		if ring {
			g.SetHop(name(n-1), name(0), h)
		}
		return AnalyzeTime(g, time.Hour)
	}
	hour := Hop{{Name: "retrycap", Tries: 3, PerTry: time.Hour, BackoffBase: 100 * ms, BackoffMax: 2 * time.Second}}
	// No per-try timeout, an overall one: each hop takes at most 1h, whatever it waits on.
	overall := Hop{{Name: "Istio VirtualService a/b", Tries: 3, Timeout: time.Hour, BackoffBase: 25 * ms, BackoffMax: 250 * ms}}
	second := Hop{{Name: "retrycap", Tries: 3, PerTry: time.Second}}
	linkerd := Hop{{Name: "Linkerd Service a/b", Tries: 3, PerTry: time.Second, LastTry: Forever, BackoffBase: 25 * ms, BackoffMax: 250 * ms}}
	over := "add up past 2562047h47m16.854775807s, the longest time counted"
	for _, tc := range []struct {
		name string
		ring bool
		hop  Hop
		want want
	}{
		// 3 x 1h + 300ms at the top, whatever is under it: 2 client tries, 6h0m0.6s.
		{"line, 1h per try", false, hour, want{worst: "6h0m0.6s"}},
		{"line, overall 1h", false, overall, want{worst: "2h0m0s"}},
		{"line, 1s per try", false, second, want{worst: "6s"}},
		{"ring, 1h per try", true, hour, want{worst: "6h0m0.6s"}},
		{"line, Linkerd's unbounded last try", false, linkerd, want{worst: "unbounded", why: "no timeout on s0000 -> "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ta := build(tc.ring, tc.hop)
			if got := FormatTime(ta.Worst); got != tc.want.worst {
				t.Fatalf("worst %s, want %s (%s)", got, tc.want.worst, ta.WorstUnbounded)
			}
			if !strings.HasPrefix(ta.WorstUnbounded, tc.want.why) || (tc.want.why == "") != (ta.WorstUnbounded == "") {
				t.Fatalf("unbounded %q, want prefix %q", ta.WorstUnbounded, tc.want.why)
			}
			if strings.Contains(ta.WorstUnbounded, over) {
				t.Fatalf("a missing timeout said as an overflow: %q", ta.WorstUnbounded)
			}
			if len(ta.WorstPath) < 2 {
				t.Fatalf("path %v", ta.WorstPath)
			}
		})
	}
	// Sums past Forever: hops of 2 tries and no timeout over a last hop of 1h per try double the
	// time on every hop up the line (2^998 h): an overflow, and said so.
	g := New()
	for i := range n - 1 {
		g.AddEdge(name(i), name(i+1), 2, 1)
		g.SetHop(name(i), name(i+1), Hop{{Name: "app", Tries: 2}})
	}
	g.SetEntrypoint(name(0), 1)
	g.SetHop(name(n-2), name(n-1), Hop{{Name: "retrycap", Tries: 1, PerTry: time.Hour}})
	ta := AnalyzeTime(g, time.Hour)
	if ta.Worst != Forever || !strings.Contains(ta.WorstUnbounded, over) {
		t.Fatalf("999 doublings of 1h: %s, %q; want unbounded, an overflow", FormatTime(ta.Worst), ta.WorstUnbounded)
	}
	// The same closed into a ring: a call loop whose tries multiply round it has no bound.
	g.AddEdge(name(n-1), name(0), 2, 1)
	g.SetHop(name(n-1), name(0), Hop{{Name: "app", Tries: 2}})
	ta = AnalyzeTime(g, time.Hour)
	if ta.Worst != Forever || ta.WorstUnbounded == "" {
		t.Fatalf("ring: %s, %q; want unbounded with its reason", FormatTime(ta.Worst), ta.WorstUnbounded)
	}
}
