package mesh

import (
	"strings"
	"testing"
)

// Istio ambient waypoints: a callee-side layer on the calls of ztunnel-captured callers into a
// Service that uses a waypoint (waypoint.go); never beside a sidecar's layer.
func TestWaypointLayer(t *testing.T) {
	const (
		ambientNS = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}}\n"
		waypoint  = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: waypoint, namespace: shop}\n" +
			"spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE}]}\n"
		orders = "apiVersion: v1\nkind: Service\nmetadata: {name: orders, namespace: shop}\nspec: {ports: [{name: http, port: 8080}]}\n"
	)
	gw := func(ns, extra string) string {
		return "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: waypoint, namespace: " + ns + extra + "}\n" +
			"spec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE"
	}
	web := Caller{Name: "Deployment shop/web", Namespace: "shop"}
	cases := []struct {
		name   string
		docs   []string
		caller Caller
		callee string
		want   string // the layers, "; "-joined
		warn   string
	}{
		{name: "namespace label, no Gateway in the input: assumed, Istio's default", docs: []string{ambientNS, orders}, caller: web, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/waypoint (assumed: Namespace shop istio.io/use-waypoint=waypoint, no Gateway shop/waypoint in the input))"},
		{name: "the Gateway in the input", docs: []string{ambientNS, orders, waypoint}, caller: web, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a VirtualService binding the Service applies at the waypoint", docs: []string{ambientNS, orders, waypoint,
			"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: orders, namespace: shop}\nspec: {hosts: [orders], http: [{retries: {attempts: 4}}]}\n"},
			caller: web, callee: "orders",
			want: "5 (VirtualService shop/orders spec.http[0].retries.attempts: 4 at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a GAMMA HTTPRoute (parentRef the Service) applies at the waypoint", docs: []string{ambientNS, orders, waypoint,
			"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: orders, namespace: shop}\nspec: {parentRefs: [{group: \"\", kind: Service, name: orders}], rules: [{retry: {attempts: 1}}]}\n"},
			caller: web, callee: "orders",
			want: "2 (HTTPRoute shop/orders spec.rules[0].retry.attempts: 1 at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a VirtualService of a third namespace does not apply at the waypoint", docs: []string{ambientNS, orders, waypoint,
			"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: orders, namespace: other}\nspec: {hosts: [orders.shop.svc.cluster.local], http: [{retries: {attempts: 4}}]}\n"},
			caller: web, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "the Service's own label wins over the namespace's: none", docs: []string{ambientNS, waypoint,
			"apiVersion: v1\nkind: Service\nmetadata: {name: orders, namespace: shop, labels: {istio.io/use-waypoint: none}}\n"},
			caller: web, callee: "orders", want: ""},
		{name: "the Service's label in a namespace without one", docs: []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio.io/dataplane-mode: ambient}}\n",
			"apiVersion: v1\nkind: Service\nmetadata: {name: orders, namespace: shop, labels: {istio.io/use-waypoint: orders-wp}}\n"},
			caller: web, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/orders-wp (assumed: Service shop/orders istio.io/use-waypoint=orders-wp, no Gateway shop/orders-wp in the input))"},
		{name: "a pod opted out of ambient (dataplane-mode none): no layer", docs: []string{ambientNS, orders},
			caller: Caller{Name: "Deployment shop/web", Namespace: "shop", Labels: map[string]string{IstioDataplaneModeLabel: "none"}}, callee: "orders", want: ""},
		{name: "a pod labelled ambient in a plain namespace", docs: []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: plain}\n", ambientNS, orders, waypoint},
			caller: Caller{Name: "Deployment plain/web", Namespace: "plain", Labels: map[string]string{IstioDataplaneModeLabel: "ambient"}}, callee: "orders.shop",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a caller outside the mesh bypasses the waypoint", docs: []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: plain}\n", ambientNS, orders, waypoint},
			caller: Caller{Name: "Deployment plain/web", Namespace: "plain"}, callee: "orders.shop", want: ""},
		{name: "a sidecar caller: its own layer only, never the waypoint's too", docs: []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: side, labels: {istio-injection: enabled, istio.io/dataplane-mode: ambient}}\n", ambientNS, orders, waypoint},
			caller: Caller{Name: "Deployment side/web", Namespace: "side"}, callee: "orders.shop", want: "3 (Istio default, no VirtualService binds shop/orders)"},
		{name: "a manifest already injected (istio-proxy) in an ambient namespace: the sidecar's layer", docs: []string{ambientNS, orders, waypoint},
			caller: Caller{Name: "Deployment shop/web", Namespace: "shop", Containers: []string{"app", IstioProxyContainer}}, callee: "orders",
			want: "3 (Istio default, no VirtualService binds orders)"},
		{name: "sidecar.istio.io/inject false in a namespace with both labels: ambient, the waypoint's layer", docs: []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled, istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}}\n", orders, waypoint},
			caller: Caller{Name: "Deployment shop/web", Namespace: "shop", Annotations: map[string]string{IstioInjectAnnotation: "false"}}, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a TCP port: the waypoint does not retry", docs: []string{ambientNS, waypoint,
			"apiVersion: v1\nkind: Service\nmetadata: {name: orders, namespace: shop}\nspec: {ports: [{name: tcp-db, port: 5432}]}\n"},
			caller: web, callee: "orders", want: "1 (IstioWaypoint does not retry tcp port 5432 (tcp-db) of Service shop/orders)"},
		{name: "waypoint-for workload takes no service traffic", docs: []string{ambientNS, orders, gw("shop", ", labels: {istio.io/waypoint-for: workload}") + "}]}\n"},
			caller: web, callee: "orders", want: "",
			warn: "Namespace shop istio.io/use-waypoint=waypoint names Gateway shop/waypoint, whose istio.io/waypoint-for=workload takes no service traffic: no waypoint layer"},
		{name: "waypoint-for all takes it", docs: []string{ambientNS, orders, gw("shop", ", labels: {istio.io/waypoint-for: all}") + "}]}\n"},
			caller: web, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint shop/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "another namespace's waypoint, listener from Same (the default): refused", docs: []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: mesh-wp}}\n",
			orders, gw("mesh-wp", "") + "}]}\n"},
			caller: web, callee: "orders", want: "",
			warn: "Namespace shop istio.io/use-waypoint=waypoint names Gateway mesh-wp/waypoint, whose HBONE listener does not allow namespace shop: Istio refuses the attachment, no waypoint layer"},
		{name: "another namespace's waypoint, from All; its namespace's VirtualService applies", docs: []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: mesh-wp}}\n",
			orders, gw("mesh-wp", "") + ", allowedRoutes: {namespaces: {from: All}}}]}\n",
			"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: orders, namespace: mesh-wp}\nspec: {hosts: [orders.shop.svc.cluster.local], http: [{retries: {attempts: 1}}]}\n"},
			caller: web, callee: "orders",
			want: "2 (VirtualService mesh-wp/orders spec.http[0].retries.attempts: 1 at waypoint mesh-wp/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a listener selecting the namespace by label", docs: []string{
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {team: a, istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint, istio.io/use-waypoint-namespace: mesh-wp}}\n",
			orders, gw("mesh-wp", "") + ", allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}}]}\n"},
			caller: web, callee: "orders",
			want: "3 (Istio default, no VirtualService or HTTPRoute binds shop/orders at waypoint mesh-wp/waypoint (Namespace shop istio.io/use-waypoint=waypoint))"},
		{name: "a Gateway of another class is not read", docs: []string{ambientNS, orders,
			"apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: waypoint, namespace: shop}\nspec: {gatewayClassName: istio-agentgateway-waypoint}\n"},
			caller: web, callee: "orders", want: "",
			warn: `Namespace shop istio.io/use-waypoint=waypoint names Gateway shop/waypoint of class "istio-agentgateway-waypoint", not istio-waypoint: its retries are not read`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSet(Options{})
			for _, doc := range c.docs {
				if _, err := s.AddManifest([]byte(doc)); err != nil {
					t.Fatal(err)
				}
			}
			e := s.Edge(c.caller, c.callee)
			var got []string
			for _, l := range e.Layers {
				got = append(got, l.String())
			}
			if g := strings.Join(got, "; "); g != c.want {
				t.Errorf("layers %q\nwant   %q", g, c.want)
			}
			if g := strings.Join(e.Warnings, "; "); g != c.warn {
				t.Errorf("warnings %q\nwant     %q", g, c.warn)
			}
		})
	}
}

