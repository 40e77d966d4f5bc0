package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The graph from telemetry in a policy's status (DESIGN.md, "The graph from telemetry"): set only
// by a manager started with --prometheus-url. The admission gate never reads it: declarations
// (and the mesh) are judged as they are.

const (
	// ConditionGraphComplete is True when every edge telemetry observed over the window between
	// the policy's services is declared; False (reason UndeclaredEdges) names up to 10 that are
	// not, with the annotation that would declare each; Unknown (PrometheusUnavailable) when
	// the last query failed, (NoTelemetry) when none of the sources' series exist,
	// (NoObservedEdges) when no edge of the policy had calls, (UnplacedSeries) when calls were
	// observed on edges a missing label leaves unnamed.
	ConditionGraphComplete = "GraphComplete"
	// ReasonGraphComplete: every observed edge is declared.
	ReasonGraphComplete = "GraphComplete"
	// ReasonUndeclaredEdges: edges were observed that no annotation declares.
	ReasonUndeclaredEdges = "UndeclaredEdges"
	// ReasonNoTelemetry: Prometheus answered, but none of the sources' series exist (no Istio,
	// Linkerd, OpenTelemetry service graph or retrycap-proxy counters): nothing was compared.
	ReasonNoTelemetry = "NoTelemetry"
	// ReasonUnplacedSeries: every edge telemetry named is declared, but series with calls over
	// the window name no caller or no callee (a label the query groups by is missing): the
	// edges they carry cannot be compared, so the graph is not said complete (Unknown).
	ReasonUnplacedSeries = "UnplacedSeries"
)

// GraphStatus compares the declared call graph with the observed one.
type GraphStatus struct {
	// Window is the query window the counters' increase was taken over ("5m0s").
	Window string `json:"window"`
	// ObservedAt is when the observation was made: a Prometheus that is down keeps the last
	// good observation until a window has passed since it.
	ObservedAt metav1.Time `json:"observedAt"`
	// Sources are the telemetry sources whose series exist (istio, linkerd,
	// otel-servicegraph, retrycap).
	// +listType=atomic
	// +optional
	Sources []string `json:"sources,omitempty"`
	// Counts of edges between the policy's services.
	Counts GraphCounts `json:"counts"`
	// Undeclared are observed edges no annotation declares, highest rate first (at most 20).
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Undeclared []GraphEdge `json:"undeclared,omitempty"`
	// MoreUndeclared is how many undeclared edges the list leaves out.
	// +optional
	MoreUndeclared int32 `json:"moreUndeclared,omitempty"`
	// Stale are declared edges not observed over the window (at most 20).
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Stale []GraphEdge `json:"stale,omitempty"`
	// MoreStale is how many stale edges the list leaves out.
	// +optional
	MoreStale int32 `json:"moreStale,omitempty"`
}

// GraphCounts are the edge counts of a GraphStatus.
type GraphCounts struct {
	// Observed: edges whose counters increased over the window.
	Observed int32 `json:"observed"`
	// Declared: edges the annotations (and mesh layers) declare.
	Declared int32 `json:"declared"`
	// Undeclared: observed, not declared.
	Undeclared int32 `json:"undeclared"`
	// Stale: declared, not observed over the window.
	Stale int32 `json:"stale"`
}

// GraphEdge is one edge of a GraphStatus list.
type GraphEdge struct {
	// From is the calling service, as the graph names it.
	From string `json:"from"`
	// To is the called service, as the graph names it.
	To string `json:"to"`
	// RatePerSecond is the observed rate over the window, three significant digits ("2.50";
	// "0" for a stale edge): a string, as the API carries no floats.
	RatePerSecond string `json:"ratePerSecond"`
}
