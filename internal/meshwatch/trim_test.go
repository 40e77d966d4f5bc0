package meshwatch

import (
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/mesh"
)

func obj(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestTrim(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{
			name: "VirtualService keeps hosts, gateways, exportTo, routes' gateways, destinations, timeouts, retries and delegates, by index",
			in: `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: ratings
  namespace: bookinfo
  resourceVersion: "7"
  uid: u1
  labels: {app: ratings}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", owner: team}
  managedFields: [{manager: kubectl}]
spec:
  hosts: [ratings]
  exportTo: ["."]
  http:
  - match: [{gateways: [mesh], uri: {prefix: /a}}]
    route: [{destination: {host: ratings, subset: v1}, weight: 100}]
    timeout: 1s
  - retries: {attempts: 3, perTryTimeout: 2s, backoff: 1s, retryOn: 5xx}
  - match: [{uri: {prefix: /b}}]
    delegate: {name: ratings-b, namespace: team}
status: {observedGeneration: 3}
`,
			want: `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo, resourceVersion: "7"}
spec:
  hosts: [ratings]
  exportTo: ["."]
  http:
  - match: [{gateways: [mesh]}]
    route: [{destination: {host: ratings}}]
    timeout: 1s
  - retries: {attempts: 3, perTryTimeout: 2s, backoff: 1s}
  - match: [{}]
    delegate: {name: ratings-b, namespace: team}
`,
		},
		{
			name: "ServiceEntry keeps hosts, exportTo and its ports' number, name and protocol",
			in: `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: googleapis
  namespace: default
  resourceVersion: "9"
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}"}
spec:
  hosts: [www.googleapis.com]
  exportTo: ["*"]
  addresses: [10.0.0.1]
  location: MESH_EXTERNAL
  resolution: DNS
  ports:
  - {number: 80, name: http-port, protocol: HTTP, targetPort: 8080}
  - {number: 443, name: https, protocol: HTTPS}
  endpoints: [{address: 1.2.3.4}]
status: {addresses: [{value: 240.240.0.1}]}
`,
			want: `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: googleapis, namespace: default, resourceVersion: "9"}
spec:
  hosts: [www.googleapis.com]
  exportTo: ["*"]
  ports:
  - {number: 80, name: http-port, protocol: HTTP}
  - {number: 443, name: https, protocol: HTTPS}
`,
		},
		{
			name: "HTTPRoute keeps refs, retry, backoff and the Linkerd annotations",
			in: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: reviews
  namespace: bookinfo
  annotations: {retry.linkerd.io/limit: "2", timeout.linkerd.io/response: 1s, note: x}
spec:
  parentRefs: [{group: "", kind: Service, name: reviews, port: 9080}]
  rules:
  - backendRefs: [{name: reviews-v2, port: 9080, weight: 1}]
    retry: {attempts: 3, codes: [503], backoff: 1s}
    timeouts: {request: 10s}
    filters: [{type: RequestHeaderModifier}]
`,
			want: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: reviews
  namespace: bookinfo
  annotations: {retry.linkerd.io/limit: "2", timeout.linkerd.io/response: 1s}
spec:
  parentRefs: [{group: "", kind: Service, name: reviews, port: 9080}]
  rules:
  - backendRefs: [{name: reviews-v2}]
    retry: {attempts: 3, backoff: 1s}
    timeouts: {request: 10s}
`,
		},
		{
			name: "Namespace keeps labels and mesh annotations",
			in: `apiVersion: v1
kind: Namespace
metadata:
  name: bookinfo
  labels: {istio-injection: enabled}
  annotations: {linkerd.io/inject: enabled, other: x}
spec: {finalizers: [kubernetes]}
`,
			want: `apiVersion: v1
kind: Namespace
metadata:
  name: bookinfo
  labels: {istio-injection: enabled}
  annotations: {linkerd.io/inject: enabled}
`,
		},
		{
			name: "MeshConfig keeps data.mesh",
			in: `apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data: {mesh: "defaultHttpRetryPolicy: {attempts: 1}", meshNetworks: "x"}
`,
			want: `apiVersion: v1
kind: ConfigMap
metadata: {name: istio, namespace: istio-system}
data: {mesh: "defaultHttpRetryPolicy: {attempts: 1}"}
`,
		},
		{
			name: "BackendTrafficPolicy keeps targets, numRetries and timeouts",
			in: `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: retry, namespace: shop}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: backend, sectionName: x}]
  retry: {numRetries: 5, perRetry: {timeout: 1s}}
  timeout: {http: {requestTimeout: 5s}}
`,
			want: `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: retry, namespace: shop}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: backend}]
  retry: {numRetries: 5, perRetry: {timeout: 1s}}
  timeout: {http: {requestTimeout: 5s}}
`,
		},
		{
			// Before, targetSelectors were cut and the manager counted no retry where analyze
			// counted the policy's (mesh/targetselectors.go).
			name: "BackendTrafficPolicy keeps its targetSelectors, and an HTTPRoute its labels",
			in: `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: retry, namespace: shop}
spec:
  targetSelectors: [{kind: HTTPRoute, matchLabels: {retry: "yes"}, namespaces: {from: All}}]
  retry: {numRetries: 5}
`,
			want: `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: retry, namespace: shop}
spec:
  targetSelectors: [{kind: HTTPRoute, matchLabels: {retry: "yes"}, namespaces: {from: All}}]
  retry: {numRetries: 5}
`,
		},
		{
			name: "HTTPRoute keeps every label",
			in: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop, labels: {retry: "yes", app: web}}
spec:
  parentRefs: [{name: eg}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`,
			want: `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop, labels: {retry: "yes", app: web}}
spec:
  parentRefs: [{name: eg}]
  rules: [{backendRefs: [{name: web}]}]
`,
		},
		{
			// The top-level targetRef's kind and a to[] item's sectionName: cut before mesx20, so
			// the status counted a Dataplane policy as a Mesh one and an item for one port on every port.
			name: "MeshRetry keeps its mesh label, its targetRef's kind and the to[] fields read (its per-try timeout: the time model)",
			in: `apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: r, namespace: shop, labels: {kuma.io/mesh: default, team: x}}
spec:
  targetRef: {kind: Dataplane, labels: {app: web}}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: orders}, sectionName: grpc}
    default: {http: {numRetries: 2, perTryTimeout: 1s}, tcp: {maxConnectAttempt: 5}}
