package meshwatch

import (
	"reflect"
	"testing"
)

func TestParseSelection(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "", want: "auto"},
		{in: "auto", want: "auto"},
		{in: "none", want: "none"},
		{in: "virtualservices.networking.istio.io", want: "virtualservices.networking.istio.io"},
		{in: " HTTPRoutes.gateway.networking.k8s.io , virtualservices.networking.istio.io", want: "httproutes.gateway.networking.k8s.io,virtualservices.networking.istio.io"},
		{in: "virtualservice", err: `--mesh-apis "virtualservice": "virtualservice" is not a mesh API retrycap reads (auto, none, or a comma-separated list of ` +
			"virtualservices.networking.istio.io, serviceentries.networking.istio.io, httproutes.gateway.networking.k8s.io, grpcroutes.gateway.networking.k8s.io, " +
			"backendtrafficpolicies.gateway.envoyproxy.io, serviceprofiles.linkerd.io, httproutes.policy.linkerd.io, meshes.kuma.io, meshretries.kuma.io, meshexternalservices.kuma.io, meshhttproutes.kuma.io, resiliencies.dapr.io, servicerouters.consul.hashicorp.com, ingresses.networking.k8s.io)"},
		{in: "ingresses.networking.k8s.io", want: "ingresses.networking.k8s.io"},
		// The IngressClasses are read beside the Ingresses, not named.
		{in: "ingressclasses.networking.k8s.io", err: `--mesh-apis "ingressclasses.networking.k8s.io": "ingressclasses.networking.k8s.io" is not a mesh API retrycap reads (auto, none, or a comma-separated list of ` +
			"virtualservices.networking.istio.io, serviceentries.networking.istio.io, httproutes.gateway.networking.k8s.io, grpcroutes.gateway.networking.k8s.io, " +
			"backendtrafficpolicies.gateway.envoyproxy.io, serviceprofiles.linkerd.io, httproutes.policy.linkerd.io, meshes.kuma.io, meshretries.kuma.io, meshexternalservices.kuma.io, meshhttproutes.kuma.io, resiliencies.dapr.io, servicerouters.consul.hashicorp.com, ingresses.networking.k8s.io)"},
	} {
		s, err := ParseSelection(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParseSelection(%q) error = %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || s.String() != tc.want {
			t.Errorf("ParseSelection(%q) = %s, %v; want %s", tc.in, s, err, tc.want)
		}
	}
}

func TestChoose(t *testing.T) {
	res := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	istio := Served{
		Preferred: map[string]string{"networking.istio.io": "v1"},
		Resources: map[string]map[string]bool{
			"networking.istio.io/v1":       res("virtualservices", "serviceentries", "destinationrules"),
			"networking.istio.io/v1alpha3": res("virtualservices", "serviceentries", "destinationrules", "envoyfilters"),
		},
	}
	oldIstio := Served{
		// An Istio before 1.22 serves no v1: its preferred version then.
		Preferred: map[string]string{"networking.istio.io": "v1beta1"},
		Resources: map[string]map[string]bool{"networking.istio.io/v1beta1": res("virtualservices", "serviceentries"), "networking.istio.io/v1alpha3": res("virtualservices", "serviceentries")},
	}
	gatewayStandard := Served{
		// GRPCRoute only in v1; a preferred version without the resource falls back to the list.
		Preferred: map[string]string{"gateway.networking.k8s.io": "v1beta1", "gateway.envoyproxy.io": "v1alpha1"},
		Resources: map[string]map[string]bool{
			"gateway.networking.k8s.io/v1":      res("httproutes", "grpcroutes", "gateways"),
			"gateway.networking.k8s.io/v1beta1": res("httproutes", "gateways"),
			"gateway.envoyproxy.io/v1alpha1":    res("backendtrafficpolicies", "envoyproxies"),
		},
	}
	// Every cluster since Kubernetes 1.19.
	networking := Served{
		Preferred: map[string]string{"networking.k8s.io": "v1"},
		Resources: map[string]map[string]bool{"networking.k8s.io/v1": res("ingresses", "ingressclasses", "networkpolicies")},
	}
	auto, none := Selection{}, Selection{None: true}
	onlyVS, _ := ParseSelection("virtualservices.networking.istio.io")
	for _, tc := range []struct {
		name   string
		sel    Selection
		served Served
		want   []string
	}{
		{"nothing served", auto, Served{}, nil},
		{"istio v1", auto, istio, []string{"VirtualService networking.istio.io/v1", "ServiceEntry networking.istio.io/v1"}},
		{"istio before v1", auto, oldIstio, []string{"VirtualService networking.istio.io/v1beta1", "ServiceEntry networking.istio.io/v1beta1"}},
		{"gateway API and Envoy Gateway", auto, gatewayStandard, []string{
			"HTTPRoute gateway.networking.k8s.io/v1beta1", "GRPCRoute gateway.networking.k8s.io/v1", "BackendTrafficPolicy gateway.envoyproxy.io/v1alpha1"}},
		{"Ingresses", auto, networking, []string{"Ingress networking.k8s.io/v1"}},
		{"istio and Ingresses", auto, Served{Preferred: merge2(istio.Preferred, networking.Preferred), Resources: merge(istio.Resources, networking.Resources)},
			[]string{"VirtualService networking.istio.io/v1", "ServiceEntry networking.istio.io/v1", "Ingress networking.k8s.io/v1"}},
		{"a list without Ingresses", onlyVS, Served{Preferred: merge2(istio.Preferred, networking.Preferred), Resources: merge(istio.Resources, networking.Resources)},
			[]string{"VirtualService networking.istio.io/v1"}},
		// An old Istio's preferred version without serviceentries: the first of the list that has it.
		{"a ServiceEntry at v1alpha3 only", auto, Served{Preferred: map[string]string{"networking.istio.io": "v1beta1"},
			Resources: map[string]map[string]bool{"networking.istio.io/v1beta1": res("virtualservices"), "networking.istio.io/v1alpha3": res("virtualservices", "serviceentries")}},
			[]string{"VirtualService networking.istio.io/v1beta1", "ServiceEntry networking.istio.io/v1alpha3"}},
		{"none", none, istio, nil},
		{"a list", onlyVS, Served{Preferred: istio.Preferred, Resources: merge(istio.Resources, gatewayStandard.Resources)}, []string{"VirtualService networking.istio.io/v1"}},
	} {
		got := Choose(tc.sel, tc.served)
		if names := Names(got); !reflect.DeepEqual(names, tc.want) && (len(names) != 0 || len(tc.want) != 0) {
			t.Errorf("%s: Choose = %q, want %q", tc.name, names, tc.want)
		}
	}
}

