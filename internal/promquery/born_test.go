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

// bornCounters serves Istio's istio_requests_total as Envoy exposes it: a label set's counter
// exists from its first request on, so its first scrape already holds the calls made before it.
// From the fourth scrape on: web -> report made 7 calls in one burst before that scrape and none
// after (a nightly job's call), web -> payment 7 more per scrape.
type bornCounters struct {
	mu sync.Mutex
	n  int
}

func (b *bornCounters) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	b.mu.Lock()
	b.n++
	n := b.n
	b.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	if n < 4 {
		return
	}
	edge := `reporter="source",source_workload="web",source_workload_namespace="shop",destination_service_namespace="shop",destination_service_name=`
	fmt.Fprintf(w, "istio_requests_total{%s\"report\"} 7\n", edge)
	fmt.Fprintf(w, "istio_requests_total{%s\"payment\"} %d\n", edge, 7*(n-3))
}

// TestCounterBornWithItsCallsAgainstPrometheus: what a real Prometheus' increase() makes of a
// counter that is created by its first call: the calls before its first scrape are in no
// increase, so an edge called in one burst between two scrapes is not observed by it (its
// series exists: the source is detected, the edge is not). The graph's queries count such a
// label set from zero when its target was scraped at the window's start without it
// (telemetry.Calls, TestCounterBornInTheWindowAgainstPrometheus); here Prometheus is younger
// than the window (its first scrape is inside it), so nothing says the counter did not count
// before the window, and the edge stays unobserved: the known limit that remains.
func TestCounterBornWithItsCallsAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&bornCounters{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes of both series", func() (bool, string) {
		v, err := instant(c, `count_over_time(istio_requests_total{destination_service_name="report"}[1m])`)
		return err == nil && v >= 5, fmt.Sprint(v, err)
	})
	now := time.Now()
	v, err := c.query(context.Background(), `increase(istio_requests_total{destination_service_name="report"}[1m])`, now)
	if err != nil || len(v) != 1 || v[0].Value != 0 {
		t.Fatalf("increase of the burst's counter: %v %v, want one series of 0", v, err)
	}
	ob, err := c.Graph(context.Background(), now, nil)
	if err != nil {
		t.Fatal(err)
	}
	var edges []string
	for _, e := range ob.Edges {
		edges = append(edges, fmt.Sprintf("%s %s -> %s", e.Source, e.From, e.To))
	}
	if want := []string{"istio shop/web -> shop/payment"}; fmt.Sprint(edges) != fmt.Sprint(want) || fmt.Sprint(ob.Sources) != fmt.Sprint([]telemetry.Source{telemetry.SourceIstio}) {
		t.Fatalf("edges %q, sources %v; want %q, [istio]", edges, ob.Sources, want)
	}
}

