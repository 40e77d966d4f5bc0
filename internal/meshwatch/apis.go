package meshwatch

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/retrycap/retrycap/internal/mesh"
)

// API is one mesh API the watcher reads: a resource of a group at the version it lists.
type API struct {
	Group, Version, Resource, Kind string
}

// String is "VirtualService networking.istio.io/v1": how the log line and the MeshLayers
// condition name it.
// A core API is "Namespace v1".
func (a API) String() string {
	if a.Group == "" {
		return a.Kind + " " + a.Version
	}
	return a.Kind + " " + a.Group + "/" + a.Version
}

// GVR is the API's group, version and resource.
func (a API) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: a.Group, Version: a.Version, Resource: a.Resource}
}

// Name is "virtualservices.networking.istio.io", as --mesh-apis and the chart's meshAPIs name it.
func (a API) Name() string { return a.Resource + "." + a.Group }

// Candidate is a mesh API internal/mesh reads, with the versions that carry the fields it reads,
// in order of preference when the group's preferred version does not serve the resource.
type Candidate struct {
	Group, Resource, Kind string
	Versions              []string
	// Linkerd: the API is Linkerd's; a cluster serving it has Linkerd, whose retry annotations
	// on Services are then read too.
	Linkerd bool
	// Istio: a cluster serving it has Istio, whose MeshConfig ConfigMap is then read too.
	Istio bool
	// Ingress: the API is networking.k8s.io's Ingress, served by every cluster: read with the
	// IngressClasses (which controller serves an Ingress), without the Namespaces and Services a
	// mesh needs (the ingress-nginx layer reads neither).
	Ingress bool
}

// Name is "virtualservices.networking.istio.io".
func (c Candidate) Name() string { return c.Resource + "." + c.Group }

// Candidates are every mesh API internal/mesh reads.
var Candidates = []Candidate{
	{Group: mesh.GroupIstio, Resource: "virtualservices", Kind: "VirtualService", Versions: []string{"v1", "v1beta1", "v1alpha3"}, Istio: true},
	// An Istio ServiceEntry: a sidecar's call to an external HTTP host it registers takes
	// Istio's default route, with the default retries (mesh/serviceentry.go), and an HTTPRoute
	// may name it as its parent (mesh/egress.go). Not read, the status and the gate counted 1 try
	// where analyze counts 3.
	{Group: mesh.GroupIstio, Resource: "serviceentries", Kind: "ServiceEntry", Versions: []string{"v1", "v1beta1", "v1alpha3"}, Istio: true},
	{Group: mesh.GroupGateway, Resource: "httproutes", Kind: "HTTPRoute", Versions: []string{"v1", "v1beta1"}},
	{Group: mesh.GroupGateway, Resource: "grpcroutes", Kind: "GRPCRoute", Versions: []string{"v1", "v1alpha2"}},
	{Group: mesh.GroupEnvoyGateway, Resource: "backendtrafficpolicies", Kind: "BackendTrafficPolicy", Versions: []string{"v1alpha1"}},
	{Group: mesh.GroupLinkerd, Resource: "serviceprofiles", Kind: "ServiceProfile", Versions: []string{"v1alpha2"}, Linkerd: true},
	{Group: mesh.GroupLinkerdPol, Resource: "httproutes", Kind: "HTTPRoute", Versions: []string{"v1", "v1beta3", "v1beta2", "v1beta1"}, Linkerd: true},
	// Kuma: the Mesh (whether its default MeshRetry mesh-retry-all-<mesh> is assumed), the
	// MeshRetry policies, the MeshExternalServices and MeshHTTPRoutes; Dapr's Resiliency; Consul's ServiceRouter (mesh/kuma.go, dapr.go,
	// consul.go). Each is read when its CRD is served, like the others.
	{Group: mesh.GroupKuma, Resource: "meshes", Kind: "Mesh", Versions: []string{"v1alpha1"}},
	{Group: mesh.GroupKuma, Resource: "meshretries", Kind: "MeshRetry", Versions: []string{"v1alpha1"}},
	// A MeshExternalService: which MeshRetry conf a call to its host (<name>.extsvc.mesh.local)
	// takes, by its spec.match.protocol (mesh/kuma.go kumaExtEdge). Not read (before mesx20),
	// the status counted both confs: 6 tries to a tcp one, where analyze and Kuma count 1.
	{Group: mesh.GroupKuma, Resource: "meshexternalservices", Kind: "MeshExternalService", Versions: []string{"v1alpha1"}},
	// A MeshHTTPRoute: the callees of its to[] items, the only ones a MeshRetry item naming the
	// route covers (mesh/kuma.go kumaRouteCovers). Not in the Set, the item counts for every
	// callee of the mesh (an upper bound, said in the layer's note).
	{Group: mesh.GroupKuma, Resource: "meshhttproutes", Kind: "MeshHTTPRoute", Versions: []string{"v1alpha1"}},
	{Group: mesh.GroupDapr, Resource: "resiliencies", Kind: "Resiliency", Versions: []string{"v1alpha1"}},
	{Group: mesh.GroupConsul, Resource: "servicerouters", Kind: "ServiceRouter", Versions: []string{"v1alpha1"}},
	// ingress-nginx's retries on the Services an Ingress routes to (mesh/ingressnginx.go). Every
	// cluster serves it: under auto every cluster reads it (docs/decisions.md), and
	// --mesh-apis=none or a list without it does not.
	{Group: mesh.GroupNetworking, Resource: "ingresses", Kind: "Ingress", Versions: []string{"v1"}, Ingress: true},
}

