package mesh

import (
	"reflect"
	"strings"
	"testing"
)

// ing is an Ingress of shop routing / to frontend, with annotations (a YAML map's inside) and
// spec lines before the rules.
func ing(name, annotations, spec string) string {
	return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: " + name + ", namespace: shop, annotations: {" + annotations + "}}\nspec:\n" + spec +
		"  rules:\n  - host: shop.example\n    http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: frontend, port: {number: 80}}}}\n"
}

func ingClass(name, controller, annotations string) string {
	return "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: " + name + ", annotations: {" + annotations + "}}\nspec: {controller: " + controller + "}\n"
}

const triesKey = `metadata.annotations["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"]`

func TestIngressNginxEntry(t *testing.T) {
	frontend := ServiceRef{"shop", "frontend"}
	cases := []struct {
		name    string
		docs    string
		backend ServiceRef
		want    Edge
	}{
		{
			name: "class nginx, no IngressClass in the input: assumed, the default 3 tries", backend: frontend,
			docs: ing("web", "", "  ingressClassName: nginx\n"),
			want: Edge{Layers: []Layer{{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input; no ingress-nginx controller of this class in the input, so no ConfigMap: NewDefault's 3 tries assumed)"}}},
		},
		{
			name: "IngressClass of k8s.io/ingress-nginx, tries annotation 5", backend: frontend,
			docs: ingClass("public", "k8s.io/ingress-nginx", "") + "---\n" + ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "5"`, "  ingressClassName: public\n"),
			want: Edge{Layers: []Layer{{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 5,
				Note: `Ingress shop/web ` + triesKey + `: "5" (ingress-nginx, class public)`}}},
		},
		{
			name: "legacy annotation kubernetes.io/ingress.class nginx", backend: frontend,
			docs: ing("web", `kubernetes.io/ingress.class: nginx`, ""),
			want: Edge{Layers: []Layer{{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx, assumed: kubernetes.io/ingress.class nginx, no IngressClass nginx in the input; no ingress-nginx controller of this class in the input, so no ConfigMap: NewDefault's 3 tries assumed)"}}},
		},
		{
			name: "proxy-next-upstream off: 1 try, whatever the tries", backend: frontend,
			docs: ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream: "off", nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "0"`, "  ingressClassName: nginx\n"),
			want: Edge{Layers: []Layer{{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: `metadata.annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"]`, Tries: 1,
				Note: `Ingress shop/web metadata.annotations["nginx.ingress.kubernetes.io/proxy-next-upstream"]: "off": no retries (ingress-nginx, class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input)`}}},
		},
		{
			name: "no class, default IngressClass of ingress-nginx in the input", backend: frontend,
			docs: ingClass("nginx", "k8s.io/ingress-nginx", `ingressclass.kubernetes.io/is-default-class: "true"`) + "---\n" + ing("web", "", ""),
			want: Edge{Layers: []Layer{{Kind: IngressNginx, Object: "Ingress shop/web", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/web sets none (class nginx; no ingress-nginx controller of this class in the input, so no ConfigMap: NewDefault's 3 tries assumed)"}}},
		},
		{
			name: "the largest of two Ingresses; defaultBackend counts", backend: frontend,
			docs: ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"`, "  ingressClassName: nginx\n") + "---\n" +
				"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: catchall, namespace: shop}\nspec:\n  ingressClassName: nginx\n  defaultBackend: {service: {name: frontend, port: {number: 80}}}\n",
			want: Edge{Layers: []Layer{{Kind: IngressNginx, Object: "Ingress shop/catchall", FieldPath: triesKey, Tries: 3, Default: true,
				Note: "ingress-nginx default proxy-next-upstream-tries 3, Ingress shop/catchall sets none (class nginx, assumed: spec.ingressClassName nginx, no IngressClass nginx in the input; no ingress-nginx controller of this class in the input, so no ConfigMap: NewDefault's 3 tries assumed)"}}},
		},
		{
			name: "class traefik: 1 try and a warning naming the Ingress", backend: frontend,
			docs: ingClass("traefik", "traefik.io/ingress-controller", "") + "---\n" + ing("web", "", "  ingressClassName: traefik\n"),
			want: Edge{Layers: []Layer{{Kind: Ingress, Object: "Ingress shop/web", Tries: 1, Default: true,
				Note: "Ingress shop/web class traefik (controller traefik.io/ingress-controller): its controller's retries are not modelled"}},
				Warnings: []string{"Ingress shop/web class traefik (controller traefik.io/ingress-controller): its controller's retries are not modelled (retrycap reads ingress-nginx's)"}},
		},
		// istio/istio eed52ebb66ad pilot/pkg/config/kube/ingress: an Ingress of Istio's class is
		// translated into routes without retries; the gateway applies the mesh default (before:
		// 1 try and "not modelled", a false green on bookinfo-ingress.yaml).
		{
			name: "legacy annotation kubernetes.io/ingress.class istio: Istio's default, 3", backend: frontend,
			docs: ing("web", `kubernetes.io/ingress.class: istio`, ""),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "Ingress shop/web", Tries: 3, Default: true,
				Note: "Istio default, Ingress shop/web class istio: Istio routes it with no retries"}}},
		},
		{
			name: "an IngressClass of istio.io/ingress-controller, MeshConfig's 4 retries", backend: frontend,
			docs: ingClass("mesh-ingress", "istio.io/ingress-controller", "") + "---\n" + ing("web", "", "  ingressClassName: mesh-ingress\n") + "---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |-\n    defaultHttpRetryPolicy:\n      attempts: 4\n",
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "ConfigMap istio-system/istio", FieldPath: "data.mesh", Tries: 5, Default: true,
				Note: "Istio default from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 4, Ingress shop/web class mesh-ingress: Istio routes it with no retries"}}},
		},
		{
			name: "spec.ingressClassName istio, no IngressClass in the input: assumed", backend: frontend,
			docs: ing("web", "", "  ingressClassName: istio\n"),
			want: Edge{Layers: []Layer{{Kind: Istio, Object: "Ingress shop/web", Tries: 3, Default: true,
				Note: "Istio default, Ingress shop/web class istio, assumed: spec.ingressClassName istio, no IngressClass istio in the input: Istio routes it with no retries"}}},
		},
		{
			name: "an unknown class not in the input: not modelled", backend: frontend,
			docs: ing("web", "", "  ingressClassName: haproxy\n"),
			want: Edge{Layers: []Layer{{Kind: Ingress, Object: "Ingress shop/web", Tries: 1, Default: true,
				Note: "Ingress shop/web class haproxy (no IngressClass haproxy in the input): its controller's retries are not modelled"}},
				Warnings: []string{"Ingress shop/web class haproxy (no IngressClass haproxy in the input): its controller's retries are not modelled (retrycap reads ingress-nginx's)"}},
		},
		{
			name: "no class at all: not modelled", backend: frontend,
			docs: ing("web", "", ""),
			want: Edge{Layers: []Layer{{Kind: Ingress, Object: "Ingress shop/web", Tries: 1, Default: true,
				Note: "Ingress shop/web no class: spec.ingressClassName unset, no kubernetes.io/ingress.class annotation and no default IngressClass in the input: its controller's retries are not modelled"}},
				Warnings: []string{"Ingress shop/web no class: spec.ingressClassName unset, no kubernetes.io/ingress.class annotation and no default IngressClass in the input: its controller's retries are not modelled (retrycap reads ingress-nginx's)"}},
		},
		{
			name: "a Service no Ingress routes to: no layer", backend: ServiceRef{"shop", "cart"},
			docs: ing("web", "", "  ingressClassName: nginx\n"),
			want: Edge{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			if got := s.Entry(tc.backend); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Entry(%s):\n got %#v\nwant %#v", tc.backend, got, tc.want)
			}
		})
	}
}

