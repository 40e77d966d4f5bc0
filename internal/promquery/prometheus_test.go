package promquery

import (
	"context"
	"fmt"
	"net/http"
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
// failing) with real proxies: gateway's proxy makes 1 attempt per call to order, order's makes
// 3 to payment. A real Prometheus scrapes both. The counters then say 3 tries on order ->
// payment: within a graph whose annotations declare payment=3, over one that declares
// payment=2 (the proxy was configured by hand: a retry layer the graph does not know).
func TestAgainstPrometheus(t *testing.T) {
	common := []string{"--chain-cap", "0", "--backoff-base", "1ms", "--backoff-max", "2ms",
		"--budget-percent", "100", "--budget-min-per-second", "10000", "--breaker-failures", "0"}
	payment, err := labapp.Start(labapp.Config{Name: "payment"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = payment.Close() })
	payment.SetFailing(true)
	po := startProxy(t, append(common, "--service", "order", "--upstreams", "payment=3", "--resolve", "payment="+payment.Addr())...)
	order, err := labapp.Start(labapp.Config{Name: "order", Upstreams: []string{"http://payment/charge"}, ProxyURL: po.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = order.Close() })
	pg := startProxy(t, append(common, "--service", "gateway", "--upstreams", "order=1", "--resolve", "order="+order.Addr())...)
	gateway, err := labapp.Start(labapp.Config{Name: "gateway", Upstreams: []string{"http://order/checkout"}, ProxyURL: pg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gateway.Close() })

	send := func(n int) {
		for range n {
			resp, err := http.Get(gateway.URL() + "/buy")
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
		}
	}
	// One request before Prometheus starts: every counter of both edges exists at its first
	// scrape, so the first and last samples in the window are of the same scrapes for the
	// attempts and the calls, and increase() extrapolates both by the same factor.
	send(1)
	prom := promtest.Start(t, "../..", map[string]string{po.AdminAddr: "order", pg.AdminAddr: "gateway"})
	url, stop := prom.URL, prom.Stop
	c, err := New(Options{URL: url, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the first scrape of both proxies", func() (bool, string) {
		v, err := instant(c, `count(retrycap_proxy_requests_total)`)
		return err == nil && v == 2, fmt.Sprint(v, err)
	})
	const n = 20
	send(n)
	for q, want := range map[string]float64{
		`sum(retrycap_proxy_requests_total{service="order"})`:   n + 1,
		`sum(retrycap_proxy_attempts_total{service="order"})`:   3 * (n + 1),
		`sum(retrycap_proxy_requests_total{service="gateway"})`: n + 1,
		`sum(retrycap_proxy_attempts_total{service="gateway"})`: n + 1,
	} {
		eventually(t, 30*time.Second, "Prometheus has "+q+" = "+fmt.Sprint(want), func() (bool, string) {
			v, err := instant(c, q)
			return err == nil && v == want, fmt.Sprint(v, err)
		})
	}
	series, err := c.Series(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}

	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}}

	for _, tc := range []struct {
		name, orderUpstreams string
		want                 metav1.Condition
		status               *v1alpha1.ObservedAmplification
	}{
		{
			name: "declared", orderUpstreams: "payment=3",
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionTrue, Reason: "WithinComputed", ObservedGeneration: 1,
				Message: "2 edges observed over 1m0s, none with more tries than computed; observed amplification 3.00 along gateway>order>payment"},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "1m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", Computed: 3, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", Computed: 1, Source: "retrycap-proxy"},
			}},
		},
		{
			name: "undeclared retry layer", orderUpstreams: "payment=2",
			want: metav1.Condition{Type: "ObservedWithinComputed", Status: metav1.ConditionFalse, Reason: "UndeclaredRetries", ObservedGeneration: 1,
				Message: "edge order>payment: 3.00 tries per call observed over 1m0s (retrycap-proxy), the graph computes 2: a retry layer the graph does not know (application code, a mesh it does not read, or a proxy configured by hand)"},
			status: &v1alpha1.ObservedAmplification{Amplification: "3.00", WorstPath: "gateway>order>payment", Window: "1m0s", Edges: []v1alpha1.ObservedEdge{
				{From: "order", To: "payment", Tries: "3.00", Computed: 2, Source: "retrycap-proxy"},
				{From: "gateway", To: "order", Tries: "1.00", Computed: 1, Source: "retrycap-proxy"},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := workload.Analyze(p, []workload.Workload{
				{Kind: "Deployment", Namespace: "shop", Name: "gateway", Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: "order=1"})},
				{Kind: "Deployment", Namespace: "shop", Name: "order", Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: tc.orderUpstreams})},
				{Kind: "Deployment", Namespace: "shop", Name: "payment"},
			})
			r := observed.Compute(res.Graph.Edges(), series, observed.InNamespace("shop"))
			for _, e := range r.Edges {
				t.Logf("%s>%s: %.9f tries (computed %d)", e.From, e.To, e.Tries, e.Computed)
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
		Message: "querying Prometheus at " + url + ": query " + Queries(time.Minute, "service")[0] + ": dial tcp " + host + ": connect: connection refused"}
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
	want := "query " + q + ": 4 series, the limit (--prometheus-series-limit): the edges would be incomplete"
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