`,
			want: `apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: r, namespace: shop, labels: {kuma.io/mesh: default, team: x}}
spec:
  targetRef: {kind: Dataplane}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: orders}, sectionName: grpc}
    default: {http: {numRetries: 2, perTryTimeout: 1s}}
`,
		},
		{
			name: "MeshExternalService keeps its labels (mesh, display name) and its listener's port and protocol",
			in: `apiVersion: kuma.io/v1alpha1
kind: MeshExternalService
metadata: {name: httpbin, namespace: kuma-system, labels: {kuma.io/mesh: default, kuma.io/display-name: httpbin}}
spec:
  match: {type: HostnameGenerator, port: 80, protocol: http}
  endpoints: [{address: httpbin.org, port: 80}]
  tls: {enabled: true}
status: {addresses: [{hostname: httpbin.extsvc.mesh.local}]}
`,
			want: `apiVersion: kuma.io/v1alpha1
kind: MeshExternalService
metadata: {name: httpbin, namespace: kuma-system, labels: {kuma.io/mesh: default, kuma.io/display-name: httpbin}}
spec:
  match: {port: 80, protocol: http}
`,
		},
		{
			name: "MeshHTTPRoute keeps its to[] items' targetRefs (its callees), no rules",
			in: `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: r, namespace: shop, labels: {kuma.io/mesh: default}}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: orders}, sectionName: http}
    hostnames: [orders.example]
    rules: [{matches: [{path: {type: PathPrefix, value: /v2}}], default: {backendRefs: [{kind: MeshService, name: orders-v2}]}}]
