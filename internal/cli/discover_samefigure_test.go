package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/promquery"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// TestDiscoverAndManagerSameFigureAgainstPrometheus: `retrycap discover --prometheus-url` as a
// user runs it and the manager's observed-amplification client (promquery.Series, what the
// ObservedAmplification condition is computed from) over the same series of a real Prometheus:
// web's proxy and Linkerd route counters, steady, then label sets born with their calls in one
// burst (report: 7 calls, 21 attempts; Linkerd's route to cart: 10 request statuses, 5
// retries). Per edge, discover's rate is the manager's calls over the window and its observed
// tries the manager's attempts over calls, exactly. Before, the manager read these counters by
// increase() alone: both edges were no calls at all for it, 7/6 and 10/6 a second for discover.
func TestDiscoverAndManagerSameFigureAgainstPrometheus(t *testing.T) {
	var flipped atomic.Bool
	addr := serve(t, &exporter{lines: func(int) string {
		s := "# TYPE retrycap_proxy_requests_total counter\nretrycap_proxy_requests_total{upstream=\"stock\"} 5\n"
		a := "# TYPE retrycap_proxy_attempts_total counter\nretrycap_proxy_attempts_total{upstream=\"stock\"} 5\n"
		route := `parent_group="core",parent_kind="Service",parent_namespace="shop",parent_port="8080",route_kind="default",route_name="http"`
		r := fmt.Sprintf("# TYPE outbound_http_route_request_statuses_total counter\noutbound_http_route_request_statuses_total{%s,parent_name=\"stock\",http_status=\"200\"} 3\n", route)
		rr := fmt.Sprintf("# TYPE outbound_http_route_retry_requests_total counter\noutbound_http_route_retry_requests_total{%s,parent_name=\"stock\"} 0\n", route)
		if flipped.Load() {
			s += "retrycap_proxy_requests_total{upstream=\"report\"} 7\n"
			a += "retrycap_proxy_attempts_total{upstream=\"report\"} 21\n"
			r += fmt.Sprintf("outbound_http_route_request_statuses_total{%s,parent_name=\"cart\",http_status=\"200\"} 10\n", route)
			rr += fmt.Sprintf("outbound_http_route_retry_requests_total{%s,parent_name=\"cart\"} 5\n", route)
		}
		return s + a + r + rr
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: addr, Labels: map[string]string{"namespace": "shop", "service": "web", "deployment": "web"}}})
	c, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(c)
	count := func(q string) float64 {
		v, _, _, err := papi.Query(context.Background(), q, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 {
			return float64(vec[0].Value)
		}
		return -1
	}
	poll := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60s", what)
			}
			time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
		}
	}
	// The window's start must find the target scraped: Prometheus older than --since 6s.
	poll("70 scrapes before the flip", func() bool {
		return count(`count_over_time(retrycap_proxy_requests_total{upstream="stock"}[1m])`) >= 70
	})
	flipped.Store(true)
	poll("the born series in Prometheus", func() bool {
		return count(`count_over_time(retrycap_proxy_attempts_total{upstream="report"}[1m])`) >= 1 && count(`count_over_time(outbound_http_route_retry_requests_total{parent_name="cart"}[1m])`) >= 1
	})

	code, stdout, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "6s", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res telemetry.Result
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	var discover []string
	for _, w := range res.Workloads {
		for _, p := range w.Discovered {
			discover = append(discover, fmt.Sprintf("%s/%s > %s %v/s tries %v", w.Namespace, w.Name, p.Upstream, p.RatePerSecond, p.ObservedTries))
		}
	}
	pc, err := promquery.New(promquery.Options{URL: prom.URL, Window: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	series, err := pc.Series(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var manager []string
	for _, s := range series {
		if s.Calls > 0 {
			manager = append(manager, fmt.Sprintf("%s/%s > %s %v/s tries %v", s.Namespace, s.Caller, s.Upstream, s.Calls/6, s.Attempts/s.Calls))
		}
	}
	sort.Strings(manager)
	want := []string{"shop/web > cart 1.6666666666666667/s tries 1.5", "shop/web > report 1.1666666666666667/s tries 3"}
	if fmt.Sprint(discover) != fmt.Sprint(want) || fmt.Sprint(manager) != fmt.Sprint(want) {
		t.Fatalf("discover and the manager:\ndiscover %q\n manager %q\n    want %q\n%s", discover, manager, want, strings.TrimSpace(stderr))
	}
}
