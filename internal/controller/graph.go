package controller

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
)

// graphView is what the Observer's latest poll says of one policy's graph, made before the
// status is: its snapshot (the observed edges on the policy's nodes) also decides the graph the
// amplification is computed on (countObserved).
type graphView struct {
	// set is false when there is nothing to write: no Observer, a querier that reads no graph,
	// or no poll yet.
	set bool
	// clear: the policy has no graph (an invalid selector): status.graph and GraphComplete go.
	clear bool
	gs    *v1alpha1.GraphStatus
	cond  metav1.Condition
	// counted is the observation the amplification counts: this poll's, or the last good one
	// while a window has not passed since it; nil: declarations alone (the condition says so).
	counted *telemetry.Snapshot
	window  time.Duration
}

// observeGraph reads status.graph and GraphComplete for the policy whose declared graph is res
// from the Observer's latest poll (never a query of its own: a reconcile does not wait on
// Prometheus). A failed poll keeps the last good observation for one window, then the status is
// on declarations alone and the condition says so. res must be the declared graph (before
// countObserved): the comparison is of declarations against observations.
func observeGraph(o *Observer, res *workload.Result, generation int64) graphView {
	return observeGraphOf(o.Latest(), res, generation)
}

// observeGraphOf is observeGraph on the poll obs (nil: none yet).
func observeGraphOf(obs *Observation, res *workload.Result, generation int64) graphView {
	if obs == nil || !obs.Graphs {
		return graphView{}
	}
	if res == nil {
		return graphView{set: true, clear: true}
	}
	caller, callee := nodeMappers(res)
	v := graphView{set: true}
	switch {
	case obs.GraphErr != nil:
		var last *telemetry.Snapshot
		if obs.LastGraph != nil {
			s := telemetry.OnNodes(obs.LastGraph, obs.LastGraphAt, caller, callee)
			last = &s
		}
		// The time the kept observation expires is the poll's, not the reconcile's: every
		// policy reconciled after one poll decides alike, and the next poll (which reconciles
		// them all) moves it on.
		v.cond, v.counted = telemetry.GraphUnavailable(obs.URL, obs.GraphErr, last, obs.GraphAt, generation)
		if v.counted != nil {
			v.gs, v.window = telemetry.CompareGraph(res.Graph, *v.counted), v.counted.Window
		}
	case len(obs.Graph.Sources) == 0:
		v.cond = telemetry.NoTelemetry(obs.URL, obs.Graph.Window, generation, obs.Graph.PresentOnly...)
	default:
		s := telemetry.OnNodes(obs.Graph, obs.GraphAt, caller, callee)
		v.gs, v.counted, v.window = telemetry.CompareGraph(res.Graph, s), &s, s.Window
		v.cond = telemetry.GraphConditionOf(v.gs, s, generation)
	}
	return v
}

// apply puts the view into st, the stored status's copy. An observation whose content (its
// window, sources, counts and which edges are undeclared and stale) is the stored one's, under
// the same condition, keeps the stored one (its rates, time and message) until a window has
// passed since it was made: the poll's time and the rates move on every poll, and writing them
// would patch every policy every poll (a status write per policy per minute, for figures that
// are averages over the window anyway). The rates and observedAt are therefore at most one
// window old; a change of the edges is written at once.
func (v graphView) apply(st *v1alpha1.RetryPolicyStatus, now time.Time) {
	if !v.set {
		return
	}
	if v.clear {
		status.ClearGraph(st)
		return
	}
	gs, c := v.gs, v.cond
	c.LastTransitionTime = metav1.NewTime(now)
	// An Unknown with an observation (NoObservedEdges, UnplacedSeries) is kept alike; one
	// without (PrometheusUnavailable's message moves, NoTelemetry has no graph) is written.
	if prev := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionGraphComplete); prev != nil && gs != nil &&
		c.Reason != v1alpha1.ReasonPrometheusUnavailable && c.Reason != v1alpha1.ReasonNoTelemetry &&
		prev.Status == c.Status && prev.Reason == c.Reason && prev.ObservedGeneration == c.ObservedGeneration &&
		sameObservation(st.Graph, gs) && gs.ObservedAt.Sub(st.Graph.ObservedAt.Time) < v.window {
		gs, c = st.Graph, *prev
	}
	status.SetGraph(st, gs, c)
}

// sameObservation says whether a and b hold the same edges: the same window, sources, counts
// and undeclared and stale edges (in any order: the undeclared are sorted by rate), whatever
// their rates and times.
func sameObservation(a, b *v1alpha1.GraphStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Window == b.Window && slices.Equal(a.Sources, b.Sources) && a.Counts == b.Counts &&
		a.MoreUndeclared == b.MoreUndeclared && a.MoreStale == b.MoreStale &&
		sameEdges(a.Undeclared, b.Undeclared) && sameEdges(a.Stale, b.Stale)
}

func sameEdges(a, b []v1alpha1.GraphEdge) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[[2]string]bool, len(a))
	for _, e := range a {
		in[[2]string{e.From, e.To}] = true
	}
	for _, e := range b {
		if !in[[2]string{e.From, e.To}] {
			return false
		}
	}
	return true
}

