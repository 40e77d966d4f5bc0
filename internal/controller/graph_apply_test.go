package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
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

// TestObserveGraphAndCount: a good poll is counted (the undeclared edge in the amplification);
// a failed one keeps the last good observation, still counted, until its window has passed
// since it; then the status is on declarations alone and the condition says so.
func TestObserveGraphAndCount(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	dep := func(name, ups string) workload.Workload {
		w := workload.Workload{Kind: workload.KindDeployment, Namespace: "shop", Name: name}
		if ups != "" {
			w.Annotations = workload.PairsFrom(annotations.Upstreams, ups)
		}
		return w
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", Generation: 1}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 10}}
	ws := []workload.Workload{dep("web", "payment=3"), dep("payment", ""), dep("cart", "ledger=4"), dep("ledger", "")}
	ob := &telemetry.Observation{Window: 5 * time.Minute, Sources: []telemetry.Source{telemetry.SourceIstio}, Edges: []telemetry.Edge{
		{Source: telemetry.SourceIstio, From: telemetry.Caller{Namespace: "shop", Name: "payment"}, To: telemetry.Callee{Namespace: "shop", Name: "cart"}, Requests: 60, RatePerSecond: 0.2},
	}}
	for _, tc := range []struct {
		name    string
		obs     *Observation
		amp     int64
		reason  string
		message string
	}{
		{"a good poll", &Observation{Graphs: true, Graph: ob, GraphAt: t0, LastGraph: ob, LastGraphAt: t0, URL: "http://prom:9090"}, 12, "UndeclaredEdges", ""},
		{"down, within the window", &Observation{Graphs: true, GraphErr: errors.New("connection refused"), GraphAt: t0.Add(5 * time.Minute), LastGraph: ob, LastGraphAt: t0, URL: "http://prom:9090"}, 12, "PrometheusUnavailable",
			"querying Prometheus at http://prom:9090: connection refused; keeping the observation of 2026-12-02T03:00:00Z until 2026-12-02T03:05:00Z (one window)"},
		{"down, past the window", &Observation{Graphs: true, GraphErr: errors.New("connection refused"), GraphAt: t0.Add(5*time.Minute + time.Second), LastGraph: ob, LastGraphAt: t0, URL: "http://prom:9090"}, 4, "PrometheusUnavailable",
			"querying Prometheus at http://prom:9090: connection refused; the last observation (2026-12-02T03:00:00Z) is older than the window (5m0s): the status is computed on declarations alone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Observer{latest: tc.obs}
			res, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil)
			in := status.Input{Generation: 1, Result: res, Analysis: a, Now: metav1.NewTime(t0)}
			v := observeGraph(o, res, 1)
			countObserved(&in, v, func() *workload.Result { r, _ := workload.Analyze(workload.ForRetryPolicy(p), ws, nil); return r })
			st := &v1alpha1.RetryPolicyStatus{}
			status.Set(st, in)
			v.apply(st, t0)
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionGraphComplete)
			if st.Amplification != tc.amp || c.Reason != tc.reason || (tc.message != "" && c.Message != tc.message) {
				t.Errorf("amplification %d, %s: %s", st.Amplification, c.Reason, c.Message)
			}
			if (tc.amp == 12) != (st.Graph != nil) {
				t.Errorf("status.graph %+v", st.Graph)
			}
		})
	}
}

// TestCountObservedMeshLayers: in an Istio-injected namespace an undeclared edge counts with
// one application attempt times Istio's default 3 tries, explained as a declared one is; a
// Service the ingress gateway calls is a chain's start although web calls it too.
func TestCountObservedMeshLayers(t *testing.T) {
	set := mesh.NewSet(mesh.Options{})
	if _, err := set.AddManifest([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}")); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", Generation: 1}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100}}
	ws := []workload.Workload{
		{Kind: workload.KindDeployment, Namespace: "shop", Name: "web", Annotations: workload.PairsFrom(annotations.Upstreams, "payment")},
		{Kind: workload.KindDeployment, Namespace: "shop", Name: "payment"},
		{Kind: workload.KindDeployment, Namespace: "shop", Name: "cart"},
	}
	ob := &telemetry.Observation{Window: 5 * time.Minute, Sources: []telemetry.Source{telemetry.SourceIstio}, Edges: []telemetry.Edge{
		{Source: telemetry.SourceIstio, From: telemetry.Caller{Namespace: "shop", Name: "payment"}, To: telemetry.Callee{Namespace: "shop", Name: "cart"}, Requests: 60, RatePerSecond: 0.2},
	}, Entrypoints: []telemetry.Entrypoint{{Callee: telemetry.Callee{Namespace: "shop", Name: "payment"}, Via: "istio-system/istio-ingressgateway", Source: telemetry.SourceIstio}}}
	build := func() *workload.Result { return workload.Build(workload.ForRetryPolicy(p), ws, set) }
	res := build()
	in := status.Input{Generation: 1, Result: res, Analysis: res.Analyze(), Now: metav1.Now()}
	if in.Analysis.Amplification != 3 {
		t.Fatalf("declared: %d", in.Analysis.Amplification)
	}
	v := observeGraph(&Observer{latest: &Observation{Graphs: true, Graph: ob, GraphAt: time.Now(), URL: "http://prom:9090"}}, res, 1)
	countObserved(&in, v, build)
	var chains []string
	for _, c := range in.Analysis.Chains {
		chains = append(chains, fmt.Sprintf("%s=%d", c.Entrypoint, c.Amplification))
	}
	// web -3-> payment -3-> cart: 9; payment, called by the gateway, is a chain's start: 3.
	if in.Analysis.Amplification != 9 || in.ObservedEdges != 1 || strings.Join(chains, " ") != "web=9 payment=3" {
		t.Errorf("amplification %d, %d observed edge(s), chains %v", in.Analysis.Amplification, in.ObservedEdges, chains)
	}
	if e := in.Result.MeshEdges[[2]string{"payment", "cart"}]; e.Explain() != "3 = 1 (Deployment payment) x 3 (Istio default, no VirtualService binds cart)" {
		t.Errorf("explained %q", e.Explain())
	}
}