// TestWindowShorterThanTwoScrapesAgainstPrometheus: a real Prometheus scraping every 3 s (a
// cluster's 30 s or 1 m, scaled) and a window of 2 s: increase() needs two samples of a series
// within the window, and the window holds one, so no query answers any series although web ->
// payment is called on every scrape. Before, discover said "no source's series exist": false,
// and the fix (a longer --since) unsaid. Now the observation names the metrics whose series
// exist at the query's time (PresentOnly), which discover's message says with the cause.
func TestWindowShorterThanTwoScrapesAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&bornCounters{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargetsEvery(t, "../..", 3*time.Second, []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "two samples of the growing series", func() (bool, string) {
		v, err := instant(c, `count_over_time(istio_requests_total{destination_service_name="payment"}[1m])`)
		return err == nil && v >= 2, fmt.Sprint(v, err)
	})
	ob, err := c.Graph(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ob.Sources) != 0 || len(ob.Edges) != 0 || fmt.Sprint(ob.PresentOnly) != "[istio_requests_total]" {
		t.Fatalf("sources %v, edges %v, present only %q; want none, none, [istio_requests_total]", ob.Sources, ob.Edges, ob.PresentOnly)
	}
	// The same Prometheus over a window of two scrapes and more answers the edges.
	c, err = New(Options{URL: prom.URL, Window: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ob, err = c.Graph(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// report, born with its 7 calls inside the window after the target's first scrape (up at
	// the window's start), is counted from zero (telemetry.Calls).
	if len(ob.Edges) != 2 || ob.Edges[0].To.Name != "payment" || ob.Edges[1].To.Name != "report" || ob.Edges[1].Requests != 7 || ob.PresentOnly != nil {
		t.Fatalf("over 10s: edges %+v, present only %q", ob.Edges, ob.PresentOnly)
	}
}

// phasedCounters serves istio_requests_total from web in two phases: before the test flips it,
// stock at 5 and cart at 10 (both unchanged); after, stock still 5, cart 3 (its sidecar
// restarted: the same label set, a counter reset, 3 calls before the next scrape), and two
// label sets born with their calls: report at 7 and no more (one burst), payment at 7 more per
// scrape from its first.
type phasedCounters struct {
	mu      sync.Mutex
	flipped bool
	n       int // scrapes since the flip
}

func (p *phasedCounters) flip() {
	p.mu.Lock()
	p.flipped = true
	p.mu.Unlock()
}

func (p *phasedCounters) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	flipped := p.flipped
	if flipped {
		p.n++
	}
	n := p.n
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	edge := `reporter="source",source_workload="web",source_workload_namespace="shop",destination_service_namespace="shop",destination_service_name=`
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	fmt.Fprintf(w, "istio_requests_total{%s\"stock\"} 5\n", edge)
	if !flipped {
		fmt.Fprintf(w, "istio_requests_total{%s\"cart\"} 10\n", edge)
		return
	}
	fmt.Fprintf(w, "istio_requests_total{%s\"cart\"} 3\n", edge)
	fmt.Fprintf(w, "istio_requests_total{%s\"report\"} 7\n", edge)
	fmt.Fprintf(w, "istio_requests_total{%s\"payment\"} %d\n", edge, 7*n)
}

// TestCounterBornInTheWindowAgainstPrometheus: a real Prometheus scraping every 100 ms, read at
// 1.5 s after the flip over a window of 3 s (so the window starts 1.5 s before the flip, with
// the unchanged series' samples before it). A label set born inside the window is counted from
// zero (its calls before its first scrape included): report 7, payment its last value, exactly;
// a series that existed before the window is counted by increase() as before: stock 0 (no
// edge), cart's reset exactly what increase() says of it (the 3 calls after the restart,
// extrapolated), never its 3 added once more. Before, report was no edge and payment's count
// was increase()'s, which misses the 7 calls before its first scrape.
func TestCounterBornInTheWindowAgainstPrometheus(t *testing.T) {
	p := &phasedCounters{}
	exp := httptest.NewServer(p)
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const sel = `istio_requests_total{destination_service_name="%s"}`
	eventually(t, 30*time.Second, "25 scrapes before the flip", func() (bool, string) {
		v, err := instant(c, fmt.Sprintf("count_over_time("+sel+"[1m])", "stock"))
		return err == nil && v >= 25, fmt.Sprint(v, err)
	})
	flipped := time.Now()
	p.flip()
	at := flipped.Add(1500 * time.Millisecond)
	eventually(t, 30*time.Second, "samples of report after the time read", func() (bool, string) {
		v, err := c.query(context.Background(), fmt.Sprintf("count_over_time("+sel+"[1m])", "report"), time.Now())
		return err == nil && len(v) == 1 && time.Now().After(at.Add(time.Second)) && v[0].Value >= 20, fmt.Sprint(v, err)
	})
	value := func(q string) float64 {
		t.Helper()
		v, err := c.query(context.Background(), q, at)
		if err != nil || len(v) != 1 {
			t.Fatalf("%s at %v: %v %v", q, at, v, err)
		}
		return float64(v[0].Value)
	}
	paymentLast := value(fmt.Sprintf("last_over_time("+sel+"[3s])", "payment"))
	cartIncrease := value(fmt.Sprintf("increase("+sel+"[3s])", "cart"))
	if paymentLast < 14 || paymentLast != float64(7*int(paymentLast/7)) || cartIncrease < 3 {
		t.Fatalf("payment's last value %v (want a multiple of 7 from 14), cart's increase %v (want 3 or more)", paymentLast, cartIncrease)
	}
	ob, err := c.Graph(context.Background(), at, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ob.Edges {
		got = append(got, fmt.Sprintf("%s -> %s %v", e.From, e.To, e.Requests))
	}
	want := []string{
		fmt.Sprintf("shop/web -> shop/cart %v", cartIncrease),
		fmt.Sprintf("shop/web -> shop/payment %v", paymentLast),
		"shop/web -> shop/report 7",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("edges at %v over 3s:\n got %q\nwant %q", at, got, want)
	}
}
