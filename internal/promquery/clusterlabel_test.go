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
)

// clusterProxy serves one cluster's retrycap-proxy counters for web -> payment: 10 requests per
// scrape and attempts attempts; the scrape adds namespace, service and the cluster label (the
// external label each cluster's Prometheus adds, as a Thanos or a federation over several
// clusters answers it).
type clusterProxy struct {
	attempts int
	mu       sync.Mutex
	n        int
}

func (p *clusterProxy) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE retrycap_proxy_requests_total counter\nretrycap_proxy_requests_total{upstream=\"payment\"} %d\n", 10*n)
	fmt.Fprintf(w, "# TYPE retrycap_proxy_attempts_total counter\nretrycap_proxy_attempts_total{upstream=\"payment\"} %d\n", p.attempts*n)
}

// TestClusterLabelAgainstPrometheus: one Prometheus holding two clusters' proxy series, told
// apart by the external label cluster only (shop/web in east makes 3 attempts per call, in west
// 1). Before, both the graph and the observed amplification summed them: one edge
// shop/web -> shop/payment with both clusters' calls, and 2.00 tries per call that neither
// cluster has, silently. Now both reads are refused naming the label and the values, and with a
// cluster chosen its series alone are read (the other's said in a warning).
func TestClusterLabelAgainstPrometheus(t *testing.T) {
	east := httptest.NewServer(&clusterProxy{attempts: 30})
	t.Cleanup(east.Close)
	west := httptest.NewServer(&clusterProxy{attempts: 10})
	t.Cleanup(west.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: strings.TrimPrefix(east.URL, "http://"), Labels: map[string]string{"namespace": "shop", "service": "web", "cluster": "east"}},
		{Addr: strings.TrimPrefix(west.URL, "http://"), Labels: map[string]string{"namespace": "shop", "service": "web", "cluster": "west"}},
	})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes of each cluster", func() (bool, string) {
		v, err := instant(c, `min(count_over_time(retrycap_proxy_attempts_total[1m]))`)
		return err == nil && v >= 5, fmt.Sprint(v, err)
	})
	now := time.Now()
	const refused = `the answers hold the series of 2 clusters (label cluster: "east", "west"): a workload of one namespace and name in each would be read as one caller, their calls added; ` +
		`pick the cluster with --cluster (discover) or --prometheus-cluster (the manager), or, if cluster names no cluster (a pod's label), name the label that does with --prometheus-cluster-label`
	if ob, err := c.Graph(context.Background(), now, nil); err == nil || err.Error() != refused {
		t.Fatalf("Graph: %+v, %v\nwant %s", ob, err, refused)
	}
	if s, err := c.Series(context.Background(), now); err == nil || err.Error() != refused {
		t.Fatalf("Series: %+v, %v\nwant %s", s, err, refused)
	}

	east1, err := New(Options{URL: prom.URL, Window: time.Minute, Cluster: "east"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.query(context.Background(), `increase(retrycap_proxy_requests_total{cluster="east"}[1m])`, now)
	if err != nil || len(v) != 1 {
		t.Fatalf("east's increase: %v %v", v, err)
	}
	ob, err := east1.Graph(context.Background(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ob.Edges) != 1 || ob.Edges[0].From.String() != "shop/web" || ob.Edges[0].To.String() != "shop/payment" || ob.Edges[0].Requests != float64(v[0].Value) ||
		fmt.Sprintf("%.2f", ob.Edges[0].Tries) != "3.00" {
		t.Fatalf("east's edges: %+v, want shop/web -> shop/payment with %v requests, 3.00 tries", ob.Edges, v[0].Value)
	}
	wantWarn := `a series of another cluster than "east" (--cluster, --prometheus-cluster): not read: 2 series (e.g. {cluster="west", namespace="shop", service="web", upstream="payment"})`
	if fmt.Sprint(ob.Warnings) != fmt.Sprint([]string{wantWarn}) {
		t.Fatalf("warnings:\n got %q\nwant %q", ob.Warnings, []string{wantWarn})
	}
	series, err := east1.Series(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || series[0].Caller != "web" || series[0].Upstream != "payment" || fmt.Sprintf("%.2f", series[0].Attempts/series[0].Calls) != "3.00" {
		t.Fatalf("east's series: %+v, want web>payment at 3.00 tries", series)
	}
	// A cluster no series names is refused, naming those there are.
	none, err := New(Options{URL: prom.URL, Window: time.Minute, Cluster: "north"})
	if err != nil {
		t.Fatal(err)
	}
	const noSuch = `cluster "north" (--cluster, --prometheus-cluster): no series of it; the answers hold those of "east", "west" (label cluster)`
	if _, err := none.Graph(context.Background(), now, nil); err == nil || err.Error() != noSuch {
		t.Fatalf("Graph of north: %v\nwant %s", err, noSuch)
	}
}
