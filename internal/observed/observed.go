package observed

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

// Sources of series.
const (
	SourceRetrycap = "retrycap-proxy"
	SourceEnvoy    = "envoy"
	SourceLinkerd  = "linkerd"
)

// Tolerance is how far observed tries may exceed the computed ones before the edge counts as
// exceeding: the counters of one target are read at the same scrape times, so their ratio is
// exact up to float rounding, but an edge summed over pods scraped at different times is not.
const Tolerance = 0.01

// CallsTolerance is how far the observed calls per inbound request may exceed the calls the
// graph declares: that ratio divides the counters of two targets (the caller's proxy and its
// callers' proxies), scraped at different instants and each extrapolated by increase() over the
// window, so it is exact only for a steady rate; 0.05 keeps an honest application within while
// a retry on every tenth request (1.10) already shows.
const CallsTolerance = 0.05

// NotMeasured is what the status says for the calls per inbound request of an edge whose caller
// received no request any counted layer sent (an entrypoint, or a service whose callers have
// no proxy): the factor is left out rather than taken as 1.
const NotMeasured = "not measured"

// MaxEdges is how many edges the status lists (the API's MaxItems).
const MaxEdges = 20

// Series is one edge's counters over the window, as a query returns them (summed over pods).
type Series struct {
	Source string
	// Namespace is the caller's namespace ("" when the scrape has no namespace label: a lab).
	Namespace string
	// Caller and Upstream are the names the counters carry: the caller's service name and the
	// upstream as the caller names it (the proxy's --upstreams entry, Envoy's cluster host).
	Caller, Upstream string
	// Attempts are the attempts sent (first tries and retries), Calls the calls the layer
	// received from above (the application's calls, for the proxy).
	Attempts, Calls float64
	// TargetNamespace is set when the scrape renamed the series' own namespace label
	// exported_namespace (any source's series federated without honor_labels: true): it is the
	// namespace label the scrape wrote (its target's), and Namespace the one the series claims.
	// Such a series is never an edge (which other labels the scrape overwrote cannot be told):
	// Compute counts it as not placed, in the policies of the namespace it claims.
	TargetNamespace string
}

// innermost ranks the sources by how near the application they sit when several count one
// edge: the injected proxy takes the application's calls (HTTP_PROXY) and a mesh sidecar
// captures the proxy's attempts, so the proxy's calls are the application's.
func innermost(src string) int {
	if src == SourceRetrycap {
		return 0
	}
	return 1
}

// Edge is one edge's observed tries beside the computed ones.
type Edge struct {
	From, To string
	// Tries is the product over the sources of each source's attempts / calls: layers on one
	// edge multiply, as they do in the graph.
	Tries float64
	// CallsPerRequest is how many calls From's application made to To per request From
	// received: the calls its innermost layer took on this edge over the requests the layers
	// of From's callers sent to From (their attempts, summed over callers). An application
	// that retries by itself behind its proxy raises it (each of its retries is a new call to
	// the proxy, so Tries does not move), and so does a fan-out. Meaningful only when
	// CallsMeasured.
	CallsPerRequest float64
	// CallsMeasured is false when no counted layer sent From a request in the window (an
	// entrypoint, or callers without a proxy): the factor is then left out of Factor.
	CallsMeasured bool
	// Computed is the graph's attempts on the edge, 1 when the graph lacks it (no retry layer
	// declared on it); ComputedCalls the graph's calls per request on it (the annotation's
	// fan-out, 1 when not declared or the edge is not in the graph).
	Computed, ComputedCalls int64
	// Declared reports whether the graph has the edge.
	Declared bool
	// Sources are the sources that counted the edge, sorted.
	Sources []string
}

// Factor is the edge's observed load multiplier, what the graph's attempts x calls bound:
// tries per call times calls per inbound request, or the tries alone when the calls per
// request were not measured.
func (e Edge) Factor() float64 {
	if e.CallsMeasured {
		return e.Tries * e.CallsPerRequest
	}
	return e.Tries
}

