package controller

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// TestGraphViewApply: a poll whose edges are the stored status's keeps the stored graph (its
// rates, time and message) until a window has passed since it; other edges, another condition
// or a window's age are written at once.
func TestGraphViewApply(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	g := graph.New()
	g.AddService("web")
	g.AddEdge("web", "payment", 3, 1)
	view := func(at time.Time, edges ...telemetry.NodeEdge) graphView {
		s := telemetry.Snapshot{Window: 5 * time.Minute, At: at, Sources: []string{"istio"}, Edges: edges}
		gs := telemetry.CompareGraph(g, s)
		return graphView{set: true, gs: gs, cond: telemetry.GraphCondition(gs, 1), counted: &s, window: s.Window}
	}
	cart := func(rate float64) telemetry.NodeEdge {
		return telemetry.NodeEdge{From: "web", To: "cart", RatePerSecond: rate}
	}
	pay := telemetry.NodeEdge{From: "web", To: "payment", RatePerSecond: 1}
	st := &v1alpha1.RetryPolicyStatus{}
	view(t0, pay, cart(2)).apply(st, t0)
	stored := st.DeepCopy()
	for _, tc := range []struct {
		name string
		v    graphView
		kept bool
		rate string
	}{
		{"the same edges, other rates, a minute later: kept", view(t0.Add(time.Minute), pay, cart(2.5)), true, "2.00"},
		{"the same edges just under a window later: kept", view(t0.Add(5*time.Minute-time.Second), pay, cart(3)), true, "2.00"},
		{"a window later: written", view(t0.Add(5*time.Minute), pay, cart(3)), false, "3.00"},
		{"another undeclared edge: written", view(t0.Add(time.Minute), pay, cart(2), telemetry.NodeEdge{From: "web", To: "ledger", RatePerSecond: 1}), false, "2.00"},
		{"declared edge gone (stale): written", view(t0.Add(time.Minute), cart(2)), false, "2.00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := stored.DeepCopy()
			tc.v.apply(next, tc.v.gs.ObservedAt.Time)
			if kept := next.Graph.ObservedAt.Equal(&stored.Graph.ObservedAt); kept != tc.kept {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
			if r := next.Graph.Undeclared[0].RatePerSecond; r != tc.rate {
				t.Errorf("rate %s, want %s", r, tc.rate)
			}
			c := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionGraphComplete)
			if tc.kept && *c != *meta.FindStatusCondition(stored.Conditions, v1alpha1.ConditionGraphComplete) {
				t.Errorf("condition changed: %+v", c)
			}
		})
	}
	// Unknown (Prometheus down) is always written as computed.
	next := stored.DeepCopy()
	c, snap := telemetry.GraphUnavailable("http://prom:9090", errors.New("connection refused"), view(t0, pay, cart(2)).counted, t0.Add(time.Minute), 1)
	graphView{set: true, gs: telemetry.CompareGraph(g, *snap), cond: c, counted: snap, window: snap.Window}.apply(next, t0.Add(time.Minute))
	if got := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionGraphComplete); got.Status != metav1.ConditionUnknown || got.Reason != v1alpha1.ReasonPrometheusUnavailable {
		t.Errorf("down: %+v", got)
	}
}
