package v1alpha1

// The observed side of a policy's status: set only by a manager started with --prometheus-url
// (DESIGN.md, "Observed amplification"). Without it neither the field nor the condition appears.

const (
	// ConditionObservedWithinComputed is True when no edge's observed tries (attempts / calls
	// over the query window) exceed the tries the graph computes for it; False (reason
	// UndeclaredRetries) names the edge that does: a retry layer the graph does not know.
	ConditionObservedWithinComputed = "ObservedWithinComputed"
	// ReasonObservedWithinComputed: every observed edge is within its computed tries.
	ReasonObservedWithinComputed = "WithinComputed"
	// ReasonUndeclaredRetries: an edge was observed making more tries than the graph computes.
	ReasonUndeclaredRetries = "UndeclaredRetries"
	// ReasonPrometheusUnavailable: the last query failed (Unknown); the message has the URL and
	// the error.
	ReasonPrometheusUnavailable = "PrometheusUnavailable"
	// ReasonNoObservedEdges: Prometheus answered, but no edge of the policy had calls over the
	// window (Unknown): nothing was compared, which is not a pass.
	ReasonNoObservedEdges = "NoObservedEdges"
)

// ObservedAmplification is what the proxies counted over the query window: the observed tries
// per edge and their product along the worst observed path.
type ObservedAmplification struct {
	// Amplification is the product of the observed factors (tries per call x calls per
	// inbound request, where measured) along WorstPath, two decimals ("3.00"): an average over
	// the window, not an integer.
	Amplification string `json:"amplification"`

	// WorstPath is the path of the largest observed product, services joined by ">".
	// +optional
	WorstPath string `json:"worstPath,omitempty"`

	// Window is the query window the counters were taken over ("5m0s").
	Window string `json:"window"`

	// Edges are the edges with traffic in the window, worst observed factor (tries x calls per
	// request) first (at most 20).
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Edges []ObservedEdge `json:"edges,omitempty"`
}

// ObservedEdge is one caller -> upstream edge as its counters saw it.
type ObservedEdge struct {
	// From is the calling service, as the graph names it.
	From string `json:"from"`
	// To is the called service, as the graph names it.
	To string `json:"to"`
	// Tries is attempts / calls over the window, two decimals.
	Tries string `json:"tries"`
	// CallsPerRequest is the calls From's application made to To per request From received
	// (the attempts its callers' proxies or sidecars sent it), two decimals; "not measured"
	// when no counted layer sent From a request (an entrypoint). Application retries behind
	// the proxy and fan-out raise it.
	// +optional
	CallsPerRequest string `json:"callsPerRequest,omitempty"`
	// Computed is the tries the graph computes for the edge (1 for an edge the graph lacks).
	Computed int64 `json:"computed"`
	// ComputedCalls is the calls per request the graph declares on the edge (the
	// annotation's fan-out; 1 when not declared or for an edge the graph lacks).
	// +optional
	ComputedCalls int64 `json:"computedCalls,omitempty"`
	// Source is what counted it: retrycap-proxy, envoy, linkerd (joined by "+" when several
	// did).
	Source string `json:"source"`
}