// TriesExceed reports whether the edge's observed tries exceed its computed attempts.
func (e Edge) TriesExceed() bool { return e.Tries > float64(e.Computed)+Tolerance }

// CallsExceed reports whether the calls per inbound request were measured and exceed the
// graph's calls on the edge.
func (e Edge) CallsExceed() bool {
	return e.CallsMeasured && e.CallsPerRequest > float64(e.ComputedCalls)+CallsTolerance
}

// Exceeds reports whether either observed factor exceeds its computed one.
func (e Edge) Exceeds() bool { return e.TriesExceed() || e.CallsExceed() }

// Report is the observed side of one policy.
type Report struct {
	// Edges are the edges with calls in the window, worst Factor first, then by name.
	Edges []Edge
	// Amplification is the largest product of observed factors along a path; WorstPath that
	// path (nil when no edge was observed).
	Amplification float64
	WorstPath     []string
	// Exceeding are the edges whose observed tries or calls per request exceed the computed
	// ones, in Edges' order.
	Exceeding []Edge
	// Unmeasured are the callers of observed edges whose calls per inbound request were not
	// measured (no counted layer sent them a request), sorted.
	Unmeasured []string
	// Unplaced counts the series of this policy without a caller or an upstream label (a scrape
	// that does not add the caller label: docs/observe.md), which no edge can be made of; the
	// condition says so rather than dropping them silently. UnplacedExample is the first.
	Unplaced        int
	UnplacedExample string
	// NoCalls counts the edges and sources whose attempts over the window had no calls to
	// divide by (retries of calls made before the window; for Envoy, retries over its requests,
	// which increase()'s extrapolation can give): no tries per call, said rather than dropped.
	// NoCallsExample is the first.
	NoCalls        int
	NoCallsExample string
	// Renamed counts the series of this policy whose namespace label a scrape renamed
	// (Series.TargetNamespace), which no edge is made of; RenamedExample is the first.
	Renamed        int
	RenamedExample string
}

// Node maps a series' caller or upstream name to a graph node; ok false drops the series (not
// this policy's). Identity for a RetryPolicy whose series are filtered by namespace first.
type Node func(s Series) (from, to string, ok bool)

// InNamespace keeps the series of namespace ns (and those without a namespace, from a scrape
// that has none), named as they come: a RetryPolicy's nodes are its namespace's service names.
func InNamespace(ns string) Node {
	return func(s Series) (string, string, bool) {
		if s.Namespace != "" && s.Namespace != ns {
			return "", "", false
		}
		return s.Caller, s.Upstream, true
	}
}

// Qualified names a series' nodes as a ClusterRetryPolicy's graph does ("name.ns"): the caller
// in its namespace, an upstream without a dot in the caller's namespace, one with a dot as it
// is written (an upstream "payment.billing" is node "payment.billing"). A series without a
// namespace cannot be placed and is dropped.
func Qualified(s Series) (string, string, bool) {
	if s.Namespace == "" {
		return "", "", false
	}
	to := s.Upstream
	if !strings.Contains(to, ".") {
		to += "." + s.Namespace
	}
	return s.Caller + "." + s.Namespace, to, true
}

