package mesh

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// ingress-nginx (north-south), read from kubernetes/ingress-nginx at
// dbb11b92ddb77bee9c35e462479129354c84f939:
//
//   - Which Ingresses it serves (internal/ingress/controller/store/store.go GetIngressClass): the
//     IngressClass named by spec.ingressClassName, else the legacy annotation
//     kubernetes.io/ingress.class equal to its --ingress-class ("nginx", ingressclass.go
//     DefaultAnnotationValue); the IngressClass's spec.controller is "k8s.io/ingress-nginx"
//     (DefaultControllerName). An Ingress naming no class is served only with
//     --watch-ingress-without-class (off by default) or a default IngressClass, which the API
//     server writes into spec.ingressClassName on creation.
//   - What it retries (internal/ingress/controller/config/config.go NewDefault:
//     proxy-next-upstream "error timeout", proxy-next-upstream-tries 3;
//     internal/ingress/annotations/proxy/main.go: the per-Ingress annotations
//     nginx.ingress.kubernetes.io/proxy-next-upstream and -tries override them;
//     rootfs/etc/nginx/template/nginx.tmpl writes them as each location's proxy_next_upstream
//     and proxy_next_upstream_tries). nginx's proxy_next_upstream_tries counts tries, the first
//     included, and 0 is no limit; proxy_next_upstream off passes no request to another server.
//     POST, LOCK and PATCH are retried only with non_idempotent listed (or retry-non-idempotent in
//     the ConfigMap, which the note mentions); the layer counts every method (an upper bound, as
//     for Istio). Its Lua
//     balancer (rootfs/etc/nginx/lua/balancer.lua, balance) calls set_more_tries(1) on every
//     try, so the tries apply whatever the number of endpoints, one included.
//
// Each backend Service of an Ingress it serves (spec.rules[].http.paths[].backend.service,
// spec.defaultBackend.service) is a north-south entrypoint whose client attempts the tries
// multiply (Set.Backends, Set.Entry), as an Istio ingress VirtualService's destination is. The
// defaults are the controller's ConfigMap's where its workload is read (ingressnginx_config.go),
// else NewDefault's, and the note says which.
//
// Istio's ingress gateway serves Ingresses too, read from istio/istio at eed52ebb66ad:
// pilot/pkg/config/kube/ingress/virtualservices.go shouldProcessIngressWithClass takes an Ingress
// whose kubernetes.io/ingress.class annotation is MeshConfig's ingressClass ("istio",
// pkg/config/mesh/mesh.go DefaultMeshConfig, mode STRICT), or whose IngressClass's controller is
// "istio.io/ingress-controller"; convertIngressV1alpha3 writes each path as an HTTPRoute without
// Retries, so the gateway's Envoy applies the mesh's default policy (Istio's 2 retries, or
// MeshConfig defaultHttpRetryPolicy): the backend's client attempts x 3, as for an ingress
// VirtualService route without retries (before: 1 try, "not modelled").
//
// An Ingress of another class gives a 1-try layer and a warning: its controller's retries are
// not modelled.

// ingress-nginx's group, annotations, controller and defaults.
const (
	GroupNetworking               = "networking.k8s.io"
	IngressClassAnnotation        = "kubernetes.io/ingress.class"
	IngressNginxController        = "k8s.io/ingress-nginx"
	IngressNginxClass             = "nginx" // the chart's IngressClass and the legacy annotation's default
	IngressNginxNextUpstream      = "nginx.ingress.kubernetes.io/proxy-next-upstream"
	IngressNginxNextUpstreamTries = "nginx.ingress.kubernetes.io/proxy-next-upstream-tries"
	IngressNginxDefaultTries      = 3 // config.go NewDefault ProxyNextUpstreamTries
	IngressDefaultClass           = "ingressclass.kubernetes.io/is-default-class"
	IstioIngressController        = "istio.io/ingress-controller" // an IngressClass's spec.controller for Istio
	IstioIngressClass             = "istio"                       // MeshConfig ingressClass's default

	IngressNginx Kind = "IngressNginx" // an Ingress served by ingress-nginx (north-south)
	Ingress      Kind = "Ingress"      // an Ingress of another controller: not modelled, 1 try
)

type ingressBackend struct {
	Service *struct {
		Name string `json:"name"`
	} `json:"service"`
}

