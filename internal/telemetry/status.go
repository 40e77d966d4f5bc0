package telemetry

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

// Status list and message caps.
const (
	// MaxListed is the most edges each of status.graph's lists holds (the CRD's MaxItems).
	MaxListed = 20
	// MaxNamed is the most undeclared edges the GraphComplete condition's message names.
	MaxNamed = 10
)

// NodeEdge is an observed edge between two nodes of a policy's graph, named as the graph names
// them ("payment"; "payment.billing" in a cluster policy's graph), with its rate.
type NodeEdge struct {
	From, To      string
	RatePerSecond float64
}

// Snapshot is one good observation of a policy's edges.
type Snapshot struct {
	Edges   []NodeEdge
	Sources []string
	Window  time.Duration
	At      time.Time
	// Entrypoints are the nodes gateways and callers outside the mesh were observed calling.
	Entrypoints []string
	// Unplaced are the observation's Unplaced that may be edges of the policy: those whose
	// callee is unknown or one of its nodes (To: that node, "" when unknown).
	Unplaced []Unplaced
}

// CompareGraph counts and lists a policy's edges: observed (in the snapshot), declared (in the
// graph built from the annotations and the mesh), undeclared (observed, not declared: highest
// rate first) and stale (declared, not observed over the window). An edge observed twice
// (two sources, two workloads of one service) counts once, at its highest rate.
func CompareGraph(g *graph.Graph, s Snapshot) *v1alpha1.GraphStatus {
	// The declared side is the graph's own edge index (no map of its 20,000 edges per
	// reconcile); the observed one deduplicates.
	observed := make(map[[2]string]float64, len(s.Edges))
	for _, e := range s.Edges {
		k := [2]string{e.From, e.To}
		if r, ok := observed[k]; !ok || e.RatePerSecond > r {
			observed[k] = e.RatePerSecond
		}
	}
	type rated struct {
		from, to string
		rate     float64
	}
	var un []rated
	for k, r := range observed {
		if _, ok := g.EdgeIndex(k[0], k[1]); !ok {
			un = append(un, rated{k[0], k[1], r})
		}
	}
	var stale []v1alpha1.GraphEdge
	declared := g.NumEdges()
	for i := range declared {
		e := g.EdgeAt(i)
		if _, ok := observed[[2]string{e.From, e.To}]; !ok {
			stale = append(stale, v1alpha1.GraphEdge{From: e.From, To: e.To, RatePerSecond: "0"})
		}
	}
	// Highest rate first, then by name; only the listed ones are formatted.
	slices.SortFunc(un, func(a, b rated) int {
		if a.rate != b.rate {
			return cmp.Compare(b.rate, a.rate)
		}
		return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.to, b.to))
	})
	slices.SortFunc(stale, func(a, b v1alpha1.GraphEdge) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	var undeclared []v1alpha1.GraphEdge
	for i, e := range un {
		if i == MaxListed {
			break
		}
		undeclared = append(undeclared, v1alpha1.GraphEdge{From: e.from, To: e.to, RatePerSecond: FormatRate(e.rate)})
	}
	gs := &v1alpha1.GraphStatus{
		Window: s.Window.String(), ObservedAt: metav1.NewTime(s.At), Sources: s.Sources,
		Counts: v1alpha1.GraphCounts{Observed: int32(len(observed)), Declared: int32(declared), Undeclared: int32(len(un)), Stale: int32(len(stale))},
	}
	gs.Undeclared, gs.MoreUndeclared = undeclared, int32(len(un)-len(undeclared))
	gs.Stale, gs.MoreStale = capEdges(stale)
	return gs
}

func capEdges(es []v1alpha1.GraphEdge) ([]v1alpha1.GraphEdge, int32) {
	if len(es) <= MaxListed {
		return es, 0
	}
	return es[:MaxListed], int32(len(es) - MaxListed)
}

