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

	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// linkerdSeries serves Linkerd's response_total{direction="outbound"} with the given labels,
// 10 more calls per scrape: withNamespace, the series carries its own namespace label, as
// linkerd-viz's Prometheus answers /federate (its scrape added namespace from the pod's); else
// the scrape that reads it adds it, as linkerd-viz's own scrape of a proxy does.
type linkerdSeries struct {
	labels string
	mu     sync.Mutex
	n      int
}

func (l *linkerdSeries) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	l.n++
	n := l.n
	l.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE response_total counter\nresponse_total{direction=\"outbound\",%s} %d\n", l.labels, 10*n)
}

// TestFederationWithoutHonorLabelsAgainstPrometheus: Linkerd's documented way to get its
// metrics into a cluster's Prometheus is to federate linkerd-viz's, whose series carry the
// caller's namespace label already. A federation job without honor_labels: true (Prometheus'
// default is false) keeps the target's own namespace ("linkerd-viz", where the federated
// Prometheus runs) as namespace and renames the series' own to exported_namespace. Before,
// the edge read was linkerd-viz/web -> shop/payment: a caller in a namespace it is not in,
// silently (the policy of shop saw no traffic from web; discover proposed a patch of a
// Deployment linkerd-viz/web). Now such a series is no edge: a warning naming the label and the
// fix, and an Unplaced (its calls are on an edge nobody can name). A proxy scraped directly in
// the same Prometheus (its namespace the scrape's) is read as before.
func TestFederationWithoutHonorLabelsAgainstPrometheus(t *testing.T) {
	federated := httptest.NewServer(&linkerdSeries{labels: `namespace="shop",deployment="web",dst_namespace="shop",dst_service="payment"`})
	t.Cleanup(federated.Close)
	direct := httptest.NewServer(&linkerdSeries{labels: `deployment="cart",dst_namespace="shop",dst_service="stock"`})
	t.Cleanup(direct.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: strings.TrimPrefix(federated.URL, "http://"), Labels: map[string]string{"namespace": "linkerd-viz"}},
		{Addr: strings.TrimPrefix(direct.URL, "http://"), Labels: map[string]string{"namespace": "shop"}},
	})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// The rename is Prometheus' own: checked on the stored series.
	eventually(t, 30*time.Second, "the federated series stored under exported_namespace", func() (bool, string) {
		v, err := instant(c, `count_over_time(response_total{namespace="linkerd-viz",exported_namespace="shop",deployment="web"}[1m])`)
		return err == nil && v >= 3, fmt.Sprint(v, err)
	})
	var ob *telemetry.Observation
	eventually(t, 30*time.Second, "both series increased", func() (bool, string) {
		ob, err = c.Graph(context.Background(), time.Now(), nil)
		return err == nil && len(ob.Edges)+len(ob.Unplaced) == 2, fmt.Sprintf("%+v %v", ob, err)
	})
	var edges []string
	for _, e := range ob.Edges {
		edges = append(edges, fmt.Sprintf("%s %s -> %s", e.Source, e.From, e.To))
	}
	if want := []string{"linkerd shop/cart -> shop/stock"}; fmt.Sprint(edges) != fmt.Sprint(want) {
		t.Fatalf("edges:\n got %q\nwant %q", edges, want)
	}
	const reason = "linkerd response_total: the scrape renamed the series' own namespace label exported_namespace (a federation or scrape without honor_labels: true): its namespace is the scrape target's, not the caller's: not an edge"
	wantWarn := reason + `: 1 series (e.g. {deployment="web", dst_namespace="shop", dst_service="payment", exported_namespace="shop", namespace="linkerd-viz"})`
	if fmt.Sprint(ob.Warnings) != fmt.Sprint([]string{wantWarn}) {
		t.Fatalf("warnings:\n got %q\nwant %q", ob.Warnings, []string{wantWarn})
	}
	if len(ob.Unplaced) != 1 || ob.Unplaced[0].Reason != reason || ob.Unplaced[0].To != (telemetry.Callee{Namespace: "shop", Name: "payment"}) || ob.Unplaced[0].Series != 1 {
		t.Fatalf("unplaced: %+v", ob.Unplaced)
	}
}