// Ingress traffic skips a waypoint unless istio.io/ingress-use-waypoint is "true" on the Service
// (else on its Namespace): then the gateway's tries and the waypoint's multiply.
func TestWaypointEntry(t *testing.T) {
	const route = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: shop}\n" +
		"spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: front, port: 80}], retry: {attempts: 1}}]}\n"
	ns := func(extra string) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint" + extra + "}}\n"
	}
	cases := []struct {
		name string
		docs []string
		want string
	}{
		{"no label: the waypoint is skipped", []string{ns(""), route}, "2 (HTTPRoute shop/web spec.rules[0].retry.attempts: 1)"},
		{"namespace label true", []string{ns(", istio.io/ingress-use-waypoint: \"true\""), route},
			"2 (HTTPRoute shop/web spec.rules[0].retry.attempts: 1); 3 (Istio default, no VirtualService or HTTPRoute binds shop/front at waypoint shop/waypoint (assumed: Namespace shop istio.io/use-waypoint=waypoint, no Gateway shop/waypoint in the input))"},
		{"the Service's false wins over the namespace's true", []string{ns(", istio.io/ingress-use-waypoint: \"true\""), route,
			"apiVersion: v1\nkind: Service\nmetadata: {name: front, namespace: shop, labels: {istio.io/ingress-use-waypoint: \"false\"}}\n"},
			"2 (HTTPRoute shop/web spec.rules[0].retry.attempts: 1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewSet(Options{})
			for _, doc := range c.docs {
				if _, err := s.AddManifest([]byte(doc)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, l := range s.Entry(ServiceRef{"shop", "front"}).Layers {
				got = append(got, l.String())
			}
			if g := strings.Join(got, "; "); g != c.want {
				t.Errorf("entry layers %q\nwant         %q", g, c.want)
			}
		})
	}
}