`,
			want: `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: r, namespace: shop, labels: {kuma.io/mesh: default}}
spec:
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: orders}, sectionName: http}
`,
		},
		{
			name: "Resiliency keeps its scopes, retry policies and app targets",
			in: `apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata: {name: r, namespace: shop}
scopes: [checkout]
spec:
  policies: {retries: {once: {maxRetries: 1}}, timeouts: {fast: 1s}}
  targets: {apps: {payment: {retry: once}}, components: {store: {}}}
`,
			want: `apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata: {name: r, namespace: shop}
scopes: [checkout]
spec:
  policies: {retries: {once: {maxRetries: 1}}}
  targets: {apps: {payment: {retry: once}}}
`,
		},
		{
			name: "ServiceRouter keeps its destinations' retry fields",
			in: `apiVersion: consul.hashicorp.com/v1alpha1
kind: ServiceRouter
metadata: {name: ledger, namespace: shop}
spec:
  routes:
  - match: {http: {pathPrefix: /}}
    destination: {service: ledger-v2, numRetries: 2, retryOnConnectFailure: true, retryOn: [reset], retryOnStatusCodes: [503]}
`,
			want: `apiVersion: consul.hashicorp.com/v1alpha1
kind: ServiceRouter
metadata: {name: ledger, namespace: shop}
spec:
  routes:
  - destination: {numRetries: 2, retryOnConnectFailure: true, retryOn: [reset], retryOnStatusCodes: [503]}
`,
		},
		{
			name: "Service keeps its ports' name, port, protocol and appProtocol, Linkerd's retry annotations, and Linkerd's and Kuma's protocol annotations",
			in: `apiVersion: v1
kind: Service
metadata:
  name: redis-cart
  namespace: boutique
  resourceVersion: "7"
  labels: {app: redis-cart}
  annotations: {retry.linkerd.io/http: 5xx, kubectl.kubernetes.io/last-applied-configuration: "{}", config.linkerd.io/opaque-ports: "9121", 9121.service.kuma.io/protocol: http}
spec:
  selector: {app: redis-cart}
  clusterIP: 10.0.0.7
  ports:
  - {name: tcp-redis, port: 6379, targetPort: 6379, protocol: TCP}
  - {port: 9121, appProtocol: http, nodePort: 30001}
status: {loadBalancer: {}}
`,
			want: `apiVersion: v1
kind: Service
metadata:
  name: redis-cart
  namespace: boutique
  resourceVersion: "7"
  annotations: {retry.linkerd.io/http: 5xx, config.linkerd.io/opaque-ports: "9121", 9121.service.kuma.io/protocol: http}
spec:
  ports:
  - {name: tcp-redis, port: 6379, protocol: TCP}
  - {port: 9121, appProtocol: http}
`,
		},
		{
			name: "Service keeps its Istio ambient waypoint labels, no others",
			in: `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: bookinfo
  labels: {app: reviews, istio.io/use-waypoint: wp, istio.io/use-waypoint-namespace: mesh, istio.io/ingress-use-waypoint: "true"}
spec:
  ports: [{name: http, port: 9080}]
`,
			want: `apiVersion: v1
kind: Service
metadata:
  name: reviews
  namespace: bookinfo
  labels: {istio.io/use-waypoint: wp, istio.io/use-waypoint-namespace: mesh, istio.io/ingress-use-waypoint: "true"}
spec:
  ports: [{name: http, port: 9080}]
`,
		},
		{
			// Every label: an Envoy Gateway BackendTrafficPolicy's targetSelectors may match any.
			name: "Gateway keeps its class, its labels and listeners' port, protocol and allowed namespaces",
			in: `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
  namespace: bookinfo
  labels: {istio.io/waypoint-for: all, istio.io/rev: stable}
  annotations: {note: x}
