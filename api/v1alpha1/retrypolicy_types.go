package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Enforcement says what the admission gate does with a workload that would push a chain over the cap.
// +kubebuilder:validation:Enum=Reject;Rewrite;Audit
type Enforcement string

const (
	// EnforcementReject denies the workload.
	EnforcementReject Enforcement = "Reject"
	// EnforcementRewrite admits the workload with its attempts lowered to what fits.
	EnforcementRewrite Enforcement = "Rewrite"
	// EnforcementAudit admits the workload with a warning.
	EnforcementAudit Enforcement = "Audit"
)

// Condition types and reasons of a RetryPolicy.
const (
	// ConditionReady is True once the controller has computed the status for the current spec.
	ConditionReady = "Ready"
	// ConditionWithinCap is True when no chain exceeds spec.maxAmplification.
	ConditionWithinCap = "WithinCap"

	ReasonWithinCap         = "WithinCap"
	ReasonCapExceeded       = "CapExceeded"
	ReasonRetryCycle        = "RetryCycle"
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonInvalidEnv (WithinCap False): a selected workload's container environment that the
	// graph reads (AWS_MAX_ATTEMPTS) is not a value its SDK accepts.
	ReasonInvalidEnv = "InvalidEnv"
	ReasonReconciled = "Reconciled"
	// ReasonNothingSelected (WithinCap Unknown): the policy selects no workload.
	ReasonNothingSelected = "NothingSelected"
	// ReasonNoUpstreamsDeclared (WithinCap Unknown): no selected workload declares
	// retrycap.dev/upstreams, so the graph has no edges to check.
	ReasonNoUpstreamsDeclared = "NoUpstreamsDeclared"

	// ConditionWithinMaxTime is True when no chain's worst time to answer exceeds
	// spec.maxTimeToAnswer (set only when the spec sets it).
	ConditionWithinMaxTime = "WithinMaxTime"
	// ReasonWithinMaxTime and ReasonMaxTimeExceeded are its reasons.
	ReasonWithinMaxTime   = "WithinMaxTime"
	ReasonMaxTimeExceeded = "MaxTimeExceeded"
)

// WorstTimeUnbounded is status.worstTimeToAnswer when nothing bounds a chain's time.
const WorstTimeUnbounded = "unbounded"

// RetryPolicySpec declares the cap on retry multiplication for the workloads it selects, and what
// the injected proxies do at run time.
type RetryPolicySpec struct {
	// Selector selects workloads by their pod-template labels (bare Pods by their labels).
	// Empty selects every workload in the namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// MaxAmplification is the cap on retry multiplication along any chain: client attempts times
	// the attempts of every hop on the path.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	MaxAmplification int32 `json:"maxAmplification"`

	// MaxTimeToAnswer is the most an entrypoint's client may wait for an answer in the worst case
	// (every try of every hop timing out): a chain whose worst time to answer is longer is a
	// violation, refused at admission like one over maxAmplification. Unset: the worst time is
	// reported, not checked. 1ms to 24h (the proxies' largest deadline).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1ms') && duration(self) <= duration('24h')",message="must be between 1ms and 24h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h (\"1m30s\", \"500ms\")"
	// +optional
	MaxTimeToAnswer *metav1.Duration `json:"maxTimeToAnswer,omitempty"`

	// Entrypoints are the services that callers outside the cluster reach. Default: every selected
	// service that no selected service calls, with one client attempt.
	// +listType=map
	// +listMapKey=service
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Entrypoints []Entrypoint `json:"entrypoints,omitempty"`

	// Enforcement is what admission does with a workload that would exceed the cap.
	// +kubebuilder:default=Reject
	// +optional
	Enforcement Enforcement `json:"enforcement,omitempty"`

	// Retry is what the injected proxies do on a failed call.
	// +kubebuilder:default={}
	// +optional
	Retry RetrySettings `json:"retry,omitempty"`

	// Budget limits retries to a share of requests, per proxy (Finagle/Linkerd semantics).
	// +kubebuilder:default={}
	// +optional
	Budget RetryBudget `json:"budget,omitempty"`

	// CircuitBreaker stops calls to an upstream that keeps failing.
	// +kubebuilder:default={}
	// +optional
	CircuitBreaker CircuitBreaker `json:"circuitBreaker,omitempty"`

	// Injection controls the proxy sidecar for the selected pods.
	// +kubebuilder:default={}
	// +optional
	Injection Injection `json:"injection,omitempty"`

	// Observability is what the injected proxies record besides their metrics.
	// +kubebuilder:default={}
	// +optional
	Observability Observability `json:"observability,omitempty"`
}

