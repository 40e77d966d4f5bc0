package telemetry

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// Source names where an edge was seen.
type Source string

// The sources.
const (
	SourceIstio    Source = "istio"
	SourceLinkerd  Source = "linkerd"
	SourceOTel     Source = "otel-servicegraph"
	SourceRetrycap Source = "retrycap"
	// SourceEnv is an edge the manifests imply (a container's env value naming a Service).
	SourceEnv Source = "env"
)

// Caller is the calling side of an edge as the data names it.
type Caller struct {
	Namespace, Name string
	// Kind is the workload kind when the data says it (Linkerd's deployment, statefulset,
	// daemonset, replicaset, k8s_job and cronjob labels: linkerdCallers); "" when Name is a
	// workload (a controller) of a kind the data does not say (Istio's source_workload: a
	// CronJob's pod is named after the CronJob, docs/telemetry.md), or when Service is set.
	Kind string
	// Service is set when Name is a service name (the OpenTelemetry service graph's client,
	// retrycap-proxy's caller label), not a workload's: mapping it to workloads needs the
	// manifests or the cluster.
	Service bool
}

func (c Caller) String() string { return c.Namespace + "/" + c.Name }

// Callee is the called Service. Namespace is "" for a name the data gives without one (an
// OpenTelemetry server without a namespace dimension, a host outside the cluster).
type Callee struct{ Namespace, Name string }

func (c Callee) String() string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// Edge is one caller -> callee pair observed over the window by one source.
type Edge struct {
	Source Source
	From   Caller
	To     Callee
	// Requests is the counter's increase over the window: the calls as the caller's side counts
	// them where the data has that side (Istio's source or waypoint reporter), else as the
	// callee's side does.
	Requests float64
	// RatePerSecond is Requests over the window.
	RatePerSecond float64
	// Tries is the tries per call the data shows, 0 when it does not: for Istio the
	// destination-reported requests over the source-reported ones on the edge (each try of the
	// source sidecar reaches the destination's, which counts it; kiali#3673).
	Tries float64
	// Why is, for an edge that is not HTTP (Istio TCP, a database or messaging edge of the
	// service graph), why it is listed apart.
	Why string
}

// Entrypoint is a Service that a mesh gateway, or a caller outside the mesh, calls: an
// entrypoint of the graph, not an upstream of a workload (gateways are never annotated).
type Entrypoint struct {
	Callee
	// Via is the gateway (namespace/name) or "outside the mesh".
	Via    string
	Source Source
	// RatePerSecond is the entry traffic's rate over the window.
	RatePerSecond float64
}

// Observation is what one Prometheus showed over a window.
type Observation struct {
	Window time.Duration
	// Sources are the sources whose series exist (a query answered at least one series,
	// increased or not), in the order of Queries.
	Sources []Source
	// Edges are the HTTP and gRPC edges whose counters increased over the window, sorted.
	Edges []Edge
	// NonHTTP are the edges no HTTP retry applies to (TCP-only, database, messaging), listed
	// apart and never proposed as upstreams.
	NonHTTP []Edge
	// Entrypoints are the Services gateways and callers outside the mesh call.
	Entrypoints []Entrypoint
	// Warnings say what the series held that could not be placed on the graph, per reason with
	// a count and an example.
	Warnings []string
	// Unplaced are the series among those whose counter increased over the window that name no
	// caller or no callee because a label the query groups by is missing (a scrape or a
	// relabelling that drops it): calls were made on an edge nobody can name, so the graph
	// cannot be said complete (OnNodes keeps those that may be a policy's, GraphConditionOf
	// says so). Per reason and callee, in the order first seen.
	Unplaced []Unplaced
	// PresentOnly are, when no query answered any series (Sources is empty), the metrics read
	// whose series exist at the query's time all the same (PresenceQuery, sorted):
	// increase() needs two samples of a series within the window, and a window shorter than
	// twice the scrape interval holds one. Nil when not asked (Read does not).
	PresentOnly []string
}

// Unplaced counts the series with traffic of one reason (a Warnings reason) and one callee
// (To; zero when the callee is what is missing).
type Unplaced struct {
	Reason  string
	To      Callee
	Series  int
	Example string
}

// Query is one PromQL query a source is read by.
type Query struct {
	Source Source
	// Metric is the series it reads, for messages.
	Metric string
	PromQL string
}

// Answer is a Query's result. Read checks its series (CheckVector) unless it is a
// CheckedAnswer.
type Answer struct {
	Query  Query
	Vector model.Vector
	// checked is the Vector CheckVector passed (CheckedAnswer), twins its series given twice
	// with one value: Read warns of them and does not check the series again.
	checked model.Vector
	twins   []*model.Sample
}