spec:
  gatewayClassName: istio-waypoint
  infrastructure: {labels: {a: b}}
  listeners:
  - name: mesh
    port: 15008
    protocol: HBONE
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}, kinds: [{kind: HTTPRoute}]}
status: {addresses: [{value: 10.0.0.9}]}
`,
			want: `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata:
  name: waypoint
  namespace: bookinfo
  labels: {istio.io/waypoint-for: all, istio.io/rev: stable}
spec:
  gatewayClassName: istio-waypoint
  listeners:
  - port: 15008
    protocol: HBONE
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: a}}}}
`,
		},
		{
			name: "Ingress keeps its class, ingress-nginx's annotations and its backends' Service names, by index",
			in: `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
  resourceVersion: "9"
  labels: {app: web}
  annotations:
    kubernetes.io/ingress.class: nginx
    nginx.ingress.kubernetes.io/proxy-next-upstream: error timeout http_502
    nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"
    nginx.ingress.kubernetes.io/rewrite-target: /
    kubectl.kubernetes.io/last-applied-configuration: "{}"
  managedFields: [{manager: kubectl}]
spec:
  ingressClassName: nginx
  defaultBackend: {service: {name: fallback, port: {number: 80}}}
  tls: [{hosts: [shop.example], secretName: shop-tls}]
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: frontend, port: {number: 80}}}}
      - {path: /static, pathType: Prefix, backend: {resource: {apiGroup: k8s.example.com, kind: StorageBucket, name: static}}}
  - host: api.shop.example
status: {loadBalancer: {ingress: [{ip: 10.0.0.9}]}}
`,
			want: `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
  resourceVersion: "9"
  annotations:
    kubernetes.io/ingress.class: nginx
    nginx.ingress.kubernetes.io/proxy-next-upstream: error timeout http_502
    nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"
spec:
  ingressClassName: nginx
  defaultBackend: {service: {name: fallback}}
  rules:
  - http:
      paths:
      - backend: {service: {name: frontend}}
      - backend: {}
  - {}
`,
		},
		{
			name: "IngressClass keeps its controller and the default-class annotation",
			in: `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
  resourceVersion: "3"
  labels: {app.kubernetes.io/name: ingress-nginx}
  annotations: {ingressclass.kubernetes.io/is-default-class: "true", meta.helm.sh/release-name: ingress-nginx}
spec:
  controller: k8s.io/ingress-nginx
  parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external-lb}
`,
			want: `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: nginx
  resourceVersion: "3"
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec:
  controller: k8s.io/ingress-nginx
