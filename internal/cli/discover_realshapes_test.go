package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// TestDiscoverRealShapesFromPrometheus: a real Prometheus holding the series Istio's stats
// filter and the service graph connector write for traffic that reached no Service (istio/proxy
// istio_stats.cc: Envoy's passthrough cluster names, with the called pod's namespace; a
// ServiceEntry's host in the ServiceEntry's namespace; connector.go: a virtual server node
// "unknown", or named after the client span's db.system; Linkerd's response_total naming the
// backend a route sent the call to; Tempo's unprefixed namespace dimension, which is either
// side's). discover proposes none of them as a
// Service of the caller's namespace (before: "PassthroughCluster", "InboundPassthroughClusterIpv4",
// "api.stripe.com.istio-system", "unknown", "postgresql" and "payment-primary" were all proposed
// as upstreams).
func TestDiscoverRealShapesFromPrometheus(t *testing.T) {
	istio := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" +
			istioSeries("source", "web", "shop", "payment", "shop", "200", 4*n) +
			istioSeries("source", "web", "shop", "PassthroughCluster", "shop", "200", n) +
			istioSeries("destination", "web", "shop", "InboundPassthroughClusterIpv4", "shop", "200", n) +
			istioSeries("source", "web", "shop", "api.stripe.com", "istio-system", "200", 2*n)
	}})
	otel := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE traces_service_graph_request_total counter\n" +
			fmt.Sprintf(`traces_service_graph_request_total{client="checkout",server="unknown",connection_type="virtual_node",failed="false",client_k8s_namespace_name="shop"} %d`+"\n", n) +
			fmt.Sprintf(`traces_service_graph_request_total{client="checkout",server="postgresql",connection_type="virtual_node",failed="true",client_k8s_namespace_name="shop"} %d`+"\n", n) +
			fmt.Sprintf(`traces_service_graph_request_total{client="checkout",server="cart",connection_type="",failed="false",client_k8s_namespace_name="shop",server_k8s_namespace_name="shop"} %d`+"\n", 3*n)
	}})
	// Tempo's metrics-generator with dimensions [k8s.namespace.name] and its default
	// enable_client_server_prefix: false (one unprefixed label, no failed label).
	tempo := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE traces_service_graph_request_total counter\n" +
			fmt.Sprintf(`traces_service_graph_request_total{client="frontend",server="checkout",connection_type="",k8s_namespace_name="shop"} %d`+"\n", 2*n) +
			fmt.Sprintf(`traces_service_graph_request_total{client="user",server="frontend",connection_type="virtual_node",k8s_namespace_name="shop"} %d`+"\n", n)
	}})
	// Linkerd under Flagger's canary: checkout calls payment, an HTTPRoute sends it to
	// payment-primary, whose endpoints answer (response_total's dst_service).
	linkerd := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE response_total counter\n" +
			fmt.Sprintf(`response_total{direction="outbound",authority="payment.shop.svc.cluster.local:8080",target_addr="10.0.0.7:8080",target_ip="10.0.0.7",target_port="8080",tls="true",server_id="payment-primary.shop.serviceaccount.identity.linkerd.cluster.local",dst_namespace="shop",dst_service="payment-primary",dst_deployment="payment-primary",status_code="200",classification="success",grpc_status="",error=""} %d`+"\n", 4*n) +
			"# TYPE outbound_http_route_request_statuses_total counter\n" +
			fmt.Sprintf(`outbound_http_route_request_statuses_total{parent_group="core",parent_kind="Service",parent_namespace="shop",parent_name="payment",parent_port="8080",parent_section_name="",route_group="gateway.networking.k8s.io",route_kind="HTTPRoute",route_namespace="shop",route_name="payment",hostname="",http_status="200",error=""} %d`+"\n", 4*n) +
			"# TYPE outbound_http_route_backend_response_statuses_total counter\n" +
			fmt.Sprintf(`outbound_http_route_backend_response_statuses_total{parent_group="core",parent_kind="Service",parent_namespace="shop",parent_name="payment",parent_port="8080",parent_section_name="",route_group="gateway.networking.k8s.io",route_kind="HTTPRoute",route_namespace="shop",route_name="payment",backend_group="core",backend_kind="Service",backend_namespace="shop",backend_name="payment-primary",backend_port="8080",backend_section_name="",http_status="200",error=""} %d`+"\n", 4*n)
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: istio}, {Addr: otel}, {Addr: tempo},
		{Addr: linkerd, Labels: map[string]string{"namespace": "shop", "deployment": "checkout"}}})
	waitScrapes(t, prom, `min(count_over_time({__name__=~"istio_requests_total|traces_service_graph_request_total|response_total"}[1m]))`, 5)
	code, stdout, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res telemetry.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range res.Workloads {
		for _, p := range w.Discovered {
			got = append(got, fmt.Sprintf("%s %s/%s > %s %v", w.Kind, w.Namespace, w.Name, p.Upstream, p.Sources))
		}
	}
	for _, e := range res.Entrypoints {
		got = append(got, fmt.Sprintf("entry %s/%s via %s (%s)", e.Namespace, e.Service, e.Via, e.Source))
	}
	for _, e := range res.NonHTTP {
		got = append(got, fmt.Sprintf("apart %s > %s (%s): %s", e.From, e.To, e.Source, e.Why))
	}
	want := []string{
		"Deployment shop/checkout > cart [otel-servicegraph]",
		"Deployment shop/checkout > payment [linkerd]",
		"Deployment shop/web > api.stripe.com [istio]",
		"Deployment shop/web > payment [istio]",
		"entry shop/frontend via outside the mesh (otel-servicegraph)",
		"apart shop/checkout > shop/postgresql (otel-servicegraph): a database peer (a virtual node named after the client span's db.system postgresql): no HTTP retry applies",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr)
	}
	for _, w := range []string{
		`warning: istio: destination_service_name is one of Envoy's passthrough or black-hole clusters (traffic to no Service: a pod IP, an unregistered host, a port no Service declares; its namespace is the called pod's): not an edge: 2 series`,
		`warning: linkerd response_total: a backend a route sent the caller's calls to (dst_service is the Service whose endpoints answered; the caller addressed the route's parent): not an edge: 1 series`,
		`warning: otel-servicegraph: only Tempo's unprefixed k8s_namespace_name dimension (the namespace of whichever span of the pair came last: the client's and the server's are not known; set the metrics-generator's service_graphs enable_client_server_prefix: true): not an edge: 1 series`,
		`warning: otel-servicegraph: a virtual server node "unknown" (a client span whose server span never came, with none of the connector's peer attributes: peer.service, db.name, db.system): not an edge: 1 series`,
	} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
}
