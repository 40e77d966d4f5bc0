package telemetry

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/workload"
)

func wl(kind, ns, name string, labels, anns map[string]string) workload.Workload {
	return workload.Workload{Kind: kind, Namespace: ns, Name: name, Labels: workload.PairsOf(labels), Annotations: workload.PairsOf(anns)}
}

// TestDiscoverMerges: telemetry callers map to the manifests' workloads (Istio's by name, the
// service graph's by service name and by the Services selecting them), an unmapped caller is a
// Deployment with the kind inferred and a warning, an existing annotation is kept with its
// differences, env edges the telemetry did not observe are marked, a gateway workload's calls
// make entrypoints.
func TestDiscoverMerges(t *testing.T) {
	ob := mustRead(t, []Answer{
		answer("istio_requests_total",
			istio("source", "web", "shop", "payment", "shop", 60),
			istio("destination", "web", "shop", "payment", "shop", 120),
			istio("source", "web", "shop", "bank", "billing", 6),
			istio("source", "ghost", "shop", "payment", "shop", 6),
			istio("source", "edge", "shop", "web", "shop", 6),
		),
		answer("traces_service_graph_request_total",
			sample(30, "client", "orders", "server", "payment", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
		),
	}, Options{Window: time.Minute})
	in := Input{
		Observation: ob,
		Workloads: []workload.Workload{
			wl("StatefulSet", "shop", "web", map[string]string{"app": "web"}, map[string]string{"retrycap.dev/upstreams": "payment=3, stock"}),
			wl("Deployment", "shop", "order-v2", map[string]string{"app": "order"}, nil),
			wl("Deployment", "shop", "edge", map[string]string{"istio": "ingressgateway"}, nil),
		},
		Services: []ServiceDef{{Namespace: "shop", Name: "orders", Selector: map[string]string{"app": "order"}}},
		Pods: []PodEnv{{Kind: "Deployment", Namespace: "shop", Name: "order-v2", Labels: map[string]string{"app": "order"},
			Env: []EnvVar{{Container: "app", Name: "STOCK", Value: "stock.inventory.svc:80"}}}},
	}
	res := Discover(in)
	var b bytes.Buffer
	if err := RenderYAML(&b, res); err != nil {
		t.Fatal(err)
	}
	const want = `entrypoints:
- namespace: shop
  ratePerSecond: 0.1
  service: web
  source: istio
  via: shop/edge
sources:
- istio
- otel-servicegraph
- env
warnings:
- 'istio: workload shop/ghost maps to no workload of the manifests: listed as a Deployment
  of that name (kind inferred)'
window: 1m0s
workloads:
- annotation: payment
  differences: []
  discovered:
  - ratePerSecond: 0.1
    sources:
    - istio
    upstream: payment
  kind: Deployment
  kindInferred: true
  name: ghost
  namespace: shop
  upstreams:
  - payment
- annotation: payment, stock.inventory
  differences: []
  discovered:
  - ratePerSecond: 0.5
    sources:
    - otel-servicegraph
    upstream: payment
  - notObserved: true
    serviceNotInInput: true
    sources:
    - env STOCK (container app)
    upstream: stock.inventory
  kind: Deployment
  name: order-v2
  namespace: shop
  upstreams:
  - payment
  - stock.inventory
- annotation: payment=3, stock
  differences:
  - declared: stock
    observed: ""
    upstream: stock
  - declared: ""
    observed: istio 0.100/s
    upstream: bank.billing
  discovered:
  - ratePerSecond: 0.1
    sources:
    - istio
    upstream: bank.billing
  - observedTries: 2
    ratePerSecond: 1
    sources:
    - istio
    upstream: payment
  existing: true
  kind: StatefulSet
  name: web
  namespace: shop
  upstreams:
  - payment=3
  - stock
`
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if !res.Found() {
		t.Fatal("Found() false")
	}
}

// A bare name.ns in an env value (no port, no scheme, no .svc) is an edge only when the input
// holds that Service: "app.yaml" and "v1.2" are words (before: Services app in namespace yaml
// and v1 in namespace 2); a rate "0.5" is no Service name at all; NO_PROXY and HTTP(S)_PROXY
// name no call (before: every injected pod "called" kubernetes.default, from the NO_PROXY the
// injector sets).
func TestDiscoverEnvWords(t *testing.T) {
	in := Input{
		Workloads: []workload.Workload{wl("Deployment", "shop", "web", map[string]string{"app": "web"}, nil)},
		Services:  []ServiceDef{{Namespace: "billing", Name: "payment", Selector: map[string]string{"app": "payment"}}},
		Pods: []PodEnv{{Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
			Env: []EnvVar{{Container: "app", Name: "CONFIG", Value: "app.yaml"}, {Container: "app", Name: "VERSION", Value: "v1.2"},
				{Container: "app", Name: "FAILURE_RATE", Value: "0.5"}, {Container: "app", Name: "PAYMENT", Value: "payment.billing"},
				{Container: "app", Name: "LEDGER", Value: "ledger.books:8080"},
				// A proxy's settings name no call: the injector's NO_PROXY, an egress proxy.
				{Container: "app", Name: "no_proxy", Value: "kubernetes.default.svc,payment.billing.svc.cluster.local"},
				{Container: "app", Name: "HTTPS_PROXY", Value: "http://egress.proxy:3128"}}}},
	}
	res := Discover(in)
	var b bytes.Buffer
	if err := RenderYAML(&b, res); err != nil {
		t.Fatal(err)
	}
	const want = `sources:
- env
warnings:
- 'env: 2 value(s) of the form name.namespace without a port or scheme name no Service
  of the input: read as words (a file name, a version), not edges; write host:port,
  or give the Service (e.g. Deployment shop/web env CONFIG="app.yaml")'
workloads:
- annotation: ledger.books, payment.billing
  differences: []
  discovered:
  - serviceNotInInput: true
    sources:
    - env LEDGER (container app)
    upstream: ledger.books
  - sources:
    - env PAYMENT (container app)
    upstream: payment.billing
  kind: Deployment
  name: web
  namespace: shop
  upstreams:
  - ledger.books
  - payment.billing
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDiscoverSiblingPortBareHost: a host variable holding a bare name beside its port (the
// OpenTelemetry demo's FLAGD_HOST=flagd with FLAGD_PORT=8013) names the Service as host:port
// would: proposed when HTTP, listed apart on a database's port, counted in the warning when the
// namespace's Services hold no such name, never read without the sibling (a word) nor from
// another container's sibling, nor when it is an IP or localhost. Before, every bare name was a
// word: flagd was called by no one.
func TestDiscoverSiblingPortBareHost(t *testing.T) {
	in := Input{
		Workloads: []workload.Workload{wl("Deployment", "shop", "web", map[string]string{"app": "web"}, nil)},
		Services: []ServiceDef{{Namespace: "shop", Name: "flagd", Selector: map[string]string{"app": "flagd"}},
			{Namespace: "shop", Name: "mysqldb", Selector: map[string]string{"app": "mysql"}},
			{Namespace: "shop", Name: "cart", Selector: map[string]string{"app": "cart"}}},
		Pods: []PodEnv{{Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
			Env: []EnvVar{{Container: "app", Name: "FLAGD_HOST", Value: "flagd"}, {Container: "app", Name: "FLAGD_PORT", Value: "8013"},
				{Container: "app", Name: "DB_HOST", Value: "mysqldb"}, {Container: "app", Name: "DB_PORT", Value: "3306"},
				{Container: "app", Name: "FLAGD_UI_HOST", Value: "flagd-ui"}, {Container: "app", Name: "FLAGD_UI_PORT", Value: "4000"},
				{Container: "app", Name: "PHX_HOST", Value: "localhost"}, {Container: "app", Name: "PHX_PORT", Value: "4000"},
				{Container: "app", Name: "WEB_HOST", Value: "0.0.0.0"}, {Container: "app", Name: "WEB_PORT", Value: "8080"},
				// No sibling port: a word, as before.
				{Container: "app", Name: "MODE_HOST", Value: "cart"},
				// Another container's port is not this one's.
				{Container: "side", Name: "CART_ADDR", Value: "cart"}, {Container: "app", Name: "CART_PORT", Value: "8080"}}}},
	}
	res := Discover(in)
	var b bytes.Buffer
	if err := RenderYAML(&b, res); err != nil {
		t.Fatal(err)
	}
	const want = `nonHTTP:
- from: shop/web
  source: env DB_HOST (container app)
  to: shop/mysqldb
  why: 'port 3306 (MySQL): no HTTP retry applies'
sources:
- env
warnings:
- 'env: 1 host variable(s) beside a port variable (NAME_HOST=name with NAME_PORT=port,
  read as name:port) name no Service of the input in a namespace whose Services it
  holds: not edges (e.g. Deployment shop/web env FLAGD_UI_HOST="flagd-ui" beside FLAGD_UI_PORT=4000)'
workloads:
- annotation: flagd
  differences: []
  discovered:
  - sources:
    - env FLAGD_HOST (container app)
    upstream: flagd
  kind: Deployment
  name: web
  namespace: shop
  upstreams:
  - flagd
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDiscoverTelemetryExporters: the variables that tell an SDK where to export spans, metrics
// and logs (the OpenTelemetry demo's OTEL_EXPORTER_OTLP_ENDPOINT in every app, flagd's
// FLAGD_OTEL_COLLECTOR_URI, Sock Shop's ZIPKIN, a Jaeger client's JAEGER_ENDPOINT) are no calls
// on a request's path: counted in one warning, never proposed; a value naming nothing (the
// browser's localhost endpoint) is not counted; other variables of the same container still are
// read. Before, every app of the demo was proposed the collector.
func TestDiscoverTelemetryExporters(t *testing.T) {
	in := Input{
		Workloads: []workload.Workload{wl("Deployment", "shop", "web", map[string]string{"app": "web"}, nil)},
		Services: []ServiceDef{{Namespace: "shop", Name: "otel-collector", Selector: map[string]string{"app": "otel"}},
			{Namespace: "shop", Name: "cart", Selector: map[string]string{"app": "cart"}}},
		Pods: []PodEnv{{Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
			Env: []EnvVar{{Container: "app", Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector:4317"},
				{Container: "app", Name: "otel_exporter_otlp_traces_endpoint", Value: "http://otel-collector:4318/v1/traces"},
				{Container: "app", Name: "FLAGD_OTEL_COLLECTOR_URI", Value: "otel-collector:4317"},
				{Container: "app", Name: "ZIPKIN", Value: "zipkin.jaeger.svc.cluster.local"},
				{Container: "app", Name: "JAEGER_ENDPOINT", Value: "http://jaeger-collector.tracing:14268/api/traces"},
				{Container: "app", Name: "PUBLIC_OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", Value: "http://localhost:8080/otlp-http/v1/traces"},
				// Any name, on an OTLP receiver's port (Online Boutique's google-cloud-operations).
				{Container: "app", Name: "COLLECTOR_SERVICE_ADDR", Value: "opentelemetrycollector:4317"},
				// Not an exporter's: words that only contain the letters.
				{Container: "app", Name: "COLLECTOR_MODE", Value: "cart:8080"}}}},
	}
	res := Discover(in)
	var b bytes.Buffer
	if err := RenderYAML(&b, res); err != nil {
		t.Fatal(err)
	}
	const want = `sources:
- env
warnings:
- 'env: 6 value(s) of telemetry exporters'' variables (OTEL_EXPORTER_*, *OTLP*, *ZIPKIN*,
  *OTEL_COLLECTOR*, JAEGER_ENDPOINT, JAEGER_AGENT_HOST) or on a telemetry receiver''s
  port (OTLP 4317, 4318, Zipkin 9411, Jaeger 14250, 14268, 6831, 6832) name where
  the SDK sends spans, metrics and logs, in batches off the requests'' path: not edges
  (e.g. Deployment shop/web env OTEL_EXPORTER_OTLP_ENDPOINT="http://otel-collector:4317")'
workloads:
- annotation: cart
  differences: []
  discovered:
  - sources:
    - env COLLECTOR_MODE (container app)
    upstream: cart
  kind: Deployment
  name: web
  namespace: shop
  upstreams:
  - cart
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// TestDiscoverPortPicksProtocol: where the Service has ports Istio retries on and ports it
// does not (the OpenTelemetry demo's flagd: rpc 8013, ofrep 8016, tcp-service-0 4000), the
// upstream keeps the port the value calls, as analyze asks ("write the upstream as flagd:PORT");
// not where every port reads alike, nor where the workload calls two of them (no one port picks).
// Before, the port was dropped and analyze warned that the upstream named none.
func TestDiscoverPortPicksProtocol(t *testing.T) {
	pod := func(name string, env ...EnvVar) PodEnv {
		return PodEnv{Kind: "Deployment", Namespace: "shop", Name: name, Labels: map[string]string{"app": name}, Env: env}
	}
	in := Input{
		Workloads: []workload.Workload{wl("Deployment", "shop", "ad", map[string]string{"app": "ad"}, nil),
			wl("Deployment", "shop", "web", map[string]string{"app": "web"}, nil),
			wl("Deployment", "shop", "proxy", map[string]string{"app": "proxy"}, nil)},
		Services: []ServiceDef{
			{Namespace: "shop", Name: "flagd", Selector: map[string]string{"app": "flagd"},
				Ports: []ServicePort{{Name: "rpc", Port: 8013}, {Name: "ofrep", Port: 8016}, {Name: "tcp-service-0", Port: 4000}}},
			{Namespace: "shop", Name: "api", Selector: map[string]string{"app": "api"},
				Ports: []ServicePort{{Name: "http", Port: 80}, {Name: "grpc", Port: 9090}}},
			{Namespace: "shop", Name: "stats", Selector: map[string]string{"app": "stats"},
				Ports: []ServicePort{{Name: "api", AppProtocol: "grpc", Port: 9000}, {Name: "statsd", Port: 8125, Protocol: "UDP"}}}},
		Pods: []PodEnv{
			pod("ad", EnvVar{Container: "app", Name: "FLAGD_HOST", Value: "flagd"}, EnvVar{Container: "app", Name: "FLAGD_PORT", Value: "8013"},
				EnvVar{Container: "app", Name: "API_ADDR", Value: "api:9090"}, EnvVar{Container: "app", Name: "SINK", Value: "stats:9000"}),
			pod("web", EnvVar{Container: "app", Name: "FLAGD_ADDR", Value: "flagd:8013"}, EnvVar{Container: "app", Name: "OFREP_URL", Value: "http://flagd:8016/ofrep"}),
			pod("proxy", EnvVar{Container: "app", Name: "FLAGD_URL", Value: "http://flagd/"}, EnvVar{Container: "app", Name: "FLAGD_ADDR", Value: "flagd:8013"}),
		},
	}
	res := Discover(in)
	got := map[string]string{}
	for _, w := range res.Workloads {
		got[w.Name] = w.Annotation
	}
	want := map[string]string{"ad": "api, flagd:8013, stats:9000", "web": "flagd", "proxy": "flagd"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("annotations: got %v, want %v", got, want)
	}
}

// TestDiscoverSiblingPort: a host variable whose port is in a sibling variable (Train-Ticket's
// MYSQL_DB_HOST beside MYSQL_DB_PORT=3306) is a database call, listed apart and never
// proposed as an HTTP upstream; an HTTP port in the sibling keeps it an upstream. Before, the
// MySQL host was proposed (no port seen).
func TestDiscoverSiblingPort(t *testing.T) {
	in := Input{
		Workloads: []workload.Workload{wl("Deployment", "shop", "web", map[string]string{"app": "web"}, nil)},
		Services: []ServiceDef{{Namespace: "shop", Name: "mysqldb", Selector: map[string]string{"app": "mysql"}},
			{Namespace: "shop", Name: "cart", Selector: map[string]string{"app": "cart"}}},
		Pods: []PodEnv{{Kind: "Deployment", Namespace: "shop", Name: "web", Labels: map[string]string{"app": "web"},
			Env: []EnvVar{{Container: "app", Name: "MYSQL_DB_HOST", Value: "mysqldb.shop"}, {Container: "app", Name: "MYSQL_DB_PORT", Value: "3306"},
				{Container: "app", Name: "cart_addr", Value: "cart.shop"}, {Container: "app", Name: "CART_PORT", Value: "8080"},
				// Another container's port is not this one's.
				{Container: "side", Name: "MYSQL_DB_PORT", Value: "8080"}}}},
	}
	res := Discover(in)
	if len(res.NonHTTP) != 1 || res.NonHTTP[0].To != "shop/mysqldb" || res.NonHTTP[0].Why != "port 3306 (MySQL): no HTTP retry applies" {
		t.Fatalf("NonHTTP: %+v", res.NonHTTP)
	}
	if len(res.Workloads) != 1 || strings.Join(res.Workloads[0].Upstreams, ",") != "cart" {
		t.Fatalf("workloads: %+v", res.Workloads)
	}
}
