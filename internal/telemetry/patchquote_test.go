package telemetry

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestHostileNamesNeverReachThePatch: a service graph's client and server are service.name
// values any pod can set; a newline in one ended a comment of the patch and wrote its remainder
// as YAML of the patch kubectl applies, and was proposed as an upstream. Such a series is no
// edge (a warning), a ServiceEntry-like host must be a DNS name, and the patch's comments quote
// whatever is not printable.
func TestHostileNamesNeverReachThePatch(t *testing.T) {
	ob := mustRead(t, []Answer{answer("traces_service_graph_request_total",
		sample(30, "client", "web", "server", "pay.example.com\nspec: {replicas: 0}", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
		sample(6, "client", "web", "server", "orders", "connection_type", "database", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop\n#x\nkind: Secret"),
		sample(6, "client", "web", "server", "cart", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
	), answer("istio_requests_total",
		istio("source", "web", "shop", "a.example.com\nkind: Secret", "shop", 6),
	)}, Options{Window: time.Minute})
	got := strings.Join(summary(ob), "\n")
	want := strings.Join([]string{
		"edge otel-servicegraph shop/web (service) > shop/cart 0.10/s",
		`warning istio: destination_service_name is not a host name: not an edge: 1 series (e.g. {destination_service_name="a.example.com\nkind: Secret", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
		`warning otel-servicegraph: a client, server or namespace with a control character or invalid UTF-8: not an edge: 2 series (e.g. {client="web", client_k8s_namespace_name="shop", server="pay.example.com\nspec: {replicas: 0}", server_k8s_namespace_name="shop"})`,
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// The comments quote what is not printable, whatever reached them.
	res := &Result{Workloads: []WorkloadResult{{Namespace: "shop", Kind: "Deployment", Name: "web", Upstreams: []string{"cart"}, Annotation: "cart",
		Discovered: []Proposal{{Upstream: "cart\nspec: {replicas: 0}", Sources: []string{"env"}}}}},
		NonHTTP: []NonHTTPResult{{From: "shop/web", To: "shop\n#x\nkind: Secret/orders", Source: "otel-servicegraph", Why: "a database call"}}}
	var b bytes.Buffer
	if err := RenderPatch(&b, res); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "spec: {replicas") || strings.HasPrefix(l, "kind: Secret") {
			t.Fatalf("a label value's line is YAML of the patch:\n%s", out)
		}
	}
	for _, want := range []string{`#   "cart\nspec: {replicas: 0}": env`, `#   shop/web -> "shop\n#x\nkind: Secret/orders" (otel-servicegraph)`} {
		if !strings.Contains(out, want) {
			t.Errorf("the patch lacks %s:\n%s", want, out)
		}
	}
}