// TestCountObservedPorts: an undeclared edge has no port (the observation names none), so the
// mesh's port rule (mesh/ports.go) decides by the callee Service's ports: only TCP ports, no
// mesh retry (1 try); only HTTP or gRPC ports, the mesh's 3; both kinds, the worst (3) and a
// warning that says which port to name; no Service object, the mesh's layer as before.
func TestCountObservedPorts(t *testing.T) {
	for _, tc := range []struct {
		name, service string
		amp           int64
		explain, note string // the recorded mesh edge's explanation, and its 1-try layer's note
		warnings      []string
	}{
		{name: "TCP only", service: "spec: {ports: [{name: redis, port: 6379}]}", amp: 1,
			explain: "1 = 1 (Deployment payment)", note: "Istio does not retry redis port 6379 (redis) of Service shop/cart"},
		{name: "TCP by appProtocol", service: "spec: {ports: [{name: cache, port: 6379, appProtocol: tcp}]}", amp: 1,
			explain: "1 = 1 (Deployment payment)", note: "Istio does not retry tcp port 6379 (cache) of Service shop/cart"},
		{name: "gRPC only", service: "spec: {ports: [{name: grpc-api, port: 9000}]}", amp: 3,
			explain: "3 = 1 (Deployment payment) x 3 (Istio default, no VirtualService binds cart)"},
		{name: "HTTP and TCP, no port named", service: "spec: {ports: [{name: http, port: 80}, {name: redis, port: 6379}]}", amp: 3,
			explain:  "3 = 1 (Deployment payment) x 3 (Istio default, no VirtualService binds cart)",
			warnings: []string{"Service shop/cart has HTTP and TCP ports and Deployment shop/payment names no port in its upstream cart: counting the mesh's retries (the worst); write the upstream as cart:PORT"}},
		{name: "no Service object", amp: 3, explain: "3 = 1 (Deployment payment) x 3 (Istio default, no VirtualService binds cart)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			ms := []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}"}
			if tc.service != "" {
				ms = append(ms, "apiVersion: v1\nkind: Service\nmetadata: {name: cart, namespace: shop}\n"+tc.service)
			}
			for _, m := range ms {
				if _, err := set.AddManifest([]byte(m)); err != nil {
					t.Fatal(err)
				}
			}
			p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", Generation: 1}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 100}}
			ws := []workload.Workload{{Kind: workload.KindDeployment, Namespace: "shop", Name: "payment"}, {Kind: workload.KindDeployment, Namespace: "shop", Name: "cart"}}
			ob := &telemetry.Observation{Window: 5 * time.Minute, Sources: []telemetry.Source{telemetry.SourceIstio}, Edges: []telemetry.Edge{
				{Source: telemetry.SourceIstio, From: telemetry.Caller{Namespace: "shop", Name: "payment"}, To: telemetry.Callee{Namespace: "shop", Name: "cart"}, Requests: 60, RatePerSecond: 0.2}}}
			build := func() *workload.Result { return workload.Build(workload.ForRetryPolicy(p), ws, set) }
			res := build()
			in := status.Input{Generation: 1, Result: res, Analysis: res.Analyze(), Now: metav1.Now()}
			v := observeGraph(&Observer{latest: &Observation{Graphs: true, Graph: ob, GraphAt: time.Now(), URL: "http://prom:9090"}}, res, 1)
			countObserved(&in, v, build)
			if in.ObservedEdges != 1 || in.Analysis.Amplification != tc.amp {
				t.Errorf("%d observed edge(s), amplification %d; want 1, %d", in.ObservedEdges, in.Analysis.Amplification, tc.amp)
			}
			e, ok := in.Result.MeshEdges[[2]string{"payment", "cart"}]
			if got := map[bool]string{true: e.Explain()}[ok]; got != tc.explain {
				t.Errorf("explained %q, want %q", got, tc.explain)
			}
			var notes []string
			for _, l := range e.Layers {
				if l.Tries == 1 {
					notes = append(notes, l.Note)
				}
			}
			if got := strings.Join(notes, "; "); got != tc.note {
				t.Errorf("1-try layer notes %q, want %q", got, tc.note)
			}
			if !slices.Equal(in.Result.Warnings, tc.warnings) {
				t.Errorf("warnings %q, want %q", in.Result.Warnings, tc.warnings)
			}
		})
	}
}
