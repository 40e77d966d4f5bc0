package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kuma (kumahq/kuma): a caller is in Kuma when Kuma's injector adds its sidecar to the pods of
// its pod template (KumaWillInject: the label kuma.io/sidecar-injection, the pod's over its
// Namespace's; kumainject.go). Its outbound retries are MeshRetry objects (kuma.io/v1alpha1)
// of its mesh (label kuma.io/mesh of the pod, else of the Namespace, "default" when absent):
// spec.to[].default.http.numRetries and .grpc.numRetries, retries (tries = n + 1), for a to[].targetRef of kind Mesh or the callee's MeshService (by name and
// namespace, or the legacy "name_namespace_svc_port" form). The largest applies: Kuma merges the
// matching policies, more specific over less, and the largest is an upper bound of any merge. The
// top-level targetRef (which callers) is not narrowed: an upper bound too, said in the docs.
//
// Every new mesh gets the MeshRetry "mesh-retry-all-<mesh>" (HTTP and gRPC numRetries 5; TCP
// maxConnectAttempt 5, connection attempts that resend no request) unless its Mesh object's
// spec.skipCreatingInitialPolicies lists "*" or "MeshRetry": when the Mesh object is in the input
// and no MeshRetry of that mesh is, that default is assumed and said so.
const (
	GroupKuma                   = "kuma.io"
	KumaSidecarInjection        = "kuma.io/sidecar-injection"
	KumaMeshLabel               = "kuma.io/mesh"
	KumaDefaultMesh             = "default"
	KumaDefaultNumRetries       = 5
	KumaDefaultRetryPrefix      = "mesh-retry-all-"
	KumaSystemNamespace         = "kuma-system"
	Kuma                   Kind = "Kuma"
)

type kumaMesh struct {
	header
	Spec struct {
		SkipCreatingInitialPolicies []string `json:"skipCreatingInitialPolicies"`
	} `json:"spec"`
}

type kumaRetryConf struct {
	NumRetries *int64 `json:"numRetries"`
	// PerTryTimeout and BackOff go into the Envoy retry policy beside numRetries (kumahq/kuma
	// 348b6528 pkg/plugins/policies/meshretry/plugin/xds/configurer.go genHttpRetryPolicy,
	// genGrpcRetryPolicy): the time model's (kumaTime).
	PerTryTimeout *string `json:"perTryTimeout"`
	BackOff       *struct {
		BaseInterval *string `json:"baseInterval"`
		MaxInterval  *string `json:"maxInterval"`
	} `json:"backOff"`
}

type meshRetry struct {
	header
	Spec struct {
		// TargetRef selects the callers: Mesh (or none) is every proxy of the mesh; Dataplane
		// some, which retrycap does not match (kumaEdge counts it as maybe applying).
		TargetRef *struct {
			Kind string `json:"kind"`
		} `json:"targetRef"`
		To []struct {
			TargetRef kumaRef `json:"targetRef"`
			Default   struct {
				HTTP *kumaRetryConf `json:"http"`
				GRPC *kumaRetryConf `json:"grpc"`
			} `json:"default"`
		} `json:"to"`
	} `json:"spec"`
}

func (m *meshRetry) mesh() string { return kumaMeshLabel(m.Metadata.Labels) }

func kumaMeshLabel(labels map[string]string) string {
	if v := labels[KumaMeshLabel]; v != "" {
		return v
	}
	return KumaDefaultMesh
}

// KumaExtSvcSuffix is the host suffix of Kuma's default HostnameGenerators for a
// MeshExternalService (kumahq/kuma 348b6528 pkg/defaults/hostname_generator.go:
// "{{ .DisplayName }}.extsvc.mesh.local", local and synced). A HostnameGenerator of one's own
// (another template) is not read: its hosts get no Kuma layer.
const KumaExtSvcSuffix = ".extsvc.mesh.local"

// meshExternalService is what kuma.go reads of a MeshExternalService (kuma.io/v1alpha1, in
// Kuma's system namespace only): the port and protocol its outbound listener takes
// (meshexternalservice.go Match: protocol tcp when unset, the CRD's default).
type meshExternalService struct {
	header
	Spec struct {
		Match struct {
			Port     int32  `json:"port"`
			Protocol string `json:"protocol"`
		} `json:"match"`
	} `json:"spec"`
}

// displayName is the name Kuma's hostname and a to[].targetRef give it: the label
// kuma.io/display-name (a synced copy's), else the object's name.
func (m *meshExternalService) displayName() string {
	if v := m.Metadata.Labels[KumaDisplayName]; v != "" {
		return v
	}
	return m.Metadata.Name
}

