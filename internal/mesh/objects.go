package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/internal/jsonfield"
)

// API groups the package reads.
const (
	GroupCore         = ""
	GroupIstio        = "networking.istio.io"
	GroupGateway      = "gateway.networking.k8s.io"
	GroupLinkerd      = "linkerd.io"
	GroupLinkerdPol   = "policy.linkerd.io"
	GroupEnvoyGateway = "gateway.envoyproxy.io"
)

// Mesh membership and retry keys.
const (
	IstioInjectionLabel   = "istio-injection"         // namespace label; "enabled" meshes it
	IstioRevLabel         = "istio.io/rev"            // namespace label; any value meshes it
	IstioInjectAnnotation = "sidecar.istio.io/inject" // pod template; "true" in, "false" out
	LinkerdInject         = "linkerd.io/inject"       // namespace or pod template; "enabled"
	LinkerdRetryHTTP      = "retry.linkerd.io/http"
	LinkerdRetryGRPC      = "retry.linkerd.io/grpc"
	LinkerdRetryLimit     = "retry.linkerd.io/limit"
)

// The ConfigMap that holds Istio's MeshConfig, and its key.
const (
	IstioConfigNamespace = "istio-system"
	IstioConfigName      = "istio"
	IstioConfigKey       = "mesh"
)

// IsMeshConfig reports whether the ConfigMap namespace/name with labels holds an Istio
// MeshConfig: istio-system/istio (the default revision's), or istio-system/istio-<rev> labelled
// istio.io/rev: <rev>, the one a revisioned control plane reads (istio/istio eed52ebb66ad
// pilot/pkg/bootstrap/mesh.go getMeshConfigMapName; the istio-discovery chart's configmap.yaml
// names it so and sets that label). Other istio-* ConfigMaps (the sidecar injector's, the CA
// root certificate) are not.
func IsMeshConfig(namespace, name string, labels map[string]string) bool {
	if namespace != IstioConfigNamespace {
		return false
	}
	if name == IstioConfigName {
		return true
	}
	rev := labels[IstioRevLabel]
	return rev != "" && rev != "default" && name == IstioConfigName+"-"+rev
}

// IstioDefaultRetries is Istio's retries when nothing sets them (2: 3 tries).
const IstioDefaultRetries = 2

// GatewayAPIDefaultRetries is what `retry: {}` means on a Gateway API route, in Istio's and Envoy
// Gateway's translation (2 retries); EnvoyGatewayDefaultRetries the same for BackendTrafficPolicy.
const (
	GatewayAPIDefaultRetries   = 2
	EnvoyGatewayDefaultRetries = 2
)

type objectMeta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type header struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   objectMeta `json:"metadata"`
}

// group is the API group of apiVersion "group/version" ("" for "v1").
func (h header) group() string {
	if i := strings.IndexByte(h.APIVersion, '/'); i >= 0 {
		return h.APIVersion[:i]
	}
	return GroupCore
}

// describeObject names an object whose header does not decode (a label or annotation written
// as a number, a name that is an object), as id does where it can ("VirtualService shop/r"): a
// manifest set's error must say which of its objects to look at.
func describeObject(data []byte, kind string) string {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return "an object"
	}
	str := func(v any) string {
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	if k, ok := m["kind"]; ok {
		kind = str(k)
	}
	meta, _ := m["metadata"].(map[string]any)
	name, ok := meta["name"]
	switch {
	case kind == "":
		return "an object"
	case !ok:
		return kind + " object without metadata.name"
	}
	id := str(name)
	if ns, ok := meta["namespace"]; ok {
		id = str(ns) + "/" + id
	}
	return kind + " " + id
}

// id is "VirtualService bookinfo/ratings".
func (h header) id() string { return h.Kind + " " + h.Metadata.Namespace + "/" + h.Metadata.Name }

