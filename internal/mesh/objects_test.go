package mesh

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestAddErrors(t *testing.T) {
	cases := []struct{ doc, want string }{
		{vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: -1}"),
			"VirtualService bookinfo/ratings spec.http[0].retries.attempts: -1 is negative"},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{}, {retry: {attempts: -2}}]"),
			"HTTPRoute shop/web spec.rules[1].retry.attempts: -2 is under 1 (the CRD's minimum 1: the API server refuses it)"},
		{btp("shop", "p", "{kind: Gateway, name: eg}", "  retry: {numRetries: -1}"),
			"BackendTrafficPolicy shop/p spec.retry.numRetries: -1 is negative"},
		{svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "two"`),
			`Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "two" is not a non-negative integer`},
		{routeDoc("policy.linkerd.io/v1beta3", "HTTPRoute", "e", "r", `retry.linkerd.io/limit: "-1"`, "  rules: [{}]"),
			`HTTPRoute e/r metadata.annotations["retry.linkerd.io/limit"]: "-1" is not a non-negative integer`},
		// kuma19: conditions Linkerd's policy controller cannot parse (http.rs parse_http_retry,
		// grpc.rs parse_grpc_retry), with which it drops every retry annotation of the object.
		// Before: counted, no word (a Service's 3 tries where Linkerd makes 1).
		{svc("booksapp", "authors", `{retry.linkerd.io/http: "5xx, 429", retry.linkerd.io/limit: "2"}`),
			`Service booksapp/authors metadata.annotations["retry.linkerd.io/http"]: "5xx, 429": condition " 429" is not 5xx, gateway-error, a status code from 100 to 599 or a range of them (500-504), comma-separated without spaces: Linkerd's policy controller drops every retry annotation of the object`},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "e", "r", `{retry.linkerd.io/http: "504-500"}`, "  rules: [{}]"),
			`HTTPRoute e/r metadata.annotations["retry.linkerd.io/http"]: "504-500": condition "504-500" is not 5xx, gateway-error, a status code from 100 to 599 or a range of them (500-504), comma-separated without spaces: Linkerd's policy controller drops every retry annotation of the object`},
		{svc("shop", "grpc", `{retry.linkerd.io/grpc: "unavailable,not-found"}`),
			`Service shop/grpc metadata.annotations["retry.linkerd.io/grpc"]: "unavailable,not-found": condition "not-found" is not cancelled, deadline-exceeded, internal, resource-exhausted or unavailable, comma-separated without spaces: Linkerd's policy controller drops every retry annotation of the object`},
		{svc("shop", "big", `{retry.linkerd.io/limit: "70000"}`),
			`Service shop/big metadata.annotations["retry.linkerd.io/limit"]: "70000" is over 65535, the largest limit Linkerd's policy controller reads (a u16): it drops every retry annotation of the object`},
		{svc("shop", "spaced", `{retry.linkerd.io/limit: " 3"}`),
			`Service shop/spaced metadata.annotations["retry.linkerd.io/limit"]: " 3" is not a non-negative integer`},
		// review19: Rust's u16 parse takes no '-' at all, "-0" included (Go's ParseInt does).
		{svc("shop", "minus-zero", `{retry.linkerd.io/http: "5xx", retry.linkerd.io/limit: "-0"}`),
			`Service shop/minus-zero metadata.annotations["retry.linkerd.io/limit"]: "-0" is not a non-negative integer`},
		{svc("shop", "trailing", `{retry.linkerd.io/http: "5xx,"}`),
			`Service shop/trailing metadata.annotations["retry.linkerd.io/http"]: "5xx,": condition "" is not 5xx, gateway-error, a status code from 100 to 599 or a range of them (500-504), comma-separated without spaces: Linkerd's policy controller drops every retry annotation of the object`},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n    defaultHttpRetryPolicy: {attempts: -3}\n",
			"ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: -3 is negative"},
		{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: \"defaultHttpRetryPolicy: [\"\n",
			"ConfigMap istio-system/istio data.mesh: decoding the MeshConfig YAML: error converting YAML to JSON: yaml: line 1: did not find expected node content"},
		{vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: three}"),
			`VirtualService bookinfo/ratings spec.http[0].retries.attempts: "three" is a string, want an integer`},
		// Before: the Go decoder's "cannot unmarshal ... into Go struct field .spec.http.retries of
		// type struct { PerTryTimeout *string ... }", no index, no value.
		{vs("bookinfo", "ratings", "  http:\n  - route: [{destination: {host: ratings}}]\n  - retries: \"3\""),
			`VirtualService bookinfo/ratings spec.http[1].retries: "3" is a string, want an object`},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{}, {retry: {attempts: 2.5}}]"),
			"HTTPRoute shop/web spec.rules[1].retry.attempts: 2.5 is a number, want an integer"},
		{"apiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: r, namespace: shop}\nspec:\n  policies: {retries: {r1: {policy: constant, maxRetries: \"3\"}}}\n  targets: {apps: {payments: {retry: r1}}}\n",
			`Resiliency shop/r spec.policies.retries.r1.maxRetries: "3" is a string, want an integer`},
		{"apiVersion: consul.hashicorp.com/v1alpha1\nkind: ServiceRouter\nmetadata: {name: api, namespace: shop}\nspec:\n  routes: [{}, {destination: {numRetries: \"3\"}}]\n",
			`ServiceRouter shop/api spec.routes[1].destination.numRetries: "3" is a string, want an integer`},
		{btp("shop", "p", "{kind: Gateway, name: eg}", "  retry: {numRetries: \"3\"}"),
			`BackendTrafficPolicy shop/p spec.retry.numRetries: "3" is a string, want an integer`},
	}
	for _, tc := range cases {
		s := NewSet(Options{})
		_, err := s.AddManifest([]byte(tc.doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("AddManifest error = %v\nwant %q", err, tc.want)
		}
		if got := s.Counts(); len(got) != 0 {
			t.Errorf("an invalid object was added: %v", got)
		}
	}
}