// kumaRef is a Kuma targetRef as the readers take it: by name (and namespace), or by labels
// (Kuma's v3 API, whose CRDs prune a name).
type kumaRef struct {
	Kind        string            `json:"kind"`
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	SectionName string            `json:"sectionName"`
}

// meshHTTPRoute is what kuma.go reads of a MeshHTTPRoute (kuma.io/v1alpha1): the callees of its
// to[] items (kumahq/kuma 348b6528 pkg/plugins/policies/meshhttproute/api/v1alpha1/validation.go
// validateToRef: a MeshService, MeshExternalService or MeshMultiZoneService). Its routes are on
// those callees' outbound listeners only, so a MeshRetry item naming the route applies to calls
// to them only (kumaRouteCovers).
type meshHTTPRoute struct {
	header
	Spec struct {
		To []struct {
			TargetRef kumaRef `json:"targetRef"`
		} `json:"to"`
	} `json:"spec"`
}

// addKuma decodes a Mesh, MeshRetry, MeshExternalService or MeshHTTPRoute into s; a negative
// numRetries is an error naming the field.
func (s *Set) addKuma(key string, h header, decode func(any) error) error {
	if h.Kind == "MeshHTTPRoute" {
		m := &meshHTTPRoute{}
		if err := decode(m); err != nil {
			return err
		}
		m.header = h
		s.kumaRoutes[key] = m
		return nil
	}
	if h.Kind == "MeshExternalService" {
		m := &meshExternalService{}
		if err := decode(m); err != nil {
			return err
		}
		m.header = h
		switch p := m.Spec.Match.Protocol; p {
		case "", "tcp", "http", "grpc", "http2":
		default:
			return fmt.Errorf("%s: spec.match.protocol %q: Kuma takes tcp, grpc, http or http2", h.id(), p)
		}
		s.kumaExternal[key] = m
		return nil
	}
	if h.Kind == "Mesh" {
		m := &kumaMesh{}
		if err := decode(m); err != nil {
			return err
		}
		m.header = h
		s.kumaMeshes[h.Metadata.Name] = m
		return nil
	}
	r := &meshRetry{}
	if err := decode(r); err != nil {
		return err
	}
	r.header = h
	for i, t := range r.Spec.To {
		for proto, c := range map[string]*kumaRetryConf{"http": t.Default.HTTP, "grpc": t.Default.GRPC} {
			if c != nil && c.NumRetries != nil {
				if err := boundsInt32.check(h.id(), fmt.Sprintf("spec.to[%d].default.%s.numRetries", i, proto), *c.NumRetries); err != nil {
					return err
				}
			}
			if _, err := kumaConfTime(h.id(), i, proto, c); err != nil {
				return err
			}
		}
	}
	s.kumaRetries[key] = r
	return nil
}

// kumaMeshOf is the caller's Kuma mesh, and whether it is in Kuma at all (KumaWillInject); err
// when Kuma's injector refuses its pods. A Namespace not in the Set (retrycap analyze over a
// workload's manifests alone) is taken as labelled so that the pod's own label reaches Kuma's
// injector: a pod labelled "enabled", "true" or "yes" is counted in Kuma (an upper bound: Kuma
// injects it only where its Namespace has the label), one without the label is not.
func (s *Set) kumaMeshOf(c Caller) (string, bool, error) {
	nsLabels := s.namespaces[c.Namespace].Labels
	if _, known := s.namespaces[c.Namespace]; !known {
		nsLabels = nil
		if _, ok := c.Labels[KumaSidecarInjection]; ok {
			nsLabels = map[string]string{KumaSidecarInjection: "enabled"}
		}
	}
	if _, injected := c.Annotations[KumaSidecarInjected]; injected {
		// Already injected (a Pod as the API server stores it): meshed whatever its labels say.
		return KumaMeshOf(c.Labels, nsLabels), true, nil
	}
	why, err := KumaWillInject(c.Namespace, c.Labels, nsLabels)
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", c.Name, err)
	}
	if why == "" {
		return "", false, nil
	}
	return KumaMeshOf(c.Labels, nsLabels), true, nil
}

// InKuma reports whether the caller runs a Kuma sidecar.
func (s *Set) InKuma(c Caller) bool {
	if s == nil {
		return false
	}
	_, ok, _ := s.kumaMeshOf(c)
	return ok
}

