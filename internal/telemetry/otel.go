package telemetry

import (
	"strings"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/annotations"
)

// otel reads traces_service_graph_request_total (the OpenTelemetry Collector's servicegraph
// connector, Tempo's metrics-generator, Beyla) by client, server, connection_type and the
// namespace dimensions: client_k8s_namespace_name/server_k8s_namespace_name (the connector's
// "client_"/"server_" prefix on a k8s.namespace.name dimension, as Prometheus names it), else
// client_service_namespace/server_service_namespace (Beyla's, and a service.namespace
// dimension's). A client "user" on a virtual_node edge is the connector's name for a root span's
// caller: the server is an entrypoint. database and messaging_system edges are listed apart.
func (r *reader) otel(v model.Vector) {
	for _, s := range v {
		client, server, ct := label(s.Metric, "client"), label(s.Metric, "server"), label(s.Metric, "connection_type")
		if client == "" || server == "" {
			r.w.add("otel-servicegraph: client or server missing: not an edge", s.Metric)
			continue
		}
		var cns, sns string
		for _, d := range otelNamespaceDims {
			if cns == "" {
				cns = label(s.Metric, d[0])
			}
			if sns == "" {
				sns = label(s.Metric, d[1])
			}
		}
		// A virtual server is the peer's address as the client span gave it: "payment:8080",
		// "payment.shop.svc.cluster.local".
		if ct == "virtual_node" {
			if h, _, ok := strings.Cut(server, ":"); ok {
				server = h
			}
			if svc, ns, ok := annotations.SplitService(server); ok {
				server, sns = svc, ns
			}
		}
		n := float64(s.Value)
		to := Callee{sns, server}
		if ct == "virtual_node" && client == "user" {
			r.addEntry(SourceOTel, to, Outside, n)
			continue
		}
		if cns == "" {
			r.w.add("otel-servicegraph: no client namespace dimension (configure the connector's dimensions: [k8s.namespace.name]): not an edge", s.Metric)
			continue
		}
		if sns == "" {
			sns = cns // the connector saw both spans; without a dimension the server's is unknown: the client's is the likeliest
			to.Namespace = sns
			r.w.add("otel-servicegraph: no server namespace dimension: the server is taken to be in the client's namespace", s.Metric)
		}
		why := ""
		switch ct {
		case "database":
			why = "a database call (connection_type database): no HTTP retry applies"
		case "messaging_system":
			why = "a messaging edge (connection_type messaging_system): no HTTP retry applies"
		}
		r.addEdge(SourceOTel, Caller{Namespace: cns, Name: client, Service: true}, to, n, 0, why)
	}
}
