package mesh

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

// Kind names the system that adds a layer.
type Kind string

// Kinds of layers.
const (
	Istio        Kind = "Istio"
	Linkerd      Kind = "Linkerd"
	GAMMA        Kind = "GAMMA"        // a Gateway API route with a Service parentRef, in either mesh
	Gateway      Kind = "Gateway"      // a Gateway API route with a Gateway parentRef (north-south)
	IstioIngress Kind = "IstioIngress" // a VirtualService bound to an Istio ingress Gateway (north-south)
	EnvoyGateway Kind = "EnvoyGateway" // a BackendTrafficPolicy, where the route sets no retry
)

// Layer is one retry layer on an edge: Tries multiplies the attempts the caller's code makes.
type Layer struct {
	Kind Kind
	// Object is the object that sets it ("VirtualService bookinfo/ratings"); empty for a default
	// no object declares.
	Object string
	// FieldPath is the field of Object that decides Tries ("spec.http[0].retries.attempts"); for a
	// default on a declared route, the block that is missing ("spec.http[1].retries").
	FieldPath string
	Tries     int64
	// Default: Tries is the system's default, not a number written in Object.
	Default bool
	// Note says where Tries comes from, for status and reports:
	// "Istio default, no VirtualService binds reviews".
	Note string
	// Unset is, for a Gateway API route rule's retry (FieldPath spec.rules[i].retry...), the
	// tries the rule gives without its retry block, as the system that weighs the layer reads
	// that: Istio's default, 1 for Linkerd (which reads no rules[].retry), a Gateway's
	// BackendTrafficPolicy or 1; 0 for other layers. The CRD's retry.attempts is at least 1
	// (2 tries): 1 try is only "remove the block", where that gives 1 (PlanRewrite, MinTries).
	Unset int64
	// NoRuleTimes: the system that applies the layer reads no per-try timeout or backoff of its
	// rule: Linkerd, for a Gateway API rule's retry (counted as declared, an upper bound), reads
	// rules[].timeouts.request and no backendRequest (LayerTime).
	NoRuleTimes bool
	// Registers is, for Istio's default route to an external host, the ServiceEntry that
	// registers the host ("ServiceEntry ns/name") and RegisteredPorts its ports ("80 HTTP"):
	// the object a change of which raises or lowers the layer (the mesh gate names it), kept
	// apart from Object, which holds a retry field.
	Registers, RegisteredPorts string
}

// String is "3 (Istio default, no VirtualService binds reviews)".
func (l Layer) String() string { return fmt.Sprintf("%d (%s)", l.Tries, l.Note) }

// Edge is what the mesh adds to one edge (or, from Entry, to a backend's client attempts).
type Edge struct {
	// Layers, in order of application; a meshed caller always gets its mesh's layer, even of
	// 1 try (a renderer may leave those out of a product).
	Layers []Layer
	// Warnings are the exact strings of DESIGN.md's mesh section (see the Warn* functions).
	Warnings []string
}

// Tries is the product of the layers: 1 when there is none; saturating at graph.Saturated (a
// layer without bound, such as a Dapr retry policy's maxRetries -1 named from another
// Resiliency, must not wrap to a negative when another layer multiplies it).
func (e Edge) Tries() int64 {
	t := int64(1)
	for _, l := range e.Layers {
		t = graph.Mul(t, l.Tries)
	}
	return t
}

// Caller is the calling workload, as the graph builder has it.
type Caller struct {
	// Name names the workload in warnings ("Deployment bookinfo/productpage").
	Name      string
	Namespace string
	// Labels and Annotations of the pod template (a bare Pod's own).
	Labels, Annotations map[string]string
	// Containers are the names of the pod template's containers and init containers: a
	// manifest already injected (istioctl kube-inject, linkerd inject --manual) carries the
	// mesh's proxy container ("istio-proxy", "linkerd-proxy") and is meshed whatever the
	// namespace says.
	Containers []string
}

// Options are the settings a Set applies.
type Options struct {
	// IstioDefaultRetries overrides Istio's default retries (--istio-default-retries); nil reads
	// MeshConfig defaultHttpRetryPolicy.attempts from the Set's MeshConfigs (istio-system/istio
	// and the revisions' istio-<rev>, the most of them: revisions.go), else Istio's 2.
	IstioDefaultRetries *int64
	// DefaultNamespace is given to objects without one ("default" if empty).
	DefaultNamespace string
	// KumaDefaultMesh: a caller in Kuma's mesh "default" whose Mesh object is not in the Set is
	// in the mesh Kuma's control plane creates at start (kumahq/kuma pkg/defaults/mesh.go
	// EnsureDefaultMeshExists, unless KUMA_DEFAULTS_SKIP_MESH_CREATION), with its initial
	// MeshRetry mesh-retry-all-default, assumed and said so (kuma.go). For a manifest set
	// (retrycap analyze), which rarely carries the Mesh the control plane made; not for a
	// cluster, whose Meshes the manager reads.
	KumaDefaultMesh bool
}