// Options configure Read.
type Options struct {
	// Window is the range the counters' increase was taken over (the queries' range).
	Window time.Duration
	// Gateways are the callers that are mesh gateways ("namespace/name" or "name" for any
	// namespace), besides DefaultGateways: their callees are entrypoints.
	Gateways []string
	// CallerLabel is the label naming the caller on retrycap-proxy's series (the scrape adds it;
	// promquery's --prometheus-caller-label), "service" when empty.
	CallerLabel string
	// ReplicaLabels are the labels that tell an HA pair's replicas apart (ReplicaLabels when
	// nil): the queries' (QueriesFor), each series read once across them.
	ReplicaLabels []string
	// IstioCluster is the Istio cluster (IstioClusterLabel's value) whose series are read when
	// one Prometheus holds several; "" reads a single cluster's and refuses several.
	IstioCluster string
	// ClusterLabels name a series' cluster (ClusterLabels when nil: --prometheus-cluster-label),
	// Cluster the one whose series are read when the answers hold several ("" refuses several).
	ClusterLabels []string
	Cluster       string
}

// DefaultGateways are the workload names of Istio's gateways as its charts install them.
var DefaultGateways = []string{"istio-ingressgateway", "istio-egressgateway"}

// IstioGatewayAPIWorkload says whether an Istio series' source_workload is the Deployment Istio
// deploys for a Gateway API Gateway of class "istio": "<Gateway name>-istio" (istio/istio
// pilot/pkg/config/kube/gatewaycommon/gateway_utils.go GetDefaultName appends "-<class>"; the
// waypoint and east-west classes set DisableNameSuffix and are no ingress).
func IstioGatewayAPIWorkload(name string) bool {
	return len(name) > len("-istio") && strings.HasSuffix(name, "-istio")
}

// Labels read from each source (docs/telemetry.md cites where each project defines them).
var (
	istioEdgeLabels   = []string{"source_workload", "source_workload_namespace", "destination_service_name", "destination_service_namespace"}
	otelNamespaceDims = [][2]string{{"client_k8s_namespace_name", "server_k8s_namespace_name"}, {"client_service_namespace", "server_service_namespace"}}
	// tempoNamespaceDim is Tempo's metrics-generator's k8s.namespace.name dimension without
	// enable_client_server_prefix (its default): one label, set by each span of the pair in
	// turn (grafana/tempo modules/generator/processor/servicegraphs/servicegraphs.go
	// upsertDimensions), so it is the namespace of whichever span came last.
	tempoNamespaceDim = "k8s_namespace_name"
	// otelVirtualNodeLabel says which side of a virtual_node edge was never seen ("client",
	// "server"): the connector's virtual_node_extra_label, Tempo's enable_virtual_node_label.
	otelVirtualNodeLabel = "virtual_node"
)

// Queries are the queries Read needs for a window, in order: Istio's HTTP requests and TCP
// connections, Linkerd's outbound responses, its route requests and route retries, the service
// graph's requests, retrycap-proxy's requests and attempts. The retries and attempts give the
// tries per call of Linkerd's routes and of the proxies (docs/telemetry.md). Each is an aggregation by the edge's labels, so its
// answer has one series per edge (and reporter), never one per pod.
func Queries(window time.Duration, callerLabel string) []Query {
	return QueriesFor(window, callerLabel, nil)
}

// QueriesFor is Queries keeping the replica labels replicaLabels apart (ReplicaLabels when nil):
// the --prometheus-replica-label flags.
func QueriesFor(window time.Duration, callerLabel string, replicaLabels []string) []Query {
	return QueriesWith(window, callerLabel, replicaLabels, nil)
}