// EntryFor is the annotation entry the caller node from would declare the callee node to
// with: a cluster policy's nodes are "name.namespace", and an entry names a Service of the
// caller's own namespace by its name alone.
func EntryFor(from, to string) string {
	_, fns, fok := annotations.SplitService(from)
	svc, tns, tok := annotations.SplitService(to)
	if fok && tok && fns == tns {
		return svc
	}
	return to
}

// GraphCondition is GraphComplete for a comparison: True when every observed edge is declared;
// False (UndeclaredEdges) naming up to MaxNamed undeclared edges, each with the entry that would
// declare it, and saying that the application's attempts on them are unknown (the amplification
// counts each with one try times its mesh layers).
func GraphCondition(gs *v1alpha1.GraphStatus, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionGraphComplete, ObservedGeneration: generation}
	if gs.Counts.Observed == 0 {
		// Sources exist (else NoTelemetry), but not one of the policy's edges had calls: nothing
		// was compared, which is not a pass (the policy's namespace outside the mesh, no traffic).
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoObservedEdges
		c.Message = fmt.Sprintf("no edge of the policy had calls over %s (from %s): nothing compared (no traffic in the window, or its workloads are not seen by these sources); %d declared",
			gs.Window, sourcesOrNone(gs.Sources), gs.Counts.Declared)
		return c
	}
	if gs.Counts.Undeclared == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonGraphComplete
		c.Message = fmt.Sprintf("every edge observed over %s (%d, from %s) is declared; %d declared, %d of them not observed (stale)",
			gs.Window, gs.Counts.Observed, sourcesOrNone(gs.Sources), gs.Counts.Declared, gs.Counts.Stale)
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonUndeclaredEdges
	var parts []string
	for i, e := range gs.Undeclared {
		if i == MaxNamed {
			break
		}
		parts = append(parts, fmt.Sprintf("%s>%s (%s/s; declare: %s %q on %s)", e.From, e.To, e.RatePerSecond, annotations.Upstreams, EntryFor(e.From, e.To), e.From))
	}
	c.Message = fmt.Sprintf("%d edge(s) observed over %s (from %s) are not declared: %s", gs.Counts.Undeclared, gs.Window, sourcesOrNone(gs.Sources), strings.Join(parts, ", "))
	if n := int(gs.Counts.Undeclared) - len(parts); n > 0 {
		c.Message += fmt.Sprintf(", and %d more", n)
	}
	c.Message += "; the amplification counts each with one application attempt times its mesh layers: the application's own attempts on them are unknown"
	return c
}

// GraphConditionOf is GraphCondition told what the snapshot could not place: series with calls
// over the window that name no caller or no callee (a label the query groups by is missing)
// may be edges of the policy nobody can name, so "every edge is declared" cannot be said: a
// True turns Unknown (UnplacedSeries), a False says them too. Partial data is never taken for
// the whole graph.
func GraphConditionOf(gs *v1alpha1.GraphStatus, s Snapshot, generation int64) metav1.Condition {
	c := GraphCondition(gs, generation)
	if len(s.Unplaced) == 0 {
		return c
	}
	n := 0
	var parts []string
	for i, u := range s.Unplaced {
		n += u.Series
		if i == MaxNamed {
			continue
		}
		to := "calling " + u.To.Name
		if u.To.Name == "" {
			to = "callee unknown"
		}
		parts = append(parts, fmt.Sprintf("%s (%d series, %s; e.g. %s)", u.Reason, u.Series, to, u.Example))
	}
	note := fmt.Sprintf("%d series with calls over %s name no caller or no callee (a label the query groups by is missing: fix the scrape's labels), so their edges cannot be compared: %s",
		n, gs.Window, strings.Join(parts, ", "))
	if more := len(s.Unplaced) - len(parts); more > 0 {
		note += fmt.Sprintf(", and %d more", more)
	}
	if c.Status == metav1.ConditionTrue {
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonUnplacedSeries
		c.Message = "the graph cannot be said complete: " + note + "; " + c.Message
		return c
	}
	c.Message += "; and " + note
	return c
}

func sourcesOrNone(ss []string) string {
	if len(ss) == 0 {
		return "no source"
	}
	return strings.Join(ss, ", ")
}