// The conditions Linkerd takes: no error.
func TestLinkerdConditionsValid(t *testing.T) {
	for _, v := range []string{"5xx", "5XX", "gateway-error", "429", "500-504", "500-504,429,5xx", "+503"} {
		if err := linkerdConditions(map[string]string{LinkerdRetryHTTP: v}, "Service s/x"); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	for _, v := range []string{"unavailable", "Cancelled,deadline-exceeded,internal,resource-exhausted"} {
		if err := linkerdConditions(map[string]string{LinkerdRetryGRPC: v}, "Service s/x"); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
}

func TestAddPaths(t *testing.T) {
	s := NewSet(Options{})
	ok, err := s.AddManifest([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}"))
	if ok || err != nil {
		t.Errorf("a Deployment: read %v, %v; want not read", ok, err)
	}
	ok, err = s.AddManifest([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: istio-system}\ndata: {mesh: 'x: ['}"))
	if ok || err != nil {
		t.Errorf("another ConfigMap: read %v, %v; want not read", ok, err)
	}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: "bookinfo", Labels: map[string]string{IstioInjectionLabel: "enabled"}}}
	if ok, err := s.AddObject(ns); !ok || err != nil {
		t.Fatalf("AddObject(Namespace): %v, %v", ok, err)
	}
	if _, err := s.AddObject(&corev1.Pod{}); err == nil || err.Error() != "adding a *v1.Pod: its apiVersion and kind are not set" {
		t.Errorf("AddObject without TypeMeta: %v", err)
	}
	// A Service from a cache: no TypeMeta, recognised by its Go type.
	cached := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "emoji-svc", Namespace: "bookinfo", Annotations: map[string]string{LinkerdRetryLimit: "4"}}}
	if ok, err := s.AddObject(cached); !ok || err != nil || cached.Kind != "" {
		t.Fatalf("AddObject(cached Service): %v, %v, kind %q", ok, err, cached.Kind)
	}
	if got := s.Edge(Caller{Namespace: "bookinfo", Annotations: map[string]string{LinkerdInject: "enabled", IstioInjectAnnotation: "false"}}, "emoji-svc").Tries(); got != 5 {
		t.Errorf("Linkerd tries from the cached Service %d, want 5", got)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
		"metadata": map[string]any{"name": "ratings", "namespace": "bookinfo"},
		"spec":     map[string]any{"hosts": []any{"ratings"}, "http": []any{map[string]any{"retries": map[string]any{"attempts": int64(3)}}}},
	}}
	if ok, err := s.AddUnstructured(u); !ok || err != nil {
		t.Fatalf("AddUnstructured: %v, %v", ok, err)
	}
	c := caller("bookinfo")
	if got := s.Edge(c, "ratings").Tries(); got != 4 {
		t.Errorf("tries %d, want 4", got)
	}
	// Adding again replaces: the gate adds the incoming version over the cluster's.
	u.Object["spec"].(map[string]any)["http"] = []any{map[string]any{"retries": map[string]any{"attempts": int64(1)}}}
	if _, err := s.AddUnstructured(u); err != nil {
		t.Fatal(err)
	}
	if got := s.Edge(c, "ratings").Tries(); got != 2 {
		t.Errorf("after replacing: tries %d, want 2", got)
	}
	if want := map[string]int{"Namespace": 1, "Service": 1, "VirtualService": 1}; !reflect.DeepEqual(s.Counts(), want) {
		t.Errorf("Counts() = %v, want %v", s.Counts(), want)
	}
	if !s.Remove(GroupIstio, "VirtualService", "bookinfo", "ratings") {
		t.Error("Remove: not held")
	}
	if got := s.Edge(c, "ratings").Tries(); got != 3 {
		t.Errorf("after removing: tries %d, want 3 (the default)", got)
	}
	if s.Remove(GroupIstio, "VirtualService", "bookinfo", "ratings") {
		t.Error("Remove twice: held")
	}
}

