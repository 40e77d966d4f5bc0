package promquery

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/labapp"
	"github.com/retrycap/retrycap/internal/observed"
	"github.com/retrycap/retrycap/internal/promquery/promtest"
	"github.com/retrycap/retrycap/internal/workload"
)

var proxyBin string

func TestMain(m *testing.M) {
	os.Exit(labapp.RunTestsWithProxy(m, "../..", &proxyBin))
}

// eventually polls cond every 50 ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (last: %s)", what, within, last)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// instant evaluates q in Prometheus now and returns the one sample's value.
func instant(c *Client, q string) (float64, error) {
	v, err := c.query(context.Background(), q, time.Now())
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, fmt.Errorf("%s: %d samples", q, len(v))
	}
	return float64(v[0].Value), nil
}

// TestAgainstPrometheus runs the lab's chain gateway -> order -> payment (payment always
// failing) twice with real proxies, a real Prometheus scraping all four. In namespace shop
// order is the lab app (one call per request) and its proxy makes 3 attempts per call: 3 tries
// on order -> payment, within a graph whose annotations declare payment=3, over one that
// declares payment=2 (the proxy was configured by hand). In namespace lab order's application
// calls payment 3 times per request itself, through a proxy that makes 1 attempt per call:
// 1 try per call, 3 calls per inbound request at order, over a graph that declares payment=1,
// within one that declares the fan-out (payment=1*3).
func TestAgainstPrometheus(t *testing.T) {
	shop := promtest.StartChain(t, promtest.ChainConfig{ProxyBin: proxyBin, OrderAttempts: 3, Labels: map[string]string{"namespace": "shop"}})
	lab := promtest.StartChain(t, promtest.ChainConfig{ProxyBin: proxyBin, OrderAttempts: 1, OrderAppTries: 3, Labels: map[string]string{"namespace": "lab"}})
	// One request before Prometheus starts: every counter of both edges exists at its first
	// scrape, so the first and last samples in the window are of the same scrapes for the
	// attempts and the calls, and increase() extrapolates both by the same factor.
	shop.Send(t, 1)
	lab.Send(t, 1)
	prom := promtest.StartTargets(t, "../..", append(shop.Targets(), lab.Targets()...))
	url, stop := prom.URL, prom.Stop
	const window = 10 * time.Minute
	c, err := New(Options{URL: url, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first scrape of the four proxies", func() (bool, string) {
		v, err := instant(c, `count(retrycap_proxy_requests_total)`)
		return err == nil && v == 4, fmt.Sprint(v, err)
	})
	const n = 20
	shop.Send(t, n)
	lab.Send(t, n)
	for q, want := range map[string]float64{
		`sum(retrycap_proxy_requests_total{namespace="shop",service="order"})`:   n + 1,
		`sum(retrycap_proxy_attempts_total{namespace="shop",service="order"})`:   3 * (n + 1),
		`sum(retrycap_proxy_requests_total{namespace="shop",service="gateway"})`: n + 1,
		`sum(retrycap_proxy_attempts_total{namespace="shop",service="gateway"})`: n + 1,
		`sum(retrycap_proxy_requests_total{namespace="lab",service="order"})`:    3 * (n + 1),
		`sum(retrycap_proxy_attempts_total{namespace="lab",service="order"})`:    3 * (n + 1),
		`sum(retrycap_proxy_attempts_total{namespace="lab",service="gateway"})`:  n + 1,
	} {
		eventually(t, 30*time.Second, "Prometheus has "+q+" = "+fmt.Sprint(want), func() (bool, string) {
			v, err := instant(c, q)
			return err == nil && v == want, fmt.Sprint(v, err)
		})
	}
	promtest.Settle(t, prom, shop, lab)
	for _, q := range []string{"count_over_time(retrycap_proxy_requests_total[10m])", "count_over_time(up[10m]) - sum_over_time(up[10m])"} {
		v, err := c.query(context.Background(), q, time.Now())
		t.Logf("%s: %v %v", q, v, err) // the samples behind the extrapolation, for a reader of a failure
	}
	series, err := c.Series(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	const (
		notMeasured = "; calls per inbound request not measured at gateway (no counted layer sent them a request)"
		triesCause  = ": a retry layer the graph does not know (application code, a mesh it does not read, or a proxy configured by hand)"
		callsCause  = ": the application retries by itself behind its proxy (app retries?), or fans out more calls per request than its annotation declares"
	)
	for _, tc := range []struct {
		name, ns, orderUpstreams string
		want                     metav1.Condition
		status                   *v1alpha1.ObservedAmplification
	}{
		{
			name: "proxy retries declared", ns: "shop", orderUpstreams: "payment=3",
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionTrue, Reason: "WithinComputed", ObservedGeneration: 1,
				Message: "2 edges observed over 10m0s, none with more tries per call or calls per request than computed; observed amplification 3.00 along gateway>order>payment" + notMeasured},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", CallsPerRequest: "1.00", Computed: 3, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "a proxy configured by hand", ns: "shop", orderUpstreams: "payment=2",
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 1,
				Message: "edge order>payment: 3.00 tries per call observed over 10m0s (retrycap-proxy), the graph computes 2" + triesCause},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", CallsPerRequest: "1.00", Computed: 2, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "an application retrying behind its proxy", ns: "lab", orderUpstreams: "payment=1",
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 1,
				Message: "edge order>payment: 3.00 calls per inbound request at order observed over 10m0s (retrycap-proxy), the graph declares 1" + callsCause},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "1.00", CallsPerRequest: "3.00", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "the application's calls declared as a fan-out", ns: "lab", orderUpstreams: "payment=1*3",
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionTrue, Reason: "WithinComputed", ObservedGeneration: 1,
				Message: "2 edges observed over 10m0s, none with more tries per call or calls per request than computed; observed amplification 3.00 along gateway>order>payment" + notMeasured},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "10m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "1.00", CallsPerRequest: "3.00", Computed: 1, ComputedCalls: 3, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", CallsPerRequest: "not measured", Computed: 1, ComputedCalls: 1, Source: "retrycap-proxy"},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "checkout"}}
			res, _ := workload.Analyze(workload.ForRetryPolicy(p), []workload.Workload{
				{Kind: "Deployment", Namespace: tc.ns, Name: "gateway", Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: "order=1"})},
				{Kind: "Deployment", Namespace: tc.ns, Name: "order", Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: tc.orderUpstreams})},
				{Kind: "Deployment", Namespace: tc.ns, Name: "payment"},
			}, nil)
			r := observed.Compute(res.Graph.Edges(), series, observed.InNamespace(tc.ns))
			for _, e := range r.Edges {
				t.Logf("%s>%s: %.9f tries, %.9f calls per request (computed %d x %d)", e.From, e.To, e.Tries, e.CallsPerRequest, e.Computed, e.ComputedCalls)
			}
			if got := observed.Condition(r, c.Window(), 1); got != tc.want {
				t.Errorf("condition:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := observed.Status(r, c.Window()); fmt.Sprint(got) != fmt.Sprint(tc.status) {
				t.Errorf("status:\n got %+v\nwant %+v", got, tc.status)
			}
		})
	}

	// Prometheus down: the query's error, with the URL, in an Unknown condition.
	stop()
	_, err = c.Series(context.Background(), time.Now())
	if err == nil {
		t.Fatal("Series with Prometheus stopped: no error")
	}
	host := strings.TrimPrefix(url, "http://")
	want := metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionUnknown, Reason: "PrometheusUnavailable", ObservedGeneration: 1,
		Message: "querying Prometheus at " + url + ": query " + Queries(window, "service")[0] + ": dial tcp " + host + ": connect: connection refused"}
	if got := observed.Unavailable(c.URL(), err, 1); got != want {
		t.Errorf("condition:\n got %+v\nwant %+v", got, want)
	}
}

