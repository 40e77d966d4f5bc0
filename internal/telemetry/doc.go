// Package telemetry reads the call graph a cluster has already observed out of Prometheus query
// results: Istio's istio_requests_total (reporters source, waypoint and destination) and
// istio_tcp_connections_opened_total, Linkerd's response_total{direction="outbound"} and its
// 2.16+ route series, the OpenTelemetry service-graph connector's (and Tempo's and Beyla's)
// traces_service_graph_request_total, and retrycap-proxy's retrycap_proxy_requests_total. Each
// reader turns one query's answer into caller -> callee edges with their rate over the window;
// edges whose counters did not increase are not observed; series that cannot be placed on the
// graph (a missing label, an "unknown" destination, Envoy's passthrough clusters, an IP, a label
// value that is no Kubernetes name of its kind: names.go) are
// counted in warnings, never dropped silently (and those with calls over the window that a missing
// label leaves unnamed are Observation.Unplaced, which keep GraphComplete from True); a callee that is not a Service's name is read as
// what the source meant by it (peerhost.go: a ServiceEntry's host, a host outside the cluster, a
// database the service graph named after db.system); a value that is not a count (NaN, an infinity, negative, a series twice with two
// values) or no answer at all fails the read (check.go: CheckVector is the one check of an
// answer's values and duplicates, which internal/promquery runs as it decodes an answer and Read
// runs on answers not so checked). A messy Prometheus is read as what it holds: Istio's
// workload: recorded series where the raw ones are missing (istioQuery), each series once across
// two HA replicas' labels (OneReplica), a Linkerd or proxy series whose namespace a scrape renamed
// exported_namespace as unplaced, an ambient waypoint's hop as no edge, Istio's series of one
// cluster only (oneCluster: several clusters' are refused unless one is chosen), and so every
// source's by a querier's cluster label (OneClusterBy, clusters.go; the exported_cluster a federation
// without honor_labels renames it to is read as the series' own, and said); each counter is
// counted by Calls (a series born inside the window from zero); and when no query
// answered, PresenceQuery tells a window too short for increase() from no series at all.
// docs/telemetry.md cites each label set's source.
//
// It also reads the edges manifests imply (container env values and the ConfigMaps they
// reference that name a Service; a mesh proxy's container passed over: mesh.IsProxyContainer)
// and merges both into the retrycap.dev/upstreams each workload
// needs (Discover), against what the workloads already declare.
//
// It is pure: query results and decoded manifests in, edges and proposals out. internal/promquery
// runs the queries; internal/cli's discover command reads the files and renders the result.
package telemetry