// QueriesWith is QueriesFor keeping the cluster labels clusterLabels apart too (ClusterLabels
// when nil): the --prometheus-cluster-label flags.
func QueriesWith(window time.Duration, callerLabel string, replicaLabels, clusterLabels []string) []Query {
	if len(replicaLabels) == 0 {
		replicaLabels = ReplicaLabels
	}
	if len(clusterLabels) == 0 {
		clusterLabels = ClusterLabels
	}
	// The cluster labels are kept apart as the replica labels are (Read refuses several
	// clusters or reads one: OneClusterBy).
	// Their renamed forms too (exported_cluster): a federation without honor_labels: true
	// moves a series' own cluster there, which OneClusterNoted reads and says.
	replicaLabels = append(append(append([]string(nil), replicaLabels...), clusterLabels...), RenamedLabels(clusterLabels)...)
	if callerLabel == "" {
		callerLabel = "service"
	}
	// exported_namespace is grouped by so that a series whose own namespace the scrape renamed
	// is seen as such (linkerdEdge), not summed into the scrape target's namespace.
	lk := strings.Join(append([]string{"namespace", LinkerdExportedNamespace}, linkerdCallers...), ", ")
	var otelBy []string
	for _, d := range otelNamespaceDims {
		otelBy = append(otelBy, d[0], d[1])
	}
	otelBy = append(otelBy, tempoNamespaceDim, otelVirtualNodeLabel)
	// Each query keeps the replica labels apart (oneReplica reads each series once).
	rep := ", " + strings.Join(replicaLabels, ", ")
	return []Query{
		{SourceIstio, "istio_requests_total", istioQuery("istio_requests_total", window, replicaLabels)},
		{SourceIstio, "istio_tcp_connections_opened_total", istioQuery("istio_tcp_connections_opened_total", window, replicaLabels)},
		{SourceLinkerd, "response_total", fmt.Sprintf(`sum by (%s, dst_namespace, dst_service%s) %s`, lk, rep, Calls(`response_total{direction="outbound"}`, window))},
		{SourceLinkerd, "outbound_http_route_request_statuses_total", fmt.Sprintf(`sum by (%s, parent_namespace, parent_name%s) %s`, lk, rep, Calls(`{__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}`, window))},
		{SourceLinkerd, "outbound_http_route_retry_requests_total", fmt.Sprintf(`sum by (%s, parent_namespace, parent_name%s) %s`, lk, rep, Calls(`{__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}`, window))},
		{SourceOTel, "traces_service_graph_request_total", fmt.Sprintf(`sum by (client, server, connection_type, %s%s) %s`, strings.Join(otelBy, ", "), rep, Calls(`{__name__=~"(.+_)?traces_service_graph_request_total"}`, window))},
		// The proxies' namespace is the scrape's as Linkerd's is: exported_namespace kept apart.
		{SourceRetrycap, "retrycap_proxy_requests_total", fmt.Sprintf("sum by (namespace, %s, %s, upstream%s) %s", callerLabel, LinkerdExportedNamespace, rep, Calls(`retrycap_proxy_requests_total`, window))},
		{SourceRetrycap, "retrycap_proxy_attempts_total", fmt.Sprintf("sum by (namespace, %s, %s, upstream%s) %s", callerLabel, LinkerdExportedNamespace, rep, Calls(`retrycap_proxy_attempts_total`, window))},
		// Last, so that the indexes above stay: which Services a route sent a caller's calls
		// to (linkerdResponses).
		{SourceLinkerd, "outbound_http_route_backend_response_statuses_total", fmt.Sprintf(`sum by (%s, parent_namespace, parent_name, backend_namespace, backend_name%s) %s`, lk, rep, Calls(`{__name__=~"outbound_(http|grpc)_route_backend_response_statuses_total",parent_kind="Service",backend_kind="Service"}`, window))},
	}
}

// ReplicaLabels are the labels that tell the series of two Prometheus replicas of an HA pair
// apart where a querier in front of them does not deduplicate (Thanos without
// --query.replica-label, Mimir or VictoriaMetrics without HA deduplication): the Prometheus
// Operator's replica external label, prometheus_replica. Every graph query groups by them too,
// and Read takes each series once (oneReplica): summed, the replicas' would count every call
// once per replica. Thanos' example name, replica, is not among them: a scrape that maps every
// pod label (labelmap) gives it to the series of a pod labelled replica, whose pods' counts
// must be summed, not reduced to the largest. A querier whose replica label is another
// (Thanos' example replica, a Mimir or VictoriaMetrics HA label) is named with
// --prometheus-replica-label, as Thanos Query's own --query.replica-label names it
// (Options.ReplicaLabels, QueriesFor).
//
// __replica__, Mimir's and Cortex's HA tracker label (kept on the series when the tracker is
// off), is one too: no pod label can be named so (a Kubernetes label name starts with a letter
// or a digit), so it never tells pods apart.
var ReplicaLabels = []string{"prometheus_replica", "__replica__"}

// CheckReplicaLabels refuses replica labels that are no Prometheus label name, or that the
// queries group by for an edge (the caller label included): taken for a replica label, a label
// that tells edges apart would read two edges as one's replicas, keeping the larger.
func CheckReplicaLabels(labels []string, callerLabel string) error {
	edge := map[string]bool{}
	for _, l := range EdgeLabels(callerLabel) {
		edge[l] = true
	}
	if callerLabel == "" {
		callerLabel = "service"
	}
	seen := map[string]bool{}
	for _, l := range labels {
		switch {
		case !model.LegacyValidation.IsValidLabelName(l):
			return fmt.Errorf("--prometheus-replica-label %q: not a Prometheus label name", l)
		case edge[l]:
			return fmt.Errorf("--prometheus-replica-label %q: a label the queries read an edge by (caller label %q): two edges would be read as one's replicas", l, callerLabel)
		case seen[l]:
			return fmt.Errorf("--prometheus-replica-label %q: given twice", l)
		}
		seen[l] = true
	}
	return nil
}