// TestSeriesLimit: a query that reaches the limit is an error naming it, not a truncated set.
func TestSeriesLimit(t *testing.T) {
	var targets = map[string]string{}
	for _, svc := range []string{"a", "b"} {
		p := startProxy(t, "--service", svc, "--upstreams", "x,y")
		targets[p.AdminAddr] = svc
	}
	url := promtest.Start(t, "../..", targets).URL
	// Prometheus answers at most the limit (the API's limit parameter), so reaching it is the sign.
	c, err := New(Options{URL: url, Window: time.Minute, SeriesLimit: 4})
	if err != nil {
		t.Fatal(err)
	}
	q := `sum by (namespace, service, upstream) (retrycap_proxy_attempts_total)`
	eventually(t, 30*time.Second, "both proxies scraped", func() (bool, string) {
		v, err := instant(c, `count(retrycap_proxy_attempts_total)`)
		return err == nil && v == 6, fmt.Sprint(v, err) // x, y and "unknown" (hosts no entry matches) per proxy
	})
	_, err = c.query(context.Background(), q, time.Now())
	want := "query " + q + ": 4 series, the limit (--prometheus-series-limit 4): the edges would be incomplete"
	if err == nil || err.Error() != want {
		t.Fatalf("query at the limit: %v, want %s", err, want)
	}
}

func startProxy(t *testing.T, args ...string) *labapp.ProxyProc {
	t.Helper()
	p, err := labapp.StartProxy(proxyBin, 10*time.Second, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(5 * time.Second); err != nil {
			t.Logf("proxy stop: %v\n%s", err, p.Log())
		}
	})
	return p
}
