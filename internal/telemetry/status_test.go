package telemetry

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/internal/graph"
)

var t0 = time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)

func chain() *graph.Graph {
	g := graph.New()
	for _, s := range []string{"gateway", "order", "payment"} {
		g.AddService(s)
	}
	g.AddEdge("gateway", "order", 3, 1)
	g.AddEdge("order", "payment", 3, 1)
	g.AddEdge("payment", "db", 3, 1)
	return g
}

func TestCompareGraphAndCondition(t *testing.T) {
	s := Snapshot{Window: 5 * time.Minute, At: t0, Sources: []string{"istio"}, Edges: []NodeEdge{
		{"order", "payment", 2.5}, {"order", "payment", 1}, {"order", "stock", 1.25}, {"web", "order", 0.5}, {"gateway", "order", 9},
	}}
	gs := CompareGraph(chain(), s)
	if got := fmt.Sprintf("%+v", gs.Counts); got != "{Observed:4 Declared:3 Undeclared:2 Stale:1}" {
		t.Errorf("counts %s", got)
	}
	if got := fmt.Sprint(gs.Undeclared, gs.Stale); got != "[{order stock 1.25} {web order 0.500}] [{payment db 0}]" {
		t.Errorf("lists %s", got)
	}
	c := GraphCondition(gs, 7)
	want := metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionFalse, Reason: "UndeclaredEdges", ObservedGeneration: 7,
		Message: `2 edge(s) observed over 5m0s (from istio) are not declared: order>stock (1.25/s; declare: retrycap.dev/upstreams "stock" on order), web>order (0.500/s; declare: retrycap.dev/upstreams "order" on web); the amplification counts each with one application attempt times its mesh layers: the application's own attempts on them are unknown`}
	if c != want {
		t.Errorf("condition\n got %+v\nwant %+v", c, want)
	}

	// Declared plus observed: the undeclared edges count with one try times their mesh layers:
	// web (an entrypoint now) -x1-> order -x3-> payment -x3-> db = 9.
	g := chain()
	if n := AddUndeclared(g, s, func(from, to string) int64 {
		if to == "stock" {
			return 2 // an Istio default route's 2 tries
		}
		return 0
	}); n != 2 {
		t.Fatalf("added %d", n)
	}
	g.SetEntrypoint("web", 1)
	a := graph.Analyze(g, 100)
	if a.Amplification != 9 || strings.Join(a.WorstPath, ">") != "web>order>payment>db" {
		t.Errorf("amplification %d over %v", a.Amplification, a.WorstPath)
	}
	if i, ok := g.EdgeIndex("order", "stock"); !ok || g.EdgeAt(i).Attempts != 2 {
		t.Errorf("order>stock: %v %v", ok, g.EdgeAt(i))
	}
}

func TestGraphConditionComplete(t *testing.T) {
	gs := CompareGraph(chain(), Snapshot{Window: time.Minute, At: t0, Sources: []string{"linkerd", "retrycap"}, Edges: []NodeEdge{{"gateway", "order", 1}, {"order", "payment", 1}}})
	c := GraphCondition(gs, 1)
	if c.Status != metav1.ConditionTrue || c.Reason != "GraphComplete" ||
		c.Message != "every edge observed over 1m0s (2, from linkerd, retrycap) is declared; 3 declared, 1 of them not observed (stale)" {
		t.Errorf("%+v", c)
	}
}

// TestGraphConditionNothingObserved: sources whose series exist but no edge of the policy with
// calls over the window (a namespace outside the mesh, no traffic): Unknown NoObservedEdges,
// never True (before: "every edge observed over 1m0s (0, from istio) is declared").
func TestGraphConditionNothingObserved(t *testing.T) {
	gs := CompareGraph(chain(), Snapshot{Window: time.Minute, At: t0, Sources: []string{"istio"}})
	c := GraphCondition(gs, 4)
	want := metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionUnknown, Reason: "NoObservedEdges", ObservedGeneration: 4,
		Message: "no edge of the policy had calls over 1m0s (from istio): nothing compared (no traffic in the window, or its workloads are not seen by these sources); 3 declared"}
	if c != want {
		t.Errorf("\n got %+v\nwant %+v", c, want)
	}
}

