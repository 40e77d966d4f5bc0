package promquery

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/observed"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
)

// linkerdProxy serves a Linkerd proxy's outbound route families in the shape linkerd2-proxy
// defines them (docs/observe.md cites the files): outbound_http_route_request_statuses_total
// and outbound_http_route_retry_requests_total (and the gRPC ones) labelled with the route's
// parent (parent_group, parent_kind, parent_namespace, parent_name, parent_port,
// parent_section_name), the route (route_group, route_kind, route_namespace, route_name) and
// hostname, the statuses also with http_status (grpc_status) and error. Every scrape adds one
// window's worth: 10 completed requests to the HTTP route of Service shop/payment (4 answered
// 200, 6 answered 503) and 20 retries; 5 gRPC requests to billing/bank, none retried; and 7
// requests and 7 retries to an EgressNetwork, which is not a Service of the graph.
type linkerdProxy struct {
	mu sync.Mutex
	n  int
}

func (l *linkerdProxy) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	l.n++
	n := l.n
	l.mu.Unlock()
	const payment = `parent_group="core",parent_kind="Service",parent_namespace="shop",parent_name="payment",parent_port="8080",parent_section_name="",route_group="",route_kind="default",route_namespace="",route_name="http",hostname="payment.shop.svc.cluster.local"`
	const bank = `parent_group="core",parent_kind="Service",parent_namespace="billing",parent_name="bank",parent_port="9090",parent_section_name="",route_group="",route_kind="default",route_namespace="",route_name="grpc",hostname="bank.billing.svc.cluster.local"`
	const egress = `parent_group="policy.linkerd.io",parent_kind="EgressNetwork",parent_namespace="linkerd-egress",parent_name="all",parent_port="443",parent_section_name="",route_group="",route_kind="default",route_namespace="",route_name="http",hostname="api.example.com"`
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE outbound_http_route_request_statuses_total counter\n")
	fmt.Fprintf(w, "outbound_http_route_request_statuses_total{%s,http_status=\"200\",error=\"\"} %d\n", payment, 4*n)
	fmt.Fprintf(w, "outbound_http_route_request_statuses_total{%s,http_status=\"503\",error=\"\"} %d\n", payment, 6*n)
	fmt.Fprintf(w, "outbound_http_route_request_statuses_total{%s,http_status=\"200\",error=\"\"} %d\n", egress, 7*n)
	fmt.Fprintf(w, "# TYPE outbound_http_route_retry_requests_total counter\n")
	fmt.Fprintf(w, "outbound_http_route_retry_requests_total{%s} %d\n", payment, 20*n)
	fmt.Fprintf(w, "outbound_http_route_retry_requests_total{%s} %d\n", egress, 7*n)
	fmt.Fprintf(w, "# TYPE outbound_grpc_route_request_statuses_total counter\n")
	fmt.Fprintf(w, "outbound_grpc_route_request_statuses_total{%s,grpc_status=\"OK\",error=\"\"} %d\n", bank, 5*n)
	fmt.Fprintf(w, "# TYPE outbound_grpc_route_retry_requests_total counter\n")
	fmt.Fprintf(w, "outbound_grpc_route_retry_requests_total{%s} 0\n", bank)
}

// TestLinkerdAgainstPrometheus: the Linkerd queries, run by a real Prometheus over series of
// that shape (the scrape adds the caller's service and namespace, as for the proxy), give 3
// tries on web -> payment (30 attempts for 10 calls) and 1 on web -> bank.billing; the egress
// route is not an edge.
func TestLinkerdAgainstPrometheus(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: &linkerdProxy{}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: ln.Addr().String(), Labels: map[string]string{"service": "web", "namespace": "shop"}}})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "ten scrapes of the Linkerd proxy", func() (bool, string) {
		v, err := instant(c, `count_over_time(outbound_http_route_retry_requests_total{parent_name="payment"}[1m])`)
		return err == nil && v >= 10, fmt.Sprint(v, err)
	})
	series, err := c.Series(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range series {
		got = append(got, fmt.Sprintf("%s %s/%s>%s tries %s", s.Source, s.Namespace, s.Caller, s.Upstream, observed.Format(s.Attempts/s.Calls)))
	}
	sort.Strings(got) // the order of a vector's samples is Prometheus'
	want := []string{"linkerd shop/web>bank.billing tries 1.00", "linkerd shop/web>payment tries 3.00"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("series:\n got %q\nwant %q", got, want)
	}
	r := observed.Compute([]graph.Edge{{From: "web", To: "payment", Attempts: 2, Calls: 1}}, series, observed.InNamespace("shop"))
	wantCond := "edge web>payment: 3.00 tries per call observed over 1m0s (linkerd), the graph computes 2: a retry layer the graph does not know (application code, a mesh it does not read, or a proxy configured by hand)"
	if got := observed.Condition(r, c.Window(), 1).Message; got != wantCond {
		t.Fatalf("condition:\n got %s\nwant %s", got, wantCond)
	}
}
