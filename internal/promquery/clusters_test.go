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

// twoClusters serves istio_requests_total as one Prometheus holding two clusters of a
// multi-primary mesh answers it: the same workload shop/web calling shop/payment in cluster
// east (10 calls per scrape) and in cluster west (30), each side reported by its own cluster's
// sidecars (Istio's source_cluster and destination_cluster labels); and a caller outside the
// mesh (source_cluster "unknown") calling shop/web.
type twoClusters struct {
	mu sync.Mutex
	n  int
}

func (c *twoClusters) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# TYPE istio_requests_total counter")
	for _, cl := range []struct {
		name  string
		calls int
	}{{"east", 10}, {"west", 30}} {
		for _, rep := range []string{"source", "destination"} {
			fmt.Fprintf(w, "istio_requests_total{reporter=%q,source_cluster=%q,destination_cluster=%q,source_workload=\"web\",source_workload_namespace=\"shop\",destination_service_name=\"payment\",destination_service_namespace=\"shop\"} %d\n",
				rep, cl.name, cl.name, cl.calls*n)
		}
	}
	fmt.Fprintf(w, "istio_requests_total{reporter=\"destination\",source_cluster=\"unknown\",destination_cluster=\"east\",source_workload=\"unknown\",source_workload_namespace=\"unknown\",destination_service_name=\"web\",destination_service_namespace=\"shop\"} %d\n", 5*n)
}

// TestIstioClustersAgainstPrometheus: one Prometheus holding two clusters' Istio series (a
// Thanos or a federation over a multi-primary mesh). Before, shop/web -> shop/payment was one
// edge of both clusters' calls added together (40 a scrape where each cluster's web made 10 or
// 30), silently. Now, unless a cluster is chosen, the read is refused naming the clusters and
// the flags; with one chosen, that cluster's calls are read and the other's are said.
func TestIstioClustersAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&twoClusters{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes", func() (bool, string) {
		v, err := instant(c, `min(count_over_time(istio_requests_total[1m]))`)
		return err == nil && v >= 5, fmt.Sprint(v, err)
	})
	now := time.Now()
	_, err = c.Graph(context.Background(), now, nil)
	const want = `istio: the answers hold the series of 2 clusters (label source_cluster: "east", "west"): a workload of one namespace and name in each would be read as one caller, their calls added; ` +
		`pick the cluster with --istio-cluster (discover) or --prometheus-istio-cluster (the manager)`
	if err == nil || err.Error() != want {
		t.Fatalf("Graph: %v\nwant the error %s", err, want)
	}

	east, err := New(Options{URL: prom.URL, Window: time.Minute, IstioCluster: "east"})
	if err != nil {
		t.Fatal(err)
	}
	ob, err := east.Graph(context.Background(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.query(context.Background(), `sum by (source_cluster) (increase(istio_requests_total{reporter="source"}[1m]))`, now)
	if err != nil || len(v) != 2 {
		t.Fatalf("%v %v", v, err)
	}
	byCluster := map[string]float64{}
	for _, s := range v {
		byCluster[string(s.Metric["source_cluster"])] = float64(s.Value)
	}
	if len(ob.Edges) != 1 || ob.Edges[0].From.String() != "shop/web" || ob.Edges[0].To.String() != "shop/payment" || ob.Edges[0].Requests != byCluster["east"] || ob.Edges[0].Tries != 1 {
		t.Fatalf("edges %+v, want shop/web -> shop/payment with east's %v requests (not west's %v added), 1 try", ob.Edges, byCluster["east"], byCluster["west"])
	}
	if len(ob.Entrypoints) != 1 || ob.Entrypoints[0].String() != "shop/web" || ob.Entrypoints[0].Via != "outside the mesh" {
		t.Fatalf("entrypoints %+v: want shop/web from outside the mesh (source_cluster unknown is of no cluster)", ob.Entrypoints)
	}
	wantWarn := []string{`istio: source_cluster is another cluster's than "east" (--istio-cluster, --prometheus-istio-cluster): not read: 2 series (e.g. ` +
		`{destination_service_name="payment", destination_service_namespace="shop", reporter="destination", source_cluster="west", source_workload="web", source_workload_namespace="shop"})`}
	if fmt.Sprint(ob.Warnings) != fmt.Sprint(wantWarn) {
		t.Fatalf("warnings:\n got %q\nwant %q", ob.Warnings, wantWarn)
	}
	typo, err := New(Options{URL: prom.URL, Window: time.Minute, IstioCluster: "eats"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = typo.Graph(context.Background(), now, nil)
	const wantTypo = `istio: cluster "eats" (--istio-cluster, --prometheus-istio-cluster): no series of it; the answers hold those of "east", "west" (label source_cluster)`
	if err == nil || err.Error() != wantTypo {
		t.Fatalf("Graph: %v\nwant the error %s", err, wantTypo)
	}
}
