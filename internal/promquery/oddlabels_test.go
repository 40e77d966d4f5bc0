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

// oddLinkerd serves Linkerd's response_total whose label values are no Kubernetes names, as a
// relabelling or a look-alike exporter may write them (escaped in the text format: a quote, a
// newline): 10 more calls per scrape on each series, one of them web -> cart, named.
type oddLinkerd struct {
	mu sync.Mutex
	n  int
}

func (o *oddLinkerd) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	o.mu.Lock()
	o.n++
	n := o.n
	o.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE response_total counter\n")
	for _, l := range []string{
		`deployment="web",namespace="shop",dst_namespace="shop",dst_service="cart"`,
		`deployment="web",namespace="shop",dst_namespace="shop",dst_service="payment=9"`,
		`deployment="web",namespace="shop",dst_namespace="shop",dst_service="a/b"`,
		`deployment="web",namespace="shop",dst_namespace="shop",dst_service="cart\nspec: {replicas: 0}"`,
		`deployment="we\"b",namespace="shop",dst_namespace="shop",dst_service="cart"`,
		`deployment="web",namespace="sh op",dst_namespace="shop",dst_service="cart"`,
	} {
		fmt.Fprintf(w, "response_total{direction=\"outbound\",%s} %d\n", l, 10*n)
	}
}

// TestOddLabelValuesAgainstPrometheus: a real Prometheus holding Linkerd series whose label
// values are no Kubernetes names: the one named edge is read, each other series is a warning
// naming its label, quoted as the series holds it (before TestLabelValuesThatAreNoNames' fix:
// six edges, "payment=9" among them, which discover's patch wrote as 9 attempts).
func TestOddLabelValuesAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&oddLinkerd{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var ob *telemetry.Observation
	eventually(t, 60*time.Second, "the six series increased", func() (bool, string) {
		ob, err = c.Graph(context.Background(), time.Now(), nil)
		return err == nil && len(ob.Edges) == 1 && len(ob.Warnings) == 3, fmt.Sprintf("%+v %v", ob, err)
	})
	if e := ob.Edges[0]; e.From.String() != "shop/web" || e.To.String() != "shop/cart" {
		t.Errorf("edge %+v", e)
	}
	const pre = "linkerd response_total: "
	want := []string{
		pre + `deployment is no workload name (a DNS-1123 subdomain): not an edge: 1 series (e.g. {deployment="we\"b", dst_namespace="shop", dst_service="cart", namespace="shop"})`,
		pre + `dst_service is no Service name (a DNS-1035 label): not an edge: 3 series (e.g. {deployment="web", dst_namespace="shop", dst_service="`,
		pre + `namespace is no namespace name (a DNS-1123 label): not an edge: 1 series (e.g. {deployment="web", dst_namespace="shop", dst_service="cart", namespace="sh op"})`,
	}
	got := append([]string(nil), ob.Warnings...)
	// The example of a reason is its first series in Prometheus' answer, whose order is not
	// fixed: the dst_service reason is compared up to its example.
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) || (i != 1 && got[i] != w) {
			t.Errorf("warning %d:\n got %q\nwant %q", i, got[i], w)
		}
	}
}