// Compute joins the series with the graph's edges: per edge the observed tries (per source
// attempts / calls, multiplied across sources) and calls per inbound request at the caller, the
// computed attempts and calls beside them, and the largest product of observed factors along a
// path of the observed edges.
func Compute(edges []graph.Edge, series []Series, node Node) Report {
	type declared struct{ attempts, calls int64 }
	computed := make(map[[2]string]declared, len(edges))
	for _, e := range edges {
		computed[[2]string{e.From, e.To}] = declared{e.Attempts, max(e.Calls, 1)}
	}
	type counts struct{ attempts, calls float64 }
	per := map[[2]string]map[string]*counts{}
	var r Report
	for _, s := range series {
		from, to, ok := node(s)
		if ok && s.TargetNamespace != "" {
			if r.Renamed++; r.RenamedExample == "" {
				r.RenamedExample = fmt.Sprintf("%s series exported_namespace %q namespace %q caller %q upstream %q", s.Source, s.Namespace, s.TargetNamespace, s.Caller, s.Upstream)
			}
			continue
		}
		if ok && (s.Caller == "" || s.Upstream == "") {
			if r.Unplaced++; r.UnplacedExample == "" {
				r.UnplacedExample = fmt.Sprintf("%s series namespace %q caller %q upstream %q", s.Source, s.Namespace, s.Caller, s.Upstream)
			}
			continue
		}
		if !ok || from == "" || to == "" {
			continue
		}
		k := [2]string{from, to}
		if per[k] == nil {
			per[k] = map[string]*counts{}
		}
		c := per[k][s.Source]
		if c == nil {
			c = &counts{}
			per[k][s.Source] = c
		}
		c.attempts += s.Attempts
		c.calls += s.Calls
	}
	appCalls := map[[2]string]float64{}
	inbound := map[string]float64{} // requests the counted layers sent to a node
	noCallsKey := ""
	for k, bySource := range per {
		e := Edge{From: k[0], To: k[1], Tries: 1, Computed: 1, ComputedCalls: 1}
		for _, src := range sortedSources(bySource) {
			c := bySource[src]
			if c.calls <= 0 {
				// No call in the window: nothing to divide by. Attempts without calls are said.
				if c.attempts > 0 {
					// The example is the first by edge and source, whatever the map's order.
					if key := k[0] + ">" + k[1] + " " + src; r.NoCalls == 0 || key < noCallsKey {
						noCallsKey = key
						r.NoCallsExample = fmt.Sprintf("%s %s>%s: %s attempts, %s calls", src, k[0], k[1],
							strconv.FormatFloat(c.attempts, 'f', -1, 64), strconv.FormatFloat(c.calls, 'f', -1, 64))
					}
					r.NoCalls++
				}
				continue
			}
			e.Tries *= c.attempts / c.calls
			e.Sources = append(e.Sources, src)
		}
		if len(e.Sources) == 0 {
			continue
		}
		sort.Slice(e.Sources, func(i, j int) bool {
			a, b := e.Sources[i], e.Sources[j]
			if innermost(a) != innermost(b) {
				return innermost(a) < innermost(b)
			}
			return a < b
		})
		// The application's calls are its innermost layer's; what reaches the callee is those
		// calls times every layer's tries (the outermost layer's attempts).
		calls := bySource[e.Sources[0]].calls
		appCalls[k] = calls
		inbound[k[1]] += calls * e.Tries
		sort.Strings(e.Sources)
		if d, ok := computed[k]; ok {
			e.Computed, e.ComputedCalls, e.Declared = d.attempts, d.calls, true
		}
		r.Edges = append(r.Edges, e)
	}
	unmeasured := map[string]bool{}
	for i := range r.Edges {
		e := &r.Edges[i]
		if in := inbound[e.From]; in > 0 {
			e.CallsPerRequest, e.CallsMeasured = appCalls[[2]string{e.From, e.To}]/in, true
		} else {
			unmeasured[e.From] = true
		}
	}
	for n := range unmeasured {
		r.Unmeasured = append(r.Unmeasured, n)
	}
	sort.Strings(r.Unmeasured)
	sort.Slice(r.Edges, func(i, j int) bool {
		a, b := r.Edges[i], r.Edges[j]
		if fa, fb := a.Factor(), b.Factor(); fa != fb {
			return fa > fb
		}
		if a.From != b.From {
			return a.From < b.From
		}
		return a.To < b.To
	})
	for _, e := range r.Edges {
		if e.Exceeds() {
			r.Exceeding = append(r.Exceeding, e)
		}
	}
	r.Amplification, r.WorstPath = worstPath(r.Edges)
	return r
}