type ingressObj struct {
	header
	Spec struct {
		IngressClassName *string         `json:"ingressClassName"`
		DefaultBackend   *ingressBackend `json:"defaultBackend"`
		Rules            []struct {
			HTTP *struct {
				Paths []struct {
					Backend ingressBackend `json:"backend"`
				} `json:"paths"`
			} `json:"http"`
		} `json:"rules"`
	} `json:"spec"`
	off     bool  // proxy-next-upstream lists "off"
	nextSet bool  // proxy-next-upstream is set
	tries   int64 // proxy-next-upstream-tries; 0 when unset
	// The timeout annotations (ingressnginx_config.go), nil when unset.
	connect, read, next *time.Duration
	timesSet            bool
}

type ingressClass struct {
	header
	Spec struct {
		Controller string `json:"controller"`
	} `json:"spec"`
}

// addIngress reads an Ingress's retry annotations: a value that is not a whole number, or 0 (no
// limit in nginx) with retries on, is an error naming the annotation (only ingress-nginx reads
// them, so an Ingress of another class carrying them is checked too: the values are wrong for
// any class).
func (s *Set) addIngress(key string, h header, decode func(any) error) error {
	if h.APIVersion != GroupNetworking+"/v1" {
		// v1beta1 (backend.serviceName) is served by no Kubernetes since 1.22: its backends
		// would be read as none, a false pass.
		return fmt.Errorf("%s apiVersion %s: not served since Kubernetes 1.22; retrycap reads %s/v1 Ingresses", h.id(), h.APIVersion, GroupNetworking)
	}
	ing := &ingressObj{}
	if err := decode(ing); err != nil {
		return err
	}
	ing.header = h
	ing.off = slices.Contains(strings.Fields(h.Metadata.Annotations[IngressNginxNextUpstream]), "off")
	_, ing.nextSet = h.Metadata.Annotations[IngressNginxNextUpstream]
	if err := readNginxTimeAnnotations(ing); err != nil { // ingressnginx_config.go
		return err
	}
	if v, ok := h.Metadata.Annotations[IngressNginxNextUpstreamTries]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		switch {
		case err != nil || n < 0:
			return fmt.Errorf("%s %s: %q is not a whole number of tries (ingress-nginx's proxy_next_upstream_tries)", h.id(), annotationPath(IngressNginxNextUpstreamTries), v)
		case n == 0 && !ing.off:
			return fmt.Errorf("%s %s: %q is no limit in nginx (proxy_next_upstream_tries 0): unbounded tries to each backend; set a number, or %s: \"off\"", h.id(), annotationPath(IngressNginxNextUpstreamTries), v, IngressNginxNextUpstream)
		}
		ing.tries = min(n, graph.Saturated)
	}
	s.ingresses[key] = ing
	return nil
}

func (s *Set) addIngressClass(h header, decode func(any) error) error {
	c := &ingressClass{}
	if err := decode(c); err != nil {
		return err
	}
	c.header = h
	s.ingressClasses[h.Metadata.Name] = c
	return nil
}

// ingressUse is an Ingress routing to a Service, with its controller as read.
type ingressUse struct {
	ing   *ingressObj
	nginx bool
	// ctrls are the ingress-nginx controllers read that serve it (ingressnginx_config.go):
	// their ConfigMaps set its defaults; none: NewDefault's.
	ctrls []*nginxController
	istio bool // Istio's ingress gateway serves it
	// class names the class and how it was decided, for notes and warnings: `class nginx`,
	// `class nginx, assumed: no IngressClass nginx in the input`, `class traefik (controller
	// traefik.io/ingress-controller)`.
	class string
}