// kumaEntry is one to[] item of a MeshRetry that covers the callee, with what Kuma sorts it by.
type kumaEntry struct {
	r       *meshRetry // nil: the assumed default mesh-retry-all-<mesh>
	i       int
	certain bool // the top-level targetRef selects every caller of the mesh
	top     int  // top-level targetRef kind: Mesh 1, Dataplane 2 (api/common/v1alpha1/targetref.go order)
	role    int  // system 1, producer 2, consumer 3 (api/mesh/v1alpha1/dataplane_helpers.go roleOrder)
	to      int  // to[].targetRef kind: Mesh 1, MeshService 5; with a sectionName after without
	name    string
	http    *kumaRetryConf
	grpc    *kumaRetryConf
	// meshAssumed: the assumed default MeshRetry's Mesh is not in the input either (the
	// control plane's default mesh, Options.KumaDefaultMesh).
	meshAssumed bool
	// via: the to[].targetRef is an object retrycap does not read ("MeshHTTPRoute name"): it
	// may cover the callee.
	via string
}

// kumaRole is the policy role Kuma gives r (pkg/core/resources/labels/compute.go
// ComputePolicyRole, stored in the label kuma.io/policy-role): system in Kuma's system
// namespace, producer when every to[] item names one MeshService or MeshHTTPRoute of the policy's
// own namespace, else consumer.
func kumaRole(r *meshRetry) int {
	refs := make([]kumaRef, len(r.Spec.To))
	for i, t := range r.Spec.To {
		refs[i] = t.TargetRef
	}
	return kumaPolicyRole(r.Metadata.Labels, r.Metadata.Namespace, refs)
}

// kumaPolicyRole is the role Kuma gives a policy with to[] items (a MeshRetry, a MeshHTTPRoute)
// of namespace ns, by its label kuma.io/policy-role, else as kumahq/kuma 348b6528
// pkg/core/resources/labels/compute.go ComputePolicyRole computes it: system in Kuma's system
// namespace; producer when every item is a MeshService or a MeshHTTPRoute named by its display
// name alone (and the policy's own namespace, or none: isProducerItem); else consumer. A
// MeshHTTPRoute item counted as a consumer's before mesx20: a MeshRetry naming a route of its
// own namespace was not counted for callers elsewhere, which Kuma's producer role selects.
func kumaPolicyRole(labels map[string]string, ns string, tos []kumaRef) int {
	switch labels["kuma.io/policy-role"] {
	case "system":
		return 1
	case "producer":
		return 2
	case "consumer":
		return 3
	case "workload-owner":
		return 4
	}
	if ns == KumaSystemNamespace {
		return 1
	}
	for _, tr := range tos {
		single := (tr.Kind == "MeshService" || tr.Kind == "MeshHTTPRoute") && (tr.Name != "" && (tr.Namespace == "" || tr.Namespace == ns) ||
			tr.Labels[KumaDisplayName] != "" && (tr.Labels[KumaKubeNamespace] == "" || tr.Labels[KumaKubeNamespace] == ns))
		for k := range tr.Labels {
			single = single && (k == KumaDisplayName || k == KumaKubeNamespace)
		}
		if !single {
			return 3
		}
	}
	return 2
}

// kumaEdge adds the Kuma layer of a call from c to the in-cluster Service ref. Kuma merges every
// to[] item covering the callee into one conf (kumahq/kuma 348b6528
// pkg/plugins/policies/core/rules/outbound/resourcerules.go buildRules, merge.Entries: RFC 7396
// merge patches in the order of outbound/sort.go Sort: top-level targetRef kind, policy role,
// to[] kind, then name descending), so the last item that sets numRetries decides: a MeshRetry
// of the callee's namespace (producer) or a MeshService item overrides the mesh-wide default,
// lower or higher. An item whose top-level targetRef is not Mesh may not select the caller:
// counted where it would decide (an upper bound).
func (s *Set) kumaEdge(e *Edge, c Caller, ref ServiceRef, port int32) {
	mesh, ok, err := s.kumaMeshOf(c)
	if err != nil {
		e.Warnings = append(e.Warnings, WarnKumaRefuses(err))
	}
	if !ok {
		return
	}
	s.kumaMerge(e, c, mesh, s.kumaProtos(ref, port), func(kind, name, ns string, labels map[string]string, sec, policyNS string) (int, bool, bool) {
		if !kumaTargets(kind, name, ns, labels, policyNS, ref) {
			return 0, false, false
		}
		if kind != "MeshService" {
			return 1, true, true
		}
		if sec == "" {
			return 5, true, true
		}
		// One port of the MeshService (its port's name, else its number as Kuma names an unnamed
		// Service port): sorted after the whole service's items (outbound/sort.go
		// CompareByToEntry). Another port called: not this item; the port not known: it may
		// decide (an upper bound).
		switch hit, known := s.kumaSection(ref, port, sec); {
		case known && !hit:
			return 0, false, false
		case !known:
			return 6, false, true
		}
		return 6, true, true
	})
}