`,
		},
	} {
		got := Trim(obj(t, tc.in))
		want := obj(t, tc.want)
		if !reflect.DeepEqual(got.Object, want.Object) {
			gy, _ := yaml.Marshal(got.Object)
			t.Errorf("%s: Trim =\n%s\nwant\n%s", tc.name, gy, tc.want)
		}
		// The trimmed object reads as the whole one does.
		full, trimmed := mesh.NewSet(mesh.Options{}), mesh.NewSet(mesh.Options{})
		if _, err := full.AddUnstructured(obj(t, tc.in)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err := trimmed.AddUnstructured(got); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(full.Counts(), trimmed.Counts()) {
			t.Errorf("%s: counts %v, trimmed %v", tc.name, full.Counts(), trimmed.Counts())
		}
	}
}

func TestAffectedBy(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Affected
	}{
		{"a Namespace: itself", "apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo}", Affected{Namespaces: []string{"bookinfo"}}},
		{"a VirtualService exported everywhere", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r, namespace: b}\nspec: {hosts: [r]}", Affected{All: true}},
		{"exportTo *", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r, namespace: b}\nspec: {exportTo: ['*']}", Affected{All: true}},
		{"exportTo . and a namespace", "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: r, namespace: b}\nspec: {exportTo: [., shop]}", Affected{Namespaces: []string{"b", "shop"}}},
		{"a ServiceEntry exported everywhere", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: g, namespace: b}\nspec: {hosts: [www.googleapis.com]}", Affected{All: true}},
		{"a ServiceEntry exported to its namespace", "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: g, namespace: b}\nspec: {hosts: [www.googleapis.com], exportTo: [.]}", Affected{Namespaces: []string{"b"}}},
		{"a route whose parent is a ServiceEntry: all", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: b}\nspec: {parentRefs: [{group: networking.istio.io, kind: ServiceEntry, name: g}]}", Affected{All: true}},
		{"a GAMMA route: all", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: b}\nspec: {parentRefs: [{kind: Service, name: r}]}", Affected{All: true}},
		{"a Gateway route: its namespace and its backends'", "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: r, namespace: b}\nspec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: x}, {name: y, namespace: shop}]}]}", Affected{Namespaces: []string{"b", "shop"}}},
		{"a BackendTrafficPolicy: all", "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: BackendTrafficPolicy\nmetadata: {name: r, namespace: b}", Affected{All: true}},
		{"a Service: all", "apiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: b}", Affected{All: true}},
		{"an Ingress: its namespace", "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web, namespace: shop}\nspec: {defaultBackend: {service: {name: web}}}", Affected{Namespaces: []string{"shop"}}},
		{"an IngressClass: all", "apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\nspec: {controller: k8s.io/ingress-nginx}", Affected{All: true}},
	} {
		if got := AffectedBy(obj(t, tc.in)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: AffectedBy = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestMembershipOf(t *testing.T) {
	ns := obj(t, `apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {istio-injection: enabled, istio.io/rev: canary, team: a, istio.io/dataplane-mode: ambient, istio.io/use-waypoint: wp}
  annotations: {linkerd.io/inject: enabled}