// EdgeLabels are the labels the queries read an edge by, sorted: queryLabels, the caller label
// of retrycap-proxy's series (callerLabel, "service" when empty) and __name__. Neither a replica
// nor a cluster label may be one (CheckReplicaLabels, CheckClusterLabels); exported so that the
// Helm chart's values.schema.json is checked against the manager's own list (test/e2e).
func EdgeLabels(callerLabel string) []string {
	if callerLabel == "" {
		callerLabel = "service"
	}
	out := append(queryLabels(), callerLabel, "__name__")
	slices.Sort(out)
	return slices.Compact(out)
}

// queryLabels are the labels the queries group by for an edge, but the caller label of
// retrycap-proxy's series and the replica labels (the manager's queries, promquery.Queries, use
// envoy_cluster_name besides).
func queryLabels() []string {
	out := append([]string{"reporter", IstioClusterLabel, "namespace", LinkerdExportedNamespace, "dst_namespace", "dst_service",
		"parent_namespace", "parent_name", "backend_namespace", "backend_name", "client", "server", "connection_type",
		tempoNamespaceDim, otelVirtualNodeLabel, "upstream", "envoy_cluster_name"}, istioEdgeLabels...)
	out = append(out, linkerdCallers...)
	for _, d := range otelNamespaceDims {
		out = append(out, d[0], d[1])
	}
	return out
}

// IstioClusterLabel is the caller's cluster on Istio's series (istio/proxy istio_stats.cc's
// standard labels: source_cluster and destination_cluster, the Istio cluster ID of each side's
// proxy, "Kubernetes" by default, "unknown" for a caller outside the mesh). A Prometheus fed by
// several clusters (a Thanos or a federation over a multi-cluster mesh) holds the same workload
// names in each: Kiali keeps them apart (kiali/kiali graph/telemetry/istio/istio.go groups by
// source_cluster and destination_cluster; graph.Id makes the cluster part of a node's id), and
// so does Read, by refusing to add them (oneCluster). The edge is the caller's cluster's: the
// calls it made to every cluster's endpoints of the Service are its calls, so destination_cluster
// is summed over.
const IstioClusterLabel = "source_cluster"

// IstioRecordedPrefix names the recording rules of Istio's "Observability best practices"
// (istio.io docs/ops/best-practices/observability: workload:istio_requests_total is sum
// without(instance, kubernetes_namespace, kubernetes_pod_name) (istio_requests_total), the same
// for the TCP counters), the only Istio series a production Prometheus that federates
// {__name__=~"workload:(.*)"} holds.
const IstioRecordedPrefix = "workload:"

// istioQuery sums metric's increase by reporter and the edge labels, or, for an edge metric
// does not hold, its recorded series': PromQL's or keeps the left side's label sets, so a
// Prometheus holding both (the one that records) counts each edge once, from the raw series,
// and one holding only the recorded ones (federated) is read from them.
func istioQuery(metric string, window time.Duration, replicaLabels []string) string {
	by := "reporter, " + strings.Join(append(append(append([]string(nil), istioEdgeLabels...), replicaLabels...), IstioClusterLabel), ", ")
	return fmt.Sprintf("sum by (%s) %s or sum by (%s) %s", by, Calls(metric, window), by, Calls(IstioRecordedPrefix+metric, window))
}

// ProcessStartMetric is the gauge of a process's start, in seconds since the epoch, that the
// Prometheus client libraries' process collectors export on every target they serve (Calls: a
// target whose process started inside the window).
const ProcessStartMetric = "process_start_time_seconds"

// BornLookback is how long before the window a series must have no sample to be taken for one
// born inside it (Calls): Prometheus' default lookback (--query.lookback-delta 5m), beyond which
// a scrape interval leaves every instant query empty; the window itself when longer.
const BornLookback = 5 * time.Minute