// kumaExtEdge adds the Kuma layer of a call from c to host, a MeshExternalService's
// (<name>.extsvc.mesh.local). Kuma computes its conf as a MeshService's: the MeshRetries' to[]
// items naming it (kind MeshExternalService) merged over the Mesh-wide ones, and with no item
// naming it the Mesh's rules alone (kumahq/kuma 348b6528
// pkg/plugins/policies/core/rules/outbound/resourcerules.go ResourceRules.Compute falls back to
// the Mesh's identifier), the default mesh-retry-all-<mesh> among them. Before (advice19) the
// host got no Kuma layer: 1 try where Kuma makes 6. The MeshExternalService's match.protocol
// decides the conf (GetRouteRetryConfig: http or grpc; tcp, its default, and http2 retry no
// request); not in the input (the manager does not read the kind), both confs count, an upper
// bound said in the note.
func (s *Set) kumaExtEdge(e *Edge, c Caller, host string, port int32) {
	name, ok := strings.CutSuffix(host, KumaExtSvcSuffix)
	if !ok || name == "" || strings.Contains(name, ".") {
		return
	}
	mesh, ok, err := s.kumaMeshOf(c)
	if err != nil {
		e.Warnings = append(e.Warnings, WarnKumaRefuses(err))
	}
	if !ok {
		return
	}
	var ext *meshExternalService
	for _, k := range sortedKeys(s.kumaExternal) {
		if m := s.kumaExternal[k]; m.displayName() == name && kumaMeshLabel(m.Metadata.Labels) == mesh {
			ext = m
			break
		}
	}
	protos := map[string]bool{"http": true, "grpc": true}
	if ext != nil {
		if port != 0 && port != ext.Spec.Match.Port {
			return // not its listener: Kuma does not route this port as the MeshExternalService
		}
		switch p := ext.Spec.Match.Protocol; p {
		case "http", "grpc":
			protos = map[string]bool{p: true}
		default:
			return // tcp (unset) or http2: MeshRetry retries no request
		}
	}
	before := len(e.Layers)
	s.kumaMerge(e, c, mesh, protos, func(kind, tname, ns string, labels map[string]string, sec, policyNS string) (int, bool, bool) {
		switch kind {
		case "Mesh":
			return 1, true, true
		case "MeshExternalService":
		default:
			return 0, false, false
		}
		if tname == "" {
			tname = labels[KumaDisplayName]
		}
		if tname != name {
			return 0, false, false
		}
		// A MeshExternalService lives in Kuma's system namespace: an item naming another
		// namespace names another object.
		if ns != "" && ns != KumaSystemNamespace && (ext == nil || ns != ext.Metadata.Namespace) {
			return 0, false, false
		}
		if sec == "" {
			return 6, true, true
		}
		// Its only port: the sectionName names it by number (or a name retrycap cannot see).
		if ext != nil && sec == strconv.Itoa(int(ext.Spec.Match.Port)) {
			return 6, true, true
		}
		return 6, false, true
	})
	if ext == nil && len(e.Layers) > before {
		l := &e.Layers[len(e.Layers)-1]
		l.Note += fmt.Sprintf(" (MeshExternalService %s is not in the input: its protocol taken as http or grpc, an upper bound)", name)
	}
}

// kumaProtos is which MeshRetry conf applies to a call to port of ref: http on an http port, grpc
// on a grpc one (configurer.go GetRouteRetryConfig); both when the port is not known. A port of
// neither (tcp, http2: no MeshRetry route retry) keeps both here, and onlyHTTP turns the layer
// into 1 try.
func (s *Set) kumaProtos(ref ServiceRef, port int32) map[string]bool {
	protos := map[string]bool{}
	for _, p := range s.ports[ref] {
		if port == 0 || p.Port == port {
			protos[kumaProtocol(p, s.services[ref].Annotations).name] = true
		}
	}
	if !protos["http"] && !protos["grpc"] {
		protos = map[string]bool{"http": true, "grpc": true}
	}
	return protos
}

