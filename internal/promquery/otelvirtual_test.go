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
)

// serviceGraphNoVirtualLabel serves traces_service_graph_request_total as the OpenTelemetry
// Collector's servicegraph connector writes it with dimensions [k8s.namespace.name] and without
// virtual_node_extra_label (its default, as Tempo's enable_virtual_node_label is off by
// default): no virtual_node label says which side of a virtual_node edge was never seen, only
// which side's prefixed dimension is there. Sock Shop's own service named user calls its
// database (a client span with db.system mongodb, no server span: a virtual server named
// mongodb) and catalogue, uninstrumented (peer.service catalogue); a root span of front-end has
// the virtual client "user"; and one series as Tempo writes it by default. 6 calls of each per
// scrape.
type serviceGraphNoVirtualLabel struct {
	mu sync.Mutex
	n  int
}

func (g *serviceGraphNoVirtualLabel) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	g.n++
	n := g.n
	g.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprint(w, "# TYPE traces_service_graph_request_total counter\n")
	fmt.Fprintf(w, "traces_service_graph_request_total{client=\"user\",server=\"mongodb\",connection_type=\"virtual_node\",failed=\"false\",client_k8s_namespace_name=\"sock-shop\"} %d\n", 6*n)
	fmt.Fprintf(w, "traces_service_graph_request_total{client=\"user\",server=\"catalogue\",connection_type=\"virtual_node\",failed=\"false\",client_k8s_namespace_name=\"sock-shop\"} %d\n", 6*n)
	fmt.Fprintf(w, "traces_service_graph_request_total{client=\"user\",server=\"front-end\",connection_type=\"virtual_node\",failed=\"false\",server_k8s_namespace_name=\"sock-shop\"} %d\n", 6*n)
	// Tempo's metrics-generator by default (no client_/server_ prefix, no virtual_node label):
	// one k8s_namespace_name, of the one span seen; user's call to its cache.
	fmt.Fprintf(w, "traces_service_graph_request_total{client=\"user\",server=\"redis\",connection_type=\"virtual_node\",failed=\"false\",k8s_namespace_name=\"sock-shop\"} %d\n", 6*n)
}

// TestServiceGraphWithoutVirtualNodeLabelAgainstPrometheus: a real Prometheus holding a
// service graph without the virtual_node label. Before, every virtual_node edge whose client
// was named user was read as a root span's virtual client: Sock Shop's user -> mongodb and
// user -> catalogue became entrypoints "called from outside" (mongodb and catalogue without a
// namespace: warned and dropped), their edges lost. Now the prefixed dimensions say which span
// was seen (the client's namespace alone: the client span, so a virtual server; the server's
// alone: a virtual client); the name user decides only where neither is there (Tempo's
// unprefixed dimension), and not for a server named after a database system (user -> redis,
// before an entrypoint redis).
func TestServiceGraphWithoutVirtualNodeLabelAgainstPrometheus(t *testing.T) {
	exp := httptest.NewServer(&serviceGraphNoVirtualLabel{})
	t.Cleanup(exp.Close)
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: strings.TrimPrefix(exp.URL, "http://")}})
	c, err := New(Options{URL: prom.URL, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "five scrapes", func() (bool, string) {
		v, err := instant(c, `min(count_over_time(traces_service_graph_request_total[1m]))`)
		return err == nil && v >= 5, fmt.Sprint(v, err)
	})
	ob, err := c.Graph(context.Background(), time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ob.Edges {
		got = append(got, fmt.Sprintf("edge %s -> %s", e.From, e.To))
	}
	for _, e := range ob.NonHTTP {
		got = append(got, fmt.Sprintf("apart %s -> %s: %s", e.From, e.To, e.Why))
	}
	for _, e := range ob.Entrypoints {
		got = append(got, fmt.Sprintf("entry %s via %s", e.Callee, e.Via))
	}
	want := []string{
		"edge sock-shop/user -> sock-shop/catalogue",
		"apart sock-shop/user -> sock-shop/mongodb: a database peer (a virtual node named after the client span's db.system mongodb): no HTTP retry applies",
		"apart sock-shop/user -> sock-shop/redis: a database peer (a virtual node named after the client span's db.system redis): no HTTP retry applies",
		"entry sock-shop/front-end via outside the mesh",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read:\n got %q\nwant %q\nwarnings %q", got, want, ob.Warnings)
	}
}