// Set is the mesh objects of a cluster or a manifest set. Adding and removing are not safe for
// concurrent use; queries are, once no goroutine adds or removes.
type Set struct {
	opts             Options
	namespaces       map[string]objectMeta
	services         map[ServiceRef]objectMeta
	ports            map[ServiceRef][]servicePort // ports.go
	meshConfigs      map[string]meshConfigs       // the MeshConfig ConfigMaps added, by name (revisions.go)
	meshConfig       bool                         // one was added
	meshDefault      *meshDefault                 // the defaultHttpRetryPolicy counted (the most of meshConfigs'), when one sets it
	inbound          *meshDefault                 // the defaultInboundHttpRetryPolicy counted, when one adds tries (inbound.go)
	virtualServices  map[string]*virtualService
	serviceEntries   map[string]*serviceEntry // serviceentry.go
	routes           map[string]*route
	profiles         map[string]header
	profileRetryable map[string]bool // by "namespace/name": the profile has an isRetryable route
	policies         map[string]*backendTrafficPolicy
	kumaMeshes       map[string]*kumaMesh            // kuma.go, by name
	kumaRetries      map[string]*meshRetry           // kuma.go
	kumaExternal     map[string]*meshExternalService // kuma.go, MeshExternalServices
	kumaRoutes       map[string]*meshHTTPRoute       // kuma.go, MeshHTTPRoutes (the callees of their to[] items)
	resiliencies     map[string]*resiliency          // dapr.go
	routers          map[string]*serviceRouter       // consul.go
	gateways         map[string]*gateway             // waypoint.go, by "namespace/name"
	ingresses        map[string]*ingressObj          // ingressnginx.go
	ingressClasses   map[string]*ingressClass        // ingressnginx.go, by name
	nginx            nginxObjects                    // ingress-nginx's controllers and ConfigMaps (ingressnginx_config.go)
	istioInjectors   map[string]*istioInjector       // Istio's injection webhooks, by configuration name (istiowebhooks.go)
	times            map[string]objTimes             // the objects' timeouts, by key (time.go)

	mu  sync.Mutex
	idx *index
}

// NewSet returns an empty Set.
func NewSet(opts Options) *Set {
	return &Set{
		opts:             opts,
		namespaces:       map[string]objectMeta{},
		services:         map[ServiceRef]objectMeta{},
		ports:            map[ServiceRef][]servicePort{},
		virtualServices:  map[string]*virtualService{},
		serviceEntries:   map[string]*serviceEntry{},
		routes:           map[string]*route{},
		profiles:         map[string]header{},
		profileRetryable: map[string]bool{},
		policies:         map[string]*backendTrafficPolicy{},
		meshConfigs:      map[string]meshConfigs{},
		kumaMeshes:       map[string]*kumaMesh{},
		kumaRetries:      map[string]*meshRetry{},
		kumaExternal:     map[string]*meshExternalService{},
		kumaRoutes:       map[string]*meshHTTPRoute{},
		resiliencies:     map[string]*resiliency{},
		routers:          map[string]*serviceRouter{},
		gateways:         map[string]*gateway{},
		ingresses:        map[string]*ingressObj{},
		ingressClasses:   map[string]*ingressClass{},
		nginx:            newNginxObjects(),
		istioInjectors:   map[string]*istioInjector{},
	}
}

// Clone returns a Set with the same objects, for a judge that adds an incoming version of an
// object over the cluster's without changing the shared Set. The objects are shared, not copied:
// Sets never modify an object once added.
func (s *Set) Clone() *Set {
	c := NewSet(s.opts)
	for k, v := range s.namespaces {
		c.namespaces[k] = v
	}
	for k, v := range s.services {
		c.services[k] = v
	}
	for k, v := range s.ports {
		c.ports[k] = v
	}
	for k, v := range s.virtualServices {
		c.virtualServices[k] = v
	}
	for k, v := range s.serviceEntries {
		c.serviceEntries[k] = v
	}
	for k, v := range s.routes {
		c.routes[k] = v
	}
	for k, v := range s.profiles {
		c.profiles[k] = v
	}
	for k, v := range s.profileRetryable {
		c.profileRetryable[k] = v
	}
	for k, v := range s.policies {
		c.policies[k] = v
	}
	for k, v := range s.kumaMeshes {
		c.kumaMeshes[k] = v
	}
	for k, v := range s.kumaRetries {
		c.kumaRetries[k] = v
	}
	for k, v := range s.kumaExternal {
		c.kumaExternal[k] = v
	}
	for k, v := range s.kumaRoutes {
		c.kumaRoutes[k] = v
	}
	for k, v := range s.resiliencies {
		c.resiliencies[k] = v
	}
	for k, v := range s.routers {
		c.routers[k] = v
	}
	for k, v := range s.gateways {
		c.gateways[k] = v
	}
	for k, v := range s.ingresses {
		c.ingresses[k] = v
	}
	for k, v := range s.ingressClasses {
		c.ingressClasses[k] = v
	}
	for k, v := range s.meshConfigs {
		c.meshConfigs[k] = v
	}
	for k, v := range s.istioInjectors {
		c.istioInjectors[k] = v
	}
	c.nginx = s.nginx.clone()
	c.meshConfig, c.meshDefault, c.inbound = s.meshConfig, s.meshDefault, s.inbound
	c.times = make(map[string]objTimes, len(s.times))
	for k, v := range s.times {
		c.times[k] = v
	}
	return c
}

// Counts is how many objects of each kind the Set holds ("VirtualService": 2), for reports.
func (s *Set) Counts() map[string]int {
	c := map[string]int{}
	add := func(kind string, n int) {
		if n > 0 {
			c[kind] += n
		}
	}
	add("Namespace", len(s.namespaces))
	add("Service", len(s.services))
	add("ConfigMap", len(s.meshConfigs))
	add("VirtualService", len(s.virtualServices))
	add("ServiceEntry", len(s.serviceEntries))
	for _, r := range s.routes {
		add(r.Kind, 1)
	}
	add("ServiceProfile", len(s.profiles))
	add("BackendTrafficPolicy", len(s.policies))
	add("Mesh", len(s.kumaMeshes))
	add("MeshRetry", len(s.kumaRetries))
	add("MeshExternalService", len(s.kumaExternal))
	add("MeshHTTPRoute", len(s.kumaRoutes))
	add("Resiliency", len(s.resiliencies))
	add("ServiceRouter", len(s.routers))
	add("Gateway", len(s.gateways))
	add("Ingress", len(s.ingresses))
	add("IngressClass", len(s.ingressClasses))
	add("MutatingWebhookConfiguration", len(s.istioInjectors))
	return c
}

