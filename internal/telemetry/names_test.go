package telemetry

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestLabelValuesThatAreNoNames: a label value that is no Kubernetes name of its kind (a "/" or
// "=" in a Service, a newline in a workload, a space in a namespace) names no caller or callee:
// a warning naming the label, not an edge. Before, each was an edge, and discover's patch wrote
// it: metadata.name "we/b", namespace "sh/op", and retrycap.dev/upstreams "a/b, cart\nspec: x,
// cart.sh op, cart.sh=op, pay ment, payment=9", whose "payment=9" is an entry of 9 attempts
// (discover never writes attempts) and whose other entries the annotation's parser refuses.
func TestLabelValuesThatAreNoNames(t *testing.T) {
	ob := mustRead(t, []Answer{
		answer("response_total",
			sample(60, "namespace", "shop", "deployment", "web", "dst_namespace", "shop", "dst_service", "payment=9"),
			sample(60, "namespace", "shop", "deployment", "web", "dst_namespace", "shop", "dst_service", "a/b"),
			sample(60, "namespace", "shop", "deployment", "web", "dst_namespace", "shop", "dst_service", "cart\nspec: x"),
			sample(60, "namespace", "shop", "deployment", "web", "dst_namespace", "sh op", "dst_service", "cart"),
			sample(60, "namespace", "shop", "deployment", "we/b", "dst_namespace", "shop", "dst_service", "cart"),
			sample(60, "namespace", "shop", "deployment", "web", "dst_namespace", "shop", "dst_service", "cart"),
		),
		answer("istio_requests_total",
			istio("source", "web\nx: y", "shop", "cart", "shop", 6),
			istio("source", "web", "sh/op", "cart", "shop", 6),
			istio("source", "web", "shop", "cart", "sh=op", 6),
			istio("destination", "unknown", "unknown", "cart", "Shop", 6),
			istio("source", "web", "shop", "stock", "shop", 6),
		),
		answer("traces_service_graph_request_total",
			sample(30, "client", "Web App", "server", "cart", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
			sample(30, "client", "web", "server", "Cart", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
			sample(30, "client", "user", "server", "cart", "connection_type", "virtual_node", "server_k8s_namespace_name", "shop_"),
			sample(30, "client", "web", "server", "stock", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
		),
		answer("retrycap_proxy_requests_total",
			sample(60, "namespace", "shop", "service", "web", "upstream", "payment=9"),
			sample(60, "namespace", "shop", "service", "web", "upstream", "pay ment"),
			sample(60, "namespace", "shop", "service", "web", "upstream", "api.example.com/x"),
			sample(60, "namespace", "shop", "service", "w/eb", "upstream", "cart"),
			sample(60, "namespace", "shop", "service", "web", "upstream", "cart"),
		),
		answer("retrycap_proxy_attempts_total",
			sample(90, "namespace", "shop", "service", "web", "upstream", "payment=9"),
			sample(90, "namespace", "shop", "service", "web", "upstream", "cart"),
		),
	}, Options{Window: time.Minute})
	got := strings.Join(summary(ob), "\n")
	want := strings.Join([]string{
		"edge linkerd shop/web (Deployment) > shop/cart 1.00/s",
		"edge retrycap shop/web (service) > shop/cart 1.00/s tries 1.50",
		"edge istio shop/web > shop/stock 0.10/s",
		"edge otel-servicegraph shop/web (service) > shop/stock 0.50/s",
		`warning istio: destination_service_namespace is no namespace name (a DNS-1123 label): not an edge: 2 series (e.g. {destination_service_name="cart", destination_service_namespace="sh=op", reporter="source", source_workload="web", source_workload_namespace="shop"})`,
		`warning istio: source_workload is no workload name (a DNS-1123 subdomain): not an edge: 1 series (e.g. {destination_service_name="cart", destination_service_namespace="shop", reporter="source", source_workload="web\nx: y", source_workload_namespace="shop"})`,
		`warning istio: source_workload_namespace is no namespace name (a DNS-1123 label): not an edge: 1 series (e.g. {destination_service_name="cart", destination_service_namespace="shop", reporter="source", source_workload="web", source_workload_namespace="sh/op"})`,
		`warning linkerd response_total: deployment is no workload name (a DNS-1123 subdomain): not an edge: 1 series (e.g. {deployment="we/b", dst_namespace="shop", dst_service="cart", namespace="shop"})`,
		`warning linkerd response_total: dst_namespace is no namespace name (a DNS-1123 label): not an edge: 1 series (e.g. {deployment="web", dst_namespace="sh op", dst_service="cart", namespace="shop"})`,
		`warning linkerd response_total: dst_service is no Service name (a DNS-1035 label): not an edge: 3 series (e.g. {deployment="web", dst_namespace="shop", dst_service="payment=9", namespace="shop"})`,
		`warning otel-servicegraph: client is no service name (a label value: at most 63 letters, digits, "-", "_" and "."): not an edge: 1 series (e.g. {client="Web App", client_k8s_namespace_name="shop", server="cart", server_k8s_namespace_name="shop"})`,
		`warning otel-servicegraph: server is no Service name (a DNS-1035 label): not an edge: 1 series (e.g. {client="web", client_k8s_namespace_name="shop", server="Cart", server_k8s_namespace_name="shop"})`,
		`warning otel-servicegraph: the server's namespace is no namespace name (a DNS-1123 label): not an edge: 1 series (e.g. {client="user", connection_type="virtual_node", server="cart", server_k8s_namespace_name="shop_"})`,
		`warning retrycap: service is no service name (a label value: at most 63 letters, digits, "-", "_" and "."): not an edge: 1 series (e.g. {namespace="shop", service="w/eb", upstream="cart"})`,
		`warning retrycap: upstream is no Service name (a DNS-1035 label): not an edge: 2 series (e.g. {namespace="shop", service="web", upstream="payment=9"})`,
		`warning retrycap: upstream is no host name (a DNS-1123 subdomain): not an edge: 1 series (e.g. {namespace="shop", service="web", upstream="api.example.com/x"})`,
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	var b bytes.Buffer
	if err := RenderPatch(&b, Discover(Input{Observation: ob})); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"/b", "sh/op", "=9", "spec: x", "x: y", "sh op", "pay ment"} {
		if strings.Contains(b.String(), bad) {
			t.Errorf("the patch holds %q:\n%s", bad, b.String())
		}
	}
}

// TestOutsideTheMeshCountedOnce: calls from outside the mesh (source_workload "unknown") are
// counted by each layer that saw them, a waypoint's and the destination's sidecar, like an
// in-mesh edge's: the entrypoint's rate is one layer's count, the waypoint's first (before: the
// two summed, 2.00/s for 60 calls a minute), and a reporter that is none of Istio's is a warning
// as on an in-mesh edge (before: summed without one).
func TestOutsideTheMeshCountedOnce(t *testing.T) {
	ob := mustRead(t, []Answer{answer("istio_requests_total",
		istio("waypoint", "unknown", "unknown", "cart", "shop", 60),
		istio("destination", "unknown", "unknown", "cart", "shop", 60),
		istio("destination", "unknown", "unknown", "stock", "shop", 30),
		istio("client", "unknown", "unknown", "pay", "shop", 30),
	)}, Options{Window: time.Minute})
	got := strings.Join(summary(ob), "\n")
	want := strings.Join([]string{
		"entry istio shop/cart via outside the mesh 1.00/s",
		"entry istio shop/stock via outside the mesh 0.50/s",
		`warning istio: reporter neither source, waypoint nor destination: 1 series (e.g. {destination_service_name="pay", destination_service_namespace="shop", reporter="client", source_workload="unknown", source_workload_namespace="unknown"})`,
	}, "\n")
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestNameKindsAsKubernetes: the hand-written checks say what k8s.io/apimachinery's validation
// says, on names built from the characters that matter, at and around the length bounds.
func TestNameKindsAsKubernetes(t *testing.T) {
	k8s := map[nameKind]func(string) bool{
		kindNamespace: func(v string) bool { return len(validation.IsDNS1123Label(v)) == 0 },
		kindService:   func(v string) bool { return len(validation.IsDNS1035Label(v)) == 0 },
		kindWorkload:  func(v string) bool { return len(validation.IsDNS1123Subdomain(v)) == 0 },
		kindHost:      func(v string) bool { return len(validation.IsDNS1123Subdomain(v)) == 0 },
		kindCaller:    func(v string) bool { return v != "" && len(validation.IsValidLabelValue(v)) == 0 },
	}
	alphabet := []string{"a", "z", "0", "9", "-", ".", "_", "A", "Z", "/", "=", " ", "\n", "ü", "\xff"}
	var names []string
	var grow func(prefix string, n int)
	grow = func(prefix string, n int) {
		names = append(names, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+c, n-1)
		}
	}
	grow("", 4) // every name of up to 4 of these characters: 54,241
	for _, n := range []int{62, 63, 64, 252, 253, 254} {
		names = append(names, strings.Repeat("a", n), "a"+strings.Repeat("-", n-2)+"a", strings.Repeat("a.", n/2)+"a"[:n%2],
			strings.Repeat("ab.", n/3)+"ab"[:n%3])
	}
	for _, v := range names {
		for kind, want := range k8s {
			if got := kind.ok(v); got != want(v) {
				t.Errorf("%s %q: got %v, Kubernetes says %v", nameKinds[kind], v, got, want(v))
			}
		}
	}
}

// TestInferredWorkloadMustBeAName: a service caller (the service graph's client, retrycap's caller
// label) that maps to no workload is listed as a Deployment of its name (kind inferred); a
// service name that is a label value but no workload name ("web_app", "Web.App") is then no
// Deployment anyone has: a warning, no patch (before: a patch of Deployment "web_app", which
// kubectl refuses).
func TestInferredWorkloadMustBeAName(t *testing.T) {
	ob := mustRead(t, []Answer{answer("traces_service_graph_request_total",
		sample(30, "client", "web_app", "server", "cart", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
		sample(30, "client", "web", "server", "cart", "client_k8s_namespace_name", "shop", "server_k8s_namespace_name", "shop"),
	), answer("retrycap_proxy_requests_total",
		sample(60, "namespace", "shop", "service", "Web.App", "upstream", "cart"),
	)}, Options{Window: time.Minute})
	res := Discover(Input{Observation: ob})
	var got []string
	for _, w := range res.Workloads {
		got = append(got, w.Kind+" "+w.Namespace+"/"+w.Name+": "+w.Annotation)
	}
	got = append(got, res.Warnings...)
	want := []string{
		"Deployment shop/web: cart",
		`retrycap: service shop/Web.App maps to no workload, and is no workload name (a DNS-1123 subdomain) to list it as a Deployment of: no patch (its upstreams: cart)`,
		`otel-servicegraph: service shop/web_app maps to no workload, and is no workload name (a DNS-1123 subdomain) to list it as a Deployment of: no patch (its upstreams: cart)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
