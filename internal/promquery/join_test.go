package promquery

import (
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/observed"
)

func sample(v float64, labels ...string) *model.Sample {
	m := model.Metric{}
	for i := 0; i < len(labels); i += 2 {
		m[model.LabelName(labels[i])] = model.LabelValue(labels[i+1])
	}
	return &model.Sample{Metric: m, Value: model.SampleValue(v)}
}

func TestJoin(t *testing.T) {
	attempts := model.Vector{
		sample(30, "namespace", "shop", "service", "order", "upstream", "payment"),
		sample(5, "namespace", "shop", "upstream", "payment"), // no caller label: kept unnamed, counted unplaced by observed
		sample(4, "service", "lab", "upstream", "x"),
	}
	calls := model.Vector{
		sample(10, "namespace", "shop", "service", "order", "upstream", "payment"),
		sample(2, "service", "lab", "upstream", "x"),
	}
	total := model.Vector{
		sample(60, "namespace", "shop", "service", "cart", "envoy_cluster_name", "outbound|8080||payment.shop.svc.cluster.local"),
		sample(9, "namespace", "shop", "service", "cart", "envoy_cluster_name", "outbound|8080||bank.billing.svc.cluster.local"),
		sample(7, "namespace", "shop", "service", "cart", "envoy_cluster_name", "outbound|443||api.example.com"),
	}
	retry := model.Vector{
		sample(20, "namespace", "shop", "service", "cart", "envoy_cluster_name", "outbound|8080||payment.shop.svc.cluster.local"),
	}
	// Linkerd, as the queries return it: summed by the caller and the route's parent Service.
	lreq := model.Vector{
		sample(40, "namespace", "shop", "service", "web", "parent_namespace", "shop", "parent_name", "payment"),
		sample(8, "namespace", "shop", "service", "web", "parent_namespace", "billing", "parent_name", "bank"),
		sample(3, "namespace", "shop", "service", "web", "parent_namespace", "", "parent_name", ""), // a default parent
		sample(5, "namespace", "shop", "parent_namespace", "shop", "parent_name", "payment"),        // no caller label
	}
	lretry := model.Vector{
		sample(80, "namespace", "shop", "service", "web", "parent_namespace", "shop", "parent_name", "payment"),
	}
	got := Join(Vectors{Attempts: attempts, Calls: calls, EnvoyTotal: total, EnvoyRetry: retry, LinkerdRequests: lreq, LinkerdRetries: lretry}, "service")
	want := []observed.Series{
		{Source: "retrycap-proxy", Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 30, Calls: 10},
		{Source: "retrycap-proxy", Namespace: "shop", Upstream: "payment", Attempts: 5},
		{Source: "retrycap-proxy", Caller: "lab", Upstream: "x", Attempts: 4, Calls: 2},
		{Source: "envoy", Namespace: "shop", Caller: "cart", Upstream: "payment", Attempts: 60, Calls: 40},
		{Source: "envoy", Namespace: "shop", Caller: "cart", Upstream: "bank.billing", Attempts: 9, Calls: 9},
		{Source: "linkerd", Namespace: "shop", Caller: "web", Upstream: "payment", Attempts: 120, Calls: 40},
		{Source: "linkerd", Namespace: "shop", Caller: "web", Upstream: "bank.billing", Attempts: 8, Calls: 8},
		{Source: "linkerd", Namespace: "shop", Upstream: "payment", Attempts: 5, Calls: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Join:\n got %+v\nwant %+v", got, want)
	}
}

func TestEnvoyUpstream(t *testing.T) {
	for _, tc := range []struct {
		cluster, ns, want string
		ok                bool
	}{
		{"outbound|8080||payment.shop.svc.cluster.local", "shop", "payment", true},
		{"outbound|8080|v2|payment.shop.svc.cluster.local", "web", "payment.shop", true},
		{"outbound|80||reviews.bookinfo.svc", "bookinfo", "reviews", true},
		{"inbound|8080||", "shop", "", false},
		{"PassthroughCluster", "shop", "", false},
		{"outbound|443||api.example.com", "shop", "", false},
		{"outbound|80||a.b.c.svc.cluster.local", "shop", "", false},
		{"outbound|8080||payment.shop.svc.corp.example", "shop", "payment", true},
		{"outbound|8080||payment.shop.svc.corp.example", "web", "payment.shop", true},
		{"outbound|8080||payment.shop.svc.", "shop", "", false},
		{"outbound|8080||.shop.svc.cluster.local", "shop", "", false},
	} {
		got, ok := EnvoyUpstream(tc.cluster, tc.ns)
		if got != tc.want || ok != tc.ok {
			t.Errorf("EnvoyUpstream(%q, %q) = %q, %v; want %q, %v", tc.cluster, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLinkerdUpstream(t *testing.T) {
	for _, tc := range []struct {
		name, parentNS, ns, want string
		ok                       bool
	}{
		{"payment", "shop", "shop", "payment", true},
		{"payment", "billing", "shop", "payment.billing", true},
		{"payment", "billing", "", "payment.billing", true},
		{"", "shop", "shop", "", false},
		{"payment", "", "shop", "", false},
	} {
		got, ok := LinkerdUpstream(tc.name, tc.parentNS, tc.ns)
		if got != tc.want || ok != tc.ok {
			t.Errorf("LinkerdUpstream(%q, %q, %q) = %q, %v; want %q, %v", tc.name, tc.parentNS, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}

func TestQueries(t *testing.T) {
	got := Queries(5*time.Minute, "app")
	want := []string{
		"sum by (namespace, app, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_attempts_total[5m]) unless last_over_time(retrycap_proxy_attempts_total[5m] offset 5m) unless resets(retrycap_proxy_attempts_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(retrycap_proxy_attempts_total[5m]) unless last_over_time(retrycap_proxy_attempts_total[5m] offset 5m) unless resets(retrycap_proxy_attempts_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(retrycap_proxy_attempts_total offset 5m)) or increase(retrycap_proxy_attempts_total[5m]))",
		"sum by (namespace, app, exported_namespace, upstream, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(retrycap_proxy_requests_total[5m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 5m) unless resets(retrycap_proxy_requests_total[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(retrycap_proxy_requests_total[5m]) unless last_over_time(retrycap_proxy_requests_total[5m] offset 5m) unless resets(retrycap_proxy_requests_total[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(retrycap_proxy_requests_total offset 5m)) or increase(retrycap_proxy_requests_total[5m]))",
		`sum by (namespace, app, exported_namespace, envoy_cluster_name, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m]) unless last_over_time(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m] offset 5m) unless resets(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m]) unless last_over_time(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m] offset 5m) unless resets(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"} offset 5m)) or increase(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m]))`,
		`sum by (namespace, app, exported_namespace, envoy_cluster_name, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m]) unless last_over_time(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m] offset 5m) unless resets(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m]) unless last_over_time(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m] offset 5m) unless resets(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"} offset 5m)) or increase(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m]))`,
		`sum by (namespace, app, exported_namespace, parent_namespace, parent_name, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m]) unless last_over_time({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m] offset 5m) unless resets({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m]) unless last_over_time({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m] offset 5m) unless resets({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"} offset 5m)) or increase({__name__=~"outbound_(http|grpc)_route_request_statuses_total",parent_kind="Service"}[5m]))`,
		`sum by (namespace, app, exported_namespace, parent_namespace, parent_name, prometheus_replica, __replica__, cluster, exported_cluster) (((last_over_time({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m]) unless last_over_time({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m] offset 5m) unless resets({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m]) > 0) and on (job, instance) ((up offset 5m == 1) or ((last_over_time(up[5m]) unless last_over_time(up[5m] offset 5m)) and on (job) group by (job) (up offset 5m == 1)) or (min by (job, instance) (min_over_time(process_start_time_seconds[5m])) >= time() - 300))) or (((last_over_time({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m]) unless last_over_time({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m] offset 5m) unless resets({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m]) > 0) unless on (job, instance) last_over_time(up[5m])) and on () group({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"} offset 5m)) or increase({__name__=~"outbound_(http|grpc)_route_retry_requests_total",parent_kind="Service"}[5m]))`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Queries:\n got %q\nwant %q", got, want)
	}
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{URL: "prometheus:9090"}, `--prometheus-url "prometheus:9090": want an http or https URL with a host`},
		{Options{URL: "ftp://p"}, `--prometheus-url "ftp://p": want an http or https URL with a host`},
		// Before: accepted; the first query failed to dial ("invalid port").
		{Options{URL: "http://p:99999"}, `--prometheus-url "http://p:99999": port 99999: want 1..65535`},
		{Options{URL: "http://p:0"}, `--prometheus-url "http://p:0": port 0: want 1..65535`},
		{Options{URL: "http://p:9090", CallerLabel: "app-name"}, `--prometheus-caller-label "app-name": not a Prometheus label name`},
	} {
		if _, err := New(tc.o); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v, want %s", tc.o, err, tc.want)
		}
	}
}