// sortedSources are a per-source map's keys in order, so that the first example is the same
// whatever the map's order.
func sortedSources[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for s := range m {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// worstPath is the largest product of factors along a simple path of edges, and the path: a
// depth-first search from every node, memoised per node within one start. Factors are usually
// at least 1, but an average below 1 is possible (calls refused before any attempt: an open
// breaker; a service calling another on some requests only), so the worst path need not be the longest; of equal products the longer path is kept (an edge of
// 1 try still shows where the chain goes). A cycle is not followed around (the
// computed amplification of a retry cycle is unbounded anyway): a back edge is skipped, and a
// fresh memo per start keeps the skip from hiding a path that starts inside the cycle. That is
// O(V x (V+E)) over the observed edges, which the query's series limit bounds.
func worstPath(edges []Edge) (float64, []string) {
	out := map[string][]Edge{}
	nodes := map[string]bool{}
	for _, e := range edges {
		out[e.From] = append(out[e.From], e)
		nodes[e.From], nodes[e.To] = true, true
	}
	for _, es := range out {
		sort.Slice(es, func(i, j int) bool { return es[i].To < es[j].To })
	}
	names := make([]string, 0, len(nodes))
	for n := range nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	type best struct {
		product float64
		next    string // "" at the path's end
	}
	var topProduct float64
	var topPath []string
	for _, start := range names {
		if len(out[start]) == 0 {
			continue
		}
		memo := map[string]best{}
		onStack := map[string]bool{}
		var visit func(n string) best
		visit = func(n string) best {
			if b, ok := memo[n]; ok {
				return b
			}
			onStack[n] = true
			b := best{product: 1}
			for _, e := range out[n] {
				if onStack[e.To] {
					continue
				}
				if p := e.Factor() * visit(e.To).product; p > b.product || (p == b.product && b.next == "") {
					b = best{product: p, next: e.To}
				}
			}
			onStack[n] = false
			memo[n] = b
			return b
		}
		b := visit(start)
		if b.next == "" || (topPath != nil && b.product <= topProduct) {
			continue
		}
		path := []string{start}
		for n, seen := start, map[string]bool{start: true}; memo[n].next != "" && !seen[memo[n].next]; {
			n = memo[n].next
			seen[n] = true
			path = append(path, n)
		}
		topProduct, topPath = b.product, path
	}
	if topPath == nil {
		if len(edges) > 0 {
			return 1, nil // every edge's factor averaged below one: no path multiplies
		}
		return 0, nil
	}
	return topProduct, topPath
}

// Format writes a ratio with two decimals, as the status carries it.
func Format(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }

// Status is the report as the policy status carries it: the edges worst first (at most
// MaxEdges), the amplification and the worst path.
func Status(r Report, window time.Duration) *v1alpha1.ObservedAmplification {
	st := &v1alpha1.ObservedAmplification{
		Amplification: Format(r.Amplification),
		WorstPath:     strings.Join(r.WorstPath, ">"),
		Window:        window.String(),
	}
	for i, e := range r.Edges {
		if i == MaxEdges {
			break
		}
		cpr := NotMeasured
		if e.CallsMeasured {
			cpr = Format(e.CallsPerRequest)
		}
		st.Edges = append(st.Edges, v1alpha1.ObservedEdge{From: e.From, To: e.To, Tries: Format(e.Tries), CallsPerRequest: cpr,
			Computed: e.Computed, ComputedCalls: e.ComputedCalls, Source: strings.Join(e.Sources, "+")})
	}
	return st
}

// What the False condition says each exceeding factor may be.
const (
	triesCause = "a retry layer the graph does not know (application code, a mesh it does not read, or a proxy configured by hand)"
	callsCause = "the application retries by itself behind its proxy (app retries?), or fans out more calls per request than its annotation declares"
)

// Condition is ObservedWithinComputed for a report: False naming the worst exceeding edge, the
// factor that exceeds (tries per call, calls per inbound request, or both), and how many
// others exceed; True otherwise. Callers whose calls per request were not measured are named.
func Condition(r Report, window time.Duration, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionObservedWithinComputed, ObservedGeneration: generation}
	if len(r.Edges) == 0 {
		// Nothing compared is not "within": Unknown, saying why there may be nothing.
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoObservedEdges
		c.Message = fmt.Sprintf("no edge of the policy had calls over %s: nothing compared (no traffic in the window, or no counter "+
			"of the proxies, Envoy or Linkerd with the caller label: docs/observe.md)", window) + r.unplaced()
		return c
	}
	if len(r.Exceeding) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonObservedWithinComputed
		c.Message = fmt.Sprintf("%d edges observed over %s, none with more tries per call or calls per request than computed; observed amplification %s", len(r.Edges), window, Format(r.Amplification))
		if len(r.WorstPath) > 0 {
			c.Message += " along " + strings.Join(r.WorstPath, ">")
		}
		if len(r.Unmeasured) > 0 {
			c.Message += "; calls per inbound request not measured at " + strings.Join(r.Unmeasured, ", ") + " (no counted layer sent them a request)"
		}
		c.Message += r.unplaced()
		return c
	}
	e := r.Exceeding[0]
	c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonUndeclaredRetries
	var parts []string
	if e.TriesExceed() {
		declared := fmt.Sprintf("the graph computes %d", e.Computed)
		if !e.Declared {
			declared = "the graph has no such edge (1)"
		}
		parts = append(parts, fmt.Sprintf("%s tries per call observed over %s (%s), %s: %s",
			Format(e.Tries), window, strings.Join(e.Sources, "+"), declared, triesCause))
	}
	if e.CallsExceed() {
		declared := fmt.Sprintf("the graph declares %d", e.ComputedCalls)
		if !e.Declared {
			declared = "the graph has no such edge (1)"
		}
		parts = append(parts, fmt.Sprintf("%s calls per inbound request at %s observed over %s (%s), %s: %s",
			Format(e.CallsPerRequest), e.From, window, strings.Join(e.Sources, "+"), declared, callsCause))
	}
	c.Message = fmt.Sprintf("edge %s>%s: %s", e.From, e.To, strings.Join(parts, "; and "))
	if n := len(r.Exceeding) - 1; n > 0 {
		c.Message += fmt.Sprintf("; %d more edges exceed theirs", n)
	}
	c.Message += r.unplaced()
	return c
}