// ServiceRef names a Service: namespace and name.
type ServiceRef struct{ Namespace, Name string }

// String is "bookinfo/ratings".
func (r ServiceRef) String() string { return r.Namespace + "/" + r.Name }

func (r ServiceRef) fqdn() string { return r.Name + "." + r.Namespace + ".svc.cluster.local" }

// resolve reads a callee name in namespace ns: a Service (ok) or an external host.
func resolve(name, ns string) (ServiceRef, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if svc, sns, ok := annotations.SplitService(name); ok {
		return ServiceRef{sns, svc}, true
	}
	if !strings.Contains(name, ".") {
		return ServiceRef{ns, name}, true
	}
	return ServiceRef{Name: name}, false
}

// index is built on the first query after a change.
type index struct {
	vsByService map[ServiceRef][]*virtualService
	vsByHost    map[string][]*virtualService // external hosts
	vsWildcard  []*virtualService
	// routesByService: Gateway API and Linkerd routes whose parentRef is the Service.
	routesByService map[ServiceRef][]*route
	// gatewayRoutes: routes with a Gateway parentRef, by backend Service.
	gatewayRoutes map[ServiceRef][]*route
	// profiles: ServiceProfiles by the Service they name (FQDN name), any namespace.
	profiles map[ServiceRef][]header
	// policies by target: "HTTPRoute/ns/name", "Gateway/ns/name".
	policies map[string][]*backendTrafficPolicy
	// ingress: the http routes of VirtualServices bound to an Istio ingress Gateway, by the
	// Service they route to (ingress.go).
	ingress map[ServiceRef][]ingressRoute
	// ingresses: the Ingresses routing to a Service, with their controller (ingressnginx.go).
	ingresses map[ServiceRef][]ingressUse
}

func (s *Set) index() *index {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.idx != nil {
		return s.idx
	}
	x := &index{
		vsByService: map[ServiceRef][]*virtualService{}, vsByHost: map[string][]*virtualService{},
		routesByService: map[ServiceRef][]*route{}, gatewayRoutes: map[ServiceRef][]*route{},
		profiles: map[ServiceRef][]header{}, policies: map[string][]*backendTrafficPolicy{},
		ingress: map[ServiceRef][]ingressRoute{}, ingresses: map[ServiceRef][]ingressUse{},
	}
	s.indexIngresses(x) // ingressnginx.go
	for _, k := range sortedKeys(s.virtualServices) {
		vs := s.merged(s.virtualServices[k]) // delegate.go
		x.addIngress(vs)                     // ingress.go
		if !forMesh(vs.Spec.Gateways) {
			continue
		}
		seen := map[string]bool{}
		for _, h := range vs.Spec.Hosts {
			h = strings.ToLower(h)
			if strings.HasPrefix(h, "*") {
				if !seen["*"] {
					x.vsWildcard = append(x.vsWildcard, vs)
					seen["*"] = true
				}
				continue
			}
			r, ok := resolve(h, vs.Metadata.Namespace)
			key := r.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			if ok {
				x.vsByService[r] = append(x.vsByService[r], vs)
			} else {
				x.vsByHost[r.Name] = append(x.vsByHost[r.Name], vs)
			}
		}
	}
	for _, k := range sortedKeys(s.routes) {
		r := s.routes[k]
		seen := map[ServiceRef]bool{}
		gw := false
		for _, p := range r.Spec.ParentRefs {
			switch {
			case p.isService("Gateway"):
				sr := ServiceRef{p.namespaceOr(r.Metadata.Namespace), p.Name}
				if !seen[sr] {
					x.routesByService[sr] = append(x.routesByService[sr], r)
					seen[sr] = true
				}
			case p.isGateway() && r.group() == GroupGateway:
				gw = true
			}
		}
		if !gw {
			continue
		}
		backends := map[ServiceRef]bool{}
		for _, rule := range r.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if b.isService("Service") {
					backends[ServiceRef{b.namespaceOr(r.Metadata.Namespace), b.Name}] = true
				}
			}
		}
		for b := range backends {
			x.gatewayRoutes[b] = append(x.gatewayRoutes[b], r)
		}
	}
	for _, k := range sortedKeys(s.profiles) {
		p := s.profiles[k]
		if svc, ns, ok := annotations.SplitService(strings.ToLower(p.Metadata.Name)); ok {
			x.profiles[ServiceRef{ns, svc}] = append(x.profiles[ServiceRef{ns, svc}], p)
		}
	}
	for _, k := range sortedKeys(s.policies) {
		p := s.policies[k]
		targets := p.Spec.TargetRefs
		if p.Spec.TargetRef != nil {
			targets = append([]targetRef{*p.Spec.TargetRef}, targets...)
		}
		seen := map[string]bool{}
		for _, t := range targets {
			if t.Group != "" && t.Group != GroupGateway {
				continue
			}
			key := t.Kind + "/" + p.Metadata.Namespace + "/" + t.Name
			if !seen[key] {
				seen[key] = true
				x.policies[key] = append(x.policies[key], p)
			}
		}
		for _, key := range s.selectedTargets(p) { // targetselectors.go
			if !seen[key] {
				seen[key] = true
				x.policies[key] = append(x.policies[key], p)
			}
		}
	}
	s.idx = x
	return x
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// forMesh: a VirtualService's (or a route match's) gateways apply to sidecars.
func forMesh(gateways []string) bool {
	return len(gateways) == 0 || slices.Contains(gateways, "mesh")
}

