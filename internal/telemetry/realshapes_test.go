package telemetry

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestReadRealShapes: series of the exact shapes the projects' own code writes for traffic that
// reached no Service, or a peer that is no Service, each read as what it is (before: every one
// of them was an edge to a "Service" of that name).
//   - Istio (istio/proxy istio_stats.cc): destination_service_name is the Envoy cluster's name
//     for passthrough and black-hole traffic, with the called pod's namespace when it is in the
//     mesh; a ServiceEntry's host ("api.stripe.com", "*.example.com") in the ServiceEntry's
//     namespace (pilot buildServiceMetadata); the Host header when the cluster carries no
//     Service (with its port); a Gateway API Gateway's Deployment is "<name>-istio".
//   - The service graph connector (connector.go onExpire, getPeerHost): a virtual server node is
//     the first peer attribute of peer.service, db.name, db.system the client span had, or
//     "unknown".
func TestReadRealShapes(t *testing.T) {
	cases := []struct {
		name    string
		answers []Answer
		want    []string
	}{{
		name: "istio: passthrough clusters in a namespace, ServiceEntry hosts, the Host header",
		answers: []Answer{answer("istio_requests_total",
			istio("source", "web", "shop", "PassthroughCluster", "shop", 9),
			istio("destination", "web", "shop", "InboundPassthroughClusterIpv4", "shop", 5),
			istio("source", "web", "shop", "BlackHoleCluster", "shop", 1),
			istio("source", "web", "shop", "api.stripe.com", "istio-system", 12),
			istio("source", "web", "shop", "*.example.com", "shop", 3),
			istio("source", "web", "shop", "cart.shop.svc.cluster.local:8080", "shop", 6),
			istio("source", "web", "shop", "stock:8080", "shop", 6),
			istio("source", "web", "shop", "10.0.0.7:8080", "shop", 2),
			istio("source", "web", "shop", "payment", "shop", 30),
			// Istio's Deployment for the Gateway API Gateway "bookinfo-gateway" of class istio.
			istio("source", "bookinfo-gateway-istio", "istio-ingress", "productpage", "bookinfo", 60),
		), answer("istio_tcp_connections_opened_total",
			istio("source", "web", "shop", "orders.abc123.eu-west-1.rds.amazonaws.com", "shop", 6),
		)},
		want: []string{
			"edge istio shop/web > api.stripe.com 0.20/s",
			"edge istio shop/web > shop/cart 0.10/s",
			"edge istio shop/web > shop/payment 0.50/s",
			"edge istio shop/web > shop/stock 0.10/s",
			"apart istio shop/web > orders.abc123.eu-west-1.rds.amazonaws.com 0.10/s: TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies",
			"entry istio bookinfo/productpage via istio-ingress/bookinfo-gateway-istio 1.00/s",
			`warning istio: destination_service_name is a wildcard host (a ServiceEntry's), no one Service: not an edge: 1 series (e.g. {destination_service_name="*.example.com", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
			`warning istio: destination_service_name is an IP address, no Service: not an edge: 1 series (e.g. {destination_service_name="10.0.0.7:8080", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
			`warning istio: destination_service_name is one of Envoy's passthrough or black-hole clusters (traffic to no Service: a pod IP, an unregistered host, a port no Service declares; its namespace is the called pod's): not an edge: 3 series (e.g. {destination_service_name="PassthroughCluster", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
		},
	}, {
		name: "otel service graph: virtual server nodes named unknown, after db.system, an address, a host outside",
		answers: []Answer{answer("traces_service_graph_request_total",
			sample(4, "client", "checkout", "server", "unknown", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			sample(6, "client", "checkout", "server", "postgresql", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			sample(6, "client", "cart", "server", "redis", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			sample(2, "client", "checkout", "server", "10.1.2.3:5432", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			sample(12, "client", "checkout", "server", "api.stripe.com:443", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			sample(3, "client", "checkout", "server", "payment", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			// Beyla names a server it cannot resolve by its address.
			sample(5, "client", "checkout", "server", "10.96.4.7", "client_service_namespace", "shop"),
		)},
		want: []string{
			"edge otel-servicegraph shop/checkout (service) > api.stripe.com 0.20/s",
			"edge otel-servicegraph shop/checkout (service) > shop/payment 0.05/s",
			"apart otel-servicegraph shop/cart > shop/redis 0.10/s: a database peer (a virtual node named after the client span's db.system redis): no HTTP retry applies",
			"apart otel-servicegraph shop/checkout > shop/postgresql 0.10/s: a database peer (a virtual node named after the client span's db.system postgresql): no HTTP retry applies",
			`warning otel-servicegraph: a server named by an IP address (a peer whose name was not resolved): not an edge: 1 series (e.g. {client="checkout", client_service_namespace="shop", server="10.96.4.7"})`,
			`warning otel-servicegraph: a virtual server node "unknown" (a client span whose server span never came, with none of the connector's peer attributes: peer.service, db.name, db.system): not an edge: 1 series (e.g. {client="checkout", client_k8s_namespace_name="shop", connection_type="virtual_node", server="unknown"})`,
			`warning otel-servicegraph: a virtual server node that is an IP address, no Service: not an edge: 1 series (e.g. {client="checkout", client_k8s_namespace_name="shop", connection_type="virtual_node", server="10.1.2.3:5432"})`,
			`warning otel-servicegraph: no server namespace dimension: the server is taken to be in the client's namespace: 3 series (e.g. {client="checkout", client_k8s_namespace_name="shop", connection_type="virtual_node", server="postgresql"})`,
		},
	}, {
		// Tempo's metrics-generator by default: one k8s_namespace_name, set by each span of the
		// pair in turn. On a virtual node's edge only one span was seen: its namespace is known.
		name: "tempo: the unprefixed namespace dimension",
		answers: []Answer{answer("traces_service_graph_request_total",
			sample(30, "client", "frontend", "server", "checkout", "connection_type", "", "k8s_namespace_name", "shop"),
			sample(6, "client", "user", "server", "frontend", "connection_type", "virtual_node", "k8s_namespace_name", "shop"),
			sample(6, "client", "checkout", "server", "payment", "connection_type", "virtual_node", "k8s_namespace_name", "shop"),
		)},
		want: []string{
			"edge otel-servicegraph shop/checkout (service) > shop/payment 0.10/s",
			"entry otel-servicegraph shop/frontend via outside the mesh 0.10/s",
			`warning otel-servicegraph: no server namespace dimension: the server is taken to be in the client's namespace: 1 series (e.g. {client="checkout", connection_type="virtual_node", k8s_namespace_name="shop", server="payment"})`,
			`warning otel-servicegraph: only Tempo's unprefixed k8s_namespace_name dimension (the namespace of whichever span of the pair came last: the client's and the server's are not known; set the metrics-generator's service_graphs enable_client_server_prefix: true): not an edge: 1 series (e.g. {client="frontend", connection_type="", k8s_namespace_name="shop", server="checkout"})`,
		},
	}, {
		// Tempo's metrics-generator names a root server span's missing caller after the span's
		// first peer attribute when it has one, "user" only when it has none (grafana/tempo
		// modules/generator/processor/servicegraphs/servicegraphs.go onExpire: e.ClientService =
		// e.PeerNode); its enable_virtual_node_label (the connector's virtual_node_extra_label)
		// adds virtual_node="client" or "server", the side that was never seen. Before, every
		// virtual_node edge whose client was not "user" was read as a virtual server: mobile-app,
		// a caller outside the traces, became a service of shop calling frontend (its namespace
		// Tempo's dimension of the server span), and with the prefixed dimensions the edge was
		// refused as if the connector had no namespace dimension.
		name: "tempo: a virtual client named after a peer attribute",
		answers: []Answer{answer("traces_service_graph_request_total",
			sample(12, "client", "mobile-app", "server", "frontend", "connection_type", "virtual_node", "virtual_node", "client", "k8s_namespace_name", "shop"),
			sample(6, "client", "user", "server", "cart", "connection_type", "virtual_node", "virtual_node", "client", "k8s_namespace_name", "shop"),
			sample(6, "client", "checkout", "server", "payment", "connection_type", "virtual_node", "virtual_node", "server", "k8s_namespace_name", "shop"),
			// enable_client_server_prefix without the label: only the server span's dimension.
			sample(18, "client", "partner-api", "server", "orders", "connection_type", "virtual_node", "server_k8s_namespace_name", "shop"),
		)},
		want: []string{
			"edge otel-servicegraph shop/checkout (service) > shop/payment 0.10/s",
			"entry otel-servicegraph shop/cart via outside the mesh 0.10/s",
			"entry otel-servicegraph shop/frontend via outside the mesh 0.20/s",
			"entry otel-servicegraph shop/orders via outside the mesh 0.30/s",
			`warning otel-servicegraph: no server namespace dimension: the server is taken to be in the client's namespace: 1 series (e.g. {client="checkout", connection_type="virtual_node", k8s_namespace_name="shop", server="payment", virtual_node="server"})`,
		},
	}, {
		// Flagger's canary on Linkerd: checkout calls payment; an HTTPRoute sends it to
		// payment-primary and payment-canary, whose endpoints answer (response_total's
		// dst_service); the route family names payment, its backend series the two. orders has
		// a ServiceProfile with routes (the proxy's profile router: no route series), and
		// ledger's proxy predates the route family: both are read from response_total.
		name: "linkerd: response_total names the backends of a route, the route family the Service called",
		answers: []Answer{answer("response_total",
			sample(54, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop", "dst_service", "payment-primary"),
			sample(6, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop", "dst_service", "payment-canary"),
			sample(30, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop", "dst_service", "cart"),
			sample(18, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop", "dst_service", "orders"),
			sample(12, "namespace", "shop", "statefulset", "ledger", "dst_namespace", "shop", "dst_service", "payment-primary"),
		), answer("outbound_http_route_request_statuses_total",
			sample(60, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "payment"),
			sample(30, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "cart"),
		), answer("outbound_http_route_backend_response_statuses_total",
			sample(54, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "payment", "backend_namespace", "shop", "backend_name", "payment-primary"),
			sample(6, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "payment", "backend_namespace", "shop", "backend_name", "payment-canary"),
			sample(30, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "cart", "backend_namespace", "shop", "backend_name", "cart"),
		)},
		want: []string{
			"edge linkerd shop/checkout (Deployment) > shop/cart 0.50/s",
			"edge linkerd shop/checkout (Deployment) > shop/orders 0.30/s",
			"edge linkerd shop/checkout (Deployment) > shop/payment 1.00/s",
			"edge linkerd shop/ledger (StatefulSet) > shop/payment-primary 0.20/s",
			`warning linkerd response_total: a backend a route sent the caller's calls to (dst_service is the Service whose endpoints answered; the caller addressed the route's parent): not an edge: 2 series (e.g. {deployment="checkout", dst_namespace="shop", dst_service="payment-primary", namespace="shop"})`,
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := summary(mustRead(t, c.answers, Options{Window: time.Minute}))
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestPeerHost(t *testing.T) {
	for _, c := range []struct {
		in      string
		oneDot  bool
		want    Callee
		wantWhy string
	}{
		{"payment", false, Callee{Name: "payment"}, ""},
		{"payment:8080", false, Callee{Name: "payment"}, ""},
		{"payment.billing", false, Callee{Name: "payment.billing"}, ""},
		{"payment.billing", true, Callee{"billing", "payment"}, ""},
		{"payment.billing.svc", false, Callee{"billing", "payment"}, ""},
		{"Payment.Billing.svc.cluster.local.:8443", false, Callee{"billing", "payment"}, ""},
		{"api.stripe.com", true, Callee{Name: "api.stripe.com"}, ""},
		{"10.0.0.7", false, Callee{}, "an IP address, no Service"},
		{"[fd00::7]:8080", false, Callee{}, "an IP address, no Service"},
		{"fd00::7", false, Callee{}, "an IP address, no Service"},
		{"*.example.com", false, Callee{}, "a wildcard host (a ServiceEntry's), no one Service"},
		{"1payment", false, Callee{}, "not a Service name"},
		{":8080", false, Callee{}, "an empty host"},
	} {
		got, why := peerHost(c.in, c.oneDot)
		if got != c.want || why != c.wantWhy {
			t.Errorf("peerHost(%q, %v) = %v, %q; want %v, %q", c.in, c.oneDot, got, why, c.want, c.wantWhy)
		}
	}
}

// TestIstioCalleeLabelDropped: Istio writes destination_service_name and
// destination_service_namespace on every series, "unknown" when the traffic reached no Service
// (istio/proxy istio_stats.cc). A series without one lost it to a relabelling or a Telemetry
// tagOverrides REMOVE: its calls went to a Service nobody can name. Before, it was the same
// warning as "unknown" ("traffic to no Service") and nothing more: a policy's GraphComplete
// could say True while calls were made on edges it could not see. Now it is unplaced (as a
// missing caller label is), and "unknown" stays a warning only.
func TestIstioCalleeLabelDropped(t *testing.T) {
	ob := mustRead(t, []Answer{answer("istio_requests_total",
		istio("source", "web", "shop", "payment", "shop", 30),
		sample(12, "reporter", "source", "source_workload", "web", "source_workload_namespace", "shop", "destination_service_namespace", "shop"),
		sample(6, "reporter", "source", "source_workload", "web", "source_workload_namespace", "shop", "destination_service_name", "cart"),
		istio("source", "web", "shop", "unknown", "unknown", 3),
		istio("source", "web", "shop", "unknown", "shop", 0),
		sample(2, "reporter", "source", "source_workload", "web", "source_workload_namespace", "shop", "destination_service_name", "unknown"),
	)}, Options{Window: time.Minute})
	want := []string{
		"edge istio shop/web > shop/payment 0.50/s",
		`warning istio: destination_service_name or destination_service_namespace missing (Istio writes both on every series, "unknown" when there is no Service: a relabelling or a Telemetry tagOverrides dropped it): not an edge: 2 series (e.g. {destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
		`warning istio: destination_service_name unknown (traffic to no Service: a pod IP, no route): not an edge: 3 series (e.g. {destination_service_name="unknown", destination_service_namespace="unknown", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
	}
	if got := summary(ob); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantUnplaced := []Unplaced{{Reason: `istio: destination_service_name or destination_service_namespace missing (Istio writes both on every series, "unknown" when there is no Service: a relabelling or a Telemetry tagOverrides dropped it): not an edge`, Series: 2,
		Example: `{destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"}`}}
	if fmt.Sprint(ob.Unplaced) != fmt.Sprint(wantUnplaced) {
		t.Errorf("unplaced:\n got %+v\nwant %+v", ob.Unplaced, wantUnplaced)
	}
}

// TestAmbientWaypointHopIsNoEdge: Istio ambient with a waypoint in front of reviews. The
// waypoint reports the HTTP calls by their callers (reporter="waypoint"); ztunnel reports
// connections only (istio_tcp_*): the caller's ztunnel to the waypoint as reporter="source"
// with the Service the caller addressed, and reviews' ztunnel the waypoint's connections as
// reporter="destination", its source the workload at the connection's address, the waypoint's
// (istio/ztunnel src/proxy/inbound.rs: source from fetch_workload_by_address,
// destination_service from guess_inbound_service). Before, that hop was a TCP-only edge
// bookinfo/waypoint -> bookinfo/reviews in discover's nonHTTP list, as if the waypoint were a
// caller of its own. details has no waypoint: its connections stay a TCP-only edge, and so does
// a destination-reported connection to a Service no waypoint serves.
func TestAmbientWaypointHopIsNoEdge(t *testing.T) {
	ob := mustRead(t, []Answer{answer("istio_requests_total",
		istio("waypoint", "productpage-v1", "bookinfo", "reviews", "bookinfo", 60),
	), answer("istio_tcp_connections_opened_total",
		istio("source", "productpage-v1", "bookinfo", "reviews", "bookinfo", 6),
		istio("destination", "waypoint", "bookinfo", "reviews", "bookinfo", 6),
		istio("source", "productpage-v1", "bookinfo", "details", "bookinfo", 3),
		istio("destination", "productpage-v1", "bookinfo", "details", "bookinfo", 3),
		istio("destination", "loader", "bookinfo", "mysql", "bookinfo", 2),
	)}, Options{Window: time.Minute})
	want := []string{
		"edge istio bookinfo/productpage-v1 > bookinfo/reviews 1.00/s",
		"apart istio bookinfo/loader > bookinfo/mysql 0.03/s: TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies",
		"apart istio bookinfo/productpage-v1 > bookinfo/details 0.05/s: TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies",
		`warning istio: connections to a Service a waypoint serves that only the destination reported, from a workload that reported none itself (the waypoint's hop to the Service's pods; or a caller outside the mesh, whose calls no waypoint saw): not an edge: 1 series (e.g. {destination_service_name="reviews", destination_service_namespace="bookinfo", reporter="destination", source_workload="waypoint", source_workload_namespace="bookinfo"})`,
	}
	if got := summary(ob); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIstioReporterDropped: Istio writes reporter on every series. A relabelling that drops it
// (or keeps the series of one side only under another name) leaves the sum by reporter with one
// series per edge, the sides' counts summed. Before, such a series was "reporter neither source,
// waypoint nor destination" and no edge at all: a namespace's edges vanished from discover and
// the status. Now the edge is observed, its count the series' (it may hold both sides' counts of
// one call: said in the warning); a reporter of another value stays no edge.
func TestIstioReporterDropped(t *testing.T) {
	ob := mustRead(t, []Answer{answer("istio_requests_total",
		sample(24, "source_workload", "web", "source_workload_namespace", "shop", "destination_service_name", "payment", "destination_service_namespace", "shop"),
		istio("source", "web", "shop", "cart", "shop", 6),
		istio("client", "web", "shop", "stock", "shop", 3),
	)}, Options{Window: time.Minute})
	want := []string{
		"edge istio shop/web > shop/cart 0.10/s",
		"edge istio shop/web > shop/payment 0.40/s",
		`warning istio: reporter missing (a relabelling dropped it): the edge is read, its count the sum of the sides that reported (up to twice its calls): 1 series (e.g. {destination_service_name="payment", destination_service_namespace="shop", source_workload="web", source_workload_namespace="shop"})`,
		`warning istio: reporter neither source, waypoint nor destination: 1 series (e.g. {destination_service_name="stock", destination_service_namespace="shop", reporter="client", source_workload="web", source_workload_namespace="shop"})`,
	}
	if got := summary(ob); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
