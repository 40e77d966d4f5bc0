package telemetry

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOnNodes(t *testing.T) {
	o := &Observation{Window: 5 * time.Minute, Sources: []Source{SourceIstio, SourceOTel}, Edges: []Edge{
		{Source: SourceIstio, From: Caller{Namespace: "shop", Name: "web-v2"}, To: Callee{Namespace: "shop", Name: "cart"}, RatePerSecond: 2},
		{Source: SourceIstio, From: Caller{Namespace: "other", Name: "web"}, To: Callee{Namespace: "shop", Name: "cart"}, RatePerSecond: 3},
		{Source: SourceOTel, From: Caller{Namespace: "shop", Name: "web", Service: true}, To: Callee{Name: "api.example.com"}, RatePerSecond: 4},
		{Source: SourceOTel, From: Caller{Namespace: "shop", Name: "web", Service: true}, To: Callee{Namespace: "billing", Name: "bank"}, RatePerSecond: 5},
	}, Entrypoints: []Entrypoint{
		{Callee: Callee{Namespace: "shop", Name: "web"}, Via: "istio-system/istio-ingressgateway", Source: SourceIstio},
		{Callee: Callee{Namespace: "shop", Name: "web"}, Via: "outside the mesh", Source: SourceIstio},
		{Callee: Callee{Name: "nowhere"}, Via: "outside the mesh", Source: SourceOTel},
		{Callee: Callee{Namespace: "billing", Name: "bank"}, Via: "billing/gw", Source: SourceIstio},
	}}
	caller := func(c Caller) (string, bool) {
		if c.Namespace != "shop" {
			return "", false
		}
		if c.Name == "web-v2" {
			return "web", true // a workload whose service name differs
		}
		return c.Name, true
	}
	callee := func(c Callee) (string, bool) {
		if c.Namespace == "" {
			return "", false
		}
		if c.Namespace == "shop" {
			return c.Name, true
		}
		return c.Name + "." + c.Namespace, true
	}
	s := OnNodes(o, t0, caller, callee)
	if got := fmt.Sprint(s.Edges, s.Sources, s.Window, s.At.Equal(t0)); got != "[{web cart 2} {web bank.billing 5}] [istio otel-servicegraph] 5m0s true" {
		t.Errorf("got %s", got)
	}
	// Each entrypoint once, in order; one the callee mapping cannot place is not one.
	if got := fmt.Sprint(s.Entrypoints); got != "[web bank.billing]" {
		t.Errorf("entrypoints %s", got)
	}
}

func TestNoTelemetry(t *testing.T) {
	c := NoTelemetry("http://prom:9090", 5*time.Minute, 2)
	want := metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionUnknown, Reason: "NoTelemetry", ObservedGeneration: 2,
		Message: "Prometheus at http://prom:9090 holds no series of istio_requests_total, Linkerd's response_total or route series, traces_service_graph_request_total or retrycap_proxy_requests_total over 5m0s: no edge could be observed, the declarations are unchecked"}
	if c != want {
		t.Errorf("got %+v", c)
	}
	// Series that exist but have fewer than two samples in the window (PresentOnly): the
	// window is too short for increase(), which the message says instead of "no series".
	c = NoTelemetry("http://prom:9090", 30*time.Second, 2, "istio_requests_total", "response_total")
	want.Message = "Prometheus at http://prom:9090 holds series of istio_requests_total, response_total, but none with two samples within 30s, which increase() needs (a --prometheus-window shorter than twice the scrape interval; Prometheus' default scrape_interval is 1m): no edge could be observed, the declarations are unchecked"
	if c != want {
		t.Errorf("present only: got %+v", c)
	}
}
