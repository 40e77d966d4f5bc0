package promquery

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/telemetry"
)

// TestDuplicateRefusedOnBothPaths: a series twice in an answer, with two values or one, is
// refused by Series (the observed amplification's queries) and by Graph (telemetry's), each
// naming the query, the series and both values, checked once where the answer is decoded
// (Graph hands telemetry.Read the answers as checked).
func TestDuplicateRefusedOnBothPaths(t *testing.T) {
	const window = 10 * time.Minute
	// The same series on both paths, by two queries: the graph's counts a series born inside
	// the window from zero (telemetry.Calls), the observed amplification's is increase()'s.
	proxyQ, graphProxyQ := Queries(window, "service")[1], telemetry.Queries(window, "service")[6].PromQL
	if !strings.Contains(proxyQ, "retrycap_proxy_requests_total") || !strings.Contains(graphProxyQ, "increase(retrycap_proxy_requests_total[10m])") {
		t.Fatalf("the paths' queries drifted: %s, %s", proxyQ, graphProxyQ)
	}
	istioQ := telemetry.Queries(window, "service")[0].PromQL
	const order = `{"namespace":"shop","service":"order","upstream":"payment"}`
	const istioWeb = `{"reporter":"source","source_workload":"web","source_workload_namespace":"shop","destination_service_name":"payment","destination_service_namespace":"shop"}`
	const orderLabels = `{namespace="shop", service="order", upstream="payment"}`
	const istioLabels = `{destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"}`
	for _, tc := range []struct {
		name        string
		qs          []string // the queries answered with answer
		answer      string
		series      string // Series' error; "" when its queries do not include q
		graph       string
		seriesLabel string
	}{
		{name: "retrycap-proxy's calls twice with two values", qs: []string{proxyQ, graphProxyQ}, answer: vector([2]string{order, "10"}, [2]string{order, "12"}),
			series: proxyQ, graph: graphProxyQ, seriesLabel: orderLabels + ": in the answer twice, with values 10 and 12"},
		{name: "retrycap-proxy's calls twice with one value", qs: []string{proxyQ, graphProxyQ}, answer: vector([2]string{order, "10"}, [2]string{order, "10"}),
			series: proxyQ, graph: graphProxyQ, seriesLabel: orderLabels + ": in the answer twice, with values 10 and 10"},
		{name: "Istio's requests twice (the graph's queries only)", qs: []string{istioQ}, answer: vector([2]string{istioWeb, "7"}, [2]string{istioWeb, "7.5"}),
			graph: istioQ, seriesLabel: istioLabels + ": in the answer twice, with values 7 and 7.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
				r.ParseForm()
				w.Header().Set("Content-Type", "application/json")
				if slices.Contains(tc.qs, r.Form.Get("query")) {
					w.Write([]byte(tc.answer))
					return
				}
				w.Write([]byte(vector()))
			}, Options{Window: window})
			msg := func(q string) string {
				return "query " + q + ": series " + tc.seriesLabel + " (an aggregation gives each label set once)"
			}
			s, err := c.Series(context.Background(), time.Now())
			if tc.series == "" {
				if err != nil {
					t.Fatalf("Series: %v", err)
				}
			} else if err == nil || err.Error() != msg(tc.series) || s != nil {
				t.Errorf("Series: %v, %v\nwant %s", s, err, msg(tc.series))
			}
			ob, err := c.Graph(context.Background(), time.Now(), nil)
			if err == nil || err.Error() != msg(tc.graph) || ob != nil {
				t.Errorf("Graph: %v, %v\nwant %s", ob, err, msg(tc.graph))
			}
		})
	}
}