// exportedTo: the VirtualService is visible in namespace ns.
func (vs *virtualService) exportedTo(ns string) bool {
	if len(vs.Spec.ExportTo) == 0 {
		return true
	}
	for _, e := range vs.Spec.ExportTo {
		if e == "*" || e == ns || e == "." && vs.Metadata.Namespace == ns {
			return true
		}
	}
	return false
}

// InIstio reports whether the caller runs an Istio sidecar: already injected (injected.go), or
// one Istio's injector will add (Set.IstioWillInject: the selectors of Istio's injection
// webhooks when the Set holds them, else IstioWillInject; the rule internal/inject follows too): its
// webhooks select on pod labels only, so an annotation sidecar.istio.io/inject "true" alone,
// in a namespace without injection labels, meshes nothing.
func (s *Set) InIstio(c Caller) bool {
	if s == nil {
		return false
	}
	return injectedIstio(c) || s.IstioWillInject(c.Namespace, c.Labels, c.Annotations, s.namespaces[c.Namespace].Labels) != ""
}

// InLinkerd reports whether the caller runs a Linkerd proxy: already injected (injected.go), else
// linkerd.io/inject "enabled" on its
// pod template, else on its namespace ("disabled" on the pod template opts out).
func (s *Set) InLinkerd(c Caller) bool {
	if s == nil {
		return false
	}
	if injectedLinkerd(c) {
		return true
	}
	if v := c.Annotations[LinkerdInject]; v != "" {
		return linkerdInjects(v)
	}
	return linkerdInjects(s.namespaces[c.Namespace].Annotations[LinkerdInject])
}

// linkerdInjects: the values of linkerd.io/inject that inject the proxy, "enabled" and "ingress"
// (an ingress controller's proxy, which routes by l5d-dst-override and retries as any other):
// linkerd/linkerd2 pkg/inject/report.go InjectEnabledValues. Before, "ingress" was read as out of
// the mesh and an ingress controller's Linkerd retries were not counted.
func linkerdInjects(v string) bool { return v == "enabled" || v == "ingress" }

// Edge returns the layers the caller's mesh adds to its calls to callee (the graph's name in the
// caller's namespace view: "ratings", "ratings.other", or a longer in-cluster form). A caller in
// no mesh gets none; an external host gets a layer only from a VirtualService that names it.
// A nil Set has no layers.
func (s *Set) Edge(c Caller, callee string) Edge { return s.EdgePort(c, callee, 0) }

// EdgePort is Edge for a call to port of callee (0: not written in the upstream): a mesh
// retries HTTP and gRPC only, so a call to a TCP port of the Service gets a 1-try layer that
// says so (ports.go).
func (s *Set) EdgePort(c Caller, callee string, port int32) Edge {
	if s == nil {
		return Edge{}
	}
	e := s.edge(c, callee, port)
	if len(e.Layers) > 0 {
		s.onlyHTTP(&e, c, callee, port)
	}
	return e
}

func (s *Set) edge(c Caller, callee string, port int32) Edge {
	x := s.index()
	ref, inCluster := resolve(callee, c.Namespace)
	istio, linkerd := s.InIstio(c), s.InLinkerd(c)
	var e Edge
	switch {
	case istio && linkerd:
		e.Warnings = append(e.Warnings, WarnBothMeshes(c.Name))
		fallthrough
	case istio:
		s.istioEdge(x, &e, c, ref, inCluster, port)
	case linkerd:
		if inCluster {
			s.linkerdEdge(x, &e, c, ref, port)
		}
	case inCluster && s.ambientLabels(c): // istio is false here: no sidecar
		s.waypointEdge(x, &e, ref) // waypoint.go: ambient pods have no sidecar
	}
	if !inCluster {
		s.kumaExtEdge(&e, c, ref.Name, port) // kuma.go: a MeshExternalService's host
	}
	if inCluster {
		s.inboundEdge(&e, ref)       // inbound.go
		s.kumaEdge(&e, c, ref, port) // kuma.go
		s.daprEdge(&e, c, ref)       // dapr.go
		s.consulEdge(&e, c, ref)     // consul.go
	}
	return e
}

func (s *Set) istioDefault(why string) Layer {
	switch {
	case s.opts.IstioDefaultRetries != nil:
		n := *s.opts.IstioDefaultRetries
		return Layer{Kind: Istio, Tries: tries(n), Default: true, Note: fmt.Sprintf("Istio default --istio-default-retries=%d, %s", n, why)}
	case s.meshDefault != nil:
		return Layer{Kind: Istio, Object: s.meshDefault.object, FieldPath: "data." + IstioConfigKey,
			Tries: s.meshDefault.retries + 1, Default: true, Note: "Istio default from " + s.meshDefault.note + ", " + why}
	}
	return Layer{Kind: Istio, Tries: IstioDefaultRetries + 1, Default: true, Note: "Istio default, " + why}
}

// withDefault returns l, or the mesh default with l's object and field when l is a default.
func withDefault(def, l Layer) Layer {
	if !l.Default {
		return l
	}
	def.Object, def.FieldPath = l.Object, l.FieldPath
	return def
}