// AccessLog is where the injected proxies write their per-attempt access log.
// +kubebuilder:validation:Enum=Off;Stdout
type AccessLog string

// AccessLog values. There is no file: the sidecar's root filesystem is read-only, and the
// container's stdout is what the cluster's log pipeline and `retrycap observe --from-cluster`
// (pods/log) read.
const (
	// AccessLogOff writes no access log.
	AccessLogOff AccessLog = "Off"
	// AccessLogStdout writes one JSON line per attempt to the sidecar's stdout.
	AccessLogStdout AccessLog = "Stdout"
)

// Observability controls what the proxies record.
type Observability struct {
	// AccessLog is the proxies' per-attempt access log (--access-log): Off, or Stdout (JSON lines
	// on the sidecar's stdout, which `retrycap observe` reads). Lines are written off the request
	// path and dropped, counted in retrycap_proxy_access_log_dropped_total, when the writer falls
	// behind. In YAML write "Off" quoted: a bare Off is YAML 1.1's false, which is refused.
	// +kubebuilder:default=Off
	// +optional
	AccessLog AccessLog `json:"accessLog,omitempty"`
}

// Entrypoint is a service called from outside the cluster.
type Entrypoint struct {
	// Service is the service name, as in the retrycap.dev/service annotation (or a Service's
	// name). A RetryPolicy names a service of its own namespace ("web"); a ClusterRetryPolicy
	// names it with its namespace ("web.shop"): CEL on each kind's spec says which. A service and
	// a namespace are DNS-1123 labels, at most 63 characters each.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$`
	// +required
	Service string `json:"service"`

	// ClientAttempts is how many tries the outside caller (browser, app) makes per request.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	ClientAttempts int32 `json:"clientAttempts,omitempty"`
}