// countObserved makes the status's amplification count the observed edges (DESIGN.md, "The
// graph from telemetry"): the undeclared ones with one application attempt times their mesh
// layers, and the Services gateways were seen calling as default entrypoints. The declared
// graph is the reconciler's incremental one, which later changes are patched into, so the edges
// go into a graph built anew by rebuild (the same builder on the same input: the declared
// graph's equal); the admission gate builds its own and never sees them. Nothing is rebuilt
// when the observation adds nothing (every edge declared, no gateway-called Service that the
// graph's services also call). The time along the chains stays the declared graph's: an
// observed edge carries no timeout.
func countObserved(in *status.Input, v graphView, rebuild func() *workload.Result) {
	if v.counted == nil || in.Result == nil || rebuild == nil || (v.gs.Counts.Undeclared == 0 && !addsEntrypoint(in.Result, *v.counted)) {
		return
	}
	declared := in.Result
	r := rebuild()
	n := telemetry.AddUndeclared(r.Graph, *v.counted, meshTries(r))
	if len(r.Graph.Entrypoints()) == 0 {
		telemetry.AddEntrypoints(r.Graph, *v.counted, r.HasNode)
	}
	in.Time = declared.AnalyzeTime()
	in.Result, in.Analysis, in.ObservedEdges = r, r.Analyze(), n
}

// addsEntrypoint says whether s makes an entrypoint of res's graph that is not one already:
// without explicit entrypoints, a gateway-called node of its own that its services call (one
// nobody calls is a default entrypoint already). The undeclared edges are CompareGraph's count.
func addsEntrypoint(res *workload.Result, s telemetry.Snapshot) bool {
	g := res.Graph
	if len(s.Entrypoints) == 0 || len(g.Entrypoints()) > 0 {
		return false
	}
	called := map[string]bool{}
	for i := range g.NumEdges() {
		called[g.EdgeAt(i).To] = true
	}
	for _, n := range s.Entrypoints {
		if called[n] && res.HasNode(n) {
			return true
		}
	}
	return false
}

// meshTries is the tries of the mesh layers on an undeclared edge of r's graph: the most any
// selected workload of the caller's node gets on a call to the callee (named as the caller's
// namespace names it), recorded in r.MeshEdges with one application attempt so that the
// violations explain the factor as for a declared edge. nil without mesh layers. The edge's port
// is unknown (no source's series names it), so the mesh's port rule (mesh/ports.go) decides by
// the callee Service's ports: only TCP ones, no mesh retry; only HTTP or gRPC ones, the mesh's;
// both, the worst, with a warning naming the Service and the upstream to write with its port.
func meshTries(r *workload.Result) func(from, to string) int64 {
	set := r.Mesh()
	if set == nil {
		return nil
	}
	callers := map[string][]workload.Workload{}
	for _, w := range r.Selected {
		if n, ok := r.ServiceOf[w.Key()]; ok {
			callers[n] = append(callers[n], w)
		}
	}
	return func(from, to string) int64 {
		best := int64(1)
		for _, w := range callers[from] {
			e := set.EdgePort(mesh.Caller{Name: w.String(), Namespace: w.Namespace, Labels: w.Labels.Map(), Annotations: w.Annotations.Map()}, telemetry.EntryFor(from, to), 0)
			for _, warn := range e.Warnings {
				if !slices.Contains(r.Warnings, warn) {
					r.Warnings = append(r.Warnings, warn)
				}
			}
			if len(e.Layers) == 0 {
				continue
			}
			// Recorded as a declared edge's is (workload.Result.meshAttempts): the largest, and a
			// 1-try layer too, whose note says why the mesh adds nothing (a TCP-only Service).
			m := workload.MeshEdge{From: from, To: to, App: 1, Caller: w.Kind + " " + w.Name, Layers: e.Layers}
			if r.MeshEdges == nil {
				r.MeshEdges = map[[2]string]workload.MeshEdge{}
			}
			k := [2]string{from, to}
			if prev, ok := r.MeshEdges[k]; !ok || m.Attempts() > prev.Attempts() {
				r.MeshEdges[k] = m
			}
			best = max(best, m.Attempts())
		}
		return best
	}
}

// nodeMappers name observed callers and callees as res's graph does. A caller is one of the
// policy's selected workloads (Istio's and Linkerd's callers name the workload: its service
// node; the service graph's and the proxies' name a service: kept when it is a selected
// workload's service node); any other caller's edges are not the policy's. A callee in the
// policy's namespace is its Service's name, one elsewhere "name.ns" (as an annotation writes
// it); a cluster policy names every node "name.ns" (workload.Policy.Node). A callee without a
// namespace (a host the data does not place) is dropped.
func nodeMappers(res *workload.Result) (func(telemetry.Caller) (string, bool), func(telemetry.Callee) (string, bool)) {
	name := res.Policy.Node
	byWorkload := make(map[[2]string][]workload.Workload, len(res.Selected))
	services := make(map[string]bool, len(res.ServiceOf))
	for _, w := range res.Selected {
		k := [2]string{w.Namespace, w.Name}
		byWorkload[k] = append(byWorkload[k], w)
	}
	for _, n := range res.ServiceOf {
		services[n] = true
	}
	caller := func(c telemetry.Caller) (string, bool) {
		if c.Service {
			if n := name(c.Name, c.Namespace); c.Namespace != "" && services[n] {
				return n, true
			}
			return "", false
		}
		for _, w := range byWorkload[[2]string{c.Namespace, c.Name}] {
			if c.Kind == "" || strings.EqualFold(c.Kind, w.Kind) {
				n, ok := res.ServiceOf[w.Key()]
				return n, ok
			}
		}
		return "", false
	}
	callee := func(c telemetry.Callee) (string, bool) {
		if c.Namespace == "" {
			return "", false
		}
		return name(c.Name, c.Namespace), true
	}
	return caller, callee
}