// kumaTarget reports whether a MeshRetry's to[].targetRef (kind, name, namespace, labels,
// sectionName; policyNS the MeshRetry's namespace) covers the callee, its to[] sort order
// (api/common/v1alpha1/targetref.go: Mesh 1, MeshService 5, MeshExternalService 6; a sectionName
// sorts after none), and whether it surely does (false: it may, an upper bound).
type kumaTarget func(kind, name, ns string, labels map[string]string, sec, policyNS string) (to int, certain, ok bool)

// kumaMerge adds the Kuma layer of a call from c, in mesh, to the callee target takes, for the
// confs of protos.
func (s *Set) kumaMerge(e *Edge, c Caller, mesh string, protos map[string]bool, target kumaTarget) {
	var entries []kumaEntry
	found, defaultFound := false, false
	for _, k := range sortedKeys(s.kumaRetries) {
		r := s.kumaRetries[k]
		if r.mesh() != mesh {
			continue
		}
		found = true
		defaultFound = defaultFound || r.Metadata.Name == KumaDefaultRetryPrefix+mesh
		// A consumer or workload-owner policy selects only the proxies of its own namespace
		// (kumahq/kuma 348b6528 pkg/plugins/policies/core/matchers/dataplane.go
		// dppSelectedByNamespace); system and producer policies every namespace's. Before
		// (kuma19), a consumer MeshRetry of team-a with numRetries 0 decided team-b's callers
		// too: 1 try where Kuma makes 6 under the mesh's default.
		role := kumaRole(r)
		if role >= 3 && r.Metadata.Namespace != c.Namespace {
			continue
		}
		top := 1
		if r.Spec.TargetRef != nil && r.Spec.TargetRef.Kind != "" && r.Spec.TargetRef.Kind != "Mesh" {
			top = 2
		}
		for i, t := range r.Spec.To {
			// A MeshHTTPRoute (its routes' requests: the route's conf merged over the service's,
			// meshretry/plugin/v1alpha1/plugin.go applyToRealResource) or a MeshMultiZoneService
			// (the MeshServices its selector takes): retrycap reads neither object, so the item may
			// cover the callee: counted where it would decide (an upper bound), in Kuma's to[]
			// order (api/common/v1alpha1/targetref.go: MeshMultiZoneService 7, MeshHTTPRoute 9).
			// Before (kuma19), dropped without a word: a route's numRetries 6 over the service's 2
			// was 3 tries where Kuma makes 7.
			if to, ok := map[string]int{"MeshMultiZoneService": 7, "MeshHTTPRoute": 9}[t.TargetRef.Kind]; ok {
				name := t.TargetRef.Name
				if name == "" {
					name = t.TargetRef.Labels[KumaDisplayName]
				}
				via := t.TargetRef.Kind + " " + name + ", which retrycap does not read"
				if t.TargetRef.Kind == "MeshHTTPRoute" {
					// The route's to[] items name its callees (mesx20): another callee's calls
					// never take its routes. Before, the item counted for every callee of the mesh.
					route, known, covers := s.kumaRouteCovers(mesh, c.Namespace, t.TargetRef.Name, t.TargetRef.Namespace, t.TargetRef.Labels, target)
					switch {
					case known && !covers:
						continue
					case known:
						via = "MeshHTTPRoute " + route + ", whose rules may not take every call"
					default:
						via = "MeshHTTPRoute " + name + ", which is not in the input"
					}
				}
				entries = append(entries, kumaEntry{r: r, i: i, top: top, role: role, to: to, name: r.Metadata.Name,
					http: t.Default.HTTP, grpc: t.Default.GRPC, via: via})
				continue
			}
			tr := t.TargetRef
			to, certain, ok := target(tr.Kind, tr.Name, tr.Namespace, tr.Labels, tr.SectionName, r.Metadata.Namespace)
			if !ok {
				continue
			}
			certain = certain && top == 1
			entries = append(entries, kumaEntry{r: r, i: i, certain: certain, top: top, role: role, to: to, name: r.Metadata.Name,
				http: t.Default.HTTP, grpc: t.Default.GRPC})
		}
	}
	m, meshIn := s.kumaMeshes[mesh]
	meshAssumed := !meshIn && mesh == KumaDefaultMesh && s.opts.KumaDefaultMesh
	if meshAssumed {
		m = &kumaMesh{} // as the control plane creates it: an empty spec
	}
	if (meshIn || meshAssumed) && !defaultFound && !slices.ContainsFunc(m.Spec.SkipCreatingInitialPolicies, func(v string) bool { return v == "*" || v == "MeshRetry" }) {
		// The object Kuma creates (kumahq/kuma pkg/defaults/mesh/mesh.go: "mesh-retry-all-<mesh>"
		// in the system namespace on Kubernetes, whatever other MeshRetries exist;
		// meshretry.go: to[0] Mesh, http and grpc numRetries 5) is named, so that the fix names
		// its field.
		n := int64(KumaDefaultNumRetries)
		entries = append(entries, kumaEntry{certain: true, top: 1, role: 1, to: 1, name: KumaDefaultRetryPrefix + mesh,
			http: &kumaRetryConf{NumRetries: &n}, grpc: &kumaRetryConf{NumRetries: &n}, meshAssumed: meshAssumed})
	}
	slices.SortStableFunc(entries, func(a, b kumaEntry) int {
		for _, d := range []int{a.top - b.top, a.role - b.role, a.to - b.to} {
			if d != 0 {
				return d
			}
		}
		return strings.Compare(b.name, a.name)
	})
	var best Layer
	for _, proto := range []string{"http", "grpc"} {
		if !protos[proto] {
			continue
		}
		conf := func(x kumaEntry) *kumaRetryConf {
			if proto == "http" {
				return x.http
			}
			return x.grpc
		}
		// The merged numRetries: the last certain setter; an uncertain setter after it may
		// decide instead. A block with no setter at all is Envoy's 1 retry.
		last := -1
		for i, x := range entries {
			if cf := conf(x); cf != nil && cf.NumRetries != nil && x.certain {
				last = i
			}
		}
		for i, x := range entries {
			cf := conf(x)
			if cf == nil || cf.NumRetries == nil || i < last || i > last && x.certain {
				continue
			}
			better(&best, kumaLayer(x, proto, found, defaultFound))
		}
		// With no certain setter, the merge may have a block and no numRetries (a certain item's
		// block, or an uncertain item's without numRetries): Envoy's 1 retry.
		if i := slices.IndexFunc(entries, func(x kumaEntry) bool { return conf(x) != nil && (x.certain || conf(x).NumRetries == nil) }); last == -1 && i != -1 {
			x := entries[i]
			// No numRetries: Envoy's default 1 retry, not written in the object (Default: a
			// rewrite sets the field rather than checking it).
			better(&best, Layer{Kind: Kuma, Object: x.r.id(), FieldPath: fmt.Sprintf("spec.to[%d].default.%s.numRetries", x.i, proto),
				Tries: 2, Default: true, Note: fmt.Sprintf("Kuma %s no numRetries: Envoy's 1 retry", x.r.id())})
		}
	}
	if best.Kind != "" {
		e.Layers = append(e.Layers, best)
	}
}