type virtualService struct {
	header
	Spec struct {
		Hosts    []string    `json:"hosts"`
		Gateways []string    `json:"gateways"`
		ExportTo []string    `json:"exportTo"`
		HTTP     []httpRoute `json:"http"`
	} `json:"spec"`
}

// httpRoute is a VirtualService's spec.http[i].
type httpRoute struct {
	Match []httpMatch `json:"match"`
	// Route: the destinations, which an ingress Gateway's VirtualService routes to (ingress.go).
	Route []struct {
		Destination struct {
			Host string `json:"host"`
			Port struct {
				Number int32 `json:"number"`
			} `json:"port"`
		} `json:"destination"`
	} `json:"route"`
	Retries *struct {
		Attempts *int64 `json:"attempts"`
	} `json:"retries"`
	// Delegate names the VirtualService whose routes replace this one (delegate.go).
	Delegate *struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"delegate"`

	// origin is where a route merged from a delegate writes its retries (or, with none, where
	// they would go): the delegate's route, or the root's when only the root sets retries;
	// nil for a route of the VirtualService itself.
	origin    *virtualService
	originIdx int
}

// named is the VirtualService and index that name route i of vs in layers and fixes.
func (r *httpRoute) named(vs *virtualService, i int) (*virtualService, int) {
	if r.origin != nil {
		return r.origin, r.originIdx
	}
	return vs, i
}

type httpMatch struct {
	Gateways []string `json:"gateways"`
	// Port: the match takes calls to this port of the host only (0: any).
	Port int32 `json:"port"`
}

type ref struct {
	Group     *string `json:"group"`
	Kind      *string `json:"kind"`
	Namespace *string `json:"namespace"`
	Name      string  `json:"name"`
	// Port: of a Service parentRef, the one port the route attaches to (nil: every port).
	Port *int32 `json:"port"`
}

// isService: a parentRef or backendRef naming a core Service (group "" or "core"; parentRefs
// default to kind Gateway, backendRefs to Service).
func (r ref) isService(defaultKind string) bool {
	g := ""
	if r.Group != nil {
		g = *r.Group
	}
	return r.kindOr(defaultKind) == "Service" && (g == "" || g == "core")
}

// isGateway: a parentRef naming a Gateway (the default group and kind of a parentRef).
func (r ref) isGateway() bool {
	return (r.Group == nil || *r.Group == GroupGateway) && r.kindOr("Gateway") == "Gateway"
}

func (r ref) kindOr(def string) string {
	if r.Kind == nil || *r.Kind == "" {
		return def
	}
	return *r.Kind
}

func (r ref) namespaceOr(def string) string {
	if r.Namespace == nil || *r.Namespace == "" {
		return def
	}
	return *r.Namespace
}

type route struct {
	header
	Spec struct {
		ParentRefs []ref `json:"parentRefs"`
		Rules      []struct {
			BackendRefs []ref `json:"backendRefs"`
			Retry       *struct {
				Attempts *int64 `json:"attempts"`
			} `json:"retry"`
		} `json:"rules"`
	} `json:"spec"`
}

type targetRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

type backendTrafficPolicy struct {
	header
	Spec struct {
		TargetRef  *targetRef  `json:"targetRef"`
		TargetRefs []targetRef `json:"targetRefs"`
		// TargetSelectors name targets by labels (targetselectors.go).
		TargetSelectors []targetSelector `json:"targetSelectors"`
		Retry           *struct {
			NumRetries *int64 `json:"numRetries"`
		} `json:"retry"`
		FaultInjection *btpFaultFields `json:"faultInjection"` // fault.go
		// MergeType set on a route's policy merges it with its Gateway's (layers.go
		// policyLayer); unset, the route's replaces the Gateway's whole.
		MergeType *string `json:"mergeType"`
	} `json:"spec"`
	// delay is spec.faultInjection.delay as Envoy Gateway applies it (readBTPFault).
	delay faultDelay
}

type configMap struct {
	header
	Data map[string]string `json:"data"`
}

type meshConfig struct {
	DefaultHTTPRetryPolicy *struct {
		Attempts      *int64  `json:"attempts"`
		PerTryTimeout *string `json:"perTryTimeout"`
		Backoff       *string `json:"backoff"`
	} `json:"defaultHttpRetryPolicy"`
	DefaultInboundHTTPRetryPolicy *struct {
		Attempts *int64  `json:"attempts"`
		RetryOn  string  `json:"retryOn"`
		Backoff  *string `json:"backoff"`
	} `json:"defaultInboundHttpRetryPolicy"`
}

// Reads reports whether the package reads objects of this apiVersion and kind (for the CLI's
// "mesh objects by kind" and "ignored" counts). ConfigMaps are read only for Istio's MeshConfigs
// (istio-system/istio and a revision's istio-<rev>: IsMeshConfig).
func Reads(apiVersion, kind string) bool {
	h := header{APIVersion: apiVersion, Kind: kind}
	_, ok := kinds[h.group()+"/"+kind]
	return ok
}

var kinds = map[string]bool{
	"/Namespace":                                true,
	"/Service":                                  true,
	"/ConfigMap":                                true,
	GroupIstio + "/VirtualService":              true,
	GroupIstio + "/ServiceEntry":                true, // serviceentry.go
	GroupGateway + "/HTTPRoute":                 true,
	GroupGateway + "/GRPCRoute":                 true,
	GroupLinkerdPol + "/HTTPRoute":              true,
	GroupLinkerd + "/ServiceProfile":            true,
	GroupEnvoyGateway + "/BackendTrafficPolicy": true,
	GroupKuma + "/Mesh":                         true,
	GroupKuma + "/MeshRetry":                    true,
	GroupKuma + "/MeshExternalService":          true,
	GroupKuma + "/MeshHTTPRoute":                true,
	GroupDapr + "/Resiliency":                   true,
	GroupConsul + "/ServiceRouter":              true,
	GroupGateway + "/Gateway":                   true, // waypoint.go: an ambient waypoint
	GroupNetworking + "/Ingress":                true, // ingressnginx.go
	GroupNetworking + "/IngressClass":           true, // ingressnginx.go (cluster-scoped)
	// istiowebhooks.go (cluster-scoped): only Istio's injector's are kept.
	GroupAdmission + "/MutatingWebhookConfiguration": true,
}

// decodeObject decodes the fields a reader reads (v, a local struct) of the object h heads;
// a value of the wrong type is named by its path and value ("VirtualService ns/name
// spec.http[0].retries.attempts: "three" is a string, want an integer"), as the readers name a
// bad value.
func decodeObject(h header, data []byte, v any) error {
	err := jsonfield.Unmarshal(data, v)
	var fe *jsonfield.Error
	if errors.As(err, &fe) {
		return fmt.Errorf("%s %w", h.id(), fe)
	}
	if err != nil {
		return fmt.Errorf("decoding %s: %w", h.id(), err)
	}
	return nil
}

// AddManifest adds one object given as YAML or JSON. It returns false, and no error, for a kind
// the package does not read.
func (s *Set) AddManifest(data []byte) (bool, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return false, fmt.Errorf("decoding a manifest: %w", err)
	}
	return s.AddJSON(js)
}

// AddUnstructured adds an unstructured object (a dynamic client's, a manifest decoded by
// apimachinery). It returns false for a kind the package does not read.
func (s *Set) AddUnstructured(u *unstructured.Unstructured) (bool, error) {
	js, err := json.Marshal(u.Object)
	if err != nil {
		return false, fmt.Errorf("encoding %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return s.AddJSON(js)
}

// AddObject adds a typed object (corev1.Service, a Gateway API HTTPRoute, an Istio
// VirtualService, ...). Its TypeMeta must be set, as in a manifest, except for the core kinds
// (Namespace, Service, ConfigMap), which are recognised by their Go type: objects from a
// controller-runtime cache have TypeMeta empty (set it from the scheme with apiutil.GVKForObject
// on a copy for the other kinds). obj is not modified.
func (s *Set) AddObject(obj runtime.Object) (bool, error) {
	apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
	if kind == "" {
		switch obj.(type) {
		case *corev1.Namespace:
			apiVersion, kind = "v1", "Namespace"
		case *corev1.Service:
			apiVersion, kind = "v1", "Service"
		case *corev1.ConfigMap:
			apiVersion, kind = "v1", "ConfigMap"
		default:
			return false, fmt.Errorf("adding a %T: its apiVersion and kind are not set", obj)
		}
	}
	js, err := json.Marshal(obj)
	if err != nil {
		return false, fmt.Errorf("encoding %s: %w", kind, err)
	}
	return s.add(js, apiVersion, kind)
}

// AddJSON adds one object given as JSON. Adding an object a second time (same kind, namespace
// and name) replaces it: the gate adds the incoming version of an object over the cluster's.
// An object with an invalid retry field is not added; the error names the object, the field and
// the value.
func (s *Set) AddJSON(data []byte) (bool, error) { return s.add(data, "", "") }

// add adds data, with apiVersion and kind when the JSON lacks them.
func (s *Set) add(data []byte, apiVersion, kind string) (bool, error) {
	var h header
	if err := jsonfield.Unmarshal(data, &h); err != nil {
		// A metadata field of the wrong type (labels: [a]) named by its path and value.
		if fe, ok := errors.AsType[*jsonfield.Error](err); ok {
			return false, fmt.Errorf("%s %w", describeObject(data, kind), fe)
		}
		return false, fmt.Errorf("decoding %s: %w", describeObject(data, kind), err)
	}
	if h.Kind == "" {
		h.APIVersion, h.Kind = apiVersion, kind
	}
	if !Reads(h.APIVersion, h.Kind) {
		return false, nil
	}
	if h.Metadata.Name == "" {
		return false, fmt.Errorf("%s object without metadata.name", h.Kind)
	}
	if h.Metadata.Namespace == "" && h.Kind != "Namespace" && h.Kind != "IngressClass" && h.Kind != "MutatingWebhookConfiguration" {
		h.Metadata.Namespace = s.opts.DefaultNamespace
		if h.Metadata.Namespace == "" {
			h.Metadata.Namespace = "default"
		}
	}
	decode := func(v any) error {
		return decodeObject(h, data, v)
	}
	key := h.group() + "/" + h.Kind + "/" + h.Metadata.Namespace + "/" + h.Metadata.Name
	if err := s.addTimes(h, key, data); err != nil { // time.go
		return false, err
	}
	switch h.group() + "/" + h.Kind {
	case "/Namespace":
		s.namespaces[h.Metadata.Name] = h.Metadata
	case "/Service":
		if _, err := linkerdRetries(h.Metadata.Annotations, h.id()); err != nil {
			return false, err
		}
		s.services[ServiceRef{h.Metadata.Namespace, h.Metadata.Name}] = h.Metadata
		var svc serviceSpec
		if err := decode(&svc); err != nil {
			return false, err
		}
		s.setPorts(ServiceRef{h.Metadata.Namespace, h.Metadata.Name}, svc.Spec.Ports) // ports.go
	case "/ConfigMap":
		if !IsMeshConfig(h.Metadata.Namespace, h.Metadata.Name, h.Metadata.Labels) {
			// An ingress-nginx controller's, maybe (ingressnginx_config.go): kept, not counted.
			var cm struct {
				Data map[string]string `json:"data"`
			}
			if err := decode(&cm); err != nil {
				return false, err
			}
			if err := s.addNginxConfigMap(h, cm.Data); err != nil {
				return false, err
			}
			s.idx = nil
			return false, nil
		}
		var cm configMap
		if err := decode(&cm); err != nil {
			return false, err
		}
		cm.header = h
		d, err := parseMeshConfig(cm)
		if err != nil {
			return false, err
		}
		in, err := parseInbound(cm)
		if err != nil {
			return false, err
		}
		s.meshConfigs[h.Metadata.Name] = meshConfigs{d, in}
		s.pickMeshConfig() // revisions.go
	case GroupIstio + "/VirtualService":
		vs := &virtualService{}
		if err := decode(vs); err != nil {
			return false, err
		}
		vs.header = h
		for i, r := range vs.Spec.HTTP {
			if r.Retries != nil && r.Retries.Attempts != nil {
				if err := boundsInt32.check(h.id(), fmt.Sprintf("spec.http[%d].retries.attempts", i), *r.Retries.Attempts); err != nil {
					return false, err
				}
			}
		}
		s.virtualServices[key] = vs
	case GroupIstio + "/ServiceEntry":
		se := &serviceEntry{}
		if err := decode(se); err != nil {
			return false, err
		}
		se.header = h
		s.serviceEntries[key] = se
	case GroupGateway + "/HTTPRoute", GroupGateway + "/GRPCRoute", GroupLinkerdPol + "/HTTPRoute":
		r := &route{}
		if err := decode(r); err != nil {
			return false, err
		}
		r.header = h
		for i, rule := range r.Spec.Rules {
			if rule.Retry != nil && rule.Retry.Attempts != nil {
				b := boundsInt64 // Linkerd's policy.linkerd.io routes: no schema of theirs is read here
				if h.group() == GroupGateway {
					b = boundsGatewayAPI
				}
				if err := b.check(h.id(), fmt.Sprintf("spec.rules[%d].retry.attempts", i), *rule.Retry.Attempts); err != nil {
					return false, err
				}
			}
		}
		if _, err := linkerdRetries(h.Metadata.Annotations, h.id()); err != nil {
			return false, err
		}
		s.routes[key] = r
	case GroupLinkerd + "/ServiceProfile":
		// Linkerd retries only a route marked isRetryable (controller/api/destination
		// profile_translator.go passes route.IsRetryable to the proxy): a profile without
		// one retries nothing (Linkerd viz's own profiles).
		var sp struct {
			Spec struct {
				Routes []struct {
					IsRetryable bool `json:"isRetryable"`
				} `json:"routes"`
			} `json:"spec"`
		}
		if err := decode(&sp); err != nil {
			return false, err
		}
		s.profiles[key] = h
		s.profileRetryable[h.Metadata.Namespace+"/"+h.Metadata.Name] = slices.ContainsFunc(sp.Spec.Routes, func(r struct {
			IsRetryable bool `json:"isRetryable"`
		}) bool {
			return r.IsRetryable
		})
	case GroupEnvoyGateway + "/BackendTrafficPolicy":
		p := &backendTrafficPolicy{}
		if err := decode(p); err != nil {
			return false, err
		}
		p.header = h
		if p.Spec.Retry != nil && p.Spec.Retry.NumRetries != nil {
			if err := boundsNonNeg.check(h.id(), "spec.retry.numRetries", *p.Spec.Retry.NumRetries); err != nil {
				return false, err
			}
		}
		var err error
		if p.delay, err = readBTPFault(h.id(), p.Spec.FaultInjection); err != nil {
			return false, err
		}
		if err := parseTargetSelectors(p); err != nil { // targetselectors.go
			return false, err
		}
		s.policies[key] = p
	case GroupKuma + "/Mesh", GroupKuma + "/MeshRetry", GroupKuma + "/MeshExternalService", GroupKuma + "/MeshHTTPRoute":
		if err := s.addKuma(key, h, decode); err != nil { // kuma.go
			return false, err
		}
	case GroupDapr + "/Resiliency":
		if err := s.addResiliency(key, h, decode); err != nil { // dapr.go
			return false, err
		}
	case GroupConsul + "/ServiceRouter":
		if err := s.addServiceRouter(key, h, decode); err != nil { // consul.go
			return false, err
		}
	case GroupGateway + "/Gateway":
		if err := s.addGateway(h, decode); err != nil { // waypoint.go
			return false, err
		}
	case GroupNetworking + "/Ingress":
		if err := s.addIngress(key, h, decode); err != nil { // ingressnginx.go
			return false, err
		}
	case GroupNetworking + "/IngressClass":
		if err := s.addIngressClass(h, decode); err != nil { // ingressnginx.go
			return false, err
		}
	case GroupAdmission + "/MutatingWebhookConfiguration":
		kept, err := s.addIstioInjector(h, decode) // istiowebhooks.go
		s.idx = nil
		return kept, err
	}
	s.idx = nil
	return true, nil
}

// Remove drops an object (group "" for core kinds); it reports whether the Set held it.
func (s *Set) Remove(group, kind, namespace, name string) bool {
	key := group + "/" + kind + "/" + namespace + "/" + name
	delete(s.times, key)
	var ok bool
	switch group + "/" + kind {
	case "/Namespace":
		_, ok = s.namespaces[name]
		delete(s.namespaces, name)
	case "/Service":
		r := ServiceRef{namespace, name}
		_, ok = s.services[r]
		delete(s.services, r)
		delete(s.ports, r)
	case "/ConfigMap":
		_, ok = s.meshConfigs[name]
		ok = ok && namespace == IstioConfigNamespace
		if ok {
			delete(s.meshConfigs, name)
			s.pickMeshConfig()
		}
		if _, nginx := s.nginx.configMaps[namespace+"/"+name]; nginx {
			delete(s.nginx.configMaps, namespace+"/"+name) // ingressnginx_config.go
			ok = true
		}
	case "apps/Deployment", "apps/DaemonSet", "apps/StatefulSet":
		_, ok = s.nginx.controllers[key] // ingressnginx_config.go
		delete(s.nginx.controllers, key)
	case GroupKuma + "/Mesh":
		_, ok = s.kumaMeshes[name]
		delete(s.kumaMeshes, name)
	case GroupGateway + "/Gateway":
		k := ServiceRef{namespace, name}.String()
		_, ok = s.gateways[k]
		delete(s.gateways, k)
	case GroupNetworking + "/IngressClass":
		_, ok = s.ingressClasses[name]
		delete(s.ingressClasses, name)
	case GroupAdmission + "/MutatingWebhookConfiguration":
		_, ok = s.istioInjectors[name]
		delete(s.istioInjectors, name)
	default:
		for _, m := range []interface{ remove(string) bool }{mapOf(s.virtualServices), mapOf(s.serviceEntries), mapOf(s.routes), mapOf(s.profiles), mapOf(s.policies), mapOf(s.kumaRetries), mapOf(s.kumaExternal), mapOf(s.kumaRoutes), mapOf(s.resiliencies), mapOf(s.routers), mapOf(s.ingresses)} {
			if m.remove(key) {
				ok = true
			}
		}
	}
	s.idx = nil
	return ok
}

type keyed[V any] map[string]V

func mapOf[V any](m map[string]V) keyed[V] { return m }

func (m keyed[V]) remove(k string) bool {
	_, ok := m[k]
	delete(m, k)
	return ok
}

// meshDefault is the MeshConfig's defaultHttpRetryPolicy: retries, and where it was read.
type meshDefault struct {
	retries int64
	note    string
	object  string // "ConfigMap istio-system/istio", or a revision's
	// perTry and base are the policy's perTryTimeout and backoff (Envoy's base interval), 0
	// when unset: Istio applies them with its tries (mesh/time.go, Set.LayerTime).
	perTry, base time.Duration
}

// meshConfig is the MeshConfig in cm's data, decoded; nil when cm has none (parseMeshConfig's
// and parseInbound's shared first step).
func (cm configMap) meshConfig() (*meshConfig, error) {
	text, ok := cm.Data[IstioConfigKey]
	if !ok {
		return nil, nil
	}
	var mc meshConfig
	if err := yaml.Unmarshal([]byte(text), &mc); err != nil {
		return nil, fmt.Errorf("%s data.%s: decoding the MeshConfig YAML: %w", cm.id(), IstioConfigKey, err)
	}
	return &mc, nil
}

func parseMeshConfig(cm configMap) (*meshDefault, error) {
	mc, err := cm.meshConfig()
	if mc == nil || err != nil {
		return nil, err
	}
	if mc.DefaultHTTPRetryPolicy == nil {
		return nil, nil
	}
	var n int64
	if a := mc.DefaultHTTPRetryPolicy.Attempts; a != nil {
		n = *a
	}
	if err := boundsInt32.check(cm.id(), "data."+IstioConfigKey+" defaultHttpRetryPolicy.attempts", n); err != nil {
		return nil, err
	}
	d := &meshDefault{retries: n, object: cm.id(), note: fmt.Sprintf("%s data.%s defaultHttpRetryPolicy.attempts: %d", cm.id(), IstioConfigKey, n)}
	p := mc.DefaultHTTPRetryPolicy
	if n <= 0 {
		// retry.ConvertPolicy gives Envoy no retry policy for attempts 0 (or unset), and its
		// per-try timeout and backoff with it (istio/istio 86c9f01fd735 pilot/pkg/networking/
		// core/route/retry/retry.go:114-117); Istio validates no field of this policy
		// (pkg/config/validation/agent/validation.go ValidateMeshConfig checks only the inbound
		// one), so neither is refused beside it either. Before, its per-try timeout was counted.
		return d, nil
	}
	if p.PerTryTimeout != nil {
		if z, err := time.ParseDuration(strings.TrimSpace(*p.PerTryTimeout)); err == nil && z == 0 {
			// Not validated, so stored; Envoy reads a per-try timeout of 0 as none.
			if err := d.backoff(cm, p.Backoff); err != nil {
				return nil, err
			}
			return d, nil
		}
	}
	if d.perTry, err = parseTime(cm.id(), "data."+IstioConfigKey+" defaultHttpRetryPolicy.perTryTimeout", p.PerTryTimeout, goGrammar); err != nil {
		return nil, err
	}
	if err := d.backoff(cm, p.Backoff); err != nil {
		return nil, err
	}
	return d, nil
}

// backoff reads defaultHttpRetryPolicy.backoff v into d.base.
func (d *meshDefault) backoff(cm configMap, v *string) error {
	b, err := parseTime(cm.id(), "data."+IstioConfigKey+" defaultHttpRetryPolicy.backoff", v, goGrammar)
	d.base = b
	return err
}

// linkerdConfig is what the retry.linkerd.io annotations of one object say, read as Linkerd's
// policy controller reads them (policy-controller/k8s/index/src/outbound/index/{http,grpc}.rs
// parse_*_retry): limit "0" and a zero timeout are dropped first; then any of http (or grpc), a
// limit or a timeout left makes a retry policy with limit 1 unless a limit says otherwise.
type linkerdConfig struct {
	set       bool   // a retry policy: any of http, grpc, a non-zero limit or timeout, or limit "0" beside one of them
	retries   int64  // limit, 1 when absent or "0"
	fieldPath string // the annotation that decides the count
	value     string // its value
	zero      bool   // limit "0"
}

var errLimit = errors.New("is not a non-negative integer")

func linkerdRetries(ann map[string]string, id string) (linkerdConfig, error) {
	var c linkerdConfig
	if err := linkerdConditions(ann, id); err != nil {
		return c, err
	}
	limit, hasLimit := ann[LinkerdRetryLimit]
	for _, k := range []string{LinkerdRetryHTTP, LinkerdRetryGRPC, LinkerdRetryTimeout} {
		v, ok := ann[k]
		if !ok || c.set {
			continue
		}
		if k == LinkerdRetryTimeout {
			// A timeout that does not parse is an error Linkerd drops the retries for; counting
			// them keeps the bound an upper one (its time reader warns of the value).
			if d, ok := parseLinkerdDuration(v); ok && d == 0 {
				continue
			}
		}
		c = linkerdConfig{set: true, retries: 1, fieldPath: annotationPath(k), value: v}
	}
	if !hasLimit {
		return c, nil
	}
	// As Linkerd's u16 parse (Rust's: an optional '+', digits, no space, no '-' even before a
	// 0): a value it cannot parse makes it drop every retry annotation of the object (kuma19;
	// before, " 3" was trimmed and counted, "70000" counted as 70001 tries; review19: "-0").
	n, err := strconv.ParseInt(strings.TrimPrefix(limit, "+"), 10, 64)
	if err != nil || n < 0 || strings.HasPrefix(strings.TrimPrefix(limit, "+"), "-") || strings.HasPrefix(limit, "++") {
		return c, fmt.Errorf("%s %s: %q %w", id, annotationPath(LinkerdRetryLimit), limit, errLimit)
	}
	if n > 65535 {
		return c, fmt.Errorf("%s %s: %q is over 65535, the largest limit Linkerd's policy controller reads (a u16): it drops every retry annotation of the object", id, annotationPath(LinkerdRetryLimit), limit)
	}
	if n == 0 && !c.set {
		return c, nil // nothing else: no retry policy at all
	}
	c = linkerdConfig{set: true, retries: n, fieldPath: annotationPath(LinkerdRetryLimit), value: limit}
	if n == 0 {
		c.retries, c.zero = 1, true
	}
	return c, nil
}

// linkerdConditions checks retry.linkerd.io/http and /grpc as Linkerd's policy controller parses
// them (linkerd/linkerd2 b24cd4059 policy-controller/k8s/index/src/outbound/index/http.rs
// parse_http_retry, grpc.rs parse_grpc_retry): a comma-separated list, each item (not trimmed)
// 5xx, gateway-error, a status code from 100 to 599 or a range of them ("500-504"), or for gRPC
// cancelled, deadline-exceeded, internal, resource-exhausted, unavailable, case-insensitive. One
// item it cannot parse fails the whole parse, and Linkerd drops every retry annotation of the
// object (a Service's: index.rs "Failed to parse http retry"; a route is not indexed at all,
// "Failed to convert route"), with only a log line: an error here, naming the item (kuma19;
// before, the retries were counted as if Linkerd made them). "5xx, 429" is the common one.
func linkerdConditions(ann map[string]string, id string) error {
	code := func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 100 && n < 600 // Rust's u32 parse takes a '+' too, as Atoi
	}
	for _, k := range []string{LinkerdRetryHTTP, LinkerdRetryGRPC} {
		v, ok := ann[k]
		if !ok {
			continue
		}
		for _, cond := range strings.Split(v, ",") {
			valid := false
			if k == LinkerdRetryHTTP {
				_, isCode := code(cond)
				valid = strings.EqualFold(cond, "5xx") || strings.EqualFold(cond, "gateway-error") || isCode
				if a, b, ok := strings.Cut(cond, "-"); !valid && ok {
					lo, okA := code(a)
					hi, okB := code(b)
					valid = okA && okB && lo <= hi
				}
			} else {
				valid = slices.ContainsFunc([]string{"cancelled", "deadline-exceeded", "internal", "resource-exhausted", "unavailable"},
					func(c string) bool { return strings.EqualFold(c, cond) })
			}
			if !valid {
				want := "5xx, gateway-error, a status code from 100 to 599 or a range of them (500-504), comma-separated without spaces"
				if k == LinkerdRetryGRPC {
					want = "cancelled, deadline-exceeded, internal, resource-exhausted or unavailable, comma-separated without spaces"
				}
				return fmt.Errorf("%s %s: %q: condition %q is not %s: Linkerd's policy controller drops every retry annotation of the object", id, annotationPath(k), v, cond, want)
			}
		}
	}
	return nil
}

func annotationPath(key string) string { return `metadata.annotations["` + key + `"]` }