func better(a *Layer, b Layer) {
	if a.Kind == "" || b.Tries > a.Tries {
		*a = b
	}
}

// vsRouteLayer is the retry layer of vs's http route i, r (Istio's default route when r sets no
// retries), for a sidecar (at "") or a waypoint (at " at <waypoint>", named in the notes).
func (s *Set) vsRouteLayer(vs *virtualService, i int, r *httpRoute, at string) Layer {
	vs, i = r.named(vs, i)
	switch {
	case r.Retries == nil:
		return withDefault(s.istioDefault(fmt.Sprintf("%s spec.http[%d] sets no retries%s", vs.id(), i, at)),
			Layer{Object: vs.id(), FieldPath: fmt.Sprintf("spec.http[%d].retries", i), Default: true})
	case r.Retries.Attempts == nil:
		return Layer{Kind: Istio, Object: vs.id(), FieldPath: fmt.Sprintf("spec.http[%d].retries.attempts", i), Tries: 1,
			Note: fmt.Sprintf("%s spec.http[%d].retries without attempts: no retries%s", vs.id(), i, at)}
	default:
		n := *r.Retries.Attempts
		return Layer{Kind: Istio, Object: vs.id(), FieldPath: fmt.Sprintf("spec.http[%d].retries.attempts", i), Tries: n + 1,
			Note: fmt.Sprintf("%s spec.http[%d].retries.attempts: %d%s", vs.id(), i, n, at)}
	}
}

func (s *Set) istioEdge(x *index, e *Edge, c Caller, ref ServiceRef, inCluster bool, port int32) {
	var vss []*virtualService
	if inCluster {
		vss = x.vsByService[ref]
	} else {
		vss = x.vsByHost[ref.Name]
	}
	for _, vs := range x.vsWildcard {
		if matchWildcard(vs.Spec.Hosts, ref, inCluster) {
			vss = append(vss, vs)
		}
	}
	name := ref.Name
	if inCluster && ref.Namespace != c.Namespace {
		name = ref.String()
	}
	var vsBest Layer
	viaEgress := true // every binding mesh route sends the call to an egress gateway (egress.go)
	for _, vs := range vss {
		if !vs.exportedTo(c.Namespace) {
			continue
		}
		for i, r := range vs.Spec.HTTP {
			if !routeForMesh(r.Match) || !matchesPort(r.Match, port) {
				continue
			}
			better(&vsBest, s.vsRouteLayer(vs, i, &vs.Spec.HTTP[i], ""))
			viaEgress = viaEgress && toEgressGateway(&vs.Spec.HTTP[i])
		}
	}
	var egress Layer
	if vsBest.Kind != "" && viaEgress {
		egress, _ = s.egressLayer(vss, c, ref, inCluster, port)
	}
	var gamma Layer
	if inCluster {
		unset := s.istioDefault("").Tries // a rule without retry
		for _, r := range x.routesByService[ref] {
			if r.group() != GroupGateway || !routeApplies(r, ref, c.Namespace) || !attachesTo(r, ref, port) {
				continue
			}
			for i := range r.Spec.Rules {
				better(&gamma, s.gammaRuleOrDefault(r, i, unset))
			}
		}
	}
	switch {
	case vsBest.Kind != "" && gamma.Kind != "":
		best := vsBest
		better(&best, gamma)
		e.Warnings = append(e.Warnings, WarnVirtualServiceAndRoute(vsBest.Object, gamma.Object, name, best.Tries))
		e.Warnings = append(e.Warnings, s.ignoredTimes(best.Object)...)
		e.Layers = append(e.Layers, best)
	case vsBest.Kind != "":
		e.Warnings = append(e.Warnings, s.ignoredTimes(vsBest.Object)...)
		e.Layers = append(e.Layers, vsBest)
	case gamma.Kind != "":
		e.Layers = append(e.Layers, gamma)
	case inCluster:
		e.Layers = append(e.Layers, s.istioDefault("no VirtualService binds "+name))
	default:
		if l, gw, ok := s.serviceEntryRoute(c, ref.Name, port); ok { // egress.go
			e.Layers = append(e.Layers, l)
			if gw.Kind != "" {
				e.Layers = append(e.Layers, gw)
			}
		} else if l, ok := s.serviceEntryDefault(c, ref.Name, port); ok { // serviceentry.go
			e.Layers = append(e.Layers, l)
		}
	}
	if egress.Kind != "" {
		e.Layers = append(e.Layers, egress) // the egress gateway's own route, after the sidecar's
	}
}

// gammaRuleOrDefault is rule i of r as Istio applies it to a sidecar's call: its retry
// (gammaRule), or Istio's default where it sets none, with Unset (the tries without a retry
// block) set; GAMMA routes to a Service and routes parented to a ServiceEntry alike.
func (s *Set) gammaRuleOrDefault(r *route, i int, unset int64) Layer {
	l, ok := gammaRule(r, i)
	if !ok {
		l = withDefault(s.istioDefault(fmt.Sprintf("%s spec.rules[%d] sets no retry", r.id(), i)), l)
	}
	l.Unset = unset
	return l
}