func TestIngressNginxBackendsAndCounts(t *testing.T) {
	s := set(t, Options{}, ingClass("nginx", "k8s.io/ingress-nginx", "")+"---\n"+
		"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: shop}\nspec:\n  ingressClassName: nginx\n  defaultBackend: {service: {name: fallback}}\n  rules:\n  - http:\n      paths:\n      - {path: /, pathType: Prefix, backend: {service: {name: frontend}}}\n      - {path: /static, pathType: Prefix, backend: {resource: {kind: StorageBucket, name: s}}}\n")
	if got, want := s.Backends(), []ServiceRef{{"shop", "fallback"}, {"shop", "frontend"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Backends() = %v, want %v", got, want)
	}
	if got, want := s.Counts(), map[string]int{"Ingress": 1, "IngressClass": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("Counts() = %v, want %v", got, want)
	}
	if !s.Remove("networking.k8s.io", "Ingress", "shop", "web") || len(s.Backends()) != 0 {
		t.Errorf("Remove(Ingress shop/web): backends left %v", s.Backends())
	}
	if !s.Remove("networking.k8s.io", "IngressClass", "", "nginx") {
		t.Error("Remove(IngressClass nginx) = false")
	}
}

func TestIngressNginxBadTries(t *testing.T) {
	for _, tc := range []struct{ value, want string }{
		{`"three"`, `Ingress shop/web ` + triesKey + `: "three" is not a whole number of tries (ingress-nginx's proxy_next_upstream_tries)`},
		{`"-1"`, `Ingress shop/web ` + triesKey + `: "-1" is not a whole number of tries (ingress-nginx's proxy_next_upstream_tries)`},
		{`"0"`, `Ingress shop/web ` + triesKey + `: "0" is no limit in nginx (proxy_next_upstream_tries 0): unbounded tries to each backend; set a number, or nginx.ingress.kubernetes.io/proxy-next-upstream: "off"`},
	} {
		s := NewSet(Options{})
		_, err := s.AddManifest([]byte(ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: `+tc.value, "  ingressClassName: nginx\n")))
		if err == nil || err.Error() != tc.want {
			t.Errorf("tries %s: error %v, want %s", tc.value, err, tc.want)
		}
	}
}

func TestIngressNginxRewrite(t *testing.T) {
	s := set(t, Options{}, ing("web", "", "  ingressClassName: nginx\n"))
	l := s.Entry(ServiceRef{"shop", "frontend"}).Layers[0]
	rw, err := PlanRewrite(l, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := `Ingress shop/web ` + triesKey + `: unset (3) -> "1"`; rw.Suggestion != want {
		t.Errorf("Suggestion = %s, want %s", rw.Suggestion, want)
	}
	out, err := rw.Apply([]byte(`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web","namespace":"shop","annotations":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"nginx.ingress.kubernetes.io/proxy-next-upstream-tries":"1"`) {
		t.Errorf("Apply = %s", out)
	}
	s = set(t, Options{}, ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "5"`, "  ingressClassName: nginx\n"))
	rw, err = PlanRewrite(s.Entry(ServiceRef{"shop", "frontend"}).Layers[0], 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := `Ingress shop/web ` + triesKey + `: "5" -> "2"`; rw.Suggestion != want {
		t.Errorf("Suggestion = %s, want %s", rw.Suggestion, want)
	}
}

func TestIngressV1beta1Refused(t *testing.T) {
	_, err := NewSet(Options{}).AddManifest([]byte("apiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata: {name: web, namespace: shop}\nspec:\n  backend: {serviceName: frontend, servicePort: 80}\n"))
	if want := "Ingress shop/web apiVersion networking.k8s.io/v1beta1: not served since Kubernetes 1.22; retrycap reads networking.k8s.io/v1 Ingresses"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestIngressNginxRewriteNoAnnotations(t *testing.T) {
	s := set(t, Options{}, ing("web", "", "  ingressClassName: nginx\n"))
	rw, err := PlanRewrite(s.Entry(ServiceRef{"shop", "frontend"}).Layers[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	out, err := rw.Apply([]byte(`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"web","namespace":"shop"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"annotations":{"nginx.ingress.kubernetes.io/proxy-next-upstream-tries":"1"}`) {
		t.Errorf("Apply = %s", out)
	}
}

// A Service that an HTTPRoute with a Gateway parent and an ingress-nginx Ingress both route to
// is one backend, and Entry takes the larger layer, with the other as an alternative.
func TestIngressNginxBesideGatewayRoute(t *testing.T) {
	s := set(t, Options{}, ing("web", `nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "4"`, "  ingressClassName: nginx\n")+"---\n"+
		routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  parentRefs: [{name: eg}]\n  rules: [{backendRefs: [{name: frontend}], retry: {attempts: 1}}]"))
	if got, want := s.Backends(), []ServiceRef{{"shop", "frontend"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Backends() = %v, want %v", got, want)
	}
	e := s.Entry(ServiceRef{"shop", "frontend"})
	if len(e.Layers) != 1 || e.Layers[0].Object != "Ingress shop/web" || e.Tries() != 4 {
		t.Errorf("Entry = %#v, want the Ingress's 4 tries", e)
	}
	var objs []string
	for _, l := range s.EntryLayers(ServiceRef{"shop", "frontend"}) {
		objs = append(objs, l.Object)
	}
	if want := []string{"HTTPRoute shop/web", "Ingress shop/web"}; !reflect.DeepEqual(objs, want) {
		t.Errorf("EntryLayers objects = %v, want %v", objs, want)
	}
}

// An IngressClass of another controller named nginx is not ingress-nginx: nothing is assumed
// when the class is in the input.
func TestIngressClassNginxOfAnotherController(t *testing.T) {
	s := set(t, Options{}, ingClass("nginx", "nginx.org/ingress-controller", "")+"---\n"+ing("web", "", "  ingressClassName: nginx\n"))
	e := s.Entry(ServiceRef{"shop", "frontend"})
	want := []string{"Ingress shop/web class nginx (controller nginx.org/ingress-controller): its controller's retries are not modelled (retrycap reads ingress-nginx's)"}
	if e.Tries() != 1 || !reflect.DeepEqual(e.Warnings, want) {
		t.Errorf("Entry = %#v, want 1 try and %q", e, want)
	}
}
