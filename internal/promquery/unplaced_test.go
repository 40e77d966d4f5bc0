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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// unlabelledIstio serves istio_requests_total as a scrape whose relabelling dropped
// source_workload from some series (Prometheus drops a label left empty): every scrape adds
// 10 calls order -> payment (labelled), 5 from a caller with no source_workload to payment, 5
// from one to ledger in another namespace, and none from one to cart.
type unlabelledIstio struct {
	mu sync.Mutex
	n  int
}

func (u *unlabelledIstio) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	u.n++
	n := u.n
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	fmt.Fprintf(w, "istio_requests_total{reporter=\"source\",source_workload=\"order\",source_workload_namespace=\"shop\",destination_service_name=\"payment\",destination_service_namespace=\"shop\",response_code=\"200\"} %d\n", 10*n)
	fmt.Fprintf(w, "istio_requests_total{reporter=\"source\",source_workload=\"\",source_workload_namespace=\"shop\",destination_service_name=\"payment\",destination_service_namespace=\"shop\",response_code=\"200\"} %d\n", 5*n)
	fmt.Fprintf(w, "istio_requests_total{reporter=\"source\",source_workload_namespace=\"other\",destination_service_name=\"ledger\",destination_service_namespace=\"other\",response_code=\"200\"} %d\n", 5*n)
	fmt.Fprint(w, "istio_requests_total{reporter=\"source\",source_workload_namespace=\"shop\",destination_service_name=\"cart\",destination_service_namespace=\"shop\",response_code=\"200\"} 0\n")
}

// TestUnplacedSeriesAgainstPrometheus: a real Prometheus whose Istio series lost
// source_workload (a relabelling that drops it) for some calls to payment: those calls are on
// an edge nobody can name, so GraphComplete is Unknown (UnplacedSeries), naming the series,
// never True because the one named edge is declared (before: True, "every edge observed ... is
// declared", the unplaced calls only in discover's warnings). Calls with no caller to a
// Service outside the policy, and series that did not increase, do not count.
func TestUnplacedSeriesAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&unlabelledIstio{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	var ob *telemetry.Observation
	eventually(t, 60*time.Second, "the two calls to payment increased", func() (bool, string) {
		ob, err = c.Graph(context.Background(), time.Now(), nil)
		return err == nil && len(ob.Edges) == 1 && len(ob.Unplaced) == 2, fmt.Sprintf("%+v %v", ob, err)
	})
	inShop := func(ns, name string) (string, bool) { return name, ns == "shop" }
	s := telemetry.OnNodes(ob, time.Now(), func(cl telemetry.Caller) (string, bool) { return inShop(cl.Namespace, cl.Name) },
		func(ce telemetry.Callee) (string, bool) { return inShop(ce.Namespace, ce.Name) })
	g := graph.New()
	g.AddService("order")
	g.AddService("payment")
	g.AddEdge("order", "payment", 1, 1)
	gs := telemetry.CompareGraph(g, s)
	got := telemetry.GraphConditionOf(gs, s, 3)
	want := metav1.Condition{Type: "GraphComplete", Status: metav1.ConditionUnknown, Reason: "UnplacedSeries", ObservedGeneration: 3,
		Message: `the graph cannot be said complete: 1 series with calls over 5m0s name no caller or no callee (a label the query groups by is missing: fix the scrape's labels), so their edges cannot be compared: ` +
			`istio: source_workload or source_workload_namespace missing: not an edge (1 series, calling payment; e.g. {destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_workload_namespace="shop"}); ` +
			`every edge observed over 5m0s (1, from istio) is declared; 1 declared, 0 of them not observed (stale)`}
	if got != want {
		t.Errorf("condition\n got %+v\nwant %+v", got, want)
	}
	// The same without the unplaced calls: True, as before.
	s.Unplaced = nil
	if c := telemetry.GraphConditionOf(gs, s, 3); c.Status != metav1.ConditionTrue || c.Reason != "GraphComplete" {
		t.Errorf("without unplaced calls: %+v", c)
	}
}

// resettingIstio serves one edge's istio_requests_total that restarts from 0 every third
// scrape (a sidecar restarted): 10 more calls per scrape.
type resettingIstio struct {
	mu sync.Mutex
	n  int
}

func (u *resettingIstio) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	u.n++
	v := 10 * (u.n % 3)
	u.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	fmt.Fprintf(w, "istio_requests_total{reporter=\"source\",source_workload=\"order\",source_workload_namespace=\"shop\",destination_service_name=\"payment\",destination_service_namespace=\"shop\"} %d\n", v)
}

// TestCounterResetsAgainstPrometheus: a counter that restarts (a sidecar's restart) is read
// through increase(), which Prometheus corrects for resets: the edge is observed with a
// positive rate, never a negative increase refused or an edge lost.
func TestCounterResetsAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&resettingIstio{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "two resets scraped", func() (bool, string) {
		v, err := c.query(context.Background(), "resets(istio_requests_total[5m])", time.Now())
		return err == nil && len(v) == 1 && v[0].Value >= 2, fmt.Sprint(v, err)
	})
	ob, err := c.Graph(context.Background(), time.Now(), nil)
	if err != nil || len(ob.Edges) != 1 || ob.Edges[0].RatePerSecond <= 0 {
		t.Fatalf("%+v %v", ob, err)
	}
}