// ingressController decides whether ingress-nginx serves ing.
func (s *Set) ingressController(ing *ingressObj) ingressUse {
	u := ingressUse{ing: ing}
	name, how := "", "spec.ingressClassName"
	switch {
	case ing.Spec.IngressClassName != nil && *ing.Spec.IngressClassName != "":
		name = *ing.Spec.IngressClassName
	case ing.Metadata.Annotations[IngressClassAnnotation] != "":
		name, how = ing.Metadata.Annotations[IngressClassAnnotation], IngressClassAnnotation
	default:
		for _, k := range sortedKeys(s.ingressClasses) {
			if s.ingressClasses[k].Metadata.Annotations[IngressDefaultClass] == "true" {
				name, how = k, "the default IngressClass"
				break
			}
		}
	}
	if name == "" {
		u.class = "no class: spec.ingressClassName unset, no " + IngressClassAnnotation + " annotation and no default IngressClass in the input"
		return u
	}
	c, ok := s.ingressClasses[name]
	switch {
	case ok && (c.Spec.Controller == IngressNginxController || s.nginxServes(c.Spec.Controller)):
		// A controller read with --controller-class serves it too (ingressnginx_config.go).
		u.nginx, u.class = true, "class "+name
		u.ctrls = s.nginxControllersOf(name, c.Spec.Controller, true)
	case ok && c.Spec.Controller == IstioIngressController:
		u.istio, u.class = true, "class "+name
	case ok:
		u.class = fmt.Sprintf("class %s (controller %s)", name, c.Spec.Controller)
	case name == IngressNginxClass || s.nginxServesName(name):
		u.nginx, u.class = true, fmt.Sprintf("class %s, assumed: %s %s, no IngressClass %s in the input", name, how, name, name)
		u.ctrls = s.nginxControllersOf(name, "", false)
	case name == IstioIngressClass && how == IngressClassAnnotation:
		u.istio, u.class = true, "class "+name // what Istio compares with MeshConfig ingressClass
	case name == IstioIngressClass:
		u.istio, u.class = true, fmt.Sprintf("class %s, assumed: %s %s, no IngressClass %s in the input", name, how, name, name)
	default:
		u.class = fmt.Sprintf("class %s (no IngressClass %s in the input)", name, name)
	}
	return u
}

// indexIngresses indexes every Ingress by the Services it routes to.
func (s *Set) indexIngresses(x *index) {
	for _, k := range sortedKeys(s.ingresses) {
		ing := s.ingresses[k]
		u := s.ingressController(ing)
		seen := map[ServiceRef]bool{}
		add := func(b *ingressBackend) {
			if b == nil || b.Service == nil || b.Service.Name == "" {
				return
			}
			ref := ServiceRef{ing.Metadata.Namespace, b.Service.Name}
			if seen[ref] {
				return
			}
			seen[ref] = true
			x.ingresses[ref] = append(x.ingresses[ref], u)
		}
		add(ing.Spec.DefaultBackend)
		for _, r := range ing.Spec.Rules {
			if r.HTTP == nil {
				continue
			}
			for i := range r.HTTP.Paths {
				add(&r.HTTP.Paths[i].Backend)
			}
		}
	}
}

// ingressLayer is the tries of u's controller on its backends' client attempts.
func (s *Set) ingressUseLayer(u ingressUse) Layer {
	ing := u.ing
	id := ing.id()
	if u.istio {
		l := s.istioDefault(fmt.Sprintf("%s %s: Istio routes it with no retries", id, u.class))
		if l.Object == "" {
			l.Object = id // the fix names it (rewrite.go): an Ingress has no retry field
		}
		return l
	}
	if !u.nginx {
		return Layer{Kind: Ingress, Object: id, Tries: 1, Default: true,
			Note: fmt.Sprintf("%s %s: its controller's retries are not modelled", id, u.class)}
	}
	// Each controller serving it applies its own ConfigMap's defaults: the most tries count (an
	// upper bound: which controller a client reaches is the load balancer's choice).
	var best Layer
	for _, src := range s.nginxSources(u) { // ingressnginx_config.go
		if l := nginxLayer(u, src); best.Kind == "" || l.Tries > best.Tries {
			best = l
		}
	}
	return best
}

// WarnIngressNotModelled is the warning on a backend of an Ingress that ingress-nginx does not
// serve.
func WarnIngressNotModelled(id, class string) string {
	return fmt.Sprintf("%s %s: its controller's retries are not modelled (retrycap reads ingress-nginx's)", id, class)
}

// ingressWarnings are the warnings of the Ingresses routing to v that no modelled controller
// serves.
func ingressWarnings(x *index, v ServiceRef) []string {
	var out []string
	for _, u := range x.ingresses[v] {
		if !u.nginx && !u.istio {
			out = append(out, WarnIngressNotModelled(u.ing.id(), u.class))
		}
	}
	return out
}
