package promquery

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
)

// istioPod serves one pod's istio_requests_total as its sidecar exposes it: a label set's
// counter exists from its first call on. steady: web -> stock at 5 and no more (an old pod).
// Else a pod born with its calls: web -> report 7 in one burst before its first scrape and
// none after, web -> payment 7 more per scrape from its first.
type istioPod struct {
	steady bool
	mu     sync.Mutex
	n      int
}

const bornEdge = `reporter="source",source_workload="web",source_workload_namespace="shop",destination_service_namespace="shop",destination_service_name=`

func (p *istioPod) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	if p.steady {
		fmt.Fprintf(w, "istio_requests_total{%s\"stock\"} 5\n", bornEdge)
		return
	}
	fmt.Fprintf(w, "istio_requests_total{%s\"report\"} 7\n", bornEdge)
	fmt.Fprintf(w, "istio_requests_total{%s\"payment\"} %d\n", bornEdge, 7*n)
}

// writeFileSD writes a file_sd_configs file listing addrs, atomically (a rename), as a
// discovery sidecar would.
func writeFileSD(t *testing.T, path string, addrs ...string) {
	t.Helper()
	b, err := json.Marshal([]map[string]any{{"targets": addrs, "labels": map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// bornRead waits until sel's series exist in Prometheus, reads the graph 1 s after that over
// a window of 3 s (so the window starts before the birth, with the steady series' samples
// before it), once samples up to that time are in, and returns its edges and the value of
// plain increase() of report then (what the queries read before).
func bornRead(t *testing.T, c *Client, sel string) (edges []string, paymentLast, reportIncrease float64) {
	t.Helper()
	eventually(t, 30*time.Second, "the born series in Prometheus", func() (bool, string) {
		v, err := c.query(context.Background(), fmt.Sprintf(`count_over_time(%s{destination_service_name="report"}[1m])`, sel), time.Now())
		return err == nil && len(v) == 1, fmt.Sprint(v, err)
	})
	at := time.Now().Add(time.Second)
	eventually(t, 30*time.Second, "samples up to the time read", func() (bool, string) {
		return time.Now().After(at.Add(700 * time.Millisecond)), ""
	})
	value := func(q string) float64 {
		t.Helper()
		v, err := c.query(context.Background(), q, at)
		if err != nil || len(v) != 1 {
			t.Fatalf("%s at %v: %v %v", q, at, v, err)
		}
		return float64(v[0].Value)
	}
	paymentLast = value(fmt.Sprintf(`last_over_time(%s{destination_service_name="payment"}[3s])`, sel))
	reportIncrease = value(fmt.Sprintf(`increase(%s{destination_service_name="report"}[3s])`, sel))
	ob, err := c.Graph(context.Background(), at, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ob.Edges {
		edges = append(edges, fmt.Sprintf("%s %s -> %s %v", e.Source, e.From, e.To, e.Requests))
	}
	if len(ob.Warnings) != 0 {
		t.Errorf("warnings %q", ob.Warnings)
	}
	return edges, paymentLast, reportIncrease
}

// TestCounterOfANewPodAgainstPrometheus: a real Prometheus discovers pods through a file
// (file_sd_configs, as Kubernetes service discovery lists a pod from its creation): an old pod
// of the job, steady, and then a new pod whose sidecar's counters are born with their calls
// (report 7 in one burst before the pod's first scrape, payment 7 a scrape). Before, the new
// target was not up at the window's start, so its series were increase()'s: report no edge (its
// increase 0) and payment's first 7 calls lost. Now a series of a target born inside the window,
// in a job scraped at its start, is counted from zero: report 7, payment its last value.
func TestCounterOfANewPodAgainstPrometheus(t *testing.T) {
	old := httptest.NewServer(&istioPod{steady: true})
	t.Cleanup(old.Close)
	born := httptest.NewServer(&istioPod{})
	t.Cleanup(born.Close)
	sd := filepath.Join(t.TempDir(), "pods.json")
	oldAddr, bornAddr := strings.TrimPrefix(old.URL, "http://"), strings.TrimPrefix(born.URL, "http://")
	writeFileSD(t, sd, oldAddr)
	prom := promtest.StartConfig(t, "../..", promtest.Config{FileSD: sd})
	c, err := New(Options{URL: prom.URL, Window: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "25 scrapes of the old pod", func() (bool, string) {
		v, err := instant(c, `count_over_time(istio_requests_total{destination_service_name="stock"}[1m])`)
		return err == nil && v >= 25, fmt.Sprint(v, err)
	})
	writeFileSD(t, sd, oldAddr, bornAddr)
	edges, paymentLast, reportIncrease := bornRead(t, c, "istio_requests_total")
	if reportIncrease != 0 || paymentLast < 7 || paymentLast != float64(7*int(paymentLast/7)) {
		t.Fatalf("increase() of report %v (want 0: the calls before the first scrape), payment's last value %v (want a multiple of 7)", reportIncrease, paymentLast)
	}
	want := []string{fmt.Sprintf("istio shop/web -> shop/payment %v", paymentLast), "istio shop/web -> shop/report 7"}
	if fmt.Sprint(edges) != fmt.Sprint(want) {
		t.Fatalf("edges:\n got %q\nwant %q", edges, want)
	}
}

// istioRecordingRules are the recording rules of Istio's "Observability best practices"
// (istio.io, section "Workload-level aggregation via recording rules", Plain Prometheus
// Rules, of the page content/en/docs/ops/best-practices/observability/index.md in the
// istio.io repository; Apache-2.0), the interval scaled
// from 5s to the test's 100ms.
const istioRecordingRules = `groups:
- name: "istio.recording-rules"
  interval: 100ms
  rules:
  - record: "workload:istio_requests_total"
    expr: |
      sum without(instance, kubernetes_namespace, kubernetes_pod_name) (istio_requests_total)
`

// phasedPod is an istioPod whose born label sets appear when flipped (the same pod, a new
// edge), with web -> stock steady throughout.
type phasedPod struct {
	mu      sync.Mutex
	flipped bool
	n       int
}

func (p *phasedPod) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	if p.flipped {
		p.n++
	}
	n, flipped := p.n, p.flipped
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	fmt.Fprintf(w, "istio_requests_total{%s\"stock\"} 5\n", bornEdge)
	if flipped {
		fmt.Fprintf(w, "istio_requests_total{%s\"report\"} 7\n", bornEdge)
		fmt.Fprintf(w, "istio_requests_total{%s\"payment\"} %d\n", bornEdge, 7*n)
	}
}

// TestRecordedCounterBornAgainstPrometheus: Istio's best practices' setup with two real
// Prometheus servers: the local one scrapes the sidecar and records workload:istio_requests_total
// (the documented rule), the production one federates {__name__=~"workload:(.*)"}
// (honor_labels: true as documented, and false, Prometheus' default). The recorded series
// keeps job and drops instance; federated with honor_labels: true it keeps the local
// Prometheus' job, which no target of the production one has. Before, such a series was
// increase()'s: an edge born with its calls (report, 7 in one burst) was no edge, and a new
// edge's first calls (payment's first 7) lost. Now a series with no target of its own that is
// born inside the window, while the same metric had series at its start (the rule and the
// federation ran then: stock), is counted from zero.
func TestRecordedCounterBornAgainstPrometheus(t *testing.T) {
	for _, honor := range []bool{true, false} {
		t.Run(fmt.Sprintf("honor_labels=%v", honor), func(t *testing.T) {
			p := &phasedPod{}
			exp := httptest.NewServer(p)
			t.Cleanup(exp.Close)
			local := promtest.StartConfig(t, "../..", promtest.Config{Targets: []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}}, Rules: istioRecordingRules})
			prod := promtest.StartConfig(t, "../..", promtest.Config{Federate: &promtest.Federate{Targets: []promtest.Target{{Addr: strings.TrimPrefix(local.URL, "http://")}}, Match: []string{`{__name__=~"workload:(.*)"}`}, HonorLabels: honor}})
			c, err := New(Options{URL: prod.URL, Window: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "25 federated samples of stock", func() (bool, string) {
				v, err := instant(c, `count_over_time(workload:istio_requests_total{destination_service_name="stock"}[1m])`)
				return err == nil && v >= 25, fmt.Sprint(v, err)
			})
			if v, err := instant(c, `count(istio_requests_total)`); err == nil {
				t.Fatalf("the production Prometheus holds raw series: %v", v)
			}
			p.mu.Lock()
			p.flipped = true
			p.mu.Unlock()
			edges, paymentLast, reportIncrease := bornRead(t, c, "workload:istio_requests_total")
			if reportIncrease != 0 || paymentLast < 7 || paymentLast != float64(7*int(paymentLast/7)) {
				t.Fatalf("increase() of report %v (want 0), payment's last value %v (want a multiple of 7)", reportIncrease, paymentLast)
			}
			want := []string{fmt.Sprintf("istio shop/web -> shop/payment %v", paymentLast), "istio shop/web -> shop/report 7"}
			if fmt.Sprint(edges) != fmt.Sprint(want) {
				t.Fatalf("edges:\n got %q\nwant %q", edges, want)
			}
		})
	}
}

// restartedPod serves a steady series (stock at 5) and, once flipped, a label set born with
// its calls whose sidecar restarts after its tenth scrape: 7, 14, ... 70, then 3, 6, 9 ...
// (its counter reset, 3 calls a scrape).
type restartedPod struct {
	mu      sync.Mutex
	flipped bool
	n       int
}

func (p *restartedPod) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	if p.flipped {
		p.n++
	}
	n, flipped := p.n, p.flipped
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE istio_requests_total counter\n")
	fmt.Fprintf(w, "istio_requests_total{%s\"stock\"} 5\n", bornEdge)
	switch {
	case !flipped:
	case n <= 10:
		fmt.Fprintf(w, "istio_requests_total{%s\"report\"} %d\n", bornEdge, 7*n)
	default:
		fmt.Fprintf(w, "istio_requests_total{%s\"report\"} %d\n", bornEdge, 3*(n-10))
	}
}

// TestCounterBornAndResetAgainstPrometheus: a label set born inside the window (its target up
// at the window's start) whose counter then resets (the sidecar restarted): 70 calls before the
// reset, then 3 a scrape. Before, a born series was counted by its last value, after the reset:
// the 70 calls were lost. Now a born series that reset is increase()'s, exactly Prometheus'
// figure, which counts the calls before the reset and loses at most the 7 before the first
// scrape.
func TestCounterBornAndResetAgainstPrometheus(t *testing.T) {
	p := &restartedPod{}
	exp := httptest.NewServer(p)
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "25 scrapes before the flip", func() (bool, string) {
		v, err := instant(c, `count_over_time(istio_requests_total{destination_service_name="stock"}[1m])`)
		return err == nil && v >= 25, fmt.Sprint(v, err)
	})
	p.mu.Lock()
	p.flipped = true
	p.mu.Unlock()
	eventually(t, 30*time.Second, "the born series in Prometheus", func() (bool, string) {
		v, err := instant(c, `count_over_time(istio_requests_total{destination_service_name="report"}[1m])`)
		return err == nil && v >= 1, fmt.Sprint(v, err)
	})
	at := time.Now().Add(2500 * time.Millisecond)
	eventually(t, 30*time.Second, "samples up to the time read", func() (bool, string) {
		return time.Now().After(at.Add(700 * time.Millisecond)), ""
	})
	value := func(q string) float64 {
		t.Helper()
		v, err := c.query(context.Background(), q, at)
		if err != nil || len(v) != 1 {
			t.Fatalf("%s at %v: %v %v", q, at, v, err)
		}
		return float64(v[0].Value)
	}
	const sel = `istio_requests_total{destination_service_name="report"}`
	last, resets, first := value("last_over_time("+sel+"[4s])"), value("resets("+sel+"[4s])"), value("count_over_time("+sel+"[4s] offset 4s) or vector(0)")
	increase := value("increase(" + sel + "[4s])")
	if resets != 1 || first != 0 || last < 3 {
		t.Fatalf("at %v: %v resets (want 1), %v samples before the window (want 0), last value %v", at, resets, first, last)
	}
	ob, err := c.Graph(context.Background(), at, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, e := range ob.Edges {
		if e.To.Name == "report" {
			got = e.Requests
		}
	}
	// The calls made: 70 before the reset and last after it; counted, all but the 7 before the
	// first scrape at most.
	if got != increase || got < 63+last {
		t.Fatalf("report's calls %v; want increase()'s %v, at least 63+%v (before the reset, but the first scrape's 7, and after)", got, increase, last)
	}
}