// gammaRule is a route rule's own retry (ok), or a default layer naming the missing block.
func gammaRule(r *route, i int) (Layer, bool) {
	rt := r.Spec.Rules[i].Retry
	switch {
	case rt == nil:
		return Layer{Kind: GAMMA, Object: r.id(), FieldPath: fmt.Sprintf("spec.rules[%d].retry", i), Default: true}, false
	case rt.Attempts == nil:
		return Layer{Kind: GAMMA, Object: r.id(), FieldPath: fmt.Sprintf("spec.rules[%d].retry.attempts", i), Tries: GatewayAPIDefaultRetries + 1, Default: true,
			Note: fmt.Sprintf("%s spec.rules[%d].retry without attempts: %d retries", r.id(), i, GatewayAPIDefaultRetries)}, true
	}
	n := *rt.Attempts
	return Layer{Kind: GAMMA, Object: r.id(), FieldPath: fmt.Sprintf("spec.rules[%d].retry.attempts", i), Tries: tries(n),
		Note: fmt.Sprintf("%s spec.rules[%d].retry.attempts: %d", r.id(), i, n)}, true
}

// routeApplies: a route with a parentRef to Service ref binds the caller's traffic when it is the
// producer's route (in the Service's namespace) or the consumer's (in the caller's namespace).
func routeApplies(r *route, ref ServiceRef, callerNS string) bool {
	return r.Metadata.Namespace == ref.Namespace || r.Metadata.Namespace == callerNS
}

// attachesTo: the route binds a call to port of Service ref (0: the upstream names no port, the
// worst case: every route of the Service). A Service parentRef with a port attaches the route
// to that port only (Gateway API's GAMMA: ParentReference.port; Istio and Linkerd implement it).
func attachesTo(r *route, ref ServiceRef, port int32) bool {
	if port == 0 {
		return true
	}
	for _, p := range r.Spec.ParentRefs {
		if p.isService("Gateway") && p.Name == ref.Name && p.namespaceOr(r.Metadata.Namespace) == ref.Namespace && (p.Port == nil || *p.Port == port) {
			return true
		}
	}
	return false
}

// matchesPort: an http route takes a call to port (0: the upstream names none, the worst case:
// every route) unless each of its matches names another port (HTTPMatchRequest.port).
func matchesPort(match []httpMatch, port int32) bool {
	if port == 0 || len(match) == 0 {
		return true
	}
	for _, m := range match {
		if m.Port == 0 || m.Port == port {
			return true
		}
	}
	return false
}

func routeForMesh(match []httpMatch) bool {
	if len(match) == 0 {
		return true
	}
	for _, m := range match {
		if forMesh(m.Gateways) {
			return true
		}
	}
	return false
}

func matchWildcard(hosts []string, ref ServiceRef, inCluster bool) bool {
	target := ref.Name
	if inCluster {
		target = ref.fqdn()
	}
	for _, h := range hosts {
		h = strings.ToLower(h)
		if h == "*" || strings.HasPrefix(h, "*.") && strings.HasSuffix(target, h[1:]) {
			return true
		}
	}
	return false
}

func (s *Set) linkerdEdge(x *index, e *Edge, c Caller, ref ServiceRef, port int32) {
	name := ref.Name
	if ref.Namespace != c.Namespace {
		name = ref.String()
	}
	for _, p := range x.profiles[ref] {
		if p.Metadata.Namespace == ref.Namespace || p.Metadata.Namespace == c.Namespace {
			id := p.Metadata.Namespace + "/" + p.Metadata.Name
			if !s.profileRetryable[id] {
				e.Warnings = append(e.Warnings, WarnServiceProfileNoRetry(id, name))
				e.Layers = append(e.Layers, Layer{Kind: Linkerd, Object: p.id(), Tries: 1, Default: true,
					Note: fmt.Sprintf("Linkerd ServiceProfile %s: no route isRetryable, no retries (retry annotations ignored)", id)})
				return
			}
			e.Warnings = append(e.Warnings, WarnServiceProfile(id, name))
			e.Layers = append(e.Layers, Layer{Kind: Linkerd, Object: p.id(), Tries: 1, Default: true,
				Note: fmt.Sprintf("Linkerd ServiceProfile %s: retry annotations ignored, budget-bounded retries not counted", id)})
			return
		}
	}
	var best Layer
	svcID := "Service " + ref.String()
	svcCfg, _ := linkerdRetries(s.services[ref].Annotations, svcID)
	svcUsed := true
	var routes []*route
	for _, r := range x.routesByService[ref] {
		if routeApplies(r, ref, c.Namespace) && attachesTo(r, ref, port) {
			routes = append(routes, r)
		}
	}
	if len(routes) > 0 {
		svcUsed = false
	}
	for _, r := range routes {
		cfg, _ := linkerdRetries(r.Metadata.Annotations, r.id())
		if !cfg.set {
			svcUsed = true
		} else {
			better(&best, s.linkerdLayer(e, r.id(), cfg))
		}
		if r.group() != GroupGateway {
			continue
		}
		for i := range r.Spec.Rules {
			if l, ok := gammaRule(r, i); ok {
				l.Unset = 1 // Linkerd reads no rules[].retry (its annotations are layers of their own)
				l.NoRuleTimes = true
				better(&best, l)
			}
		}
	}
	if svcUsed && svcCfg.set {
		better(&best, s.linkerdLayer(e, svcID, svcCfg))
	}
	if best.Kind == "" {
		best = Layer{Kind: Linkerd, Tries: 1, Default: true, Note: "Linkerd default, no retry annotations for " + name}
	}
	e.Layers = append(e.Layers, best)
}