// kumaSection reports whether the call to port of ref goes to the MeshService port named sec
// (the Service port's name, else its number), and whether that is known: the port called, or the
// Service's only port.
func (s *Set) kumaSection(ref ServiceRef, port int32, sec string) (hit, known bool) {
	var called []servicePort
	for _, p := range s.ports[ref] {
		if port == 0 || p.Port == port {
			called = append(called, p)
		}
	}
	if len(called) != 1 {
		return false, false
	}
	p := called[0]
	return p.Name == sec || p.Name == "" && strconv.Itoa(int(p.Port)) == sec, true
}

// kumaLayer is the layer of entry x's numRetries for proto.
func kumaLayer(x kumaEntry, proto string, found, defaultFound bool) Layer {
	if x.r == nil {
		why := "no MeshRetry of it is"
		if found {
			why = "no MeshRetry " + x.name + " is (Kuma creates it beside the others)"
		}
		mesh := strings.TrimPrefix(x.name, KumaDefaultRetryPrefix)
		meshWhy := fmt.Sprintf("Mesh %s is in the input", mesh)
		if x.meshAssumed {
			meshWhy = fmt.Sprintf("Kuma's control plane creates Mesh %s at start (pkg/defaults/mesh.go EnsureDefaultMeshExists, unless KUMA_DEFAULTS_SKIP_MESH_CREATION is true), which is not in the input,", mesh)
		}
		return Layer{Kind: Kuma, Object: "MeshRetry " + KumaSystemNamespace + "/" + x.name,
			FieldPath: "spec.to[0].default." + proto + ".numRetries", Tries: KumaDefaultNumRetries + 1, Default: true,
			Note: fmt.Sprintf("Kuma default MeshRetry %s (%d retries), assumed: %s and %s", x.name, KumaDefaultNumRetries, meshWhy, why)}
	}
	n := *map[string]*kumaRetryConf{"http": x.http, "grpc": x.grpc}[proto].NumRetries
	note := fmt.Sprintf("Kuma %s numRetries %d", x.r.id(), n)
	if x.via != "" {
		note += fmt.Sprintf(" for %s: counted as if it covers this call, an upper bound", x.via)
	}
	return Layer{Kind: Kuma, Object: x.r.id(), FieldPath: fmt.Sprintf("spec.to[%d].default.%s.numRetries", x.i, proto),
		Tries: n + 1, Note: note}
}