// Calls is the PromQL of the calls each series of the counter selector sel counted over window,
// per series (the caller sums them). A counter is created by its label set's first call
// (Envoy's, the proxies', Linkerd's are), so its first scrape already holds the calls made
// before it, which increase() never counts (it counts from the first sample, extrapolating
// half a scrape interval at most): an edge called in one burst between two scrapes was not
// observed, and a new edge's calls before its first scrape were lost. So a series born inside
// the window (no sample in the BornLookback, or the window if longer, before it) is counted
// from zero, by its last value in the window, when something says its counter did not count
// before the window:
//
//   - its target (job, instance) was scraped successfully at the window's start (up == 1):
//     that scrape did not hold the label set;
//   - or its target is itself born inside the window (no up sample before it: a new pod, whose
//     target Kubernetes service discovery lists from the pod's creation on, up 0 until it
//     listens) in a job scraped successfully at the window's start: the Prometheus and the job
//     were there, the pod was not, and its counters counted from its start;
//   - or it has no target of its own in this Prometheus (no up of its job and instance in the
//     window: a recording rule's series, workload:istio_requests_total keeps job and drops
//     instance; one federated with honor_labels: true keeps the other Prometheus' job and
//     instance) while the same selector had series at the window's start: the rule or the
//     federation was running then, and its output did not hold the label set;
//   - or its target's process started inside the window (the smallest
//     process_start_time_seconds its scrapes gave in the window, the client libraries' standard
//     gauge: Go's and Python's process collectors, the Linkerd proxy, retrycap's proxy): the
//     process holding the counter did not run before the window, whatever the job's age. A
//     brand-new job's first pod (a new scrape job or PodMonitor, with a new workload) is
//     counted so; a scrape job added for an old pod is not (its process started before). The
//     smallest value: a target whose endpoint merges several processes' metrics (Istio's agent
//     merges Envoy's and the app's) counts whole only when the oldest of them is new.
//
// Any other series is increase()'s, as before: one that existed before the window (a counter
// reset inside it, a restarted sidecar with the same labels, is corrected by increase() and
// never added again), and one of which nothing says that its counter did not count before the
// window (a Prometheus, a scrape job or a federation younger than the window, a target down
// then, whose process is older than the window or exports no start time): taking its whole
// value would count those calls. A series born and reset inside the
// window (a new pod's sidecar restarted) is increase()'s too: its last value is after the
// reset and would lose every call before it; increase() counts them and loses at most the
// calls before the first scrape (its extrapolation toward the window's start stops where the
// counter would have been zero). Counting those exactly needs the first sample or the sum of
// the values before each reset, which PromQL has only by a subquery at a step under the scrape
// interval: a step no query here knows, at a cost of window/step evaluations of every series;
// or first_over_time and increase's anchored modifier, which older Prometheus servers do not
// parse (docs/telemetry.md).
func Calls(sel string, window time.Duration) string {
	w := model.Duration(window).String()
	prior := model.Duration(max(window, BornLookback)).String()
	born := fmt.Sprintf("(last_over_time(%s[%s]) unless last_over_time(%s[%s] offset %s) unless resets(%s[%s]) > 0)", sel, w, sel, prior, w, sel, w)
	targets := fmt.Sprintf("((up offset %s == 1) or ((last_over_time(up[%s]) unless last_over_time(up[%s] offset %s)) and on (job) group by (job) (up offset %s == 1)) or (min by (job, instance) (min_over_time(%s[%s])) >= time() - %s))",
		w, w, prior, w, w, ProcessStartMetric, w, strconv.FormatFloat(window.Seconds(), 'f', -1, 64))
	untargeted := fmt.Sprintf("((%s unless on (job, instance) last_over_time(up[%s])) and on () group(%s offset %s))", born, w, sel, w)
	return fmt.Sprintf("((%s and on (job, instance) %s) or %s or increase(%s[%s]))", born, targets, untargeted, sel, w)
}

// PresenceQuery counts, by metric name, the series Queries read that exist at the query's
// time (Prometheus' lookback), with the same selectors: asked when no query answered any
// series, it tells a window too short for increase() (fewer than two samples of a series)
// from a Prometheus that holds none of them.
func PresenceQuery() string {
	return `count by (__name__) (istio_requests_total or workload:istio_requests_total or istio_tcp_connections_opened_total or workload:istio_tcp_connections_opened_total` +
		` or response_total{direction="outbound"}` +
		` or {__name__=~"outbound_(http|grpc)_route_(request_statuses|retry_requests|backend_response_statuses)_total",parent_kind="Service"}` +
		` or {__name__=~"(.+_)?traces_service_graph_request_total"}` +
		` or retrycap_proxy_requests_total or retrycap_proxy_attempts_total)`
}

// warnings collects the series that could not be placed, per reason, with a count and the
// first example.
type warnings struct {
	order []string
	n     map[string]int
	ex    map[string]string
}

func (w *warnings) add(reason string, m model.Metric) {
	if w.n[reason] > 0 {
		w.n[reason]++ // the example is the first's: not written out again
		return
	}
	w.addString(reason, m.String())
}

// addString is add with the series already written out.
func (w *warnings) addString(reason, m string) {
	if w.n == nil {
		w.n, w.ex = map[string]int{}, map[string]string{}
	}
	if w.n[reason] == 0 {
		w.order = append(w.order, reason)
		w.ex[reason] = m
	}
	w.n[reason]++
}