// Selection is what --mesh-apis says: every candidate (auto), none, or the named ones.
type Selection struct {
	None  bool
	Names map[string]bool // nil: every candidate
}

// ModeAuto and ModeNone are the flag's keywords.
const (
	ModeAuto = "auto"
	ModeNone = "none"
)

// ParseSelection reads --mesh-apis: "auto" (or empty), "none", or a comma-separated list of
// resource.group names of Candidates ("virtualservices.networking.istio.io,httproutes.gateway.networking.k8s.io").
func ParseSelection(v string) (Selection, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "", ModeAuto:
		return Selection{}, nil
	case ModeNone:
		return Selection{None: true}, nil
	}
	s := Selection{Names: map[string]bool{}}
	for _, n := range strings.Split(v, ",") {
		n = strings.ToLower(strings.TrimSpace(n))
		if !slices.ContainsFunc(Candidates, func(c Candidate) bool { return c.Name() == n }) {
			names := make([]string, len(Candidates))
			for i, c := range Candidates {
				names[i] = c.Name()
			}
			return Selection{}, fmt.Errorf("--mesh-apis %q: %q is not a mesh API retrycap reads (auto, none, or a comma-separated list of %s)", v, n, strings.Join(names, ", "))
		}
		s.Names[n] = true
	}
	return s, nil
}

