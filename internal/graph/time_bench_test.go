package graph

import (
	"strconv"
	"testing"
	"time"
)

// timedGraph is benchGraph with a Hop on every edge: the policy's layer (its attempts, per-try
// timeout 1s, backoff 100ms..2s), and on every third edge an Istio layer under it (3 tries, no
// per-try timeout, Envoy's 25ms backoff), as in a meshed namespace.
func timedGraph(n int) *Graph {
	g := benchGraph(n)
	for i, ed := range g.Edges() {
		h := Hop{{Name: "retrycap", Tries: ed.Attempts, PerTry: time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}}
		if i%3 == 0 {
			h = append(h, TimeLayer{Name: "Istio", Tries: 3, BackoffBase: 25 * time.Millisecond, BackoffMax: 250 * time.Millisecond})
		}
		g.SetHop(ed.From, ed.To, h)
	}
	return g
}

// BenchmarkAnalyzeWithTime runs Analyze alone and Analyze followed by AnalyzeTime alternately on
// the same graph (the 10k-service random DAG of BenchmarkAnalyze, every edge timed) and reports
// the fastest run of each and their ratio (target: at most 1.5).
func BenchmarkAnalyzeWithTime(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		g := timedGraph(n)
		b.Run("services="+strconv.Itoa(n), func(b *testing.B) {
			var bestA, bestT time.Duration
			for b.Loop() {
				t0 := time.Now()
				Analyze(g, 4)
				t1 := time.Now()
				Analyze(g, 4)
				AnalyzeTime(g, 5*time.Second)
				t2 := time.Now()
				if d := t1.Sub(t0); bestA == 0 || d < bestA {
					bestA = d
				}
				if d := t2.Sub(t1); bestT == 0 || d < bestT {
					bestT = d
				}
			}
			b.ReportMetric(float64(bestA.Nanoseconds()), "analyze-min-ns")
			b.ReportMetric(float64(bestT.Nanoseconds()), "with-time-min-ns")
			b.ReportMetric(float64(bestT)/float64(bestA), "ratio")
		})
	}
}

func BenchmarkAnalyzeTime(b *testing.B) {
	g := timedGraph(10000)
	loop(b, func() { AnalyzeTime(g, 5*time.Second) })
}

// BenchmarkAnalyzeTimeCold is the controller's and the gate's way: the hops set afresh on a
// Timing (NewTiming, SetHop per edge) and analysed with AnalyzeTimeWith, so that the compiled
// layers are built in every run, on the 10k-service graph of BenchmarkAnalyzeWithTime.
func BenchmarkAnalyzeTimeCold(b *testing.B) {
	g := benchGraph(10000)
	edges := g.Edges()
	hops := make([]Hop, len(edges))
	for i, ed := range edges {
		hops[i] = Hop{{Name: "retrycap", Tries: ed.Attempts, PerTry: time.Second, BackoffBase: 100 * time.Millisecond, BackoffMax: 2 * time.Second}}
		if i%3 == 0 {
			hops[i] = append(hops[i], TimeLayer{Name: "Istio", Tries: 3, BackoffBase: 25 * time.Millisecond, BackoffMax: 250 * time.Millisecond})
		}
	}
	Analyze(g, 4) // the adjacency, kept as the controller's graph keeps it
	loop(b, func() {
		t := NewTiming(g)
		for i, ed := range edges {
			t.SetHop(ed.From, ed.To, hops[i])
		}
		AnalyzeTimeWith(g, t, 5*time.Second)
	})
}