func (s *Set) linkerdLayer(e *Edge, id string, cfg linkerdConfig) Layer {
	l := Layer{Kind: Linkerd, Object: id, FieldPath: cfg.fieldPath, Tries: tries(cfg.retries)}
	e.Warnings = append(e.Warnings, s.ignoredTimes(id)...)
	switch {
	case cfg.zero:
		l.Default = true
		l.Note = fmt.Sprintf("%s %s: %q, %s: 1 retry", id, cfg.fieldPath, cfg.value, linkerdZeroNote)
		e.Warnings = append(e.Warnings, WarnLinkerdLimitZero(id))
	case cfg.fieldPath != annotationPath(LinkerdRetryLimit):
		l.Default = true
		l.FieldPath = annotationPath(LinkerdRetryLimit)
		l.Note = fmt.Sprintf("%s %s: %q without %s: 1 retry", id, cfg.fieldPath, cfg.value, LinkerdRetryLimit)
	default:
		l.Note = fmt.Sprintf("%s %s: %q", id, cfg.fieldPath, cfg.value)
	}
	return l
}

// Backends lists the Services that a Gateway API route with a Gateway parentRef, an Istio
// VirtualService bound to an ingress Gateway, or an Ingress (ingressnginx.go) routes to: the
// north-south entrypoints, sorted.
func (s *Set) Backends() []ServiceRef {
	if s == nil {
		return nil
	}
	x := s.index()
	out := make([]ServiceRef, 0, len(x.gatewayRoutes)+len(x.ingress))
	for r := range x.gatewayRoutes {
		out = append(out, r)
	}
	for r := range x.ingress {
		if _, dup := x.gatewayRoutes[r]; !dup {
			out = append(out, r)
		}
	}
	for r := range x.ingresses {
		_, dup := x.gatewayRoutes[r]
		if _, dup2 := x.ingress[r]; !dup && !dup2 {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b ServiceRef) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Entry returns the north-south layer on backend v's client attempts: k'(v) = k(v) x Tries,
// the largest over the rules of the Gateway-parented routes, and the http routes of the
// VirtualServices bound to an Istio ingress Gateway (ingress.go), that route to v. A rule without a
// retry takes an Envoy Gateway BackendTrafficPolicy targeting the route, else one targeting its
// Gateway; none: 1 try. A Service no such route reaches gets no layer.
func (s *Set) Entry(v ServiceRef) Edge {
	if s == nil {
		return Edge{}
	}
	var best Layer
	for _, l := range s.EntryLayers(v) {
		better(&best, l)
	}
	if best.Kind == "" {
		return Edge{}
	}
	e := Edge{Layers: []Layer{best}, Warnings: ingressWarnings(s.index(), v)} // ingressnginx.go
	s.waypointEntry(s.index(), &e, v)                                         // waypoint.go: with istio.io/ingress-use-waypoint
	if d, src := s.gatewayLayerDelay(best); d > 0 {
		e.Warnings = append(e.Warnings, WarnEnvoyGatewayFaultDelay(src)) // fault.go
	}
	return e
}

// EntryLayers are the layers Entry(v) takes the largest of: each rule of the Gateway-parented
// routes that routes to v, then each http route of the ingress-bound VirtualServices that routes
// to v. A fix that lowers the largest must lower every other with more tries than it leaves, or
// the next one takes its place (the routes of several objects as well as one object's:
// EntrySiblings).
func (s *Set) EntryLayers(v ServiceRef) []Layer {
	if s == nil {
		return nil
	}
	x := s.index()
	var out []Layer
	for _, r := range x.gatewayRoutes[v] {
		for i := range r.Spec.Rules {
			if routesTo(r, i, v) {
				out = append(out, s.entryRuleLayer(x, r, i))
			}
		}
	}
	for _, ir := range x.ingress[v] {
		out = append(out, s.ingressLayer(ir))
	}
	for _, u := range x.ingresses[v] {
		out = append(out, s.ingressUseLayer(u)) // ingressnginx.go
	}
	return out
}

// routesTo reports whether rule i of the Gateway-parented route r has a backendRef to Service v.
func routesTo(r *route, i int, v ServiceRef) bool {
	for _, b := range r.Spec.Rules[i].BackendRefs {
		if b.isService("Service") && (ServiceRef{b.namespaceOr(r.Metadata.Namespace), b.Name}) == v {
			return true
		}
	}
	return false
}

// entryRuleLayer is rule i of the Gateway-parented route r on its backends' client attempts: its
// own retry, else a BackendTrafficPolicy's (policyLayer). Unset (the rule without its retry) is
// the latter's tries.
func (s *Set) entryRuleLayer(x *index, r *route, i int) Layer {
	pl := s.policyLayer(x, r, i)
	if l, ok := gammaRule(r, i); ok {
		l.Kind, l.Unset = Gateway, pl.Tries
		return l
	}
	if pl.Object == r.id() {
		pl.Unset = pl.Tries
	}
	return pl
}

func (s *Set) policyLayer(x *index, r *route, i int) Layer {
	pick := func(key string) (Layer, bool) {
		var best Layer
		for _, p := range x.policies[key] {
			if p.Spec.Retry == nil {
				continue
			}
			l := Layer{Kind: EnvoyGateway, Object: p.id(), FieldPath: "spec.retry.numRetries"}
			if n := p.Spec.Retry.NumRetries; n != nil {
				l.Tries = tries(*n)
				l.Note = fmt.Sprintf("%s spec.retry.numRetries: %d (targets %s)", p.id(), *n, key)
			} else {
				l.Tries, l.Default = EnvoyGatewayDefaultRetries+1, true
				l.Note = fmt.Sprintf("%s spec.retry without numRetries: %d retries (targets %s)", p.id(), EnvoyGatewayDefaultRetries, key)
			}
			better(&best, l)
		}
		return best, best.Kind != ""
	}
	target := func(kind, ns, name string) string { return kind + "/" + ns + "/" + name }
	own := target(r.Kind, r.Metadata.Namespace, r.Metadata.Name)
	if l, ok := pick(own); ok {
		return l
	}
	// A policy targeting the route replaces its Gateways' whole, retry or not, unless its
	// mergeType merges them (envoyproxy/gateway d32f28294245 internal/gatewayapi/
	// backendtrafficpolicy.go:705 translates a route's policy alone when MergeType is nil, and
	// :1739 gives a Gateway's policy only to routes with no traffic features yet): a route's
	// delay-only policy leaves it without retry. Before, the Gateway's retry was counted.
	var replacing *backendTrafficPolicy
	for _, p := range x.policies[own] {
		if p.Spec.MergeType != nil {
			replacing = nil
			break
		}
		if replacing == nil {
			replacing = p
		}
	}
	var best Layer
	for _, p := range r.Spec.ParentRefs {
		if replacing != nil {
			break
		}
		if !p.isGateway() {
			continue
		}
		if l, ok := pick(target("Gateway", p.namespaceOr(r.Metadata.Namespace), p.Name)); ok {
			better(&best, l)
		}
	}
	if best.Kind != "" {
		return best
	}
	unset := Layer{Kind: Gateway, Object: r.id(), FieldPath: fmt.Sprintf("spec.rules[%d].retry", i), Tries: 1, Default: true,
		Note: fmt.Sprintf("%s spec.rules[%d] sets no retry and no BackendTrafficPolicy targets it", r.id(), i)}
	if replacing != nil {
		unset.Note = fmt.Sprintf("%s spec.rules[%d] sets no retry, nor %s, which targets it and replaces its Gateway's policies", r.id(), i, replacing.id())
	}
	if g := s.istioGatewayParent(r); g != "" {
		l := withDefault(s.istioDefault(fmt.Sprintf("%s spec.rules[%d] sets no retry (parent Gateway %s, class %s)", r.id(), i, g, IstioGatewayClass)), unset)
		l.Kind = Gateway
		return l
	}
	return unset
}

// IstioGatewayClass is the GatewayClass of Istio's Gateway API ingress (istio/istio
// pilot/pkg/features/pilot.go GatewayAPIDefaultGatewayClass, PILOT_GATEWAY_API_DEFAULT_GATEWAYCLASS_NAME).
const IstioGatewayClass = "istio"

// istioGatewayParent names the first parent Gateway of r (in the input) whose class is Istio's
// ingress, "" when none is. Istio turns such a route into a VirtualService whose retries stay
// unset when the rule has no retry (istio/istio 86c9f01f pilot/pkg/config/kube/gateway/
// conversion.go, convertHTTPRoute: vs.Retries only `if r.Retry != nil`), and the gateway's Envoy
// then gets the default retry policy (pilot/pkg/networking/core/route/retry/retry.go,
// ConvertPolicy: nil -> the default, 2 retries, or MeshConfig's defaultHttpRetryPolicy): the
// same default as a sidecar's, at the entry.
func (s *Set) istioGatewayParent(r *route) string {
	for _, p := range r.Spec.ParentRefs {
		if !p.isGateway() {
			continue
		}
		k := ServiceRef{p.namespaceOr(r.Metadata.Namespace), p.Name}.String()
		if g := s.gateways[k]; g != nil && g.Spec.GatewayClassName == IstioGatewayClass {
			return k
		}
	}
	return ""
}

const linkerdZeroNote = "treated as unset by Linkerd"

// The warnings, exact strings.

// WarnBothMeshes: a caller both meshes inject; Istio's layer counts.
func WarnBothMeshes(caller string) string {
	return caller + " is in both Istio and Linkerd: counting Istio's layer (one sidecar captures the traffic)"
}

// WarnKumaRefuses: Kuma's injector refuses the caller's pods (a kuma.io/sidecar-injection
// value it cannot parse): no Kuma layer, and no pod either until the label is fixed.
func WarnKumaRefuses(err error) string {
	return err.Error() + ": no Kuma layer counted"
}

// WarnVirtualServiceAndRoute: a VirtualService and a GAMMA route bind one host; the larger counts.
func WarnVirtualServiceAndRoute(vs, route, host string, tries int64) string {
	return fmt.Sprintf("%s and %s both route %s: counting the larger, %d tries", vs, route, host, tries)
}

// WarnLinkerdLimitZero: retry.linkerd.io/limit "0", which Linkerd treats as unset (1 retry).
func WarnLinkerdLimitZero(object string) string {
	return fmt.Sprintf(`%s %s: "0" is treated by Linkerd as unset: counted as 1 retry`, object, annotationPath(LinkerdRetryLimit))
}

// WarnServiceProfileNoRetry: a Linkerd ServiceProfile for the callee with no isRetryable route:
// Linkerd retries none of the callee's requests, whatever its annotations say.
func WarnServiceProfileNoRetry(profile, callee string) string {
	return fmt.Sprintf("Linkerd ServiceProfile %s for %s has no isRetryable route: Linkerd retries none of its requests and ignores the retry.linkerd.io annotations", profile, callee)
}

// WarnServiceProfile: a Linkerd ServiceProfile for the callee; its budget is not modelled.
func WarnServiceProfile(profile, callee string) string {
	return fmt.Sprintf("Linkerd ServiceProfile %s for %s: Linkerd ignores the retry.linkerd.io annotations and retries under the profile's budget: budget-bounded retries not counted", profile, callee)
}
