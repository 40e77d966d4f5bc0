package promquery

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/telemetry"
)

// manyBorn serves retrycap-proxy's counters of web: upstream stock steady at 5 calls and 5
// attempts; once flipped, born more upstreams u0 .. u(born-1), each 3 calls and 6 attempts in
// one burst before their first scrape.
type manyBorn struct {
	born    int
	mu      sync.Mutex
	flipped bool
}

func (m *manyBorn) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	m.mu.Lock()
	flipped := m.flipped
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	var b strings.Builder
	for _, name := range []string{"requests", "attempts"} {
		fmt.Fprintf(&b, "# TYPE retrycap_proxy_%s_total counter\nretrycap_proxy_%s_total{upstream=\"stock\"} 5\n", name, name)
		if !flipped {
			continue
		}
		v := 3
		if name == "attempts" {
			v = 6
		}
		for i := 0; i < m.born; i++ {
			fmt.Fprintf(&b, "retrycap_proxy_%s_total{upstream=\"u%d\"} %d\n", name, i, v)
		}
	}
	_, _ = w.Write([]byte(b.String()))
}

// TestTenThousandBornSeriesAgainstPrometheus: 9,999 label sets born at once beside a steady
// one, in a real Prometheus, read by the manager and by the graph. At the default series limit
// (10,000) the answer is at the limit: refused on both paths, naming the query and the flag,
// never read as complete. Over it, every born edge is its 3 calls at 2 tries, exactly, on both
// paths; the time each read took is logged.
func TestTenThousandBornSeriesAgainstPrometheus(t *testing.T) {
	const born = 9999
	m := &manyBorn{born: born}
	exp := httptest.NewServer(m)
	t.Cleanup(exp.Close)
	prom := promtest.StartConfig(t, "../..", promtest.Config{Interval: 500 * time.Millisecond,
		Targets: []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://"), Labels: map[string]string{"namespace": "shop", "service": "web"}}}})
	c, err := New(Options{URL: prom.URL, Window: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "16 scrapes (8 s, more than the window) before the flip", func() (bool, string) {
		v, err := instant(c, `count_over_time(retrycap_proxy_requests_total{upstream="stock"}[1m])`)
		return err == nil && v >= 16, fmt.Sprint(v, err)
	})
	m.mu.Lock()
	m.flipped = true
	m.mu.Unlock()
	eventually(t, 60*time.Second, "the born series in Prometheus", func() (bool, string) {
		v, err := instant(c, `count(retrycap_proxy_attempts_total)`)
		return err == nil && v == born+1, fmt.Sprint(v, err)
	})
	now := time.Now()
	_, err = c.Series(context.Background(), now)
	want := "query " + Queries(6*time.Second, "service")[0] + ": 10000 series, the limit (--prometheus-series-limit 10000): the edges would be incomplete"
	if fmt.Sprint(err) != want {
		t.Fatalf("Series at the limit:\n got %v\nwant %s", err, want)
	}
	_, err = c.Graph(context.Background(), now, nil)
	want = "query " + telemetry.Queries(6*time.Second, "service")[6].PromQL + ": 10000 series, the limit (--prometheus-series-limit 10000): the edges would be incomplete"
	if fmt.Sprint(err) != want {
		t.Fatalf("Graph at the limit:\n got %v\nwant %s", err, want)
	}

	c, err = New(Options{URL: prom.URL, Window: 6 * time.Second, SeriesLimit: 20000})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	series, err := c.Series(context.Background(), now)
	tookSeries := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	ob, err := c.Graph(context.Background(), now, nil)
	tookGraph := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// For scale, the same six by increase() alone (the manager's queries before).
	start = time.Now()
	for _, sel := range []string{"retrycap_proxy_attempts_total", "retrycap_proxy_requests_total", `envoy_cluster_upstream_rq_total`, `envoy_cluster_upstream_rq_retry`, `outbound_http_route_request_statuses_total`, `outbound_http_route_retry_requests_total`} {
		if _, err := c.query(context.Background(), "sum by (namespace, service, upstream) (increase("+sel+"[6s]))", now); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d born series: the manager's 6 queries %v (by increase() alone %v), the graph's 9 %v", born, tookSeries, time.Since(start), tookGraph)
	bad := 0
	for _, s := range series {
		if s.Upstream != "stock" && (s.Calls != 3 || s.Attempts != 6) {
			bad++
		}
	}
	var edges int
	for _, e := range ob.Edges {
		if e.Requests != 3 || e.Tries != 2 {
			bad++
		}
		edges++
	}
	if len(series) != born+1 || edges != born || bad != 0 {
		t.Fatalf("series %d (want %d), graph edges %d (want %d), %d not 3 calls at 2 tries", len(series), born+1, edges, born, bad)
	}
}

// oddBorn serves retrycap-proxy's counters of web: stock steady; once flipped, upstream report
// born at NaN calls (an exporter's bug: a float counter that went NaN) with 3 attempts, and
// upstream gone born with 7 calls and 7 attempts that leaves the exposition after two scrapes
// (its pod's connection pool dropped the label set: Prometheus writes a stale marker).
type oddBorn struct {
	nan     bool
	mu      sync.Mutex
	flipped bool
	n       int
}

func (o *oddBorn) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	o.mu.Lock()
	if o.flipped {
		o.n++
	}
	n, flipped := o.n, o.flipped
	o.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	for _, name := range []string{"requests", "attempts"} {
		fmt.Fprintf(w, "# TYPE retrycap_proxy_%s_total counter\nretrycap_proxy_%s_total{upstream=\"stock\"} 5\n", name, name)
		if flipped && n <= 2 {
			fmt.Fprintf(w, "retrycap_proxy_%s_total{upstream=\"gone\"} 7\n", name)
		}
		if flipped && o.nan {
			v := "NaN"
			if name == "attempts" {
				v = "3"
			}
			fmt.Fprintf(w, "retrycap_proxy_%s_total{upstream=\"report\"} %s\n", name, v)
		}
	}
}

// TestOddBornSeriesAgainstPrometheus: what a real Prometheus holds of odd exporters, read
// through the born series' path (last_over_time). A series that went stale inside the window
// (a stale marker after its last sample) is counted by its last value, 7 calls at 1 try, on
// both paths: the marker is no value. A counter exposed as NaN fails both reads, naming the
// query and the series: never an edge of 0 calls (not observed) nor one dropped.
func TestOddBornSeriesAgainstPrometheus(t *testing.T) {
	for _, nan := range []bool{false, true} {
		t.Run(fmt.Sprintf("nan=%v", nan), func(t *testing.T) {
			o := &oddBorn{nan: nan}
			exp := httptest.NewServer(o)
			t.Cleanup(exp.Close)
			prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://"), Labels: map[string]string{"namespace": "shop", "service": "web"}}})
			c, err := New(Options{URL: prom.URL, Window: 3 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "40 scrapes before the flip", func() (bool, string) {
				v, err := instant(c, `count_over_time(retrycap_proxy_requests_total{upstream="stock"}[1m])`)
				return err == nil && v >= 40, fmt.Sprint(v, err)
			})
			o.mu.Lock()
			o.flipped = true
			o.mu.Unlock()
			eventually(t, 30*time.Second, "gone's stale marker (no sample at the query's time)", func() (bool, string) {
				v, err := instant(c, `count_over_time(retrycap_proxy_requests_total{upstream="gone"}[1m])`)
				present, perr := c.query(context.Background(), `retrycap_proxy_requests_total{upstream="gone"}`, time.Now())
				return err == nil && perr == nil && v == 2 && len(present) == 0, fmt.Sprint(v, err, present, perr)
			})
			now := time.Now()
			series, err := c.Series(context.Background(), now)
			ob, gerr := c.Graph(context.Background(), now, nil)
			if nan {
				want := "query " + Queries(3*time.Second, "service")[1] + `: series {namespace="shop", service="web", upstream="report"}: value NaN is not a counter's increase (want a number from 0 to 2^53)`
				if fmt.Sprint(err) != want || series != nil {
					t.Fatalf("Series:\n got %v %v\nwant %s", series, err, want)
				}
				if want := "query " + telemetry.Queries(3*time.Second, "service")[6].PromQL + `: series {namespace="shop", service="web", upstream="report"}: value NaN is not a counter's increase (want a number from 0 to 2^53)`; fmt.Sprint(gerr) != want || ob != nil {
					t.Fatalf("Graph:\n got %v\nwant %s", gerr, want)
				}
				return
			}
			if err != nil || gerr != nil {
				t.Fatal(err, gerr)
			}
			var got []string
			for _, s := range series {
				got = append(got, fmt.Sprintf("%s %v/%v", s.Upstream, s.Attempts, s.Calls))
			}
			sort.Strings(got) // the answer's order
			for _, e := range ob.Edges {
				got = append(got, fmt.Sprintf("%s %v x%v", e.To, e.Requests, e.Tries))
			}
			if want := []string{"gone 7/7", "stock 0/0", "shop/gone 7 x1"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}
