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

// TestHAReplicasAgainstPrometheus: the same proxy's series scraped by two Prometheus replicas
// and stored side by side, told apart only by the replica label (the Prometheus Operator's
// prometheus_replica external label), as a querier without deduplication
// (Thanos without --query.replica-label, Mimir or VictoriaMetrics without HA deduplication)
// answers. The exporter here is scraped twice, once per "replica". Before, every sum by the
// edge's labels added both: each edge's calls counted twice. Now each series is read once per
// replica label set, the largest, with a warning naming the label.
func TestHAReplicasAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&istioRecorded{raw: true})
	t.Cleanup(exp.Close)
	srv := strings.TrimPrefix(exp.URL, "http://")
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: srv, Labels: map[string]string{"prometheus_replica": "prometheus-k8s-0"}},
		{Addr: srv, Labels: map[string]string{"prometheus_replica": "prometheus-k8s-1"}},
	})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes per replica", func() (bool, string) {
		v, err := c.query(context.Background(), `count_over_time(istio_requests_total[1m])`, time.Now())
		return err == nil && len(v) == 2 && v[0].Value >= 5 && v[1].Value >= 5, fmt.Sprint(v, err)
	})
	now := time.Now()
	ob, err := c.Graph(context.Background(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ob.Edges) != 2 || ob.Edges[1].To.Name != "payment" {
		t.Fatalf("edges %+v", ob.Edges)
	}
	v, err := c.query(context.Background(), `max(sum by (prometheus_replica) (increase(istio_requests_total{destination_service_name="payment"}[1m])))`, now)
	if err != nil || len(v) != 1 {
		t.Fatalf("%v %v", v, err)
	}
	if got := ob.Edges[1].Requests; got != float64(v[0].Value) {
		t.Errorf("web -> payment: %v requests, want %v (one replica's, not both)", got, v[0].Value)
	}
	want := `istio_requests_total: series given by more than one Prometheus replica (label prometheus_replica: a querier that does not deduplicate them): each read once, the largest`
	found := false
	for _, w := range ob.Warnings {
		found = found || strings.HasPrefix(w, want)
	}
	if !found {
		t.Errorf("warnings %q: none starts %q", ob.Warnings, want)
	}
}

// TestThanosReplicaLabelAgainstPrometheus: an HA pair whose replica label is Thanos' example
// name, replica (Thanos Query deduplicates by the labels its --query.replica-label names; here
// none does). By default replica is not a replica label (a labelmap of pod labels can give it
// to pods whose counts must be summed): the two replicas' calls are added, as before. Before,
// nothing could say otherwise; now --prometheus-replica-label replica reads each series once,
// the larger, and says so naming the label. A label the queries read an edge by is refused.
func TestThanosReplicaLabelAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&istioRecorded{raw: true})
	t.Cleanup(exp.Close)
	srv := strings.TrimPrefix(exp.URL, "http://")
	prom := promtest.StartTargets(t, "../..", []promtest.Target{
		{Addr: srv, Labels: map[string]string{"replica": "prometheus-0"}},
		{Addr: srv, Labels: map[string]string{"replica": "prometheus-1"}},
	})
	summed, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	once, err := New(Options{URL: prom.URL, Window: time.Minute, ReplicaLabels: []string{"replica"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes per replica", func() (bool, string) {
		v, err := summed.query(context.Background(), `count_over_time(istio_requests_total[1m])`, time.Now())
		return err == nil && len(v) == 2 && v[0].Value >= 5 && v[1].Value >= 5, fmt.Sprint(v, err)
	})
	now := time.Now()
	v, err := summed.query(context.Background(), `sum by (replica) (increase(istio_requests_total{destination_service_name="payment"}[1m]))`, now)
	if err != nil || len(v) != 2 {
		t.Fatalf("%v %v", v, err)
	}
	sum, most := float64(v[0].Value+v[1].Value), float64(max(v[0].Value, v[1].Value))
	for _, tc := range []struct {
		c    *Client
		want float64
		warn []string
	}{
		{summed, sum, nil},
		{once, most, []string{
			"istio_requests_total: series given by more than one Prometheus replica (label replica: a querier that does not deduplicate them): each read once, the largest: 2 series",
			"istio_tcp_connections_opened_total: series given by more than one Prometheus replica (label replica: a querier that does not deduplicate them): each read once, the largest: 1 series",
		}},
	} {
		ob, err := tc.c.Graph(context.Background(), now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(ob.Edges) != 2 || ob.Edges[1].To.Name != "payment" || ob.Edges[1].Requests != tc.want {
			t.Fatalf("replica labels %q: edges %+v, want web -> payment with %v requests (both replicas' %v, the larger %v)", tc.c.opts.ReplicaLabels, ob.Edges, tc.want, sum, most)
		}
		var warns []string
		for _, w := range ob.Warnings {
			if strings.Contains(w, "replica") {
				warns = append(warns, w[:strings.Index(w, " (e.g.")])
			}
		}
		if len(warns) != len(tc.warn) || fmt.Sprint(warns) != fmt.Sprint(tc.warn) {
			t.Fatalf("replica labels %q: warnings %q, want %q", tc.c.opts.ReplicaLabels, warns, tc.warn)
		}
	}
	for label, want := range map[string]string{
		"namespace":       `--prometheus-replica-label "namespace": a label the queries read an edge by (caller label "service"): two edges would be read as one's replicas`,
		"service":         `--prometheus-replica-label "service": a label the queries read an edge by (caller label "service"): two edges would be read as one's replicas`,
		"source_workload": `--prometheus-replica-label "source_workload": a label the queries read an edge by (caller label "service"): two edges would be read as one's replicas`,
		"replica-set":     `--prometheus-replica-label "replica-set": not a Prometheus label name`,
	} {
		if _, err := New(Options{URL: prom.URL, ReplicaLabels: []string{label}}); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", label, err, want)
		}
	}
}