func merge2(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func merge(ms ...map[string]map[string]bool) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestSupporting(t *testing.T) {
	vs := API{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices", Kind: "VirtualService"}
	route := API{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes", Kind: "HTTPRoute"}
	sp := API{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles", Kind: "ServiceProfile"}
	ing := API{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses", Kind: "Ingress"}
	for _, tc := range []struct {
		apis []API
		want []string
	}{
		{nil, []string{}},
		{[]API{route}, []string{"Namespace v1", "Service v1"}},
		// With Istio: its MeshConfigs and its injector's webhook configurations.
		{[]API{vs, route}, []string{"Namespace v1", "ConfigMap v1", "MutatingWebhookConfiguration admissionregistration.k8s.io/v1", "Service v1"}},
		{[]API{sp}, []string{"Namespace v1", "Service v1"}},
		// The ingress-nginx layer reads no Namespace and no Service: a cluster without a mesh
		// caches none of them.
		{[]API{ing}, []string{}},
		{[]API{route, ing}, []string{"Namespace v1", "Service v1"}},
	} {
		if got := Names(supporting(tc.apis)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("supporting(%v) = %q, want %q", Names(tc.apis), got, tc.want)
		}
	}
}

// Gateway API's Gateways are read beside Istio's API (ambient waypoints), at the group's
// preferred version when it serves them; without Istio, or without the resource, not at all.
func TestWaypoints(t *testing.T) {
	vs := API{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices", Kind: "VirtualService"}
	route := API{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes", Kind: "HTTPRoute"}
	served := func(preferred string, versions ...string) Served {
		s := Served{Preferred: map[string]string{"gateway.networking.k8s.io": preferred}, Resources: map[string]map[string]bool{}}
		for _, v := range versions {
			s.Resources["gateway.networking.k8s.io/"+v] = map[string]bool{"gateways": true, "httproutes": true}
		}
		return s
	}
	for _, tc := range []struct {
		name   string
		apis   []API
		served Served
		want   []string
	}{
		{"Istio and Gateways served", []API{vs, route}, served("v1", "v1", "v1beta1"), []string{"Gateway gateway.networking.k8s.io/v1"}},
		{"Istio, only v1beta1 served", []API{vs}, served("v1beta1", "v1beta1"), []string{"Gateway gateway.networking.k8s.io/v1beta1"}},
		{"no Istio: none", []API{route}, served("v1", "v1"), []string{}},
		{"no Gateway API: none", []API{vs}, Served{}, []string{}},
	} {
		if got := Names(waypoints(tc.apis, tc.served)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: waypoints = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The IngressClasses are read beside the Ingresses (which controller serves each), when served.
func TestIngressClasses(t *testing.T) {
	ing := API{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses", Kind: "Ingress"}
	route := API{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes", Kind: "HTTPRoute"}
	served := Served{Preferred: map[string]string{"networking.k8s.io": "v1"},
		Resources: map[string]map[string]bool{"networking.k8s.io/v1": {"ingresses": true, "ingressclasses": true}}}
	for _, tc := range []struct {
		name   string
		apis   []API
		served Served
		want   []string
	}{
		{"Ingresses read", []API{route, ing}, served, []string{"IngressClass networking.k8s.io/v1"}},
		{"no Ingresses: none", []API{route}, served, []string{}},
		{"not served: none", []API{ing}, Served{}, []string{}},
	} {
		if got := Names(ingressClasses(tc.apis, tc.served)); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ingressClasses = %q, want %q", tc.name, got, tc.want)
		}
	}
}
