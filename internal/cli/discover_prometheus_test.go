package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// exporter serves, at every scrape, counters that grow by a fixed amount per scrape: series of
// the exact shape one source exports (the labels its project's source defines, docs/telemetry.md).
type exporter struct {
	mu    sync.Mutex
	n     int
	lines func(n int) string
}

func (e *exporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, e.lines(n))
}

func serve(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// istioSeries is one istio_requests_total series with every label Istio's stats plugin sets
// (istio/proxy source/extensions/stats: the standard metric labels).
func istioSeries(reporter, src, srcNS, dst, dstNS, code string, v int) string {
	return fmt.Sprintf(`istio_requests_total{reporter=%q,source_workload=%q,source_workload_namespace=%q,source_principal="spiffe://cluster.local/ns/%s/sa/default",source_app=%q,source_version="v1",source_canonical_service=%q,source_canonical_revision="v1",source_cluster="Kubernetes",destination_workload=%q,destination_workload_namespace=%q,destination_principal="spiffe://cluster.local/ns/%s/sa/default",destination_app=%q,destination_version="v1",destination_service="%s.%s.svc.cluster.local",destination_service_name=%q,destination_service_namespace=%q,destination_canonical_service=%q,destination_canonical_revision="v1",destination_cluster="Kubernetes",request_protocol="http",response_code=%q,grpc_response_status="",response_flags="-",connection_security_policy="mutual_tls"} %d
`, reporter, src, srcNS, srcNS, src, src, dst, dstNS, dstNS, dst, dst, dstNS, dst, dstNS, dst, code, v)
}

// startTelemetry runs the four sources' exporters and a real Prometheus scraping them every
// 100 ms (the scrape adds namespace and deployment to Linkerd's proxy, as linkerd-viz's scrape
// configuration does; namespace and service to retrycap-proxy's, as docs/observe.md's does),
// and waits until the window holds ten scrapes of each.
func startTelemetry(t *testing.T) *promtest.Server {
	t.Helper()
	istio := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" +
			istioSeries("source", "web", "shop", "payment", "shop", "200", 4*n) +
			istioSeries("source", "web", "shop", "payment", "shop", "503", 6*n) +
			istioSeries("destination", "web", "shop", "payment", "shop", "200", 4*n) +
			istioSeries("destination", "web", "shop", "payment", "shop", "503", 26*n) +
			istioSeries("source", "web", "shop", "cart", "shop", "200", 5*n) +
			istioSeries("source", "web", "shop", "ledger", "shop", "200", 7) + // never increases
			istioSeries("source", "istio-ingressgateway", "istio-system", "web", "shop", "200", 2*n) +
			istioSeries("waypoint", "reviews", "bookinfo", "ratings", "bookinfo", "200", 3*n) +
			istioSeries("source", "web", "shop", "PassthroughCluster", "unknown", "200", n) +
			"# TYPE istio_tcp_connections_opened_total counter\n" +
			fmt.Sprintf(`istio_tcp_connections_opened_total{reporter="source",source_workload="web",source_workload_namespace="shop",destination_service_name="postgres",destination_service_namespace="shop",destination_service="postgres.shop.svc.cluster.local",connection_security_policy="mutual_tls"} %d`+"\n", n)
	}})
	linkerd := serve(t, &exporter{lines: func(n int) string {
		dst := `dst_namespace="shop",dst_service="payment",dst_deployment="payment",dst_pod_template_hash="5c7f9",dst_serviceaccount="payment"`
		return "# TYPE response_total counter\n" +
			fmt.Sprintf(`response_total{direction="outbound",authority="payment.shop.svc.cluster.local:8080",target_addr="10.0.0.7:8080",target_ip="10.0.0.7",target_port="8080",tls="true",server_id="payment.shop.serviceaccount.identity.linkerd.cluster.local",%s,status_code="200",classification="success",grpc_status="",error=""} %d`+"\n", dst, 8*n) +
			fmt.Sprintf(`response_total{direction="inbound",authority="checkout.shop.svc.cluster.local:8080",target_addr="10.0.0.5:8080",target_ip="10.0.0.5",target_port="8080",tls="true",status_code="200",classification="success",grpc_status="",error=""} %d`+"\n", 9*n) +
			"# TYPE outbound_http_route_request_statuses_total counter\n" +
			fmt.Sprintf(`outbound_http_route_request_statuses_total{parent_group="core",parent_kind="Service",parent_namespace="shop",parent_name="inventory",parent_port="8080",parent_section_name="",route_group="",route_kind="default",route_namespace="",route_name="http",hostname="inventory.shop.svc.cluster.local",http_status="200",error=""} %d`+"\n", 3*n) +
			// A 2.16+ proxy counts every HTTP call on the route family, payment's too (its
			// default route): response_total's dst_service is read where the family has the edge.
			fmt.Sprintf(`outbound_http_route_request_statuses_total{parent_group="core",parent_kind="Service",parent_namespace="shop",parent_name="payment",parent_port="8080",parent_section_name="",route_group="",route_kind="default",route_namespace="",route_name="http",hostname="payment.shop.svc.cluster.local",http_status="200",error=""} %d`+"\n", 8*n) +
			// Two retries per call (linkerd/http/retry's "Retry requests emitted", route labels).
			"# TYPE outbound_http_route_retry_requests_total counter\n" +
			fmt.Sprintf(`outbound_http_route_retry_requests_total{parent_group="core",parent_kind="Service",parent_namespace="shop",parent_name="inventory",parent_port="8080",parent_section_name="",route_group="",route_kind="default",route_namespace="",route_name="http",hostname="inventory.shop.svc.cluster.local"} %d`+"\n", 6*n)
	}})
	otel := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE traces_service_graph_request_total counter\n" +
			fmt.Sprintf(`traces_service_graph_request_total{client="frontend",server="checkout",connection_type="",failed="false",client_k8s_namespace_name="shop",server_k8s_namespace_name="shop",otel_scope_name="traces_service_graph"} %d`+"\n", 6*n) +
			fmt.Sprintf(`traces_service_graph_request_total{client="checkout",server="orders",connection_type="database",failed="false",client_k8s_namespace_name="shop",server_k8s_namespace_name="shop",otel_scope_name="traces_service_graph"} %d`+"\n", 2*n) +
			fmt.Sprintf(`traces_service_graph_request_total{client="user",server="frontend",connection_type="virtual_node",failed="false",server_k8s_namespace_name="shop",otel_scope_name="traces_service_graph"} %d`+"\n", n)
	}})
	proxy := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE retrycap_proxy_requests_total counter\n" +
			fmt.Sprintf(`retrycap_proxy_requests_total{upstream="payment",code="200"} %d`+"\n", 4*n) +
			fmt.Sprintf(`retrycap_proxy_requests_total{upstream="unknown",code="502"} %d`+"\n", n) +
			"# TYPE retrycap_proxy_attempts_total counter\n" +
			fmt.Sprintf(`retrycap_proxy_attempts_total{upstream="payment"} %d`+"\n", 8*n) +
			fmt.Sprintf(`retrycap_proxy_attempts_total{upstream="unknown"} %d`+"\n", n)
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: istio}, {Addr: otel},
		{Addr: linkerd, Labels: map[string]string{"namespace": "shop", "deployment": "checkout"}},
		{Addr: proxy, Labels: map[string]string{"namespace": "shop", "service": "order"}},
	})
	c, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(c)
	deadline := time.Now().Add(60 * time.Second)
	for {
		v, _, _, err := papi.Query(context.Background(), `min(count_over_time({__name__=~"istio_requests_total|response_total|traces_service_graph_request_total|retrycap_proxy_requests_total"}[1m]))`, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && vec[0].Value >= 10 {
			return prom
		}
		if time.Now().After(deadline) {
			t.Fatalf("ten scrapes of each exporter: not within 60s (last: %v %v)", v, err)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestDiscoverFromPrometheus: discover over a real Prometheus holding each source's series.
func TestDiscoverFromPrometheus(t *testing.T) {
	prom := startTelemetry(t)
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
			s := fmt.Sprintf("%s %s/%s inferred=%t > %s %v", w.Kind, w.Namespace, w.Name, w.KindInferred, p.Upstream, p.Sources)
			if p.ObservedTries > 0 {
				s += fmt.Sprintf(" tries %.2f", p.ObservedTries)
			}
			if p.RatePerSecond <= 0 {
				s += " NOT RATED"
			}
			got = append(got, s)
		}
		if w.Annotation != strings.Join(w.Upstreams, ", ") || w.Existing {
			t.Errorf("%s/%s: annotation %q, upstreams %q, existing %t", w.Namespace, w.Name, w.Annotation, w.Upstreams, w.Existing)
		}
	}
	for _, e := range res.Entrypoints {
		got = append(got, fmt.Sprintf("entry %s/%s via %s (%s)", e.Namespace, e.Service, e.Via, e.Source))
	}
	for _, e := range res.NonHTTP {
		got = append(got, fmt.Sprintf("apart %s > %s (%s): %s", e.From, e.To, e.Source, e.Why))
	}
	want := []string{
		"Deployment bookinfo/reviews inferred=true > ratings [istio]",
		// (3 calls + 6 retries) / 3 calls on Linkerd's route; 8 attempts per 4 requests at the proxy.
		"Deployment shop/checkout inferred=false > inventory [linkerd] tries 3.00",
		"Deployment shop/checkout inferred=false > payment [linkerd] tries 1.00",
		"Deployment shop/frontend inferred=true > checkout [otel-servicegraph]",
		"Deployment shop/order inferred=true > payment [retrycap] tries 2.00",
		"Deployment shop/web inferred=true > cart [istio]",
		// 30 tries reach payment's sidecar for every 10 calls web's makes.
		"Deployment shop/web inferred=true > payment [istio] tries 3.00",
		"entry shop/frontend via outside the mesh (otel-servicegraph)",
		"entry shop/web via istio-system/istio-ingressgateway (istio)",
		"apart shop/checkout > shop/orders (otel-servicegraph): a database call (connection_type database): no HTTP retry applies",
		"apart shop/web > shop/postgres (istio): TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fmt.Sprint(res.Sources) != "[istio linkerd otel-servicegraph retrycap]" || res.Window != "1m0s" {
		t.Errorf("sources %v window %s", res.Sources, res.Window)
	}
	wantWarn := []string{
		`warning: istio: destination_service_name is one of Envoy's passthrough or black-hole clusters (traffic to no Service: a pod IP, an unregistered host, a port no Service declares; its namespace is the called pod's): not an edge: 1 series (e.g. {destination_service_name="PassthroughCluster", destination_service_namespace="unknown", reporter="source", source_cluster="Kubernetes", source_workload="web", source_workload_namespace="shop"})`,
		`warning: retrycap: upstream unknown (a host the proxy's --upstreams does not list): not an edge: 1 series (e.g. {namespace="shop", service="order", upstream="unknown"})`,
	}
	if strings.TrimSpace(stderr) != strings.Join(wantWarn, "\n") {
		t.Errorf("stderr\n%s\nwant\n%s", stderr, strings.Join(wantWarn, "\n"))
	}

	// With manifests too: Istio's source_workload maps to the StatefulSet the manifests hold;
	// its existing annotation is kept and compared; an env edge the telemetry did not observe
	// is questioned (notObserved), one it did is confirmed.
	manifest := filepath.Join(t.TempDir(), "web.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {retrycap.dev/upstreams: "payment=2, ledger"}
    spec:
      containers:
      - name: app
        image: web
        env:
        - {name: CART, value: "cart:8080"}
        - {name: LEGACY, value: "http://legacy:8080"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "-n", "shop", "-f", manifest, "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res = telemetry.Result{}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, w := range res.Workloads {
		if w.Name != "web" {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s/%s existing=%t %q", w.Kind, w.Namespace, w.Name, w.Existing, w.Upstreams))
		for _, p := range w.Discovered {
			got = append(got, fmt.Sprintf("  %s %q notObserved=%t", p.Upstream, p.Sources, p.NotObserved))
		}
		for _, d := range w.Differences {
			got = append(got, fmt.Sprintf("  diff %s declared=%q observed=%t", d.Upstream, d.Declared, d.Observed != ""))
		}
	}
	want = []string{
		`StatefulSet shop/web existing=true ["payment=2" "ledger"]`,
		`  cart ["env CART (container app)" "istio"] notObserved=false`,
		`  legacy ["env LEGACY (container app)"] notObserved=true`,
		`  payment ["istio"] notObserved=false`,
		`  diff ledger declared="ledger" observed=false`,
		`  diff cart declared="" observed=true`,
		`  diff legacy declared="" observed=true`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("with manifests: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// -n scopes to the callers of one namespace; -o patch writes one patch per workload.
	code, stdout, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "-n", "bookinfo", "-o", "patch")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	const wantPatch = `# Deployment bookinfo/reviews (kind inferred: the data names no kind): retrycap.dev/upstreams "ratings", one try each (add =N where the app retries)
#   ratings: istio `
	if !strings.HasPrefix(stdout, wantPatch) || !strings.HasSuffix(stdout, "/s\n"+`apiVersion: apps/v1
kind: Deployment
metadata:
  name: reviews
  namespace: bookinfo
spec:
  template:
    metadata:
      annotations:
        retrycap.dev/upstreams: ratings
`) {
		t.Errorf("patch:\n%s", stdout)
	}
}

// TestDiscoverPrometheusFailures: an unreachable Prometheus, one that asks for credentials, one
// that never answers, and an answer at the series limit are each an error with exit 2, never
// an empty success.
func TestDiscoverPrometheusFailures(t *testing.T) {
	// A port nothing listens on.
	closed := promtest.FreeAddr(t)
	code, _, stderr := run(t, "", "discover", "--prometheus-url", "http://"+closed, "-A")
	if code != ExitBadInput || !strings.HasPrefix(stderr, "retrycap: discover: Prometheus at http://"+closed+": query sum by (reporter, source_workload") ||
		!strings.HasSuffix(stderr, ": dial tcp "+closed+": connect: connection refused\n") {
		t.Errorf("unreachable: exit %d: %s", code, stderr)
	}
	// The same with a password in the URL: never printed (before: the whole URL was).
	code, _, stderr = run(t, "", "discover", "--prometheus-url", "http://admin:s3cret@"+closed, "-A")
	if code != ExitBadInput || !strings.HasPrefix(stderr, "retrycap: discover: Prometheus at http://admin:xxxxx@"+closed+": query sum by (reporter, source_workload") ||
		strings.Contains(stderr, "s3cret") {
		t.Errorf("unreachable, a password in the URL: exit %d: %s", code, stderr)
	}

	// A listener that accepts and never answers: the timeout ends the query.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	code, _, stderr = run(t, "", "discover", "--prometheus-url", "http://"+ln.Addr().String(), "--prometheus-timeout", "300ms")
	if code != ExitBadInput || !strings.Contains(stderr, "retrycap: discover: Prometheus at http://"+ln.Addr().String()+": query sum by") ||
		!strings.Contains(stderr, "context deadline exceeded") {
		t.Errorf("timeout: exit %d: %s", code, stderr)
	}

	// A real Prometheus that asks for basic-auth credentials (web config).
	dir := t.TempDir()
	web := filepath.Join(dir, "web.yml")
	// bcrypt of "s3cret" (cost 4).
	if err := os.WriteFile(web, []byte("basic_auth_users:\n  admin: $2a$04$dAQYYrevlXQu6kWpq1GZtuaz5gilJJ07NtGOJns6cb7uEmHtUdc1G\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := promtest.StartTargetsArgs(t, "../..", nil, "--web.config.file="+web)
	code, _, stderr = run(t, "", "discover", "--prometheus-url", locked.URL)
	if code != ExitBadInput || !strings.HasSuffix(stderr, ": HTTP 401 Unauthorized: Prometheus refused the query: its credentials are missing or wrong (--prometheus-bearer-token-file, or --prometheus-username and --prometheus-password-file): client_error: client error: 401\n") {
		t.Errorf("auth: exit %d: %s", code, stderr)
	}
	// With the credentials the queries answer: nothing found (this Prometheus scrapes nothing),
	// which is exit 2 with its message, not an auth failure. Polled: the server answers 401
	// before its storage is ready, then 503 until it is.
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		code, _, stderr = run(t, "", "discover", "--prometheus-url", locked.URL, "--prometheus-username", "admin", "--prometheus-password-file", pw)
		if !strings.Contains(stderr, "HTTP 503") || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	if want := "retrycap: discover: nothing found: no edge observed over 5m0s at " + locked.URL + " (no source's series exist)\n"; code != ExitBadInput || stderr != want {
		t.Errorf("with credentials: exit %d: %q, want %q", code, stderr, want)
	}

	// An answer that reaches --prometheus-series-limit is refused: a graph cut at the limit
	// would look complete.
	prom := startTelemetry(t)
	code, _, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "--prometheus-series-limit", "3")
	if code != ExitBadInput || !strings.HasSuffix(stderr, "the limit (--prometheus-series-limit 3): the edges would be incomplete\n") {
		t.Errorf("series limit: exit %d: %s", code, stderr)
	}
}