// list is sorted by reason: the same whatever order the queries ran in.
func (w *warnings) list() []string {
	out := make([]string, 0, len(w.order))
	sort.Strings(w.order)
	for _, r := range w.order {
		out = append(out, fmt.Sprintf("%s: %d series (e.g. %s)", r, w.n[r], w.ex[r]))
	}
	return out
}

func label(m model.Metric, name string) string { return string(m[model.LabelName(name)]) }

// reader accumulates one Read.
type reader struct {
	o        Options
	secs     float64
	w        warnings
	gateways map[string]bool // "ns/name" and "/name" (any namespace)
	edges    map[edgeKey]*Edge
	nonHTTP  map[edgeKey]*Edge
	entries  map[string]*Entrypoint
	sources  []Source
	// routeCalls are the Linkerd route family's calls per edge, proxyCalls retrycap-proxy's:
	// the denominators of their tries (an edge's Requests may be another family's count).
	routeCalls, proxyCalls map[edgeKey]float64
	unplaced               []Unplaced
	unplacedAt             map[unplacedKey]int // an Unplaced's index in unplaced
}

type unplacedKey struct {
	reason string
	to     Callee
}

// unnamed is a series that names no caller or no callee because a label is missing: a warning,
// and with traffic over the window an Unplaced (to: its callee, zero when unknown).
func (r *reader) unnamed(reason string, s *model.Sample, to Callee) {
	r.w.add(reason, s.Metric)
	if s.Value <= 0 {
		return
	}
	if r.unplacedAt == nil {
		r.unplacedAt = map[unplacedKey]int{}
	}
	k := unplacedKey{reason, to}
	if i, ok := r.unplacedAt[k]; ok {
		r.unplaced[i].Series++
		return
	}
	r.unplacedAt[k] = len(r.unplaced)
	r.unplaced = append(r.unplaced, Unplaced{Reason: reason, To: to, Series: 1, Example: s.Metric.String()})
}

type edgeKey struct {
	src  Source
	from Caller
	to   Callee
}

func (r *reader) isGateway(ns, name string) bool {
	return r.gateways[ns+"/"+name] || r.gateways["/"+name]
}

// Read turns the answers to Queries into an Observation. Answers no counter's increase gives
// (a value that is NaN, infinite, negative or over 2^53, a series twice with different values),
// an answer to a query it does not know and no answer at all are errors (checkAnswers; an
// answer of CheckedAnswer was checked where it was decoded and is not checked again); a series
// it cannot place on the graph (a label missing or naming no Service) is a warning.
func Read(answers []Answer, o Options) (*Observation, error) {
	r := &reader{o: o, secs: o.Window.Seconds(), gateways: map[string]bool{}, edges: map[edgeKey]*Edge{}, nonHTTP: map[edgeKey]*Edge{}, entries: map[string]*Entrypoint{},
		routeCalls: map[edgeKey]float64{}, proxyCalls: map[edgeKey]float64{}}
	if r.secs <= 0 {
		r.secs = 1
	}
	for _, g := range append(append([]string(nil), DefaultGateways...), o.Gateways...) {
		if ns, name, ok := strings.Cut(g, "/"); ok {
			r.gateways[ns+"/"+name] = true
		} else {
			r.gateways["/"+g] = true
		}
	}
	answers, err := checkAnswers(answers, &r.w)
	if err != nil {
		return nil, err
	}
	vs := make([]model.Vector, len(answers))
	for i, a := range answers {
		vs[i] = r.oneReplica(a.Query.Metric, a.Vector)
	}
	// One cluster's series across every source (ClusterLabels): the others said, never added.
	vs, other, note, err := OneClusterNoted(vs, o.ClusterLabels, o.Cluster)
	if err != nil {
		return nil, err
	}
	if note != "" {
		cl := o.ClusterLabels
		if len(cl) == 0 {
			cl = ClusterLabels
		}
		for _, v := range vs {
			for _, s := range v {
				if _, l := clusterOf(s.Metric, cl); strings.HasPrefix(l, ExportedPrefix) && !slices.Contains(cl, l) {
					r.w.add(note, s.Metric)
				}
			}
		}
	}
	otherText := make([]string, len(other))
	for i, s := range other {
		otherText[i] = s.Metric.String()
	}
	sort.Strings(otherText) // the example is the same whatever the answers' order
	for _, m := range otherText {
		r.w.addString(fmt.Sprintf("a series of another cluster than %q (--cluster, --prometheus-cluster): not read", o.Cluster), m)
	}
	var istioHTTP, istioTCP []*model.Sample
	var linkerdRetries, proxyAttempts, linkerdResponses, linkerdBackends model.Vector
	for i, a := range answers {
		a.Vector = vs[i]
		if len(a.Vector) > 0 && !containsSource(r.sources, a.Query.Source) {
			r.sources = append(r.sources, a.Query.Source)
		}
		switch a.Query.Metric {
		case "istio_requests_total":
			istioHTTP = append(istioHTTP, a.Vector...)
		case "istio_tcp_connections_opened_total":
			istioTCP = append(istioTCP, a.Vector...)
		case "outbound_http_route_request_statuses_total":
			r.linkerd(a.Query.Metric, a.Vector)
		case "response_total":
			linkerdResponses = append(linkerdResponses, a.Vector...)
		case "outbound_http_route_backend_response_statuses_total":
			linkerdBackends = append(linkerdBackends, a.Vector...)
		case "traces_service_graph_request_total":
			r.otel(a.Vector)
		case "retrycap_proxy_requests_total":
			r.retrycap(a.Vector)
		case "outbound_http_route_retry_requests_total":
			linkerdRetries = a.Vector
		case "retrycap_proxy_attempts_total":
			proxyAttempts = a.Vector
		}
	}
	if istioHTTP != nil || istioTCP != nil {
		if istioHTTP, istioTCP, err = r.oneCluster(istioHTTP, istioTCP); err != nil {
			return nil, err
		}
		r.istio(istioHTTP, istioTCP)
	}
	// After the route family: response_total is read but for the backends a route sent a
	// caller's calls to (linkerdResponses).
	r.linkerdResponses(linkerdResponses, linkerdBackends)
	// After the calls: the tries are the retries' or attempts' share of an edge whose calls the
	// same source counted.
	r.linkerdTries(linkerdRetries)
	r.retrycapTries(proxyAttempts)
	return r.result(), nil
}

