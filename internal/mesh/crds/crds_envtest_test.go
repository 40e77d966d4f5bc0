package crds_test

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	istioapi "istio.io/api/networking/v1"
	istionet "istio.io/client-go/pkg/apis/networking/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/mesh/crds"
)

// TestRealCRDs installs the projects' own CRDs into a real API server, creates mesh objects
// through them (typed where a typed API is required by go.mod, unstructured for Envoy Gateway),
// reads them back the ways the manager does (typed with the GVK set from the scheme, and
// unstructured) and checks the exact layers.
func TestRealCRDs(t *testing.T) {
	paths, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	cp, err := controlplane.Start(controlplane.Options{CRDPaths: paths, ProgressTo: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	}()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gatewayv1.Install, istionet.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(cp.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	const ns = "bookinfo"
	port := gatewayv1.PortNumber(9080)
	core, svcKind, gwName := gatewayv1.Group(""), gatewayv1.Kind("Service"), gatewayv1.ObjectName("bookinfo-gateway")
	three := 3
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{mesh.IstioInjectionLabel: "enabled"}}},
		&istionet.VirtualService{
			ObjectMeta: metav1.ObjectMeta{Name: "ratings", Namespace: ns},
			Spec: istioapi.VirtualService{Hosts: []string{"ratings"}, Http: []*istioapi.HTTPRoute{{
				Route:   []*istioapi.HTTPRouteDestination{{Destination: &istioapi.Destination{Host: "ratings", Subset: "v1"}}},
				Retries: &istioapi.HTTPRetry{Attempts: 3},
			}}},
		},
		&gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "reviews", Namespace: ns},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &core, Kind: &svcKind, Name: "reviews", Port: &port}}},
				Rules: []gatewayv1.HTTPRouteRule{{
					BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "reviews-v2", Port: &port}}}},
					Retry:       &gatewayv1.HTTPRouteRetry{Attempts: &three, Codes: []gatewayv1.HTTPRouteRetryStatusCode{503}},
				}},
			},
		},
		&gatewayv1.GRPCRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "details", Namespace: ns},
			Spec: gatewayv1.GRPCRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Group: &core, Kind: &svcKind, Name: "details", Port: &port}}},
				Rules:           []gatewayv1.GRPCRouteRule{{BackendRefs: []gatewayv1.GRPCBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "details", Port: &port}}}}}},
			},
		},
		&gatewayv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: gatewayv1.HTTPRouteSpec{
				CommonRouteSpec: gatewayv1.CommonRouteSpec{ParentRefs: []gatewayv1.ParentReference{{Name: gwName}}},
				Rules:           []gatewayv1.HTTPRouteRule{{BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: "productpage", Port: &port}}}}}},
			},
		},
	}
	btp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.envoyproxy.io/v1alpha1", "kind": "BackendTrafficPolicy",
		"metadata": map[string]any{"name": "web-retry", "namespace": ns},
		"spec": map[string]any{
			"targetRefs": []any{map[string]any{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}},
			"retry":      map[string]any{"numRetries": int64(5), "retryOn": map[string]any{"triggers": []any{"connect-failure", "retriable-status-codes"}, "httpStatusCodes": []any{int64(500)}}},
		},
	}}
	for _, o := range append(objs, btp) {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}

	s := mesh.NewSet(mesh.Options{})
	// Typed, as from a cache: the GVK from the scheme.
	for _, o := range objs[:2] {
		got := o.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		gvk, err := apiutil.GVKForObject(got, scheme)
		if err != nil {
			t.Fatal(err)
		}
		got.GetObjectKind().SetGroupVersionKind(gvk)
		if ok, err := s.AddObject(got); !ok || err != nil {
			t.Fatalf("AddObject(%s): %v, %v", gvk.Kind, ok, err)
		}
	}
	// Unstructured, as from a dynamic client.
	for _, k := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{
		{schema.GroupVersionKind{Group: gatewayv1.GroupVersion.Group, Version: gatewayv1.GroupVersion.Version, Kind: "HTTPRoute"}, "reviews"},
		{schema.GroupVersionKind{Group: gatewayv1.GroupVersion.Group, Version: gatewayv1.GroupVersion.Version, Kind: "GRPCRoute"}, "details"},
		{schema.GroupVersionKind{Group: gatewayv1.GroupVersion.Group, Version: gatewayv1.GroupVersion.Version, Kind: "HTTPRoute"}, "web"},
		{schema.GroupVersionKind{Group: "gateway.envoyproxy.io", Version: "v1alpha1", Kind: "BackendTrafficPolicy"}, "web-retry"},
	} {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(k.gvk)
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: k.name}, u); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.AddUnstructured(u); !ok || err != nil {
			t.Fatalf("AddUnstructured(%s %s): %v, %v", k.gvk.Kind, k.name, ok, err)
		}
	}

	caller := mesh.Caller{Name: "Deployment bookinfo/reviews-v2", Namespace: ns}
	for _, tc := range []struct {
		callee string
		want   mesh.Layer
	}{
		{"ratings", mesh.Layer{Kind: mesh.Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 4,
			Note: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3"}},
		{"reviews", mesh.Layer{Kind: mesh.GAMMA, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[0].retry.attempts", Tries: 4, Unset: 3,
			Note: "HTTPRoute bookinfo/reviews spec.rules[0].retry.attempts: 3"}},
		{"details", mesh.Layer{Kind: mesh.Istio, Object: "GRPCRoute bookinfo/details", FieldPath: "spec.rules[0].retry", Tries: 3, Unset: 3, Default: true,
			Note: "Istio default, GRPCRoute bookinfo/details spec.rules[0] sets no retry"}},
	} {
		want := mesh.Edge{Layers: []mesh.Layer{tc.want}}
		if got := s.Edge(caller, tc.callee); !reflect.DeepEqual(got, want) {
			t.Errorf("Edge(%s):\n got %#v\nwant %#v", tc.callee, got, want)
		}
	}
	if got, want := s.Backends(), []mesh.ServiceRef{{Namespace: ns, Name: "productpage"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Backends() = %v, want %v", got, want)
	}
	want := mesh.Edge{Layers: []mesh.Layer{{Kind: mesh.EnvoyGateway, Object: "BackendTrafficPolicy bookinfo/web-retry", FieldPath: "spec.retry.numRetries", Tries: 6,
		Note: "BackendTrafficPolicy bookinfo/web-retry spec.retry.numRetries: 5 (targets HTTPRoute/bookinfo/web)"}}}
	if got := s.Entry(mesh.ServiceRef{Namespace: ns, Name: "productpage"}); !reflect.DeepEqual(got, want) {
		t.Errorf("Entry(productpage):\n got %#v\nwant %#v", got, want)
	}

	// A Gateway API route's retry cannot give 1 try: the API server refuses attempts 0 (why
	// mesh.PlanRewrite stops at attempts 1), and takes the route analyze -o patch writes for
	// Istio's helloworld sample (internal/cli/testdata/cases/public-istio-helloworld-gateway-api-patch.golden).
	route := func(attempts int64) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "gateway.networking.k8s.io/v1", "kind": "HTTPRoute",
			"metadata": map[string]any{"name": "helloworld", "namespace": ns},
			"spec": map[string]any{
				"parentRefs": []any{map[string]any{"name": "helloworld-gateway"}},
				"rules": []any{map[string]any{
					"backendRefs": []any{map[string]any{"name": "helloworld", "port": int64(5000)}},
					"matches":     []any{map[string]any{"path": map[string]any{"type": "Exact", "value": "/hello"}}},
					"retry":       map[string]any{"attempts": attempts},
				}},
			},
		}}
	}
	err = c.Create(ctx, route(0), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "spec.rules[0].retry.attempts: Invalid value: 0: spec.rules[0].retry.attempts in body should be greater than or equal to 1") {
		t.Errorf("HTTPRoute retry.attempts 0: got %v, want the API server's minimum 1", err)
	}
	if err := c.Create(ctx, route(1), client.DryRunAll); err != nil {
		t.Errorf("HTTPRoute retry.attempts 1 (analyze -o patch): %v", err)
	}
}