`)
	istioLabels := map[string]string{"istio-injection": "enabled", "istio.io/rev": "canary", "team": "a", "istio.io/dataplane-mode": "ambient", "istio.io/use-waypoint": "wp"}
	for _, tc := range []struct {
		istio, linkerd bool
		labels, ann    map[string]string
	}{
		{true, true, istioLabels, map[string]string{"linkerd.io/inject": "enabled"}},
		{false, true, map[string]string{"team": "a"}, map[string]string{"linkerd.io/inject": "enabled"}},
		{true, false, istioLabels, map[string]string{}},
	} {
		got := MembershipOf(ns, tc.istio, tc.linkerd)
		if !reflect.DeepEqual(got.GetLabels(), tc.labels) || !reflect.DeepEqual(got.GetAnnotations(), tc.ann) {
			t.Errorf("istio %v linkerd %v: labels %v annotations %v; want %v %v", tc.istio, tc.linkerd, got.GetLabels(), got.GetAnnotations(), tc.labels, tc.ann)
		}
	}
	if len(ns.GetLabels()) != 5 {
		t.Errorf("MembershipOf modified its argument: %v", ns.GetLabels())
	}
}

// Without Istio's API read, a Service's ambient waypoint labels add no layer.
func TestWithoutLabels(t *testing.T) {
	svc := obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: b, labels: {istio.io/use-waypoint: wp, istio.io/ingress-use-waypoint: \"true\", team: a}}")
	got := withoutLabels(svc, waypointLabels)
	if want := map[string]string{"team": "a"}; !reflect.DeepEqual(got.GetLabels(), want) {
		t.Errorf("labels %v, want %v", got.GetLabels(), want)
	}
	if len(svc.GetLabels()) != 3 {
		t.Errorf("the input was modified: %v", svc.GetLabels())
	}
	plain := obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: b, labels: {team: a}}")
	if withoutLabels(plain, waypointLabels) != plain {
		t.Error("a Service without waypoint labels was copied")
	}
}

func TestWithoutLinkerdRetries(t *testing.T) {
	svc := obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: b, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: \"3\", timeout.linkerd.io/request: 2s, team: a}}")
	got := WithoutLinkerdRetries(svc)
	if want := map[string]string{"team": "a"}; !reflect.DeepEqual(got.GetAnnotations(), want) {
		t.Errorf("annotations %v, want %v", got.GetAnnotations(), want)
	}
	if len(svc.GetAnnotations()) != 4 {
		t.Errorf("the input was modified: %v", svc.GetAnnotations())
	}
	plain := obj(t, "apiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: b}")
	if WithoutLinkerdRetries(plain) != plain {
		t.Error("a Service without Linkerd annotations was copied")
	}
}

func TestSameButVersion(t *testing.T) {
	const a = "apiVersion: v1\nkind: Service\nmetadata: {name: r, namespace: b, resourceVersion: \"1\"}\nspec: {ports: [{name: grpc, port: 7070}]}"
	for _, tc := range []struct {
		name, b string
		want    bool
	}{
		{"resourceVersion only", strings.Replace(a, `"1"`, `"2"`, 1), true},
		{"a port renamed", strings.Replace(strings.Replace(a, `"1"`, `"2"`, 1), "grpc", "tcp-x", 1), false},
		{"a port added", strings.Replace(a, "}]}", "}, {port: 80}]}", 1), false},
	} {
		if got := sameButVersion(obj(t, a), obj(t, tc.b)); got != tc.want {
			t.Errorf("%s: sameButVersion = %v, want %v", tc.name, got, tc.want)
		}
	}
	if sameButVersion(nil, obj(t, a)) {
		t.Error("an add (no old object) reads as no change")
	}
}

// Istio's injector's MutatingWebhookConfiguration, as helm renders it with
// enableNamespacesByDefault (internal/mesh/testdata/istio-injector/auto.yaml, which names its
// source), keeps what the Set reads: trimmed, it still makes Istio inject an unlabelled pod of an
// unlabelled namespace (mesh.Set.IstioWillInject), as the untrimmed one does. Another project's
// configuration keeps its name alone. Before, the watcher read no MutatingWebhookConfiguration and
// the manager's status, gates and injector followed the chart's default selectors.
func TestTrimIstioInjector(t *testing.T) {
	data, err := os.ReadFile("../mesh/testdata/istio-injector/auto.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	trimmed := Trim(u)
	whs, _ := trimmed.Object["webhooks"].([]any)
	if len(whs) != 5 {
		t.Fatalf("%d webhooks kept, want 5", len(whs))
	}
	for i, w := range whs {
		keys := slices.Sorted(maps.Keys(w.(map[string]any)))
		if want := []string{"name", "namespaceSelector", "objectSelector", "rules"}; !slices.Equal(keys, want) {
			t.Errorf("webhooks[%d] keeps %v, want %v", i, keys, want)
		}
	}
	for _, obj := range []*unstructured.Unstructured{u, trimmed} {
		s := mesh.NewSet(mesh.Options{})
		if kept, err := s.AddUnstructured(obj); err != nil || !kept {
			t.Fatalf("kept %v, %v", kept, err)
		}
		const want = "webhook auto.sidecar-injector.istio.io of MutatingWebhookConfiguration istio-sidecar-injector selects it " +
			"(namespaceSelector !istio-injection,!istio.io/rev,kubernetes.io/metadata.name notin (kube-node-lease,kube-public,kube-system,local-path-storage); " +
			"objectSelector !istio.io/rev,!sidecar.istio.io/inject)"
		if got := s.IstioWillInject("shop", nil, nil, nil); got != want {
			t.Fatalf("IstioWillInject = %q\nwant %q", got, want)
		}
	}
	other := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
		"metadata": map[string]any{"name": "cert-manager-webhook"},
		"webhooks": []any{map[string]any{"name": "webhook.cert-manager.io", "namespaceSelector": map[string]any{}}}}}
	got := Trim(other)
	if _, ok := got.Object["webhooks"]; ok {
		t.Fatalf("another project's webhooks kept: %v", got.Object)
	}
}