// oneCluster keeps the Istio series of one cluster (IstioClusterLabel): Options.IstioCluster's,
// the others said in a warning; with none chosen, the only one the answers name, and an error
// naming them when they name several (a workload of one name in each would be one caller, its
// calls added). A series without the label (an Istio that does not write it, a relabelling that
// dropped it) or with "unknown" (a caller outside the mesh) is of no cluster and is kept.
func (r *reader) oneCluster(httpS, tcpS []*model.Sample) ([]*model.Sample, []*model.Sample, error) {
	of := func(s *model.Sample) string {
		c := label(s.Metric, IstioClusterLabel)
		if c == "unknown" {
			return ""
		}
		return c
	}
	seen := map[string]bool{}
	for _, v := range [][]*model.Sample{httpS, tcpS} {
		for _, s := range v {
			if c := of(s); c != "" {
				seen[c] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for c := range seen {
		names = append(names, strconv.Quote(c))
	}
	sort.Strings(names)
	want := r.o.IstioCluster
	switch {
	case want == "" && len(seen) > 1:
		return nil, nil, fmt.Errorf("istio: the answers hold the series of %d clusters (label %s: %s): a workload of one namespace and name in each would be read as one caller, their calls added; "+
			"pick the cluster with --istio-cluster (discover) or --prometheus-istio-cluster (the manager)", len(seen), IstioClusterLabel, strings.Join(names, ", "))
	case want == "" || (len(seen) == 1 && seen[want]):
		return httpS, tcpS, nil
	case !seen[want] && len(seen) > 0:
		return nil, nil, fmt.Errorf("istio: cluster %q (--istio-cluster, --prometheus-istio-cluster): no series of it; the answers hold those of %s (label %s)", want, strings.Join(names, ", "), IstioClusterLabel)
	}
	var other []string // the series not read, written out: sorted, the example is the same whatever the answer's order
	keep := func(v []*model.Sample) []*model.Sample {
		var out []*model.Sample
		for _, s := range v {
			if c := of(s); c != "" && c != want {
				other = append(other, s.Metric.String())
				continue
			}
			out = append(out, s)
		}
		return out
	}
	httpS, tcpS = keep(httpS), keep(tcpS)
	sort.Strings(other)
	for _, m := range other {
		r.w.addString(fmt.Sprintf("istio: %s is another cluster's than %q (--istio-cluster, --prometheus-istio-cluster): not read", IstioClusterLabel, want), m)
	}
	return httpS, tcpS, nil
}

// oneReplica is OneReplica with a warning per series taken away, naming the replica label.
func (r *reader) oneReplica(metric string, v model.Vector) model.Vector {
	out, dropped, label := OneReplicaBy(v, r.o.ReplicaLabels)
	for _, s := range dropped {
		r.w.add(fmt.Sprintf("%s: series given by more than one Prometheus replica (label %s: a querier that does not deduplicate them): each read once, the largest", metric, label), s.Metric)
	}
	return out
}

// OneReplica is v with each series once across ReplicaLabels: the largest of the replicas'
// (two replicas of an HA pair scrape alike; one that was down part of the window counted
// less), without those labels; dropped are the others, label the first replica label seen. v
// itself when no series has one.
func OneReplica(v model.Vector) (out, dropped model.Vector, label string) {
	return OneReplicaBy(v, nil)
}

// OneReplicaBy is OneReplica across replicaLabels (ReplicaLabels when nil).
func OneReplicaBy(v model.Vector, replicaLabels []string) (out, dropped model.Vector, label string) {
	if len(replicaLabels) == 0 {
		replicaLabels = ReplicaLabels
	}
	has := func(m model.Metric) string {
		for _, l := range replicaLabels {
			if _, ok := m[model.LabelName(l)]; ok {
				return l
			}
		}
		return ""
	}
	for _, s := range v {
		if label = has(s.Metric); label != "" {
			break
		}
	}
	if label == "" {
		return v, nil, ""
	}
	out = make(model.Vector, 0, len(v))
	at := map[string]int{} // by the labels written out: a fingerprint may collide
	for _, s := range v {
		m := s.Metric
		if has(m) != "" {
			m = m.Clone()
			for _, l := range replicaLabels {
				delete(m, model.LabelName(l))
			}
		}
		key := m.String()
		if i, ok := at[key]; ok {
			dropped = append(dropped, s)
			if s.Value > out[i].Value {
				out[i].Value = s.Value
			}
			continue
		}
		at[key] = len(out)
		out = append(out, &model.Sample{Metric: m, Value: s.Value, Timestamp: s.Timestamp})
	}
	return out, dropped, label
}

func containsSource(ss []Source, s Source) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// addEdge adds requests to the edge (keeping the larger count where two series of one source
// count the same calls, as Linkerd's two families do).
func (r *reader) addEdge(src Source, from Caller, to Callee, requests, tries float64, why string) {
	if requests <= 0 {
		return // not observed in the window: the counter did not increase
	}
	if r.isGateway(from.Namespace, from.Name) || (src == SourceIstio && IstioGatewayAPIWorkload(from.Name)) {
		r.addEntry(src, to, from.Namespace+"/"+from.Name, requests)
		return
	}
	m := r.edges
	if why != "" {
		m = r.nonHTTP
	}
	k := edgeKey{src: src, from: from, to: to}
	e := m[k]
	if e == nil {
		e = &Edge{Source: src, From: from, To: to, Why: why}
		m[k] = e
	}
	if requests > e.Requests {
		e.Requests = requests
		e.RatePerSecond = requests / r.secs
	}
	if tries > 0 {
		e.Tries = tries
	}
}

func (r *reader) addEntry(src Source, to Callee, via string, requests float64) {
	if requests <= 0 {
		return
	}
	k := string(src) + "|" + to.Namespace + "/" + to.Name + "|" + via
	e := r.entries[k]
	if e == nil {
		e = &Entrypoint{Callee: to, Via: via, Source: src}
		r.entries[k] = e
	}
	e.RatePerSecond = max(e.RatePerSecond, requests/r.secs)
}

func (r *reader) result() *Observation {
	ob := &Observation{Window: r.o.Window, Sources: r.sources, Warnings: r.w.list(), Unplaced: r.unplaced}
	for _, e := range r.edges {
		ob.Edges = append(ob.Edges, *e)
	}
	// An Istio TCP edge whose pair also carried HTTP is HTTP (ambient's ztunnel counts every
	// connection, HTTP or not): only TCP-only pairs are listed apart.
	http := map[[2]string]bool{}
	for _, e := range ob.Edges {
		http[[2]string{e.From.String(), e.To.String()}] = true
	}
	for _, e := range r.nonHTTP {
		if e.Source == SourceIstio && http[[2]string{e.From.String(), e.To.String()}] {
			continue
		}
		ob.NonHTTP = append(ob.NonHTTP, *e)
	}
	for _, e := range r.entries {
		ob.Entrypoints = append(ob.Entrypoints, *e)
	}
	SortEdges(ob.Edges)
	SortEdges(ob.NonHTTP)
	sort.Slice(ob.Entrypoints, func(i, j int) bool {
		a, b := ob.Entrypoints[i], ob.Entrypoints[j]
		return fmt.Sprint(a.Namespace, "/", a.Name, "|", a.Via, "|", a.Source) < fmt.Sprint(b.Namespace, "/", b.Name, "|", b.Via, "|", b.Source)
	})
	return ob
}

// SortEdges sorts by caller, callee, then source.
func SortEdges(es []Edge) {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.From.Namespace != b.From.Namespace {
			return a.From.Namespace < b.From.Namespace
		}
		if a.From.Name != b.From.Name {
			return a.From.Name < b.From.Name
		}
		if a.To.Namespace != b.To.Namespace {
			return a.To.Namespace < b.To.Namespace
		}
		if a.To.Name != b.To.Name {
			return a.To.Name < b.To.Name
		}
		return a.Source < b.Source
	})
}
