package observed

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

// retrycapSeries is a series of the retrycap proxy from caller to upstream, without a namespace
// label (as a lab scrapes it).
func retrycapSeries(caller, upstream string, attempts, calls float64) Series {
	return Series{Source: SourceRetrycap, Caller: caller, Upstream: upstream, Attempts: attempts, Calls: calls}
}

// envoySeries is retrycapSeries for Envoy's counters.
func envoySeries(caller, upstream string, attempts, calls float64) Series {
	return Series{Source: SourceEnvoy, Caller: caller, Upstream: upstream, Attempts: attempts, Calls: calls}
}

func TestCompute(t *testing.T) {
	chain := []graph.Edge{
		{From: "gateway", To: "order", Attempts: 3, Calls: 1},
		{From: "order", To: "payment", Attempts: 2, Calls: 1},
	}
	tests := []struct {
		name      string
		edges     []graph.Edge
		series    []Series
		node      Node // nil: InNamespace("shop")
		want      []Edge
		amp       float64
		path      []string
		exceeding []string // "from>to"
		unmeasure []string
	}{
		{
			name:  "declared chain within its tries",
			edges: chain,
			series: []Series{
				{Source: SourceRetrycap, Namespace: "shop", Caller: "gateway", Upstream: "order", Attempts: 300, Calls: 100},
				{Source: SourceRetrycap, Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 600, Calls: 300},
			},
			want: []Edge{
				{From: "gateway", To: "order", Tries: 3, Computed: 3, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "order", To: "payment", Tries: 2, CallsPerRequest: 1, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       6,
			path:      []string{"gateway", "order", "payment"},
			unmeasure: []string{"gateway"},
		},
		{
			name:  "a proxy making more attempts than declared",
			edges: chain,
			series: []Series{
				retrycapSeries("gateway", "order", 10, 10),
				retrycapSeries("order", "payment", 40, 10),
			},
			want: []Edge{
				{From: "order", To: "payment", Tries: 4, CallsPerRequest: 1, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "gateway", To: "order", Tries: 1, Computed: 3, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       4,
			path:      []string{"gateway", "order", "payment"},
			exceeding: []string{"order>payment"},
			unmeasure: []string{"gateway"},
		},
		{
			name:  "an application retrying behind its proxy: 3 calls per inbound request, 1 try each",
			edges: chain,
			series: []Series{
				retrycapSeries("gateway", "order", 10, 10),
				retrycapSeries("order", "payment", 30, 30),
			},
			want: []Edge{
				{From: "order", To: "payment", Tries: 1, CallsPerRequest: 3, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "gateway", To: "order", Tries: 1, Computed: 3, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       3,
			path:      []string{"gateway", "order", "payment"},
			exceeding: []string{"order>payment"},
			unmeasure: []string{"gateway"},
		},
		{
			name: "a declared fan-out of 4 is within; 1.04 calls per request is within the tolerance",
			edges: []graph.Edge{
				{From: "gateway", To: "order", Attempts: 1, Calls: 1},
				{From: "order", To: "inventory", Attempts: 2, Calls: 4},
				{From: "order", To: "payment", Attempts: 1, Calls: 1},
			},
			series: []Series{
				retrycapSeries("gateway", "order", 100, 100),
				retrycapSeries("order", "inventory", 400, 400),
				retrycapSeries("order", "payment", 104, 104),
			},
			want: []Edge{
				{From: "order", To: "inventory", Tries: 1, CallsPerRequest: 4, CallsMeasured: true, Computed: 2, ComputedCalls: 4, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "order", To: "payment", Tries: 1, CallsPerRequest: 1.04, CallsMeasured: true, Computed: 1, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "gateway", To: "order", Tries: 1, Computed: 1, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       4,
			path:      []string{"gateway", "order", "inventory"},
			unmeasure: []string{"gateway"},
		},
		{
			name:  "two callers' requests summed at order, one of them retried by its proxy",
			edges: chain,
			series: []Series{
				retrycapSeries("gateway", "order", 10, 10),
				retrycapSeries("admin", "order", 10, 5),
				retrycapSeries("order", "payment", 40, 20),
			},
			want: []Edge{
				{From: "admin", To: "order", Tries: 2, Computed: 1, ComputedCalls: 1, Sources: []string{SourceRetrycap}},
				{From: "order", To: "payment", Tries: 2, CallsPerRequest: 1, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "gateway", To: "order", Tries: 1, Computed: 3, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       4,
			path:      []string{"admin", "order", "payment"},
			exceeding: []string{"admin>order"},
			unmeasure: []string{"admin", "gateway"},
		},
		{
			name:  "two pods summed, two layers multiplied, another namespace dropped",
			edges: chain,
			series: []Series{
				{Source: SourceRetrycap, Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 30, Calls: 20},
				{Source: SourceRetrycap, Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 10, Calls: 20},
				{Source: SourceEnvoy, Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 80, Calls: 40},
				{Source: SourceRetrycap, Namespace: "other", Caller: "order", Upstream: "payment", Attempts: 99, Calls: 1},
			},
			want: []Edge{
				{From: "order", To: "payment", Tries: 2, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceEnvoy, SourceRetrycap}},
			},
			amp:       2,
			path:      []string{"order", "payment"},
			unmeasure: []string{"order"},
		},
		{
			// gateway's app makes 20 calls, its proxy 20 attempts, the sidecar 40: order
			// receives 40 requests and its app makes 40 calls to payment.
			name:  "layers on the inbound edge: the requests are the outermost layer's attempts",
			edges: chain,
			series: []Series{
				retrycapSeries("gateway", "order", 20, 20),
				envoySeries("gateway", "order", 40, 20),
				retrycapSeries("order", "payment", 40, 40),
			},
			want: []Edge{
				{From: "gateway", To: "order", Tries: 2, Computed: 3, ComputedCalls: 1, Declared: true, Sources: []string{SourceEnvoy, SourceRetrycap}},
				{From: "order", To: "payment", Tries: 1, CallsPerRequest: 1, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       2,
			path:      []string{"gateway", "order", "payment"},
			unmeasure: []string{"gateway"},
		},
		{
			name:  "an edge the graph lacks, retrying",
			edges: chain,
			series: []Series{
				retrycapSeries("payment", "bank", 50, 20),
				retrycapSeries("order", "payment", 20, 10),
				retrycapSeries("audit", "log", 0, 0),
			},
			want: []Edge{
				{From: "payment", To: "bank", Tries: 2.5, CallsPerRequest: 1, CallsMeasured: true, Computed: 1, ComputedCalls: 1, Sources: []string{SourceRetrycap}},
				{From: "order", To: "payment", Tries: 2, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       5,
			path:      []string{"order", "payment", "bank"},
			exceeding: []string{"payment>bank"},
			unmeasure: []string{"order"},
		},
		{
			name:  "within the tolerance",
			edges: chain,
			series: []Series{
				retrycapSeries("order", "payment", 2009, 1000),
			},
			want:      []Edge{{From: "order", To: "payment", Tries: 2.009, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}}},
			amp:       2.009,
			path:      []string{"order", "payment"},
			unmeasure: []string{"order"},
		},
		{
			// a receives b's 30 attempts and makes 10 calls: 1/3 call per request, b
			// receives 20 and makes 10: 1/2.
			name:  "a cycle is followed once around",
			edges: []graph.Edge{{From: "a", To: "b", Attempts: 2}, {From: "b", To: "a", Attempts: 2}},
			series: []Series{
				retrycapSeries("a", "b", 20, 10),
				retrycapSeries("b", "a", 30, 10),
			},
			node: InNamespace("x"),
			want: []Edge{
				{From: "b", To: "a", Tries: 3, CallsPerRequest: 0.5, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "a", To: "b", Tries: 2, CallsPerRequest: 10.0 / 30, CallsMeasured: true, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
			},
			amp:       1.5,
			path:      []string{"b", "a"},
			exceeding: []string{"b>a"},
		},
		{
			name: "cluster policy: qualified names, a series without namespace dropped",
			edges: []graph.Edge{
				{From: "order.shop", To: "payment.billing", Attempts: 3},
			},
			series: []Series{
				{Source: SourceRetrycap, Namespace: "shop", Caller: "order", Upstream: "payment.billing", Attempts: 30, Calls: 10},
				{Source: SourceRetrycap, Namespace: "billing", Caller: "payment", Upstream: "bank", Attempts: 30, Calls: 30},
				retrycapSeries("order", "payment", 50, 10),
			},
			node: Qualified,
			want: []Edge{
				{From: "order.shop", To: "payment.billing", Tries: 3, Computed: 3, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}},
				{From: "payment.billing", To: "bank.billing", Tries: 1, CallsPerRequest: 1, CallsMeasured: true, Computed: 1, ComputedCalls: 1, Sources: []string{SourceRetrycap}},
			},
			amp:       3,
			path:      []string{"order.shop", "payment.billing", "bank.billing"},
			unmeasure: []string{"order.shop"},
		},
		{
			name:      "calls refused before any attempt: no path multiplies",
			edges:     chain,
			series:    []Series{retrycapSeries("order", "payment", 5, 10)},
			want:      []Edge{{From: "order", To: "payment", Tries: 0.5, Computed: 2, ComputedCalls: 1, Declared: true, Sources: []string{SourceRetrycap}}},
			amp:       1,
			unmeasure: []string{"order"},
		},
		{
			name:  "nothing observed",
			edges: chain,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := tc.node
			if node == nil {
				node = InNamespace("shop")
			}
			r := Compute(tc.edges, tc.series, node)
			if !reflect.DeepEqual(r.Edges, tc.want) {
				t.Errorf("edges:\n got %+v\nwant %+v", r.Edges, tc.want)
			}
			if r.Amplification != tc.amp || !reflect.DeepEqual(r.WorstPath, tc.path) {
				t.Errorf("amplification %v along %v, want %v along %v", r.Amplification, r.WorstPath, tc.amp, tc.path)
			}
			var ex []string
			for _, e := range r.Exceeding {
				ex = append(ex, e.From+">"+e.To)
			}
			if !reflect.DeepEqual(ex, tc.exceeding) {
				t.Errorf("exceeding %v, want %v", ex, tc.exceeding)
			}
			if !reflect.DeepEqual(r.Unmeasured, tc.unmeasure) {
				t.Errorf("unmeasured %v, want %v", r.Unmeasured, tc.unmeasure)
			}
		})
	}
}

func TestConditionAndStatus(t *testing.T) {
	w := 5 * time.Minute
	chain := []graph.Edge{{From: "gateway", To: "order", Attempts: 3, Calls: 1}, {From: "order", To: "payment", Attempts: 2, Calls: 1}}
	const triesCause = ": a retry layer the graph does not know (application code, a mesh it does not read, or a proxy configured by hand)"
	const callsCause = ": the application retries by itself behind its proxy (app retries?), or fans out more calls per request than its annotation declares"
	tests := []struct {
		name   string
		series []Series
		want   metav1.Condition
		status *v1alpha1.ObservedAmplification
	}{
		{
			name: "within",
			series: []Series{
				retrycapSeries("gateway", "order", 30, 10),
				retrycapSeries("order", "payment", 50, 30),
			},
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionTrue, Reason: "WithinComputed", ObservedGeneration: 7,
				Message: "2 edges observed over 5m0s, none with more tries per call or calls per request than computed; observed amplification 5.00 along gateway>order>payment; calls per inbound request not measured at gateway (no counted layer sent them a request)"},
			status: &v1alpha1.ObservedAmplification{Amplification: "5.00", WorstPath: "gateway>order>payment", Window: "5m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "gateway", To: "order", Tries: "3.00", CallsPerRequest: "not measured", Computed: 3, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "order", To: "payment", Tries: "1.67", CallsPerRequest: "1.00", Computed: 2, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "declared edge exceeded, and an undeclared one",
			series: []Series{
				retrycapSeries("order", "payment", 40, 10),
				envoySeries("payment", "bank", 120, 40),
			},
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 7,
				Message: "edge order>payment: 4.00 tries per call observed over 5m0s (retrycap-proxy), the graph computes 2" + triesCause + "; 1 more edges exceed theirs"},
			status: &v1alpha1.ObservedAmplification{Amplification: "12.00", WorstPath: "order>payment>bank", Window: "5m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "4.00", CallsPerRequest: "not measured", Computed: 2, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "payment", To: "bank", Tries: "3.00", CallsPerRequest: "1.00", Computed: 1, ComputedCalls: 1, Source: "envoy"},
			}},
		},
		{
			name:   "only an undeclared edge",
			series: []Series{envoySeries("payment", "bank", 30, 10)},
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 7,
				Message: "edge payment>bank: 3.00 tries per call observed over 5m0s (envoy), the graph has no such edge (1)" + triesCause},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "payment>bank", Window: "5m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "payment", To: "bank", Tries: "3.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "envoy"},
			}},
		},
		{
			name: "an application retrying behind its proxy",
			series: []Series{
				retrycapSeries("gateway", "order", 21, 21),
				retrycapSeries("order", "payment", 63, 63),
			},
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 7,
				Message: "edge order>payment: 3.00 calls per inbound request at order observed over 5m0s (retrycap-proxy), the graph declares 1" + callsCause},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "5m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "1.00", CallsPerRequest: "3.00", Computed: 2, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 3, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "both factors exceed on one edge, the calls on an undeclared one",
			series: []Series{
				retrycapSeries("gateway", "order", 10, 10),
				retrycapSeries("order", "payment", 60, 20),
				retrycapSeries("payment", "bank", 120, 120),
			},
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 7,
				Message: "edge order>payment: 3.00 tries per call observed over 5m0s (retrycap-proxy), the graph computes 2" + triesCause +
					"; and 2.00 calls per inbound request at order observed over 5m0s (retrycap-proxy), the graph declares 1" + callsCause + "; 1 more edges exceed theirs"},
			status: &v1alpha1.ObservedAmplification{Amplification: "12.00", WorstPath: "gateway>order>payment>bank", Window: "5m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", CallsPerRequest: "2.00", Computed: 2, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "payment", To: "bank", Tries: "1.00", CallsPerRequest: "2.00", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 3, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name:   "only the calls of an undeclared edge",
			series: []Series{retrycapSeries("order", "payment", 10, 10), retrycapSeries("payment", "bank", 25, 25)},
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 7,
				Message: "edge payment>bank: 2.50 calls per inbound request at payment observed over 5m0s (retrycap-proxy), the graph has no such edge (1)" + callsCause},
			status: &v1alpha1.ObservedAmplification{Amplification: "2.50", WorstPath: "order>payment>bank", Window: "5m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "payment", To: "bank", Tries: "1.00", CallsPerRequest: "2.50", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "order", To: "payment", Tries: "1.00", CallsPerRequest: "not measured", Computed: 2, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "no traffic",
			// Before: True, "0 edges observed ..., none with more tries ... than computed": a
			// pass on nothing.
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionUnknown, Reason: "NoObservedEdges", ObservedGeneration: 7,
				Message: "no edge of the policy had calls over 5m0s: nothing compared (no traffic in the window, or no counter of the proxies, Envoy or Linkerd with the caller label: docs/observe.md)"},
			status: &v1alpha1.ObservedAmplification{Amplification: "0.00", Window: "5m0s"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Compute(chain, tc.series, InNamespace("shop"))
			if got := Condition(r, w, 7); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("condition:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := Status(r, w); !reflect.DeepEqual(got, tc.status) {
				t.Errorf("status:\n got %+v\nwant %+v", got, tc.status)
			}
		})
	}
}

func TestStatusCapsEdges(t *testing.T) {
	var series []Series
	for i := range 25 {
		series = append(series, Series{Source: SourceRetrycap, Caller: "c", Upstream: string(rune('a' + i)), Attempts: 1, Calls: 1})
	}
	if n := len(Status(Compute(nil, series, InNamespace("x")), time.Minute).Edges); n != MaxEdges {
		t.Fatalf("status lists %d edges, want %d", n, MaxEdges)
	}
}

// TestUnplacedSeriesAreSaid: series of the policy without a caller label (a scrape that does
// not add it) are no edge, and the condition says how many, with an example, instead of
// dropping them silently (before: a scrape without the label gave True, "0 edges observed
// ..., none with more tries ... than computed", a pass on nothing).
func TestUnplacedSeriesAreSaid(t *testing.T) {
	series := []Series{
		{Source: SourceRetrycap, Namespace: "shop", Upstream: "payment", Attempts: 30, Calls: 10},
		{Source: SourceLinkerd, Namespace: "shop", Upstream: "stock", Attempts: 5, Calls: 5},
		{Source: SourceRetrycap, Namespace: "other", Upstream: "payment", Attempts: 3, Calls: 1}, // not this policy's
	}
	r := Compute(nil, series, InNamespace("shop"))
	if r.Unplaced != 2 || len(r.Edges) != 0 {
		t.Fatalf("%+v", r)
	}
	c := Condition(r, 5*time.Minute, 1)
	if c.Status != metav1.ConditionUnknown || c.Reason != "NoObservedEdges" {
		t.Fatalf("%+v", c)
	}
	want := `no edge of the policy had calls over 5m0s: nothing compared (no traffic in the window, or no counter of the proxies, Envoy or Linkerd with the caller label: docs/observe.md); ` +
		`2 series without a caller or upstream label not placed on the graph (the scrape must add the caller label: docs/observe.md), e.g. retrycap-proxy series namespace "shop" caller "" upstream "payment"`
	if c.Message != want {
		t.Fatalf("got  %s\nwant %s", c.Message, want)
	}
}

// TestAttemptsWithoutCallsAreSaid: an edge's source whose attempts had no calls to divide by
// (Envoy's retries over its requests after increase()'s extrapolation: calls total - retry < 0;
// attempts of calls made before the window) gives no tries, and the condition says how many
// and the first (before: dropped without a word, so the edge of a storm could vanish from a
// True condition).
func TestAttemptsWithoutCallsAreSaid(t *testing.T) {
	series := []Series{
		{Source: SourceRetrycap, Namespace: "shop", Caller: "web", Upstream: "order", Attempts: 10, Calls: 10},
		{Source: SourceEnvoy, Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 100, Calls: -1.5},
		{Source: SourceRetrycap, Namespace: "shop", Caller: "order", Upstream: "stock", Attempts: 4, Calls: 0},
		{Source: SourceRetrycap, Namespace: "shop", Caller: "order", Upstream: "ledger", Attempts: 0, Calls: 0}, // no traffic: nothing to say
	}
	r := Compute([]graph.Edge{{From: "web", To: "order", Attempts: 1, Calls: 1}}, series, InNamespace("shop"))
	if r.NoCalls != 2 || len(r.Edges) != 1 {
		t.Fatalf("%+v", r)
	}
	c := Condition(r, 5*time.Minute, 1)
	want := `1 edges observed over 5m0s, none with more tries per call or calls per request than computed; observed amplification 1.00 along web>order; ` +
		`calls per inbound request not measured at web (no counted layer sent them a request); ` +
		`2 edge source(s) with attempts and no calls over the window: no tries per call (retries of calls made before the window, or for Envoy retries over its requests), e.g. envoy order>payment: 100 attempts, -1.5 calls`
	if c.Status != metav1.ConditionTrue || c.Message != want {
		t.Fatalf("%s\ngot  %s\nwant %s", c.Status, c.Message, want)
	}
}