// replicaExporter serves web -> payment's istio_requests_total (10 more per scrape) as a
// Mimir or Cortex without HA deduplication stores it: with the __replica__ label of the
// Prometheus that sent it (the HA tracker's default replica label, kept when the tracker is off).
type replicaExporter struct {
	replica string
	mu      sync.Mutex
	n       int
}

func (e *replicaExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	e.n++
	n := e.n
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE istio_requests_total counter\nistio_requests_total{reporter=\"source\",source_workload=\"web\",source_workload_namespace=\"shop\",destination_service_name=\"payment\",destination_service_namespace=\"shop\",__replica__=%q} %d\n", e.replica, 10*n)
}

// TestMimirReplicaLabelAgainstPrometheus: two HA Prometheus replicas' series told apart only by
// __replica__ (Mimir's and Cortex's HA tracker label; no pod label can be named so: a Kubernetes
// label name starts with a letter or digit). Before, only prometheus_replica was a replica label
// by default: web -> payment was read with both replicas' calls added. Now __replica__ is one
// too: each series read once, the largest, with a warning naming the label.
func TestMimirReplicaLabelAgainstPrometheus(t *testing.T) {
	a := httptest.NewServer(&replicaExporter{replica: "prometheus-a"})
	t.Cleanup(a.Close)
	b := httptest.NewServer(&replicaExporter{replica: "prometheus-b"})
	t.Cleanup(b.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(a.URL, "http://")}, {Addr: strings.TrimPrefix(b.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes per replica", func() (bool, string) {
		v, err := c.query(context.Background(), `count_over_time(istio_requests_total[1m])`, time.Now())
		return err == nil && len(v) == 2 && v[0].Value >= 5 && v[1].Value >= 5, fmt.Sprint(v, err)
	})
	now := time.Now()
	v, err := c.query(context.Background(), `max(increase(istio_requests_total[1m]))`, now)
	if err != nil || len(v) != 1 {
		t.Fatalf("%v %v", v, err)
	}
	ob, err := c.Graph(context.Background(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ob.Edges) != 1 || ob.Edges[0].To.Name != "payment" || ob.Edges[0].Requests != float64(v[0].Value) {
		t.Fatalf("edges %+v, want web -> payment with %v requests (one replica's, not both)", ob.Edges, v[0].Value)
	}
	want := `istio_requests_total: series given by more than one Prometheus replica (label __replica__: a querier that does not deduplicate them): each read once, the largest: 1 series (e.g. {__replica__="prometheus-`
	if len(ob.Warnings) != 1 || !strings.HasPrefix(ob.Warnings[0], want) {
		t.Fatalf("warnings %q, want one starting %q", ob.Warnings, want)
	}
}
