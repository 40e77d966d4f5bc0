package controller

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery"
)

// TestPollRefusesADuplicate: the manager's poll, through the promquery client it runs, refuses
// an answer that gives a series twice: the observed amplification's error and the graph's name
// the query, the series and both values, no series or graph of that poll is kept, and the last
// good graph stays for the status to keep for one window.
func TestPollRefusesADuplicate(t *testing.T) {
	const series = `{"metric":{"namespace":"shop","service":"order","upstream":"payment"},"value":[1796213250,"%s"]}`
	var twice atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		result := ""
		switch q := r.Form.Get("query"); {
		case strings.Contains(q, "retrycap_proxy_requests_total["):
			result = fmt.Sprintf(series, "10")
			if twice.Load() {
				result += "," + fmt.Sprintf(series, "12")
			}
		case strings.Contains(q, "retrycap_proxy_attempts_total["):
			result = fmt.Sprintf(series, "30")
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, result)
	}))
	defer srv.Close()
	q, err := promquery.New(promquery.Options{URL: srv.URL, Window: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	o := &Observer{Query: q}
	o.Poll(context.Background())
	good := o.Latest()
	if good.Err != nil || good.GraphErr != nil || len(good.Series) != 1 || good.Graph == nil || len(good.Graph.Edges) != 1 {
		t.Fatalf("the good poll: %+v", good)
	}

	twice.Store(true)
	o.Poll(context.Background())
	got := o.Latest()
	want := `query sum by (namespace, service, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_requests_total[10m]) unless last_over_time(retrycap_proxy_requests_total[10m] offset 10m) unless resets(retrycap_proxy_requests_total[10m]) > 0) and on (job, instance) ((up offset 10m == 1) or ((last_over_time(up[10m]) unless last_over_time(up[10m] offset 10m)) and on (job) group by (job) (up offset 10m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[10m])) >= time() - 600))) or (((last_over_time(retrycap_proxy_requests_total[10m]) unless last_over_time(retrycap_proxy_requests_total[10m] offset 10m) unless resets(retrycap_proxy_requests_total[10m]) > 0) unless on (job, instance) last_over_time(up[10m])) and on () group(retrycap_proxy_requests_total offset 10m)) or increase(retrycap_proxy_requests_total[10m])): series {namespace="shop", service="order", upstream="payment"}: in the answer twice, with values 10 and 12 (an aggregation gives each label set once)`
	if got.Err == nil || got.Err.Error() != want || got.Series != nil {
		t.Errorf("the observed amplification's query: %v, %v\nwant %s", got.Series, got.Err, want)
	}
	// The graph's query counts a series born inside the window from zero (telemetry.Calls).
	wantGraph := `query sum by (namespace, service, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_requests_total[10m]) unless last_over_time(retrycap_proxy_requests_total[10m] offset 10m) unless resets(retrycap_proxy_requests_total[10m]) > 0) and on (job, instance) ((up offset 10m == 1) or ((last_over_time(up[10m]) unless last_over_time(up[10m] offset 10m)) and on (job) group by (job) (up offset 10m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[10m])) >= time() - 600))) or (((last_over_time(retrycap_proxy_requests_total[10m]) unless last_over_time(retrycap_proxy_requests_total[10m] offset 10m) unless resets(retrycap_proxy_requests_total[10m]) > 0) unless on (job, instance) last_over_time(up[10m])) and on () group(retrycap_proxy_requests_total offset 10m)) or increase(retrycap_proxy_requests_total[10m])): series {namespace="shop", service="order", upstream="payment"}: in the answer twice, with values 10 and 12 (an aggregation gives each label set once)`
	if got.GraphErr == nil || got.GraphErr.Error() != wantGraph || got.Graph != nil {
		t.Errorf("the graph's query: %v, %v\nwant %s", got.Graph, got.GraphErr, wantGraph)
	}
	if got.LastGraph != good.Graph || !got.LastGraphAt.Equal(good.GraphAt) {
		t.Errorf("the last good graph not kept: %v at %v", got.LastGraph, got.LastGraphAt)
	}
}
