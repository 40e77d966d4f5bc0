package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/retrycap/retrycap/internal/promquery/promtest"
)

// TestDiscoverIstioClusters: a real Prometheus holding two clusters' Istio series (source_cluster
// east and west, the same workload shop/web calling shop/payment in each, only west's calling
// shop/stock). Before, discover proposed web the upstreams of both clusters (payment, stock),
// its rate the two clusters' added. Now without --istio-cluster it refuses, naming the clusters
// and the flag; --istio-cluster east reads east's alone (payment) and says what it left out.
func TestDiscoverIstioClusters(t *testing.T) {
	line := func(cluster, dst string, v int) string {
		return strings.ReplaceAll(istioSeries("source", "web", "shop", dst, "shop", "200", v), `source_cluster="Kubernetes"`, `source_cluster="`+cluster+`"`)
	}
	istio := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" + line("east", "payment", 10*n) + line("west", "payment", 30*n) + line("west", "stock", 5*n)
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: istio}})
	client, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(client)
	for deadline := time.Now().Add(60 * time.Second); ; {
		v, _, _, err := papi.Query(context.Background(), `min(count_over_time(istio_requests_total[1m]))`, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && vec[0].Value >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("five scrapes not within 60s: %v %v", v, err)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	code, out, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m")
	want := "retrycap: discover: Prometheus at " + prom.URL + `: istio: the answers hold the series of 2 clusters (label source_cluster: "east", "west"): ` +
		"a workload of one namespace and name in each would be read as one caller, their calls added; pick the cluster with --istio-cluster (discover) or --prometheus-istio-cluster (the manager)\n"
	if code != ExitBadInput || out != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q\ngot  %s\nwant %s", code, out, stderr, want)
	}
	code, out, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "--istio-cluster", "east", "-o", "json")
	if code != 0 || !strings.Contains(out, `"annotation": "payment"`) || strings.Contains(out, "stock") {
		t.Fatalf("--istio-cluster east: exit %d\n%s\n%s", code, out, stderr)
	}
	wantWarn := `warning: istio: source_cluster is another cluster's than "east" (--istio-cluster, --prometheus-istio-cluster): not read: 2 series (e.g. {destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_cluster="west", source_workload="web", source_workload_namespace="shop"})`
	if stderr != wantWarn+"\n" {
		t.Fatalf("--istio-cluster east: stderr\n%s\nwant\n%s", stderr, wantWarn)
	}
}

// TestDiscoverReplicaLabelRefused: --prometheus-replica-label naming a label an edge is read by
// would read two edges as one's replicas: refused before any query, naming the flag and value.
func TestDiscoverReplicaLabelRefused(t *testing.T) {
	code, out, stderr := run(t, "", "discover", "--prometheus-url", "http://127.0.0.1:1", "--prometheus-replica-label", "replica", "--prometheus-replica-label", "destination_service_name")
	want := `retrycap: discover: --prometheus-replica-label "destination_service_name": a label the queries read an edge by (caller label "service"): two edges would be read as one's replicas` + "\n"
	if code != ExitBadInput || out != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q\ngot  %s\nwant %s", code, out, stderr, want)
	}
}

// TestDiscoverClusterLabel: a real Prometheus holding two clusters' Istio series told apart only
// by the external label cluster (each cluster's Istio keeps its default cluster ID,
// source_cluster "Kubernetes", so Istio's own check sees one cluster). Before, discover added
// them: web's upstreams of both clusters (payment, stock), silently. Now without --cluster it
// refuses, naming the label, the values and the flags; --cluster east reads east's alone.
func TestDiscoverClusterLabel(t *testing.T) {
	east := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" + istioSeries("source", "web", "shop", "payment", "shop", "200", 10*n)
	}})
	west := serve(t, &exporter{lines: func(n int) string {
		return "# TYPE istio_requests_total counter\n" + istioSeries("source", "web", "shop", "payment", "shop", "200", 30*n) +
			istioSeries("source", "web", "shop", "stock", "shop", "200", 5*n)
	}})
	prom := promtest.StartTargets(t, "../..", []promtest.Target{{Addr: east, Labels: map[string]string{"cluster": "east"}}, {Addr: west, Labels: map[string]string{"cluster": "west"}}})
	client, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	papi := v1.NewAPI(client)
	for deadline := time.Now().Add(60 * time.Second); ; {
		v, _, _, err := papi.Query(context.Background(), `min(count_over_time(istio_requests_total[1m]))`, time.Now())
		if vec, ok := v.(model.Vector); err == nil && ok && len(vec) == 1 && vec[0].Value >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("five scrapes not within 60s: %v %v", v, err)
		}
		time.Sleep(100 * time.Millisecond) // polling interval
	}
	code, out, stderr := run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m")
	want := "retrycap: discover: Prometheus at " + prom.URL + `: the answers hold the series of 2 clusters (label cluster: "east", "west"): ` +
		"a workload of one namespace and name in each would be read as one caller, their calls added; pick the cluster with --cluster (discover) or --prometheus-cluster (the manager), " +
		"or, if cluster names no cluster (a pod's label), name the label that does with --prometheus-cluster-label\n"
	if code != ExitBadInput || out != "" || stderr != want {
		t.Fatalf("exit %d, stdout %q\ngot  %s\nwant %s", code, out, stderr, want)
	}
	code, out, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--since", "1m", "--cluster", "east", "-o", "json")
	if code != 0 || !strings.Contains(out, `"annotation": "payment"`) || strings.Contains(out, "stock") {
		t.Fatalf("--cluster east: exit %d\n%s\n%s", code, out, stderr)
	}
	wantWarn := `warning: a series of another cluster than "east" (--cluster, --prometheus-cluster): not read: 2 series (e.g. {cluster="west", destination_service_name="payment", destination_service_namespace="shop", reporter="source", source_cluster="Kubernetes", source_workload="web", source_workload_namespace="shop"})`
	if stderr != wantWarn+"\n" {
		t.Fatalf("--cluster east: stderr\n%s\nwant\n%s", stderr, wantWarn)
	}
	// A label the queries read an edge by is refused at start, naming the flag.
	code, _, stderr = run(t, "", "discover", "--prometheus-url", prom.URL, "--prometheus-cluster-label", "namespace")
	if wantBad := `retrycap: discover: --prometheus-cluster-label "namespace": a label the queries read an edge by (caller label "service"): it is no cluster's` + "\n"; code != ExitBadInput || stderr != wantBad {
		t.Fatalf("--prometheus-cluster-label namespace: exit %d\ngot  %s\nwant %s", code, stderr, wantBad)
	}
}