// GraphUnavailable is what a failed query leaves: GraphComplete Unknown (PrometheusUnavailable,
// naming the URL and the error), and the last good observation while a window has not passed
// since it (nil after: the status is then computed on declarations alone, and the message says
// so). A Prometheus that is down never silently turns into "declared only".
func GraphUnavailable(url string, err error, last *Snapshot, now time.Time, generation int64) (metav1.Condition, *Snapshot) {
	c := metav1.Condition{Type: v1alpha1.ConditionGraphComplete, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonPrometheusUnavailable, ObservedGeneration: generation}
	c.Message = fmt.Sprintf("querying Prometheus at %s: %v", url, err)
	switch {
	case last == nil:
		c.Message += "; no observation yet: the status is computed on declarations alone"
		return c, nil
	case now.Sub(last.At) <= last.Window:
		c.Message += fmt.Sprintf("; keeping the observation of %s until %s (one window)", last.At.UTC().Format(time.RFC3339), last.At.Add(last.Window).UTC().Format(time.RFC3339))
		return c, last
	}
	c.Message += fmt.Sprintf("; the last observation (%s) is older than the window (%s): the status is computed on declarations alone", last.At.UTC().Format(time.RFC3339), last.Window)
	return c, nil
}

// AddUndeclared puts the undeclared observed edges into g for the amplification: each with one
// application attempt times the tries of its mesh layers (meshTries, 1 when none), and one call
// per request. Declared edges are left as declared.
func AddUndeclared(g *graph.Graph, s Snapshot, meshTries func(from, to string) int64) int {
	n := 0
	seen := map[[2]string]bool{}
	for _, e := range s.Edges {
		k := [2]string{e.From, e.To}
		if seen[k] {
			continue
		}
		seen[k] = true
		if _, ok := g.EdgeIndex(e.From, e.To); ok {
			continue
		}
		t := int64(1)
		if meshTries != nil {
			t = max(1, meshTries(e.From, e.To))
		}
		g.AddEdge(e.From, e.To, t, 1)
		n++
	}
	return n
}

// AddEntrypoints makes the nodes s saw called by a mesh gateway or a caller outside the mesh
// default entrypoints of g (one client attempt: what the gateway's own retries add is its mesh
// layer's, which the declared graph carries), as a Gateway-parented route does: they count
// although services of the graph call them too. Only nodes isOwn accepts (the policy's own
// services: a gateway calling a Service of another namespace makes no chain of this policy) are
// added; explicit entrypoints in the spec override every default one (graph.AddDefaultEntrypoint).
// It returns how many it added.
func AddEntrypoints(g *graph.Graph, s Snapshot, isOwn func(node string) bool) int {
	n := 0
	for _, e := range s.Entrypoints {
		if isOwn != nil && !isOwn(e) {
			continue
		}
		g.AddDefaultEntrypoint(e, 1)
		n++
	}
	return n
}

// NoTelemetry is GraphComplete when Prometheus answered but holds none of the sources' series
// over the window: Unknown, since nothing was compared ("nothing was checked" is never a pass).
// present are the metrics whose series exist all the same (Observation.PresentOnly): the
// window holds fewer than two samples of each, which the message says.
func NoTelemetry(url string, window time.Duration, generation int64, present ...string) metav1.Condition {
	msg := fmt.Sprintf("Prometheus at %s holds no series of istio_requests_total, Linkerd's response_total or route series, traces_service_graph_request_total or retrycap_proxy_requests_total over %s: no edge could be observed, the declarations are unchecked", url, window)
	if len(present) > 0 {
		msg = fmt.Sprintf("Prometheus at %s holds series of %s, but none with two samples within %s, which increase() needs (a --prometheus-window shorter than twice the scrape interval; Prometheus' default scrape_interval is 1m): no edge could be observed, the declarations are unchecked", url, strings.Join(present, ", "), window)
	}
	return metav1.Condition{Type: v1alpha1.ConditionGraphComplete, Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNoTelemetry, ObservedGeneration: generation, Message: msg}
}
