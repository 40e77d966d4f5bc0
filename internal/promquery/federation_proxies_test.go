package promquery

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/observed"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// proxyAndEnvoySeries serves retrycap-proxy's and Envoy's counters with the given labels: per
// scrape 10 requests and 30 attempts (the proxy), 30 upstream requests of which 20 retries
// (Envoy): 3 tries per call on both.
type proxyAndEnvoySeries struct {
	labels string
	mu     sync.Mutex
	n      int
}

func (p *proxyAndEnvoySeries) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE retrycap_proxy_requests_total counter\nretrycap_proxy_requests_total{upstream=\"payment\",%s} %d\n", p.labels, 10*n)
	fmt.Fprintf(w, "# TYPE retrycap_proxy_attempts_total counter\nretrycap_proxy_attempts_total{upstream=\"payment\",%s} %d\n", p.labels, 30*n)
	cl := `envoy_cluster_name="outbound|80||payment.shop.svc.cluster.local"`
	fmt.Fprintf(w, "# TYPE envoy_cluster_upstream_rq_total counter\nenvoy_cluster_upstream_rq_total{%s,%s} %d\n", cl, p.labels, 30*n)
	fmt.Fprintf(w, "# TYPE envoy_cluster_upstream_rq_retry counter\nenvoy_cluster_upstream_rq_retry{%s,%s} %d\n", cl, p.labels, 20*n)
}

// TestObservedProxyAndEnvoyFederationWithoutHonorLabelsAgainstPrometheus: the manager's
// retrycap-proxy and Envoy queries over series federated from another Prometheus by a job
// without honor_labels: true (Prometheus' default): the series' own namespace ("shop") is renamed
// exported_namespace and namespace is the federation target's ("monitoring"). Before, only the
// Linkerd queries grouped by exported_namespace: these summed it away and the join read web's
// edges in monitoring (a RetryPolicy there saw web>payment at 3.00 tries from both sources, and
// shop's saw nothing, silently). Now neither is an edge anywhere: shop's policy says 2 series were
// not placed, naming the label; monitoring's sees no edge.
func TestObservedProxyAndEnvoyFederationWithoutHonorLabelsAgainstPrometheus(t *testing.T) {
	federated := httptest.NewServer(&proxyAndEnvoySeries{labels: `namespace="shop",service="web"`})
	t.Cleanup(federated.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: strings.TrimPrefix(federated.URL, "http://"), Labels: map[string]string{"namespace": "monitoring"}},
	})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes, stored under exported_namespace", func() (bool, string) {
		a, err1 := instant(c, `count_over_time(retrycap_proxy_attempts_total{namespace="monitoring",exported_namespace="shop",service="web"}[1m])`)
		b, err2 := instant(c, `count_over_time(envoy_cluster_upstream_rq_retry{namespace="monitoring",exported_namespace="shop",service="web"}[1m])`)
		return err1 == nil && err2 == nil && a >= 5 && b >= 5, fmt.Sprint(a, b, err1, err2)
	})
	series, err := c.Series(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range series {
		got = append(got, fmt.Sprintf("%s %s/%s>%s target %q", s.Source, s.Namespace, s.Caller, s.Upstream, s.TargetNamespace))
	}
	want := []string{`retrycap-proxy shop/web>payment target "monitoring"`, `envoy shop/web>payment target "monitoring"`}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("series:\n got %q\nwant %q", got, want)
	}
	edges := []graph.Edge{{From: "web", To: "payment", Attempts: 3, Calls: 1}}
	shop := observed.Condition(observed.Compute(edges, series, observed.InNamespace("shop")), c.Window(), 1)
	wantShop := `no edge of the policy had calls over 1m0s: nothing compared (no traffic in the window, or no counter of the proxies, Envoy or Linkerd with the caller label: docs/observe.md); ` +
		`2 series whose own namespace label the scrape renamed exported_namespace (a federation or scrape without honor_labels: true) not placed on the graph ` +
		`(their namespace label is the scrape target's, not the caller's), e.g. retrycap-proxy series exported_namespace "shop" namespace "monitoring" caller "web" upstream "payment"`
	if shop.Message != wantShop {
		t.Fatalf("shop's condition:\n got %s\nwant %s", shop.Message, wantShop)
	}
	mon := observed.Condition(observed.Compute(edges, series, observed.InNamespace("monitoring")), c.Window(), 1)
	if mon.Reason != "NoObservedEdges" {
		t.Fatalf("monitoring's condition: %s %s", mon.Reason, mon.Message)
	}
	// The graph's queries (discover, the manager's GraphComplete) over the same series: before,
	// an edge monitoring/web -> monitoring/payment; now an unplaced series calling shop/payment.
	ob, err := c.Graph(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "retrycap: the scrape renamed the series' own namespace label exported_namespace (a federation or scrape without honor_labels: true): its namespace is the scrape target's, not the caller's: not an edge"
	wantWarn := reason + `: 1 series (e.g. {exported_namespace="shop", namespace="monitoring", service="web", upstream="payment"})`
	if len(ob.Edges) != 0 || fmt.Sprint(ob.Warnings) != fmt.Sprint([]string{wantWarn}) {
		t.Fatalf("graph: edges %+v, warnings:\n got %q\nwant %q", ob.Edges, ob.Warnings, []string{wantWarn})
	}
	if len(ob.Unplaced) != 1 || ob.Unplaced[0].Reason != reason || ob.Unplaced[0].To != (telemetry.Callee{Namespace: "shop", Name: "payment"}) || ob.Unplaced[0].Series != 1 {
		t.Fatalf("unplaced: %+v", ob.Unplaced)
	}
}