// unplaced is the message's note on the series that could not be placed and on the attempts
// without calls, "" when none.
func (r Report) unplaced() string {
	s := ""
	if r.Unplaced > 0 {
		s = fmt.Sprintf("; %d series without a caller or upstream label not placed on the graph (the scrape must add the caller label: docs/observe.md), e.g. %s", r.Unplaced, r.UnplacedExample)
	}
	if r.Renamed > 0 {
		s += fmt.Sprintf("; %d series whose own namespace label the scrape renamed exported_namespace (a federation or scrape without honor_labels: true) not placed on the graph (their namespace label is the scrape target's, not the caller's), e.g. %s", r.Renamed, r.RenamedExample)
	}
	if r.NoCalls > 0 {
		s += fmt.Sprintf("; %d edge source(s) with attempts and no calls over the window: no tries per call (retries of calls made before the window, or for Envoy retries over its requests), e.g. %s", r.NoCalls, r.NoCallsExample)
	}
	return s
}

// Unavailable is ObservedWithinComputed when the query failed: Unknown, with the URL and the
// error.
func Unavailable(url string, err error, generation int64) metav1.Condition {
	return metav1.Condition{Type: v1alpha1.ConditionObservedWithinComputed, Status: metav1.ConditionUnknown,
		Reason: v1alpha1.ReasonPrometheusUnavailable, ObservedGeneration: generation,
		Message: fmt.Sprintf("querying Prometheus at %s: %v", url, err)}
}
