package telemetry

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

func sample(v float64, kv ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[model.LabelName(kv[i])] = model.LabelValue(kv[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

func istio(reporter, src, srcNS, dst, dstNS string, v float64) *model.Sample {
	return sample(v, "reporter", reporter, "source_workload", src, "source_workload_namespace", srcNS, "destination_service_name", dst, "destination_service_namespace", dstNS)
}

func answer(metric string, ss ...*model.Sample) Answer {
	for _, q := range Queries(time.Minute, "") {
		if q.Metric == metric {
			return Answer{Query: q, Vector: model.Vector(ss)}
		}
	}
	panic(metric)
}

// mustRead is Read of answers that are all counts.
func mustRead(t testing.TB, answers []Answer, o Options) *Observation {
	t.Helper()
	ob, err := Read(answers, o)
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

// summary writes an observation one line per item, rates per second over the 60 s window.
func summary(ob *Observation) []string {
	var out []string
	for _, e := range ob.Edges {
		s := fmt.Sprintf("edge %s %s%s > %s %.2f/s", e.Source, e.From, kind(e.From), e.To, e.RatePerSecond)
		if e.Tries > 0 {
			s += fmt.Sprintf(" tries %.2f", e.Tries)
		}
		out = append(out, s)
	}
	for _, e := range ob.NonHTTP {
		out = append(out, fmt.Sprintf("apart %s %s > %s %.2f/s: %s", e.Source, e.From, e.To, e.RatePerSecond, e.Why))
	}
	for _, e := range ob.Entrypoints {
		out = append(out, fmt.Sprintf("entry %s %s via %s %.2f/s", e.Source, e.Callee, e.Via, e.RatePerSecond))
	}
	for _, w := range ob.Warnings {
		out = append(out, "warning "+w)
	}
	return out
}

func kind(c Caller) string {
	switch {
	case c.Service:
		return " (service)"
	case c.Kind != "":
		return " (" + c.Kind + ")"
	}
	return ""
}

func TestRead(t *testing.T) {
	cases := []struct {
		name    string
		answers []Answer
		sources string
		want    []string
	}{{
		name: "istio: tries from destination over source, waypoint, gateway, outside, zero and unknown",
		answers: []Answer{answer("istio_requests_total",
			istio("source", "web", "shop", "payment", "shop", 60),
			istio("destination", "web", "shop", "payment", "shop", 180),
			istio("source", "web", "shop", "cart", "shop", 30),
			istio("source", "web", "shop", "ledger", "shop", 0),
			istio("waypoint", "reviews", "bookinfo", "ratings", "bookinfo", 12),
			istio("source", "istio-ingressgateway", "istio-system", "web", "shop", 120),
			istio("destination", "unknown", "unknown", "web", "shop", 6),
			istio("source", "web", "shop", "PassthroughCluster", "unknown", 9),
			istio("source", "web", "", "cart", "shop", 3),
		), answer("istio_tcp_connections_opened_total",
			istio("source", "web", "shop", "postgres", "shop", 6),
			istio("source", "web", "shop", "payment", "shop", 6),
		)},
		sources: "[istio]",
		want: []string{
			"edge istio bookinfo/reviews > bookinfo/ratings 0.20/s",
			"edge istio shop/web > shop/cart 0.50/s",
			"edge istio shop/web > shop/payment 1.00/s tries 3.00",
			"apart istio shop/web > shop/postgres 0.10/s: TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies",
			"entry istio shop/web via istio-system/istio-ingressgateway 2.00/s",
			"entry istio shop/web via outside the mesh 0.10/s",
			`warning istio: destination_service_name is one of Envoy's passthrough or black-hole clusters (traffic to no Service: a pod IP, an unregistered host, a port no Service declares; its namespace is the called pod's): not an edge: 1 series (e.g. {destination_service_name="PassthroughCluster", destination_service_namespace="unknown", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
			`warning istio: source_workload or source_workload_namespace missing: not an edge: 1 series (e.g. {destination_service_name="cart", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace=""})`,
		},
	}, {
		name: "linkerd: both families, the larger count, kinds from the scrape's labels",
		answers: []Answer{answer("response_total",
			sample(60, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop", "dst_service", "payment"),
			sample(6, "namespace", "shop", "statefulset", "ledger", "dst_namespace", "billing", "dst_service", "bank"),
			sample(6, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop"),
			sample(6, "namespace", "shop", "dst_namespace", "shop", "dst_service", "payment"),
		), answer("outbound_http_route_request_statuses_total",
			sample(66, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "payment"),
			sample(0, "namespace", "shop", "daemonset", "agent", "parent_namespace", "shop", "parent_name", "collector"),
		)},
		sources: "[linkerd]",
		want: []string{
			"edge linkerd shop/checkout (Deployment) > shop/payment 1.10/s",
			"edge linkerd shop/ledger (StatefulSet) > billing/bank 0.10/s",
			`warning linkerd response_total: no dst_namespace or dst_service (a destination that is not a Service): not an edge: 1 series (e.g. {deployment="checkout", dst_namespace="shop", namespace="shop"})`,
			`warning linkerd response_total: no namespace, or none of deployment, statefulset, daemonset, replicaset, k8s_job, cronjob (the scrape's labels; Linkerd's proxy injector labels a CronJob's pod with none): not an edge: 1 series (e.g. {dst_namespace="shop", dst_service="payment", namespace="shop"})`,
		},
	}, {
		// linkerd-viz's scrape turns linkerd.io/proxy-<kind> into <kind>, and proxy-job into
		// k8s_job; a CronJob's pod injected by the proxy injector has no such label.
		name: "linkerd: a label for every kind retrycap reads, the Job's as k8s_job",
		answers: []Answer{answer("response_total",
			sample(60, "namespace", "batch", "cronjob", "nightly", "dst_namespace", "shop", "dst_service", "payment"),
			sample(30, "namespace", "batch", "k8s_job", "migrate", "dst_namespace", "shop", "dst_service", "payment"),
			sample(12, "namespace", "batch", "replicaset", "legacy", "dst_namespace", "shop", "dst_service", "cart"),
			sample(6, "namespace", "batch", "daemonset", "agent", "dst_namespace", "shop", "dst_service", "cart"),
			sample(6, "namespace", "batch", "job", "linkerd-proxy", "dst_namespace", "shop", "dst_service", "cart"),
			sample(3, "namespace", "batch", "replicationcontroller", "old", "dst_namespace", "shop", "dst_service", "cart"),
		)},
		sources: "[linkerd]",
		want: []string{
			"edge linkerd batch/agent (DaemonSet) > shop/cart 0.10/s",
			"edge linkerd batch/legacy (ReplicaSet) > shop/cart 0.20/s",
			"edge linkerd batch/migrate (Job) > shop/payment 0.50/s",
			"edge linkerd batch/nightly (CronJob) > shop/payment 1.00/s",
			`warning linkerd response_total: no namespace, or none of deployment, statefulset, daemonset, replicaset, k8s_job, cronjob (the scrape's labels; Linkerd's proxy injector labels a CronJob's pod with none): not an edge: 2 series (e.g. {dst_namespace="shop", dst_service="cart", job="linkerd-proxy", namespace="batch"})`,
		},
	}, {
		// (statuses + retries) / statuses on the route family's calls; none counted where the
		// family exists is one try; without the family (above) none is shown.
		name: "linkerd: tries per call from the route family's retries",
		answers: []Answer{answer("response_total",
			sample(90, "namespace", "shop", "deployment", "checkout", "dst_namespace", "shop", "dst_service", "payment"),
		), answer("outbound_http_route_request_statuses_total",
			sample(60, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "payment"),
			sample(30, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "cart"),
		), answer("outbound_http_route_retry_requests_total",
			sample(120, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "payment"),
			sample(6, "namespace", "shop", "deployment", "checkout", "parent_namespace", "shop", "parent_name", "ledger"),
			sample(6, "namespace", "shop", "parent_namespace", "shop", "parent_name", "ledger"),
		)},
		sources: "[linkerd]",
		want: []string{
			"edge linkerd shop/checkout (Deployment) > shop/cart 0.50/s tries 1.00",
			"edge linkerd shop/checkout (Deployment) > shop/payment 1.50/s tries 3.00",
			`warning linkerd outbound_http_route_retry_requests_total: no namespace, or none of deployment, statefulset, daemonset, replicaset, k8s_job, cronjob (the scrape's labels; Linkerd's proxy injector labels a CronJob's pod with none): not an edge: 1 series (e.g. {namespace="shop", parent_name="ledger", parent_namespace="shop"})`,
			`warning linkerd outbound_http_route_retry_requests_total: retries on an edge with no request statuses over the window: no tries per call: 1 series (e.g. {caller="checkout", namespace="shop", parent="shop/ledger"})`,
		},
	}, {
		name: "otel service graph: the connector's and Beyla's namespace dimensions, virtual nodes, databases",
		answers: []Answer{answer("traces_service_graph_request_total",
			sample(30, "client", "frontend", "server", "checkout", "connection_type", "", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
			sample(12, "client", "ads", "server", "catalog", "client_service_namespace", "shop", "server_service_namespace", "catalog"),
			sample(6, "client", "checkout", "server", "orders", "connection_type", "database", "client_k8s_namespace_name", "shop"),
			sample(3, "client", "user", "server", "frontend", "connection_type", "virtual_node", "server_k8s_namespace_name", "shop"),
			sample(3, "client", "checkout", "server", "payment.billing.svc.cluster.local:8443", "connection_type", "virtual_node", "client_k8s_namespace_name", "shop"),
			sample(3, "client", "a", "server", "b"),
		)},
		sources: "[otel-servicegraph]",
		want: []string{
			"edge otel-servicegraph shop/ads (service) > catalog/catalog 0.20/s",
			"edge otel-servicegraph shop/checkout (service) > billing/payment 0.05/s",
			"edge otel-servicegraph shop/frontend (service) > shop/checkout 0.50/s",
			"apart otel-servicegraph shop/checkout > shop/orders 0.10/s: a database call (connection_type database): no HTTP retry applies",
			"entry otel-servicegraph shop/frontend via outside the mesh 0.05/s",
			`warning otel-servicegraph: no client namespace dimension (configure the connector's dimensions: [k8s.namespace.name]): not an edge: 1 series (e.g. {client="a", server="b"})`,
			`warning otel-servicegraph: no server namespace dimension: the server is taken to be in the client's namespace: 1 series (e.g. {client="checkout", client_k8s_namespace_name="shop", connection_type="database", server="orders"})`,
		},
	}, {
		name: "retrycap: names as the proxy's --upstreams wrote them; unknown hosts",
		answers: []Answer{answer("retrycap_proxy_requests_total",
			sample(60, "namespace", "shop", "service", "order", "upstream", "payment"),
			sample(6, "namespace", "shop", "service", "order", "upstream", "bank.billing"),
			sample(6, "namespace", "shop", "service", "order", "upstream", "api.example.com"),
			sample(6, "namespace", "shop", "service", "order", "upstream", "unknown"),
			sample(6, "namespace", "shop", "upstream", "payment"),
		)},
		sources: "[retrycap]",
		want: []string{
			"edge retrycap shop/order (service) > api.example.com 0.10/s",
			"edge retrycap shop/order (service) > billing/bank 0.10/s",
			"edge retrycap shop/order (service) > shop/payment 1.00/s",
			`warning retrycap: no namespace or no service label (the scrape adds them: docs/observe.md): not an edge: 1 series (e.g. {namespace="shop", upstream="payment"})`,
			`warning retrycap: upstream unknown (a host the proxy's --upstreams does not list): not an edge: 1 series (e.g. {namespace="shop", service="order", upstream="unknown"})`,
		},
	}, {
		name: "retrycap: tries per call from the proxies' attempts over their requests",
		answers: []Answer{answer("retrycap_proxy_requests_total",
			sample(60, "namespace", "shop", "service", "order", "upstream", "payment"),
			sample(6, "namespace", "shop", "service", "order", "upstream", "bank.billing"),
		), answer("retrycap_proxy_attempts_total",
			sample(150, "namespace", "shop", "service", "order", "upstream", "payment"),
			sample(6, "namespace", "shop", "service", "order", "upstream", "bank.billing"),
			sample(9, "namespace", "shop", "service", "order", "upstream", "stock"),
		)},
		sources: "[retrycap]",
		want: []string{
			"edge retrycap shop/order (service) > billing/bank 0.10/s tries 1.00",
			"edge retrycap shop/order (service) > shop/payment 1.00/s tries 2.50",
			`warning retrycap: attempts on an upstream with no requests over the window: no tries per call: 1 series (e.g. {namespace="shop", service="order", upstream="shop/stock"})`,
		},
	}, {
		name:    "series that exist and never increased: the source is detected, no edge",
		answers: []Answer{answer("istio_requests_total", istio("source", "web", "shop", "payment", "shop", 0)), answer("response_total")},
		sources: "[istio]",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ob := mustRead(t, c.answers, Options{Window: time.Minute})
			if got := fmt.Sprint(ob.Sources); got != c.sources {
				t.Errorf("sources %s, want %s", got, c.sources)
			}
			got := summary(ob)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestGatewaysOption(t *testing.T) {
	ob := mustRead(t, []Answer{answer("response_total",
		sample(60, "namespace", "ingress-nginx", "deployment", "ingress-nginx-controller", "dst_namespace", "shop", "dst_service", "web"),
	)}, Options{Window: time.Minute, Gateways: []string{"ingress-nginx/ingress-nginx-controller"}})
	want := "entry linkerd shop/web via ingress-nginx/ingress-nginx-controller 1.00/s"
	if got := strings.Join(summary(ob), "\n"); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestQueriesHonourTheWindowToTheSecond(t *testing.T) {
	for _, q := range Queries(90*time.Second+time.Hour, "svc") {
		if !strings.Contains(q.PromQL, "[1h1m30s]") {
			t.Errorf("%s: %s", q.Metric, q.PromQL)
		}
	}
	if q := Queries(time.Minute, "svc")[6].PromQL; q != "sum by (namespace, svc, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_requests_total[1m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 1m) unless resets(retrycap_proxy_requests_total[1m]) > 0) and on (job, instance) ((up offset 1m == 1) or ((last_over_time(up[1m]) unless last_over_time(up[5m] offset 1m)) and on (job) group by (job) (up offset 1m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[1m])) >= time() - 60))) or (((last_over_time(retrycap_proxy_requests_total[1m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 1m) unless resets(retrycap_proxy_requests_total[1m]) > 0) unless on (job, instance) last_over_time(up[1m])) and on () group(retrycap_proxy_requests_total offset 1m)) or increase(retrycap_proxy_requests_total[1m]))" {
		t.Errorf("retrycap query %s", q)
	}
}

func TestParseServiceRefs(t *testing.T) {
	cases := []struct{ in, want string }{
		{"productcatalogservice:3550", "[{productcatalogservice  3550  false}]"},
		{"http://payment:8080/charge", "[{payment  8080 http false}]"},
		{"postgresql://accounts-admin:pw@accounts-db:5432/accounts-db", "[{accounts-db  5432 postgresql false}]"},
		{"jdbc:postgresql://ledger-db:5432/postgresdb", "[{ledger-db  5432 postgresql false}]"},
		{"payment.billing", "[{payment billing 0  false}]"},
		{"payment.billing.svc.cluster.local:443", "[{payment billing 443  true}]"},
		{"a:1, b.other.svc:2", "[{a  1  false} {b other 2  true}]"},
		{"payment", "[]"},
		{"localhost:8080", "[]"},
		{"0.0.0.0:8080", "[]"},
		{"10.0.0.1:8080", "[]"},
		{":8080", "[]"},
		{"api.example.com:443", "[]"},
		{"https://api.example.com/v1", "[]"},
		{"Payment_Svc:80", "[]"},
		{"payment:99999", "[]"},
		{"[::1]:8080", "[]"},
		{"true", "[]"},
		// A Service's name starts with a letter (DNS-1035): a rate and a version name none
		// (booksapp's FAILURE_RATE "0.5" was read as Service 0 in namespace 5).
		{"0.5", "[]"},
		{"1.2", "[]"},
		{"9front:80", "[]"},
		{"http://3d.render:80", "[]"},
		// gRPC's name syntax, dns:[//authority/]host[:port] (grpc/grpc doc/naming.md), as
		// grpc.NewClient takes it: before, dns:///order:9090 named nothing (url.Parse puts
		// the host in the path).
		{"dns:///order:9090", "[{order  9090 dns false}]"},
		{"dns:///pay.shop.svc.cluster.local:80", "[{pay shop 80 dns true}]"},
		{"dns://8.8.8.8/order:9090", "[{order  9090 dns false}]"},
		{"dns:order:9090", "[{order  9090 dns false}]"},
		{"DNS:///order", "[{order  0 dns false}]"},
		{"dns:///api.example.com:443", "[]"},
		{"dns:///", "[]"},
		{"dns://8.8.8.8", "[]"},
		// The xDS resolver's target (proxyless gRPC, Istio's grpc-agent template: istio.io
		// "gRPC Proxyless Service Mesh"), same syntax: before, it named nothing.
		{"xds:///echo.echo-grpc.svc.cluster.local:7070", "[{echo echo-grpc 7070 xds true}]"},
		{"XDS:///order:9090", "[{order  9090 xds false}]"},
		{"xds://control-plane/order:9090", "[{order  9090 xds false}]"},
		{"xds:///", "[]"},
	}
	for _, c := range cases {
		got := ParseServiceRefs(c.in)
		if got == nil {
			got = []ServiceRef{}
		}
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("%q: got %s, want %s", c.in, s, c.want)
		}
	}
}

func TestNonHTTPReason(t *testing.T) {
	svc := func(ports ...ServicePort) *ServiceDef { return &ServiceDef{Name: "s", Namespace: "n", Ports: ports} }
	cases := []struct {
		ref  ServiceRef
		svc  *ServiceDef
		want string
	}{
		{ServiceRef{Name: "s", Port: 6379, Scheme: "http"}, nil, ""},
		{ServiceRef{Name: "s", Port: 80, Scheme: "redis"}, nil, "a redis URL: no HTTP retry applies"},
		{ServiceRef{Name: "s", Port: 6379}, svc(ServicePort{Name: "tcp-redis", Port: 6379}), "Service port 6379 is named tcp-redis (a TCP protocol): no HTTP retry applies"},
		{ServiceRef{Name: "s", Port: 9000}, svc(ServicePort{Name: "x", Port: 9000, AppProtocol: "kafka"}), "Service port 9000 has appProtocol kafka: no HTTP retry applies"},
		{ServiceRef{Name: "s", Port: 5432}, svc(ServicePort{Name: "http", Port: 5432}), ""},
		{ServiceRef{Name: "s", Port: 9000}, svc(ServicePort{Name: "grpc-web", Port: 9000}), ""},
		{ServiceRef{Name: "s", Port: 5432}, nil, "port 5432 (PostgreSQL): no HTTP retry applies"},
		{ServiceRef{Name: "s"}, svc(ServicePort{Name: "mongo", Port: 27017}), "Service port 27017 is named mongo (a TCP protocol): no HTTP retry applies"},
		{ServiceRef{Name: "s", Port: 8080}, svc(ServicePort{Name: "web", Port: 8080}), ""},
		// "tcp" is Istio's opaque proxying, not the app's protocol (the OpenTelemetry demo's
		// gRPC ports are all tcp-service): HTTP unless the name or number says otherwise.
		// Before, nonHTTP, and the demo's whole gRPC call graph was left out.
		{ServiceRef{Name: "s", Port: 8080}, svc(ServicePort{Name: "tcp-service", Port: 8080}), ""},
		{ServiceRef{Name: "s", Port: 8080}, svc(ServicePort{Name: "tcp", Port: 8080}), ""},
		{ServiceRef{Name: "s", Port: 8080}, svc(ServicePort{Name: "x", Port: 8080, AppProtocol: "tcp"}), ""},
		{ServiceRef{Name: "s", Port: 5432}, svc(ServicePort{Name: "tcp-service", Port: 5432}), "port 5432 (PostgreSQL): no HTTP retry applies"},
		{ServiceRef{Name: "s", Port: 7000}, svc(ServicePort{Name: "tcp-postgres", Port: 7000}), "Service port 7000 is named tcp-postgres (a TCP protocol): no HTTP retry applies"},
		{ServiceRef{Name: "s", Port: 9000}, svc(ServicePort{Name: "tls-api", Port: 9000}), "Service port 9000 is named tls-api (a TCP protocol): no HTTP retry applies"},
	}
	for i, c := range cases {
		if got := NonHTTPReason(c.ref, c.svc); got != c.want {
			t.Errorf("%d %+v: got %q, want %q", i, c.ref, got, c.want)
		}
	}
}

// TestReadRefusesWhatIsNotACount: a value no counter's increase takes, a series twice with two
// values, an answer to a query Read does not know and no answer at all are errors naming the
// source, the metric, the series and the value (before, a NaN, an infinity or a negative value
// was a warning and the series was dropped: the rest read as if complete). Labels that place
// no edge stay warnings; a series twice with one value is read once, with a warning.
func TestReadRefusesWhatIsNotACount(t *testing.T) {
	order := func(v float64) *model.Sample {
		return sample(v, "namespace", "shop", "service", "order", "upstream", "payment")
	}
	const orderLabels = `{namespace="shop", service="order", upstream="payment"}`
	for _, tc := range []struct {
		name    string
		answers []Answer
		want    string
	}{
		{"no answer", nil, "nothing was read: no answer to any query (want the answers to telemetry.Queries)"},
		{"NaN", []Answer{answer("retrycap_proxy_requests_total", order(math.NaN()))},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + ": value NaN is not a counter's increase (want a number from 0 to 2^53)"},
		{"+Inf", []Answer{answer("retrycap_proxy_attempts_total", order(math.Inf(1)))},
			"retrycap retrycap_proxy_attempts_total: series " + orderLabels + ": value +Inf is not a counter's increase (want a number from 0 to 2^53)"},
		{"negative", []Answer{answer("istio_requests_total", istio("source", "web", "shop", "payment", "shop", -3))},
			`istio istio_requests_total: series {destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"}: value -3 is not a counter's increase (want a number from 0 to 2^53)`},
		{"over 2^53", []Answer{answer("traces_service_graph_request_total", sample(1e300, "client", "a", "server", "b", "client_k8s_namespace_name", "shop"))},
			`otel-servicegraph traces_service_graph_request_total: series {client="a", client_k8s_namespace_name="shop", server="b"}: value 1e+300 is not a counter's increase (want a number from 0 to 2^53)`},
		{"-Inf on a series that places no edge", []Answer{answer("response_total", sample(math.Inf(-1), "namespace", "shop"))},
			`linkerd response_total: series {namespace="shop"}: value -Inf is not a counter's increase (want a number from 0 to 2^53)`},
		{"a series twice with two values", []Answer{answer("retrycap_proxy_requests_total", order(10), order(12))},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + " given twice, with values 10 and 12: one series has one increase over the window, and which is right cannot be told"},
		{"a series twice across two answers of one query", []Answer{answer("retrycap_proxy_requests_total", order(10)), answer("retrycap_proxy_requests_total", order(11.5))},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + " given twice, with values 10 and 11.5: one series has one increase over the window, and which is right cannot be told"},
		{"the first bad series and how many more", []Answer{answer("retrycap_proxy_requests_total", order(-1)), answer("outbound_http_route_retry_requests_total", sample(math.NaN()), sample(-2, "namespace", "x"))},
			"retrycap retrycap_proxy_requests_total: series " + orderLabels + ": value -1 is not a counter's increase (want a number from 0 to 2^53) (and 2 more series refused)"},
		{"an empty series", []Answer{answer("retrycap_proxy_requests_total", order(1), nil)},
			"retrycap retrycap_proxy_requests_total: series 2 of the answer is empty (no labels, no value)"},
		{"an unknown query", []Answer{{Query: Query{Source: SourceIstio, Metric: "istio_request_bytes_sum", PromQL: "sum(istio_request_bytes_sum)"}, Vector: model.Vector{order(1)}}},
			`istio istio_request_bytes_sum: an answer to a query Read does not know (metric "istio_request_bytes_sum"): not read, so refused (want one of telemetry.Queries)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ob, err := Read(tc.answers, Options{Window: time.Minute})
			if err == nil || err.Error() != tc.want || ob != nil {
				t.Fatalf("got %v, %v\nwant %s", ob, err, tc.want)
			}
		})
	}

	// Counts: an extrapolated increase (not a whole number), 0 and 2^53 itself; a series twice
	// with one value is read once.
	ob := mustRead(t, []Answer{
		answer("retrycap_proxy_requests_total", order(10.5), order(10.5), sample(1<<53, "namespace", "shop", "service", "order", "upstream", "stock")),
		answer("retrycap_proxy_attempts_total", order(31.5), sample(0, "namespace", "shop", "service", "order", "upstream", "ledger")),
	}, Options{Window: time.Minute})
	want := []string{
		"edge retrycap shop/order (service) > shop/payment 0.17/s tries 3.00",
		"edge retrycap shop/order (service) > shop/stock 150119987579016.53/s",
		"warning retrycap retrycap_proxy_requests_total: a series given twice with the same value: taken once: 1 series (e.g. " + orderLabels + ")",
	}
	if got := summary(ob); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSeriesSetCollision: two series whose fingerprints collide are two series (the labels are
// compared), and each is still found when given again.
func TestSeriesSetCollision(t *testing.T) {
	a, b := sample(1, "upstream", "a"), sample(2, "upstream", "b")
	ss := &seriesSet{byFP: map[model.Fingerprint]*model.Sample{b.Metric.FastFingerprint(): a}} // a stands where b's fingerprint points
	if _, dup := ss.add(b); dup {
		t.Fatal("b taken for a")
	}
	if v, dup := ss.add(sample(5, "upstream", "b")); !dup || v != 2 {
		t.Fatalf("b again: %v, %v", v, dup)
	}
	if v, dup := ss.add(sample(1, "upstream", "a")); dup {
		t.Fatalf("a at its own fingerprint is new here: %v", v)
	}
	if v, dup := ss.add(sample(7, "upstream", "a")); !dup || v != 1 {
		t.Fatalf("a again: %v, %v", v, dup)
	}
}