// Kuma's MeshService labels (kumahq/kuma api/mesh/v1alpha1/dataplane_helpers.go: DisplayName,
// KubeNamespaceTag, KubeServiceTag): the MeshService Kuma makes of a Kubernetes Service carries
// the Service's name and namespace in them.
const (
	KumaDisplayName   = "kuma.io/display-name"
	KumaKubeNamespace = "k8s.kuma.io/namespace"
	KumaKubeService   = "k8s.kuma.io/service-name"
)

// kumaTargets: a to[].targetRef covers the Service ref (policyNS: the MeshRetry's namespace).
// Kuma 2.x names a MeshService by name (and namespace, else the policy's); Kuma since its v3 API
// (kumahq/kuma #17603, OutboundTargetRef: kind, labels, sectionName only, at 348b6528) selects
// MeshServices by labels: those naming the Service (kuma.io/display-name,
// k8s.kuma.io/service-name) and its namespace (k8s.kuma.io/namespace) must agree with ref; any
// other label (a zone, a team) is taken to match, an upper bound.
func kumaTargets(kind, name, ns string, labels map[string]string, policyNS string, ref ServiceRef) bool {
	switch kind {
	case "Mesh":
		return true
	case "MeshService":
		if name == "" && len(labels) > 0 {
			for k, v := range labels {
				switch k {
				case KumaDisplayName, KumaKubeService:
					if v != ref.Name {
						return false
					}
				case KumaKubeNamespace:
					if v != ref.Namespace {
						return false
					}
				}
			}
			return true
		}
		if name == ref.Name {
			if ns == "" {
				ns = policyNS
			}
			return ns == ref.Namespace
		}
		return strings.HasPrefix(name, ref.Name+"_"+ref.Namespace+"_svc")
	}
	return false
}

// Kuma's default MeshRetry's time (kumahq/kuma 348b6528 pkg/defaults/mesh/meshretry.go: http and
// grpc perTryTimeout 16s, backOff 25ms to 250ms), for the layer assumed where no MeshRetry of the
// mesh is in the input.
const (
	KumaDefaultPerTryTimeout = 16 * time.Second
	KumaDefaultBackoffBase   = 25 * time.Millisecond
	KumaDefaultBackoffMax    = 250 * time.Millisecond
)

// kumaConfTime is the per-try timeout and backoff of a MeshRetry's to[i].default.<proto> c as
// Kuma hands them to Envoy (configurer.go): perTryTimeout as written ("0": none); backOff's
// baseInterval, else 25ms (mesh.DefaultBaseInterval), its maxInterval, else Envoy's ten times
// the base; no backOff: Envoy's 25ms to 250ms. Durations are metav1.Duration: Go's form.
func kumaConfTime(id string, i int, proto string, c *kumaRetryConf) (LayerTime, error) {
	lt := LayerTime{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}
	if c == nil {
		return lt, nil
	}
	at := fmt.Sprintf("spec.to[%d].default.%s.", i, proto)
	var err error
	if lt.PerTry, err = parseTime(id, at+"perTryTimeout", c.PerTryTimeout, goPlainGrammar); err != nil {
		return lt, err
	}
	if b := c.BackOff; b != nil {
		base, err := parseTime(id, at+"backOff.baseInterval", b.BaseInterval, goPlainGrammar)
		if err != nil {
			return lt, err
		}
		if base == 0 {
			base = KumaDefaultBackoffBase
		}
		maxI, err := parseTime(id, at+"backOff.maxInterval", b.MaxInterval, goPlainGrammar)
		if err != nil {
			return lt, err
		}
		if maxI == 0 {
			maxI = 10 * base
		}
		lt.BackoffBase, lt.BackoffMax = base, max(maxI, base)
	}
	return lt, nil
}