// TestCaps: the lists hold 20 with the count of the rest; the message names 10 and counts the
// rest; cluster-policy nodes of one namespace are declared by name alone.
func TestCaps(t *testing.T) {
	s := Snapshot{Window: time.Minute, At: t0}
	for i := range 25 {
		s.Edges = append(s.Edges, NodeEdge{"web.shop", fmt.Sprintf("s%02d.shop", i), float64(100 - i)})
	}
	s.Edges = append(s.Edges, NodeEdge{"web.shop", "bank.billing", 0.001})
	gs := CompareGraph(graph.New(), s)
	if len(gs.Undeclared) != 20 || gs.MoreUndeclared != 6 || gs.Counts.Undeclared != 26 || gs.Undeclared[0].To != "s00.shop" || gs.Undeclared[19].To != "s19.shop" {
		t.Fatalf("%d listed, %d more, first %v", len(gs.Undeclared), gs.MoreUndeclared, gs.Undeclared[0])
	}
	m := GraphCondition(gs, 1).Message
	if !strings.Contains(m, `web.shop>s00.shop (100/s; declare: retrycap.dev/upstreams "s00" on web.shop)`) || !strings.Contains(m, "s09.shop") ||
		strings.Contains(m, "s10.shop") || !strings.Contains(m, ", and 16 more;") || !strings.HasPrefix(m, "26 edge(s) observed over 1m0s (from no source)") {
		t.Errorf("message %s", m)
	}
	if got := EntryFor("web.shop", "bank.billing"); got != "bank.billing" {
		t.Errorf("EntryFor %s", got)
	}
}

// TestGraphUnavailable: the last good observation is kept for one window, then dropped and said.
func TestGraphUnavailable(t *testing.T) {
	err := errors.New("dial tcp 10.0.0.9:9090: connect: connection refused")
	last := &Snapshot{Window: 5 * time.Minute, At: t0}
	cases := []struct {
		last *Snapshot
		now  time.Time
		keep bool
		msg  string
	}{
		{nil, t0, false, "querying Prometheus at http://prom:9090: dial tcp 10.0.0.9:9090: connect: connection refused; no observation yet: the status is computed on declarations alone"},
		{last, t0.Add(5 * time.Minute), true, "querying Prometheus at http://prom:9090: dial tcp 10.0.0.9:9090: connect: connection refused; keeping the observation of 2026-12-02T01:00:00Z until 2026-12-02T01:05:00Z (one window)"},
		{last, t0.Add(5*time.Minute + time.Second), false, "querying Prometheus at http://prom:9090: dial tcp 10.0.0.9:9090: connect: connection refused; the last observation (2026-12-02T01:00:00Z) is older than the window (5m0s): the status is computed on declarations alone"},
	}
	for i, c := range cases {
		cond, kept := GraphUnavailable("http://prom:9090", err, c.last, c.now, 3)
		if cond.Status != metav1.ConditionUnknown || cond.Reason != "PrometheusUnavailable" || cond.ObservedGeneration != 3 || cond.Message != c.msg || (kept != nil) != c.keep {
			t.Errorf("%d: %+v kept %v", i, cond, kept)
		}
	}
}

// TestAddEntrypoints: a Service the gateway calls is a chain's start although the graph's
// services call it too; only the policy's own nodes; explicit entrypoints win.
func TestAddEntrypoints(t *testing.T) {
	s := Snapshot{Entrypoints: []string{"order", "elsewhere"}}
	own := func(n string) bool { return n != "elsewhere" }
	g := chain()
	if n := AddEntrypoints(g, s, own); n != 1 {
		t.Fatalf("added %d", n)
	}
	var got []string
	for _, c := range graph.Analyze(g, 100).Chains {
		got = append(got, fmt.Sprintf("%s=%d", c.Entrypoint, c.Amplification))
	}
	if strings.Join(got, " ") != "gateway=27 order=9" {
		t.Errorf("chains %v", got)
	}
	if g.Has("elsewhere") {
		t.Errorf("a node of another scope was added")
	}
	g = chain()
	g.SetEntrypoint("gateway", 2)
	AddEntrypoints(g, s, own)
	if cs := graph.Analyze(g, 100).Chains; len(cs) != 1 || cs[0].Entrypoint != "gateway" || cs[0].Amplification != 54 {
		t.Errorf("explicit entrypoints: %+v", cs)
	}
}