func TestReads(t *testing.T) {
	for _, k := range [][2]string{{"v1", "Service"}, {"networking.istio.io/v1alpha3", "VirtualService"}, {"gateway.networking.k8s.io/v1beta1", "HTTPRoute"},
		{"gateway.networking.k8s.io/v1", "GRPCRoute"}, {"policy.linkerd.io/v1beta3", "HTTPRoute"}, {"linkerd.io/v1alpha2", "ServiceProfile"},
		{"gateway.envoyproxy.io/v1alpha1", "BackendTrafficPolicy"}, {"gateway.networking.k8s.io/v1", "Gateway"}} {
		if !Reads(k[0], k[1]) {
			t.Errorf("Reads(%s, %s) = false", k[0], k[1])
		}
	}
	for _, k := range [][2]string{{"apps/v1", "Deployment"}, {"networking.istio.io/v1", "DestinationRule"}, {"networking.istio.io/v1", "Gateway"}} {
		if Reads(k[0], k[1]) {
			t.Errorf("Reads(%s, %s) = true", k[0], k[1])
		}
	}
}

func TestNilAndClone(t *testing.T) {
	var none *Set
	c := caller("bookinfo")
	if e := none.Edge(c, "ratings"); !reflect.DeepEqual(e, Edge{}) || e.Tries() != 1 {
		t.Errorf("nil Set Edge = %#v", e)
	}
	if none.Backends() != nil || !reflect.DeepEqual(none.Entry(ServiceRef{"a", "b"}), Edge{}) {
		t.Error("nil Set has north-south layers")
	}
	base := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 3}"))
	judged := base.Clone()
	if _, err := judged.AddManifest([]byte(vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 7}"))); err != nil {
		t.Fatal(err)
	}
	if b, j := base.Edge(c, "ratings").Tries(), judged.Edge(c, "ratings").Tries(); b != 4 || j != 8 {
		t.Errorf("base %d (want 4), clone with the incoming object %d (want 8)", b, j)
	}
}