// RetrySettings is the per-call retry behaviour of the injected proxies.
type RetrySettings struct {
	// DefaultAttempts is the total tries for an upstream listed without "=N" (1 = no retry).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	// +optional
	DefaultAttempts int32 `json:"defaultAttempts,omitempty"`

	// PerTryTimeout bounds each attempt, 1ms to 1h.
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="must be between 1ms and 1h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h (\"1m30s\", \"500ms\")"
	// +optional
	PerTryTimeout *metav1.Duration `json:"perTryTimeout,omitempty"`

	// Backoff is the wait before each retry: full jitter, uniform(0, min(max, base * 2^(n-1))).
	// +kubebuilder:default={}
	// +optional
	Backoff Backoff `json:"backoff,omitempty"`

	// RetryOn lists the failures that are retried: connect-failure, reset, timeout, an HTTP
	// status code, or a gRPC status code name in lower case with dashes (unavailable,
	// resource-exhausted, deadline-exceeded, ...), which judges gRPC calls by their grpc-status.
	// A list given replaces the default whole, under server-side apply too; each value once.
	// +kubebuilder:default={"connect-failure","reset","502","503","504","unavailable"}
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=19
	// +kubebuilder:validation:items:Pattern=`^(connect-failure|reset|timeout|[45][0-9][0-9]|cancelled|unknown|invalid-argument|deadline-exceeded|not-found|already-exists|permission-denied|resource-exhausted|failed-precondition|aborted|out-of-range|unimplemented|internal|unavailable|data-loss|unauthenticated)$`
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y == x))",messageExpression="'\"' + self.filter(x, self.filter(y, y == x).size() > 1)[0] + '\" is listed twice'"
	// +optional
	RetryOn []string `json:"retryOn,omitempty"`

	// Methods lists the HTTP methods that may be retried. POST and PATCH are retried only with an
	// Idempotency-Key header, whatever this says. A list given replaces the default whole, under
	// server-side apply too; each method once.
	// +kubebuilder:default={"GET","HEAD","OPTIONS","PUT","DELETE"}
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:MaxLength=7
	// +kubebuilder:validation:items:Enum=GET;HEAD;OPTIONS;PUT;DELETE;POST;PATCH;TRACE
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y == x))",messageExpression="'\"' + self.filter(x, self.filter(y, y == x).size() > 1)[0] + '\" is listed twice'"
	// +optional
	Methods []string `json:"methods,omitempty"`

	// DedupUpstreams names upstreams, as the retrycap.dev/upstreams annotation names them
	// ("payment", "ledger.billing"), whose app deduplicates requests by Idempotency-Key (it
	// stores each key's result and answers a repeat with it). Toward them a key the entry proxy
	// generated makes a POST or PATCH retryable too; toward any other upstream only a key the
	// client sent does. The injector renders the proxy's --dedup-upstreams from it: the listed
	// names among each selected pod's upstreams. Listing an upstream that does not deduplicate
	// lets a keyless POST to it run more than once. Each is a lower-case service name,
	// name.namespace or host, as the annotation's names are (the injector refuses any other, so
	// the API server does too).
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$`
	// +listType=set
	// +optional
	DedupUpstreams []string `json:"dedupUpstreams,omitempty"`
}

// Backoff is exponential backoff with full jitter.
// +kubebuilder:validation:XValidation:rule="!has(self.base) || !has(self.max) || !self.base.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') || !self.max.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') || duration(self.base) <= duration(self.max)",message="base must not exceed max",fieldPath=".base"
type Backoff struct {
	// Base is the backoff before the first retry, before jitter, 1ms to 1m.
	// +kubebuilder:default="100ms"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1ms') && duration(self) <= duration('1m')",message="must be between 1ms and 1m, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h (\"1m30s\", \"500ms\")"
	// +optional
	Base *metav1.Duration `json:"base,omitempty"`

	// Max caps the backoff, before jitter, 1ms to 1m.
	// +kubebuilder:default="2s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1ms') && duration(self) <= duration('1m')",message="must be between 1ms and 1m, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h (\"1m30s\", \"500ms\")"
	// +optional
	Max *metav1.Duration `json:"max,omitempty"`
}

// RetryBudget allows, in any window, retries up to max(minRetriesPerSecond x window,
// retryPercent % of requests).
type RetryBudget struct {
	// RetryPercent is the share of requests that may be retries.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=20
	// +optional
	RetryPercent *int32 `json:"retryPercent,omitempty"`

	// MinRetriesPerSecond is the floor, so that low traffic can still retry.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +kubebuilder:default=10
	// +optional
	MinRetriesPerSecond *int32 `json:"minRetriesPerSecond,omitempty"`

	// Window is the period over which requests and retries are counted, 1s to 60s.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1s') && duration(self) <= duration('60s')",message="must be between 1s and 60s"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`
}

// CircuitBreaker opens per upstream after `failures` failures within `window`, fails calls at
// once for `openFor`, then lets one probe through.
type CircuitBreaker struct {
	// Failures within Window that open the breaker.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +kubebuilder:default=50
	// +optional
	Failures int32 `json:"failures,omitempty"`

	// Window is the period over which failures are counted, 1ms to 1h.
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="must be between 1ms and 1h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h (\"1m30s\", \"500ms\")"
	// +optional
	Window *metav1.Duration `json:"window,omitempty"`

	// OpenFor is how long an open breaker fails calls before it lets a probe through, 1ms to 1h.
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^([0-9]+([.][0-9]+)?(ns|us|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]{1,5}([.][0-9]{1,9})?(ns|us|ms|s|m|h)){1,5}$') && duration(self) >= duration('1ms') && duration(self) <= duration('1h')",message="must be between 1ms and 1h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h (\"1m30s\", \"500ms\")"
	// +optional
	OpenFor *metav1.Duration `json:"openFor,omitempty"`
}

