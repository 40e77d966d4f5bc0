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

// istioRecorded serves what Istio's "Observability best practices" federation gives a
// production Prometheus: the local Prometheus records workload:istio_requests_total (sum
// without(instance, kubernetes_namespace, kubernetes_pod_name) (istio_requests_total)) and
// workload:istio_tcp_connections_opened_total, and only workload:.* is federated. raw adds the
// local Prometheus' own istio_requests_total beside its recorded copy (the same edge, the same
// count): a Prometheus that holds both. Per scrape: web -> payment 10 more requests (source
// reporter), web -> cart 5 (recorded only), web -> db 2 TCP connections (recorded only).
type istioRecorded struct {
	raw bool
	mu  sync.Mutex
	n   int
}

func (h *istioRecorded) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	edge := func(dst string) string {
		return fmt.Sprintf(`reporter="source",source_workload="web",source_workload_namespace="shop",destination_service_name=%q,destination_service_namespace="shop",destination_workload=%q,response_code="200"`, dst, dst+"-v1")
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE workload:istio_requests_total counter\n")
	fmt.Fprintf(w, "workload:istio_requests_total{%s} %d\n", edge("payment"), 10*n)
	fmt.Fprintf(w, "workload:istio_requests_total{%s} %d\n", edge("cart"), 5*n)
	fmt.Fprint(w, "# TYPE workload:istio_tcp_connections_opened_total counter\n")
	fmt.Fprintf(w, "workload:istio_tcp_connections_opened_total{%s} %d\n", edge("db"), 2*n)
	if h.raw {
		fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
		fmt.Fprintf(w, "istio_requests_total{%s} %d\n", edge("payment"), 10*n)
	}
}

// TestIstioRecordedSeriesAgainstPrometheus: a Prometheus that holds Istio's series only as
// the workload: recording rules Istio's best practices federate. Before, discover and the
// status saw no Istio series at all ("nothing found"). Now the Istio queries read
// istio_requests_total, or for an edge it does not hold the recorded series: with both (the
// local Prometheus) an edge is counted once, from the raw series, exactly its increase.
func TestIstioRecordedSeriesAgainstPrometheus(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) {
			exp := httptest.NewServer(&istioRecorded{raw: raw})
			t.Cleanup(exp.Close)
			prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
			c, err := New(Options{URL: prom.URL, Window: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "five scrapes", func() (bool, string) {
				v, err := instant(c, `count_over_time(workload:istio_requests_total{destination_service_name="cart"}[1m])`)
				return err == nil && v >= 5, fmt.Sprint(v, err)
			})
			now := time.Now()
			ob, err := c.Graph(context.Background(), now, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range append(append([]telemetry.Edge(nil), ob.Edges...), ob.NonHTTP...) {
				got = append(got, fmt.Sprintf("%s %s -> %s %q", e.Source, e.From, e.To, e.Why))
			}
			want := []string{
				`istio shop/web -> shop/cart ""`,
				`istio shop/web -> shop/payment ""`,
				`istio shop/web -> shop/db "TCP only (istio_tcp_connections_opened_total, no istio_requests_total): no HTTP retry applies"`,
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("edges:\n got %q\nwant %q", got, want)
			}
			// Each edge is its one series' increase at the same instant, never the sum of the
			// raw and the recorded series.
			metric := "workload:istio_requests_total"
			if raw {
				metric = "istio_requests_total"
			}
			for i, q := range []string{
				`sum(increase(workload:istio_requests_total{destination_service_name="cart"}[1m]))`,
				fmt.Sprintf(`sum(increase(%s{destination_service_name="payment"}[1m]))`, metric),
			} {
				v, err := c.query(context.Background(), q, now)
				if err != nil || len(v) != 1 {
					t.Fatalf("%s: %v %v", q, v, err)
				}
				if ob.Edges[i].Requests != float64(v[0].Value) {
					t.Errorf("%s: %v requests, want %v (%s)", ob.Edges[i].To, ob.Edges[i].Requests, v[0].Value, q)
				}
			}
		})
	}
}
