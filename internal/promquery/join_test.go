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
		sample(5, "namespace", "shop", "upstream", "payment"), // no caller label: dropped
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
	got := Join(attempts, calls, total, retry, "service")
	want := []observed.Series{
		{Source: "retrycap-proxy", Namespace: "shop", Caller: "order", Upstream: "payment", Attempts: 30, Calls: 10},
		{Source: "retrycap-proxy", Caller: "lab", Upstream: "x", Attempts: 4, Calls: 2},
		{Source: "envoy", Namespace: "shop", Caller: "cart", Upstream: "payment", Attempts: 60, Calls: 40},
		{Source: "envoy", Namespace: "shop", Caller: "cart", Upstream: "bank.billing", Attempts: 9, Calls: 9},
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
	} {
		got, ok := EnvoyUpstream(tc.cluster, tc.ns)
		if got != tc.want || ok != tc.ok {
			t.Errorf("EnvoyUpstream(%q, %q) = %q, %v; want %q, %v", tc.cluster, tc.ns, got, ok, tc.want, tc.ok)
		}
	}
}

func TestQueries(t *testing.T) {
	got := Queries(5*time.Minute, "app")
	want := []string{
		"sum by (namespace, app, upstream) (increase(retrycap_proxy_attempts_total[5m]))",
		"sum by (namespace, app, upstream) (increase(retrycap_proxy_requests_total[5m]))",
		`sum by (namespace, app, envoy_cluster_name) (increase(envoy_cluster_upstream_rq_total{envoy_cluster_name=~"outbound[|].*"}[5m]))`,
		`sum by (namespace, app, envoy_cluster_name) (increase(envoy_cluster_upstream_rq_retry{envoy_cluster_name=~"outbound[|].*"}[5m]))`,
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
		{Options{URL: "http://p:9090", CallerLabel: "app-name"}, `--prometheus-caller-label "app-name": not a Prometheus label name`},
	} {
		if _, err := New(tc.o); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v, want %s", tc.o, err, tc.want)
		}
	}
}