// Injection controls the proxy sidecar.
type Injection struct {
	// Enabled injects the retrycap proxy into selected pods (in namespaces labelled
	// retrycap.dev/injection=enabled, or pods annotated retrycap.dev/inject: "true").
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// RetryPolicyStatus is what the controller computed from the live graph.
type RetryPolicyStatus struct {
	// ObservedGeneration is the spec generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Services is the number of services in the graph (selected workloads and their upstreams).
	// +optional
	Services int32 `json:"services"` // no omitempty: an empty graph shows 0, not nothing

	// Edges is the number of caller -> upstream edges.
	// +optional
	Edges int32 `json:"edges"` // no omitempty, like Services

	// Amplification is the worst-case retry multiplication along any chain; it saturates at 2^63-1.
	// +optional
	Amplification int64 `json:"amplification"` // no omitempty, like Services

	// Bounded is false when a retry cycle makes the amplification unbounded.
	// +optional
	Bounded *bool `json:"bounded,omitempty"`

	// WorstPath is the path of the worst chain, services joined by ">".
	// +optional
	WorstPath string `json:"worstPath,omitempty"`

	// WorstCaseLoad is the most requests one entry request can cause at one service, fan-out included.
	// +optional
	WorstCaseLoad *ServiceLoad `json:"worstCaseLoad,omitempty"`

	// Chains has one entry per entrypoint, worst first.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Chains []Chain `json:"chains,omitempty"`

	// Violations are the paths over the cap, worst first.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	Violations []Violation `json:"violations,omitempty"`

	// WorstTimeToAnswer is the longest an entrypoint's client can wait for an answer, all tries
	// and backoffs along the chain included (a duration, "6.4s"), or "unbounded" when no timeout
	// bounds some chain.
	// +optional
	WorstTimeToAnswer string `json:"worstTimeToAnswer,omitempty"`

	// WorstTimePath is the chain that takes WorstTimeToAnswer, services joined by ">".
	// +optional
	WorstTimePath string `json:"worstTimePath,omitempty"`

	// WorstTimeUnbounded says why WorstTimeToAnswer is "unbounded".
	// +optional
	WorstTimeUnbounded string `json:"worstTimeUnbounded,omitempty"`

	// TimeViolations are the chains whose worst time to answer exceeds spec.maxTimeToAnswer,
	// worst first.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	TimeViolations []TimeViolation `json:"timeViolations,omitempty"`

	// TimeoutInversions are the hops whose caller's per-try timeout is shorter than the callee's
	// worst time (the caller retries while the callee still works), the largest gap first.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	TimeoutInversions []TimeoutInversion `json:"timeoutInversions,omitempty"`

	// TimeoutInversionsTotal counts them all, listed or not.
	// +optional
	TimeoutInversionsTotal int32 `json:"timeoutInversionsTotal,omitempty"`

	// ObservedAmplification is what the proxies counted (a manager with --prometheus-url only).
	// +optional
	ObservedAmplification *ObservedAmplification `json:"observedAmplification,omitempty"`

	// Graph compares the declared edges with the ones telemetry observed (a manager with
	// --prometheus-url only): graph_types.go.
	// +optional
	Graph *GraphStatus `json:"graph,omitempty"`

	// Conditions: Ready, WithinCap (and MeshLayers, ObservedWithinComputed, GraphComplete when
	// the manager reads those sources).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServiceLoad is a number of requests at one service.
type ServiceLoad struct {
	// Service is the service that receives the requests.
	Service string `json:"service"`
	// Requests is how many requests one entry request causes there, in the worst case.
	Requests int64 `json:"requests"`
}

// Chain is the worst path from one entrypoint.
type Chain struct {
	// Entrypoint is the service the chain starts at.
	Entrypoint string `json:"entrypoint"`
	// Amplification is the chain's worst-case retry multiplication, client attempts included.
	Amplification int64 `json:"amplification"`
	// Path is the chain's services, the entrypoint first.
	// +listType=atomic
	Path []string `json:"path"`
}

// Violation is a path whose amplification exceeds the cap, with the change that would fit.
type Violation struct {
	// Path is the chain's services, the entrypoint first.
	// +listType=atomic
	Path []string `json:"path"`
	// Amplification is the chain's retry multiplication, over spec.maxAmplification.
	Amplification int64 `json:"amplification"`
	// Message shows each hop's attempts along the path, e.g.
	// "client -x2-> gateway -x3-> order -x3-> payment = 18 > cap 9".
	Message string `json:"message"`
	// Suggestion is the chain's part of the combined fix: the attempts that fit the cap, e.g.
	// "gateway: order=2; order: payment=1".
	// +optional
	Suggestion string `json:"suggestion,omitempty"`
}

// TimeViolation is a chain whose worst time to answer exceeds spec.maxTimeToAnswer.
type TimeViolation struct {
	// Path is the chain's services, the entrypoint first.
	// +listType=atomic
	Path []string `json:"path"`
	// WorstTimeToAnswer is the chain's worst time, a duration or "unbounded".
	WorstTimeToAnswer string `json:"worstTimeToAnswer"`
	// Message shows each service's worst time along the path, e.g.
	// "client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s".
	Message string `json:"message"`
}

// TimeoutInversion is a hop whose caller's per-try timeout is shorter than the worst time of
// what it waits on: the callee, or a retrying layer inside the hop (a mesh sidecar).
type TimeoutInversion struct {
	// Caller is the service whose per-try timeout is too short.
	Caller string `json:"caller"`
	// Callee is the service it calls.
	Callee string `json:"callee"`
	// Layer is whose per-try timeout it is ("retrycap", "Istio VirtualService shop/payment").
	Layer string `json:"layer"`
	// PerTryTimeout is that per-try timeout.
	PerTryTimeout string `json:"perTryTimeout"`
	// InnerTime is the worst time the per-try timeout is shorter than (a duration or
	// "unbounded").
	InnerTime string `json:"innerTime"`
	// Message says the hop, the layer and both times, e.g. "order -> payment: retrycap per-try
	// timeout 200ms < ... worst time on payment 1.575s: order retries while payment still works
	// on the abandoned try".
	Message string `json:"message"`
	// Fix gives the timeouts that fit.
	Fix string `json:"fix"`
}

// RetryPolicy caps retry multiplication along every call chain of the workloads it selects.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rp,categories=retrycap
// +kubebuilder:printcolumn:name="Cap",type=integer,JSONPath=`.spec.maxAmplification`
// +kubebuilder:printcolumn:name="Amplification",type=integer,JSONPath=`.status.amplification`
// +kubebuilder:printcolumn:name="Worst Path",type=string,JSONPath=`.status.worstPath`
// +kubebuilder:printcolumn:name="Worst Time",type=string,JSONPath=`.status.worstTimeToAnswer`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.enforcement`
// +kubebuilder:printcolumn:name="Within Cap",type=string,JSONPath=`.status.conditions[?(@.type=="WithinCap")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="WithinCap")].reason`,priority=1
// +kubebuilder:printcolumn:name="Max Time",type=string,JSONPath=`.spec.maxTimeToAnswer`,priority=1
// +kubebuilder:printcolumn:name="Within Max Time",type=string,JSONPath=`.status.conditions[?(@.type=="WithinMaxTime")].status`,priority=1
// +kubebuilder:printcolumn:name="Services",type=integer,JSONPath=`.status.services`,priority=1
// +kubebuilder:printcolumn:name="Edges",type=integer,JSONPath=`.status.edges`,priority=1
type RetryPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="!has(self.entrypoints) || self.entrypoints.all(e, !e.service.contains('.'))",message="a RetryPolicy's entrypoints name services of its own namespace, without a namespace (\"web\", not \"web.shop\"); a chain across namespaces needs a ClusterRetryPolicy",fieldPath=".entrypoints"
	Spec   RetryPolicySpec   `json:"spec"`
	Status RetryPolicyStatus `json:"status,omitempty"`
}

// RetryPolicyList is a list of RetryPolicies.
//
// +kubebuilder:object:root=true
type RetryPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RetryPolicy `json:"items"`
}
