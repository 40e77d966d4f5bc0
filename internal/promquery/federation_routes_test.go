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
)

// linkerdRoutes serves Linkerd's route families with the given labels: per scrape 10 request
// statuses and 20 retries to the parent Service (3 tries per call).
type linkerdRoutes struct {
	labels string
	mu     sync.Mutex
	n      int
}

func (l *linkerdRoutes) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	l.n++
	n := l.n
	l.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE outbound_http_route_request_statuses_total counter\noutbound_http_route_request_statuses_total{parent_kind=\"Service\",http_status=\"200\",%s} %d\n", l.labels, 10*n)
	fmt.Fprintf(w, "# TYPE outbound_http_route_retry_requests_total counter\noutbound_http_route_retry_requests_total{parent_kind=\"Service\",%s} %d\n", l.labels, 20*n)
}

// TestObservedFederationWithoutHonorLabelsAgainstPrometheus: the manager's observed-amplification
// queries over Linkerd's route families, federated from linkerd-viz's Prometheus without
// honor_labels: true (the series' own namespace renamed exported_namespace, namespace the scrape
// target's, linkerd-viz). Before, the join read web's edge in linkerd-viz (a RetryPolicy there
// saw web>payment.shop at 3.00 tries; shop's saw nothing of it, silently). Now the series is no
// edge anywhere: shop's policy (the namespace it claims) says it was not placed, with the label
// and the fix; linkerd-viz's sees no edge. A proxy scraped directly in shop is read as before.
func TestObservedFederationWithoutHonorLabelsAgainstPrometheus(t *testing.T) {
	federated := httptest.NewServer(&linkerdRoutes{labels: `namespace="shop",service="web",parent_namespace="shop",parent_name="payment"`})
	t.Cleanup(federated.Close)
	direct := httptest.NewServer(&linkerdRoutes{labels: `parent_namespace="shop",parent_name="stock"`})
	t.Cleanup(direct.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: strings.TrimPrefix(federated.URL, "http://"), Labels: map[string]string{"namespace": "linkerd-viz"}},
		{Addr: strings.TrimPrefix(direct.URL, "http://"), Labels: map[string]string{"namespace": "shop", "service": "cart"}},
	})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes of each target, the federated one under exported_namespace", func() (bool, string) {
		a, err1 := instant(c, `count_over_time(outbound_http_route_retry_requests_total{namespace="linkerd-viz",exported_namespace="shop",service="web"}[1m])`)
		b, err2 := instant(c, `count_over_time(outbound_http_route_retry_requests_total{namespace="shop",service="cart"}[1m])`)
		return err1 == nil && err2 == nil && a >= 5 && b >= 5, fmt.Sprint(a, b, err1, err2)
	})
	series, err := c.Series(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	edges := []graph.Edge{{From: "web", To: "payment", Attempts: 3, Calls: 1}, {From: "cart", To: "stock", Attempts: 3, Calls: 1}}
	shop := observed.Condition(observed.Compute(edges, series, observed.InNamespace("shop")), c.Window(), 1)
	wantShop := `1 edges observed over 1m0s, none with more tries per call or calls per request than computed; observed amplification 3.00 along cart>stock; ` +
		`calls per inbound request not measured at cart (no counted layer sent them a request); ` +
		`1 series whose own namespace label the scrape renamed exported_namespace (a federation or scrape without honor_labels: true) not placed on the graph ` +
		`(their namespace label is the scrape target's, not the caller's), e.g. linkerd series exported_namespace "shop" namespace "linkerd-viz" caller "web" upstream "payment"`
	if shop.Message != wantShop {
		t.Fatalf("shop's condition:\n got %s\nwant %s", shop.Message, wantShop)
	}
	viz := observed.Condition(observed.Compute([]graph.Edge{{From: "web", To: "payment.shop", Attempts: 3, Calls: 1}}, series, observed.InNamespace("linkerd-viz")), c.Window(), 1)
	if viz.Reason != "NoObservedEdges" {
		t.Fatalf("linkerd-viz's condition: %s %s", viz.Reason, viz.Message)
	}
	cluster := observed.Condition(observed.Compute([]graph.Edge{{From: "cart.shop", To: "stock.shop", Attempts: 3, Calls: 1}}, series, observed.Qualified), c.Window(), 1)
	wantCluster := `1 edges observed over 1m0s, none with more tries per call or calls per request than computed; observed amplification 3.00 along cart.shop>stock.shop; ` +
		`calls per inbound request not measured at cart.shop (no counted layer sent them a request); ` +
		`1 series whose own namespace label the scrape renamed exported_namespace (a federation or scrape without honor_labels: true) not placed on the graph ` +
		`(their namespace label is the scrape target's, not the caller's), e.g. linkerd series exported_namespace "shop" namespace "linkerd-viz" caller "web" upstream "payment"`
	if cluster.Message != wantCluster {
		t.Fatalf("a ClusterRetryPolicy's condition:\n got %s\nwant %s", cluster.Message, wantCluster)
	}
}