// kumaTime is the time of a Kuma layer: its MeshRetry's to[i].default.<proto> (the layer's
// field path), or Kuma's default MeshRetry's where the layer assumes it.
func (s *Set) kumaTime(l Layer) LayerTime {
	lt := LayerTime{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}
	if s == nil {
		return lt
	}
	_, nsName, _ := strings.Cut(l.Object, " ")
	r := s.kumaRetries[GroupKuma+"/MeshRetry/"+nsName]
	i, okIdx := ruleIndex(l.FieldPath)
	if r == nil {
		if strings.HasPrefix(nsName, KumaSystemNamespace+"/"+KumaDefaultRetryPrefix) && l.Default {
			return LayerTime{PerTry: KumaDefaultPerTryTimeout, BackoffBase: KumaDefaultBackoffBase, BackoffMax: KumaDefaultBackoffMax,
				Source: l.Object + " (Kuma's default, assumed)"}
		}
		return lt
	}
	if !okIdx || i >= len(r.Spec.To) {
		return lt
	}
	proto, c := "http", r.Spec.To[i].Default.HTTP
	if strings.Contains(l.FieldPath, ".grpc.") {
		proto, c = "grpc", r.Spec.To[i].Default.GRPC
	}
	t, err := kumaConfTime(r.id(), i, proto, c)
	if err != nil {
		return lt // refused when added
	}
	if t.PerTry > 0 || t.BackoffBase != EnvoyBackoffBase || t.BackoffMax != EnvoyBackoffMax {
		t.Source = fmt.Sprintf("%s spec.to[%d].default.%s", r.id(), i, proto)
	}
	return t
}

// kumaRouteCovers finds the MeshHTTPRoutes of mesh a MeshRetry item's targetRef (name and
// namespace, or labels) names, and whether one of their to[]
// items is the callee target takes. A MeshHTTPRoute's routes are on its to[] callees' outbound
// listeners only, and Kuma merges the item naming the route over the service's conf on those
// routes (kumahq/kuma 348b6528 pkg/plugins/policies/meshretry/plugin/v1alpha1/plugin.go
// applyToRealResource: each route named by a KRI takes rctx.WithID of it), so the item never
// applies to another callee's calls. known is false when no such route is in the input (the item
// may then cover any callee: an upper bound). A route with no namespace in the reference is
// looked for in every namespace (the larger set: an upper bound). A consumer route (kumaPolicyRole)
// covers the callers of its own namespace only; its top-level targetRef and rules (which of
// them, which requests) are not narrowed: an upper bound.
func (s *Set) kumaRouteCovers(mesh, callerNS, name, ns string, labels map[string]string, target kumaTarget) (route string, known, covers bool) {
	if name == "" {
		name = labels[KumaDisplayName]
	}
	if ns == "" {
		ns = labels[KumaKubeNamespace]
	}
	if name == "" {
		return "", false, false
	}
	for _, k := range sortedKeys(s.kumaRoutes) {
		rt := s.kumaRoutes[k]
		dn := rt.Metadata.Name
		if v := rt.Metadata.Labels[KumaDisplayName]; v != "" {
			dn = v
		}
		if dn != name || ns != "" && rt.Metadata.Namespace != ns || kumaMeshLabel(rt.Metadata.Labels) != mesh {
			continue
		}
		match := true
		for lk, lv := range labels {
			if lk != KumaDisplayName && lk != KumaKubeNamespace && rt.Metadata.Labels[lk] != lv {
				match = false
			}
		}
		if !match {
			continue
		}
		if !known {
			route = rt.Metadata.Namespace + "/" + rt.Metadata.Name
		}
		known = true
		refs := make([]kumaRef, len(rt.Spec.To))
		for i, to := range rt.Spec.To {
			refs[i] = to.TargetRef
		}
		if kumaPolicyRole(rt.Metadata.Labels, rt.Metadata.Namespace, refs) >= 3 && rt.Metadata.Namespace != callerNS {
			// A consumer route is on the proxies of its own namespace only (matchers/dataplane.go
			// dppSelectedByNamespace), as a consumer MeshRetry.
			continue
		}
		for _, to := range rt.Spec.To {
			tr := to.TargetRef
			if _, _, ok := target(tr.Kind, tr.Name, tr.Namespace, tr.Labels, tr.SectionName, rt.Metadata.Namespace); ok {
				return rt.Metadata.Namespace + "/" + rt.Metadata.Name, true, true
			}
		}
	}
	return route, known, false
}
