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
)

// proxyAndRoutes serves one pod's retrycap-proxy and Linkerd route counters: web -> stock
// steady at 5 calls and 5 attempts throughout; once flipped, label sets born with their calls:
// web -> report 7 calls and 21 attempts in one burst before their first scrape (and no more),
// web -> payment 4 calls and 12 attempts more per scrape, and Linkerd's route to cart 10
// request statuses and 5 retries in one burst.
type proxyAndRoutes struct {
	mu      sync.Mutex
	flipped bool
	n       int
}

func (p *proxyAndRoutes) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	if p.flipped {
		p.n++
	}
	n, flipped := p.n, p.flipped
	p.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE retrycap_proxy_requests_total counter\nretrycap_proxy_requests_total{upstream=\"stock\"} 5\n")
	if flipped {
		fmt.Fprintf(w, "retrycap_proxy_requests_total{upstream=\"report\"} 7\nretrycap_proxy_requests_total{upstream=\"payment\"} %d\n", 4*n)
	}
	fmt.Fprint(w, "# TYPE retrycap_proxy_attempts_total counter\nretrycap_proxy_attempts_total{upstream=\"stock\"} 5\n")
	if flipped {
		fmt.Fprintf(w, "retrycap_proxy_attempts_total{upstream=\"report\"} 21\nretrycap_proxy_attempts_total{upstream=\"payment\"} %d\n", 12*n)
	}
	route := `parent_kind="Service",parent_namespace="shop",parent_name="cart"`
	fmt.Fprintf(w, "# TYPE outbound_http_route_request_statuses_total counter\noutbound_http_route_request_statuses_total{%s,parent_name=\"stock\"} 3\n", `parent_kind="Service",parent_namespace="shop"`)
	if flipped {
		fmt.Fprintf(w, "outbound_http_route_request_statuses_total{%s} 10\n", route)
	}
	fmt.Fprintf(w, "# TYPE outbound_http_route_retry_requests_total counter\noutbound_http_route_retry_requests_total{%s,parent_name=\"stock\"} 0\n", `parent_kind="Service",parent_namespace="shop"`)
	if flipped {
		fmt.Fprintf(w, "outbound_http_route_retry_requests_total{%s} 5\n", route)
	}
}

// TestManagerAndDiscoverSameFigureAgainstPrometheus: the manager's observed amplification
// (Series, the ObservedAmplification condition's figures) and discover's graph (Graph, what
// `retrycap discover --prometheus-url` prints and GraphComplete reads) over the same series of a
// real Prometheus at the same time. Before, the manager read each counter by increase() and
// the graph by telemetry.Calls: an edge born inside the window with its calls (report: 7
// calls, 21 attempts in one burst) was 7 calls at 3 tries for discover and no calls for the
// manager, and payment's first calls were the graph's only. Now both read telemetry.Calls: per
// edge, the manager's calls are the graph's requests and its attempts over calls the graph's
// tries, exactly.
func TestManagerAndDiscoverSameFigureAgainstPrometheus(t *testing.T) {
	p := &proxyAndRoutes{}
	exp := httptest.NewServer(p)
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://"),
		Labels: map[string]string{"namespace": "shop", "service": "web", "deployment": "web"}}})
	c, err := New(Options{URL: prom.URL, Window: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "25 scrapes before the flip", func() (bool, string) {
		v, err := instant(c, `count_over_time(retrycap_proxy_requests_total{upstream="stock"}[1m])`)
		return err == nil && v >= 25, fmt.Sprint(v, err)
	})
	p.mu.Lock()
	p.flipped = true
	p.mu.Unlock()
	eventually(t, 30*time.Second, "the born series in Prometheus", func() (bool, string) {
		v, err := instant(c, `count_over_time(retrycap_proxy_requests_total{upstream="report"}[1m])`)
		return err == nil && v >= 1, fmt.Sprint(v, err)
	})
	at := time.Now().Add(time.Second)
	eventually(t, 30*time.Second, "samples up to the time read", func() (bool, string) {
		return time.Now().After(at.Add(700 * time.Millisecond)), ""
	})
	series, err := c.Series(context.Background(), at)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := c.Graph(context.Background(), at, nil)
	if err != nil {
		t.Fatal(err)
	}
	var manager, graph []string
	for _, s := range series {
		if s.Calls > 0 {
			// The sources' names: observed's retrycap-proxy is telemetry's retrycap.
			manager = append(manager, fmt.Sprintf("%s %s/%s -> %s calls %v tries %v", strings.TrimSuffix(s.Source, "-proxy"), s.Namespace, s.Caller, s.Upstream, s.Calls, s.Attempts/s.Calls))
		}
	}
	for _, e := range ob.Edges {
		// The graph names the callee namespace/name; the manager as the caller names it.
		graph = append(graph, fmt.Sprintf("%s %s -> %s calls %v tries %v", e.Source, e.From, e.To.Name, e.Requests, e.Tries))
	}
	sort.Strings(manager)
	if fmt.Sprint(manager) != fmt.Sprint(graph) {
		t.Fatalf("the manager and discover differ:\nmanager %q\n  graph %q", manager, graph)
	}
	var payment float64
	for _, s := range series {
		if s.Upstream == "payment" {
			payment = s.Calls
		}
	}
	want := []string{
		"linkerd shop/web -> cart calls 10 tries 1.5",
		fmt.Sprintf("retrycap shop/web -> payment calls %v tries 3", payment),
		"retrycap shop/web -> report calls 7 tries 3",
	}
	if fmt.Sprint(manager) != fmt.Sprint(want) || payment < 4 || payment != float64(4*int(payment/4)) {
		t.Fatalf("manager:\n got %q\nwant %q (payment's calls a multiple of 4)", manager, want)
	}
}