// String is the flag's value back: "auto", "none", or the names sorted.
func (s Selection) String() string {
	switch {
	case s.None:
		return ModeNone
	case s.Names == nil:
		return ModeAuto
	}
	var names []string
	for n := range s.Names {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

func (s Selection) wants(c Candidate) bool {
	return !s.None && (s.Names == nil || s.Names[c.Name()])
}

// Served is what discovery says of the candidates' groups: each served group's preferred version,
// and the resources each group version serves ("networking.istio.io/v1" -> virtualservices, ...).
type Served struct {
	Preferred map[string]string          // group -> preferred version
	Versions  map[string][]string        // group -> served versions
	Resources map[string]map[string]bool // "group/version" -> resource names
}

// Choose returns the APIs to read, in Candidates' order: each selected candidate the cluster
// serves, at its group's preferred version when that serves the resource, else the first of the
// candidate's versions that does.
func Choose(sel Selection, served Served) []API {
	var out []API
	for _, c := range Candidates {
		if !sel.wants(c) {
			continue
		}
		versions := append([]string{served.Preferred[c.Group]}, c.Versions...)
		for _, v := range versions {
			if v != "" && served.Resources[c.Group+"/"+v][c.Resource] {
				out = append(out, API{Group: c.Group, Version: v, Resource: c.Resource, Kind: c.Kind})
				break
			}
		}
	}
	return out
}

// candidate returns the Candidate of an API.
func candidate(a API) Candidate {
	for _, c := range Candidates {
		if c.Group == a.Group && c.Resource == a.Resource {
			return c
		}
	}
	return Candidate{}
}

// Names is the APIs' strings ("VirtualService networking.istio.io/v1"), in order.
func Names(apis []API) []string {
	out := make([]string, len(apis))
	for i, a := range apis {
		out[i] = a.String()
	}
	return out
}

// Supporting objects read beside the mesh APIs (core v1, always served): Namespaces (mesh
// membership) and Services (their ports: a mesh retries on HTTP and gRPC ports only, mesh/ports.go;
// and Linkerd's retry annotations) whenever any mesh API is read, istio-system's ConfigMaps (the
// MeshConfigs: istio and the revisions' istio-<rev>) when Istio is. Services were read with Linkerd only, and with Istio alone a
// TCP-only callee (a Redis port) kept Istio's default retry layer in the status: 27 where
// analyze and the gate said 9 (#28, Online Boutique).
var (
	namespacesAPI = API{Version: "v1", Resource: "namespaces", Kind: "Namespace"}
	configMapsAPI = API{Version: "v1", Resource: "configmaps", Kind: "ConfigMap"}
	servicesAPI   = API{Version: "v1", Resource: "services", Kind: "Service"}
)

// gatewaysAPIs are the versions of Gateway API's Gateway read, in order, when the group's
// preferred version does not serve it.
var gatewaysVersions = []string{"v1", "v1beta1"}

// waypoints returns the Gateway API's Gateways when Istio's API is read and the cluster serves
// them: a Gateway of class istio-waypoint is an ambient waypoint whose retries apply to the
// Services that use it (mesh/waypoint.go). Read beside the mesh APIs, like the Services, so the
// MeshLayers condition's list is unchanged; a cluster without them gets each waypoint assumed.
func waypoints(apis []API, served Served) []API {
	if !slices.ContainsFunc(apis, func(a API) bool { return candidate(a).Istio }) {
		return nil
	}
	for _, v := range append([]string{served.Preferred[mesh.GroupGateway]}, gatewaysVersions...) {
		if v != "" && served.Resources[mesh.GroupGateway+"/"+v]["gateways"] {
			return []API{{Group: mesh.GroupGateway, Version: v, Resource: "gateways", Kind: "Gateway"}}
		}
	}
	return nil
}

// ingressClassesAPI is networking.k8s.io's IngressClass, read beside the Ingresses.
var ingressClassesAPI = API{Group: mesh.GroupNetworking, Version: "v1", Resource: "ingressclasses", Kind: "IngressClass"}

// ingressClasses returns the IngressClasses when the Ingresses are read and the cluster serves
// them (every cluster since Kubernetes 1.19): an Ingress is ingress-nginx's when its class's
// spec.controller is k8s.io/ingress-nginx, or the default class's when it names none. Read
// beside the Ingresses (listed under "also"), so --mesh-apis names the Ingresses only and the
// mesh webhook gets no rule for a cluster-scoped kind.
func ingressClasses(apis []API, served Served) []API {
	if !slices.ContainsFunc(apis, func(a API) bool { return candidate(a).Ingress }) {
		return nil
	}
	if served.Resources[mesh.GroupNetworking+"/"+ingressClassesAPI.Version][ingressClassesAPI.Resource] {
		return []API{ingressClassesAPI}
	}
	return nil
}

// supporting returns the core APIs read with apis: none when only the Ingresses are, whose
// layer reads neither a Namespace nor a Service (a cluster without a mesh then runs two small
// informers, not one of every Service).
func supporting(apis []API) []API {
	if !slices.ContainsFunc(apis, func(a API) bool { return !candidate(a).Ingress }) {
		return nil
	}
	out := []API{namespacesAPI}
	if slices.ContainsFunc(apis, func(a API) bool { return candidate(a).Istio }) {
		// istio-system's MeshConfigs, and Istio's injector's webhook configurations, whose
		// selectors decide which pods get its sidecar (mesh/istiowebhooks.go: its
		// enableNamespacesByDefault injects unlabelled namespaces).
		out = append(out, configMapsAPI, mutatingWebhooksAPI)
	}
	return append(out, servicesAPI)
}

// mutatingWebhooksAPI is the cluster's MutatingWebhookConfigurations (a few per cluster; Trim
// keeps the webhooks of Istio's injector only).
var mutatingWebhooksAPI = API{Group: mesh.GroupAdmission, Version: "v1", Resource: "mutatingwebhookconfigurations", Kind: "MutatingWebhookConfiguration"}