// The waypoint's fix is in its unit: the route's field when a route sets the retries, else what
// to declare (or the label that takes the Service off the waypoint).
func TestWaypointRewrite(t *testing.T) {
	s := NewSet(Options{})
	for _, doc := range []string{
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}}\n",
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: orders, namespace: shop}\nspec: {hosts: [orders], http: [{retries: {attempts: 4}}]}\n",
	} {
		if _, err := s.AddManifest([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	web := Caller{Name: "Deployment shop/web", Namespace: "shop"}
	rw, err := PlanRewrite(s.Edge(web, "orders").Layers[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := "VirtualService shop/orders spec.http[0].retries.attempts: 4 -> 1"; rw.Suggestion != want {
		t.Errorf("suggestion %q, want %q", rw.Suggestion, want)
	}
	_, err = PlanRewrite(s.Edge(web, "pay").Layers[0], 1)
	want := "Istio default, no VirtualService or HTTPRoute binds shop/pay at waypoint shop/waypoint (assumed: Namespace shop istio.io/use-waypoint=waypoint, no Gateway shop/waypoint in the input): " +
		"no object declares these 3 tries; declare the retries for the Service at its waypoint (a VirtualService route with retries.attempts: 0; an HTTPRoute's rules[].retry.attempts is at least 1, 2 tries), or take the Service off the waypoint (label istio.io/use-waypoint: none)"
	if err == nil || err.Error() != want {
		t.Errorf("default's rewrite: %v\nwant %s", err, want)
	}
}
