package meshwatch

import (
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/retrycap/retrycap/internal/mesh"
)

// keep is a tree of the fields kept in the cache: a map names the keys kept (true: the whole
// value), a one-element slice applies its element's tree to every item of a list (indexes are
// kept: "spec.http[1]" stays the second route, as field paths in messages name it).
type keep = map[string]any

var refTree = keep{"group": true, "kind": true, "namespace": true, "name": true}

// specTrees are what internal/mesh reads of each kind's spec (see its objects.go).
var specTrees = map[string]keep{
	mesh.GroupIstio + "/VirtualService": {
		"hosts": true, "gateways": true, "exportTo": true,
		// route: an ingress Gateway's destinations (mesh/ingress.go); timeout and perTryTimeout:
		// the time model (mesh/time.go). Without them the status counted bookinfo's ingress
		// layer as none (12 where analyze and the gate say 36). retries.backoff: Envoy's base
		// interval, which the time model reads too.
		"http": []any{keep{"match": []any{keep{"gateways": true, "port": true}}, "retries": keep{"attempts": true, "perTryTimeout": true, "backoff": true},
			"timeout": true, "route": []any{keep{"destination": keep{"host": true, "port": keep{"number": true}}}},
			"delegate": keep{"name": true, "namespace": true}, // mesh/delegate.go
			// fault.delay: held before the route's timeouts (mesh/fault.go); before, cut, so the
			// status and the gate counted no delay where analyze did (TestTrimKeepsTime).
			"fault": keep{"delay": true}}},
	},
	// A ServiceEntry (mesh/serviceentry.go): the hosts it registers, who sees it, and its ports'
	// numbers and protocols (Istio retries HTTP and gRPC ones only); no endpoints, resolution
	// or addresses.
	mesh.GroupIstio + "/ServiceEntry": {
		"hosts": true, "exportTo": true,
		"ports": []any{keep{"number": true, "name": true, "protocol": true}},
	},
	mesh.GroupGateway + "/HTTPRoute":    routeTree,
	mesh.GroupGateway + "/GRPCRoute":    routeTree,
	mesh.GroupLinkerdPol + "/HTTPRoute": routeTree,
	mesh.GroupEnvoyGateway + "/BackendTrafficPolicy": {
		"targetRef": refTree, "targetRefs": []any{refTree},
		// Targets named by labels (mesh/targetselectors.go): the whole selector list.
		"targetSelectors": true,
		"retry":           keep{"numRetries": true, "perRetry": keep{"timeout": true, "backOff": true}},
		"timeout":         keep{"http": keep{"requestTimeout": true}},
		// Its delay is held at the gateway (mesh/fault.go), its abort validated there.
		"faultInjection": keep{"delay": true, "abort": true},
		// A route's policy with mergeType merges with its Gateway's (mesh/layers.go policyLayer).
		"mergeType": true,
	},
	mesh.GroupLinkerd + "/ServiceProfile": {},
	mesh.GroupKuma + "/Mesh":              {"skipCreatingInitialPolicies": true},
	mesh.GroupKuma + "/MeshRetry": {
		// The top-level targetRef's kind (Mesh or not: mesh/kuma.go sorts and counts a
		// Dataplane one as maybe applying) and each to[] item's sectionName (one port of the
		// callee: another port's calls are not its). Both were cut before mesx20: an item for the
		// callee's grpc port counted on its http port in the status, not in analyze.
		"targetRef": keep{"kind": true},
		"to": []any{keep{"targetRef": keep{"kind": true, "name": true, "namespace": true, "labels": true, "sectionName": true},
			// perTryTimeout and backOff: the time model's (mesh/kuma.go kumaTime).
			"default": keep{"http": kumaConfTree, "grpc": kumaConfTree}}},
	},
	// A MeshExternalService (mesh/kuma.go kumaExtEdge): the port and protocol of its listener.
	mesh.GroupKuma + "/MeshExternalService": {"match": keep{"port": true, "protocol": true}},
	// A MeshHTTPRoute (mesh/kuma.go kumaRouteCovers): the callees of its to[] items.
	mesh.GroupKuma + "/MeshHTTPRoute": {"to": []any{keep{"targetRef": keep{"kind": true, "name": true, "namespace": true, "labels": true, "sectionName": true}}}},
	mesh.GroupDapr + "/Resiliency": {
		"policies": keep{"retries": true}, "targets": keep{"apps": true},
	},
	// A Service's ports (mesh/ports.go: retries on HTTP and gRPC ports only): a few dozen bytes
	// a port, every Service of the cluster kept.
	"/Service": {"ports": []any{keep{"name": true, "port": true, "protocol": true, "appProtocol": true}}},
	// An ambient waypoint (mesh/waypoint.go): its class and the listener that says which
	// namespaces may use it.
	mesh.GroupGateway + "/Gateway": {
		"gatewayClassName": true,
		"listeners":        []any{keep{"port": true, "protocol": true, "allowedRoutes": keep{"namespaces": true}}},
	},
	// An Ingress (mesh/ingressnginx.go): its class and the Services it routes to, by name; an
	// IngressClass: its controller.
	mesh.GroupNetworking + "/Ingress": {
		"ingressClassName": true,
		"defaultBackend":   ingressBackendTree,
		"rules":            []any{keep{"http": keep{"paths": []any{keep{"backend": ingressBackendTree}}}}},
	},
	mesh.GroupNetworking + "/IngressClass": {"controller": true},
	// An ingress-nginx controller (mesh/ingressnginx_config.go): its containers' image, command,
	// args and env, by which it is recognised and its --configmap resolved; any other workload
	// keeps no spec (Trim).
	"apps/Deployment":  nginxWorkloadTree,
	"apps/DaemonSet":   nginxWorkloadTree,
	"apps/StatefulSet": nginxWorkloadTree,
	mesh.GroupConsul + "/ServiceRouter": {
		"routes": []any{keep{"destination": keep{"numRetries": true, "retryOn": true, "retryOnConnectFailure": true, "retryOnStatusCodes": true}}},
	},
}

// labelled are the kinds whose labels internal/mesh reads: a Namespace's (mesh membership),
// a MeshRetry's and a MeshExternalService's kuma.io/mesh (which mesh it belongs to; the latter's
// kuma.io/display-name too, its host's name), and the routes' and Gateways' that an
// Envoy Gateway BackendTrafficPolicy's targetSelectors may match, any label (mesh/targetselectors.go).
var labelled = map[string]bool{"/Namespace": true, mesh.GroupKuma + "/MeshRetry": true, mesh.GroupKuma + "/MeshExternalService": true, mesh.GroupKuma + "/MeshHTTPRoute": true,
	mesh.GroupGateway + "/HTTPRoute": true, mesh.GroupGateway + "/GRPCRoute": true, mesh.GroupGateway + "/Gateway": true}

// someLabels are the kinds of which internal/mesh reads a few labels only: a Service's ambient
// waypoint labels, a ConfigMap's istio.io/rev (mesh/revisions.go). (A Gateway's
// istio.io/waypoint-for, mesh/waypoint.go, is kept with all its labels: labelled.)
var someLabels = map[string][]string{
	"/Service":   waypointLabels,
	"/ConfigMap": {mesh.IstioRevLabel}, // a revision's MeshConfig (mesh.IsMeshConfig)
}

// waypointLabels are the Istio ambient labels of a Service (and a Namespace).
var waypointLabels = []string{mesh.IstioUseWaypointLabel, mesh.IstioUseWaypointNamespaceLabel, mesh.IstioIngressUseWaypointLabel}

var ingressBackendTree = keep{"service": keep{"name": true}}

var nginxWorkloadTree = keep{"template": keep{"spec": keep{"containers": []any{keep{
	"name": true, "image": true, "command": true, "args": true,
	"env": []any{keep{"name": true, "value": true, "valueFrom": keep{"fieldRef": keep{"fieldPath": true}}}},
}}}}}

// kumaConfTree is what mesh/kuma.go reads of a MeshRetry's to[].default.http or .grpc.
var kumaConfTree = keep{"numRetries": true, "perTryTimeout": true, "backOff": keep{"baseInterval": true, "maxInterval": true}}

var routeTree = keep{
	// A parentRef's port: a route attached to one port of a Service binds calls to that port
	// only (mesh/layers.go attachesTo).
	"parentRefs": []any{keep{"group": true, "kind": true, "namespace": true, "name": true, "port": true}},
	"rules": []any{keep{"backendRefs": []any{refTree}, "retry": keep{"attempts": true, "backoff": true},
		"timeouts": keep{"request": true, "backendRequest": true}}},
}

// Trim returns the object cut down to what internal/mesh reads: apiVersion, kind, name,
// namespace, resourceVersion, the labels of a Namespace, the mesh annotations (linkerd.io/inject,
// retry.linkerd.io/*, sidecar.istio.io/inject, ingress-nginx's), the fields of the spec the package reads, and a
// ConfigMap's data.mesh. No status, no managedFields, no last-applied-configuration: a
// VirtualService with a hundred routes keeps a few bytes per route.
func Trim(u *unstructured.Unstructured) *unstructured.Unstructured {
	gv := u.GetAPIVersion()
	group := ""
	if i := strings.IndexByte(gv, '/'); i >= 0 {
		group = gv[:i]
	}
	md := map[string]any{"name": u.GetName()}
	if ns := u.GetNamespace(); ns != "" {
		md["namespace"] = ns
	}
	if rv := u.GetResourceVersion(); rv != "" {
		md["resourceVersion"] = rv
	}
	if labelled[group+"/"+u.GetKind()] {
		if l := u.GetLabels(); len(l) > 0 {
			md["labels"] = toAny(l)
		}
	} else if keys := someLabels[group+"/"+u.GetKind()]; keys != nil {
		l := map[string]any{}
		for _, k := range keys {
			if v, ok := u.GetLabels()[k]; ok {
				l[k] = v
			}
		}
		if len(l) > 0 {
			md["labels"] = l
		}
	}
	if a := meshAnnotations(u.GetAnnotations()); len(a) > 0 {
		md["annotations"] = toAny(a)
	}
	out := map[string]any{"apiVersion": gv, "kind": u.GetKind(), "metadata": md}
	if tree, ok := specTrees[group+"/"+u.GetKind()]; ok && (!isNginxWorkload(group, u.GetKind()) || nginxController(u)) {
		// A workload that does not run ingress-nginx's controller keeps its name alone
		// (ingressnginx.go): every workload of the cluster is read.
		if spec, ok := u.Object["spec"]; ok {
			out["spec"] = prune(spec, tree)
		}
	}
	if group == mesh.GroupAdmission && u.GetKind() == "MutatingWebhookConfiguration" {
		// Istio's injector's webhooks (mesh/istiowebhooks.go): their names, selectors and rules;
		// another project's configuration keeps its name alone.
		if whs, ok := u.Object["webhooks"].([]any); ok && istioInjectorWebhooks(whs) {
			out["webhooks"] = prune(whs, []any{keep{"name": true, "namespaceSelector": true, "objectSelector": true,
				"rules": []any{keep{"operations": true, "apiGroups": true, "apiVersions": true, "resources": true}}}})
		}
	}
	if group == mesh.GroupDapr {
		// A Resiliency's scopes (the apps it applies to) are beside its spec, not in it.
		if sc, ok := u.Object["scopes"]; ok {
			out["scopes"] = sc
		}
	}
	if group == "" && u.GetKind() == "ConfigMap" {
		if data, ok := u.Object["data"].(map[string]any); ok {
			keepData := map[string]any{}
			if m, ok := data[mesh.IstioConfigKey]; ok {
				keepData[mesh.IstioConfigKey] = m
			}
			for _, k := range mesh.IngressNginxConfigKeys() { // an ingress-nginx controller's
				if v, ok := data[k]; ok {
					keepData[k] = v
				}
			}
			if len(keepData) > 0 {
				out["data"] = keepData
			}
		}
	}
	return &unstructured.Unstructured{Object: out}
}

// istioInjectorWebhooks: a MutatingWebhookConfiguration's webhooks hold one of Istio's injector
// (mesh.IsIstioInjector).
func istioInjectorWebhooks(whs []any) bool {
	js, err := json.Marshal(map[string]any{"webhooks": whs})
	return err == nil && mesh.IsIstioInjector(js)
}

// ingressAnnotations are an Ingress's and an IngressClass's annotations internal/mesh reads
// (mesh/ingressnginx.go): which class, which is the default class, and ingress-nginx's tries.
var ingressAnnotations = map[string]bool{
	mesh.IngressClassAnnotation: true, mesh.IngressDefaultClass: true,
	mesh.IngressNginxNextUpstream: true, mesh.IngressNginxNextUpstreamTries: true,
	// The timeouts (mesh/ingressnginx_config.go).
	mesh.IngressNginxAnnotationPrefix + mesh.IngressNginxKeyConnectTimeout: true, mesh.IngressNginxAnnotationPrefix + mesh.IngressNginxKeyReadTimeout: true,
	mesh.IngressNginxAnnotationPrefix + mesh.IngressNginxKeySendTimeout: true, mesh.IngressNginxAnnotationPrefix + mesh.IngressNginxKeyNextTimeout: true,
}

// meshAnnotations are the annotations internal/mesh reads.
func meshAnnotations(ann map[string]string) map[string]string {
	var out map[string]string
	for k, v := range ann {
		if k == mesh.LinkerdInject || k == mesh.IstioInjectAnnotation ||
			k == mesh.LinkerdOpaquePorts || strings.HasSuffix(k, mesh.KumaProtocolAnnotationSuffix) ||
			strings.HasPrefix(k, "retry.linkerd.io/") || strings.HasPrefix(k, "timeout.linkerd.io/") ||
			ingressAnnotations[k] {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// MembershipOf returns a (trimmed) Namespace with the mesh membership labels and annotations of
// the meshes the cluster has only: without Istio, no istio-injection or istio.io/rev label; without
// Linkerd, no linkerd.io/inject annotation. u is not modified.
func MembershipOf(u *unstructured.Unstructured, istio, linkerd bool) *unstructured.Unstructured {
	if istio && linkerd {
		return u
	}
	out := u.DeepCopy()
	if !istio {
		l := out.GetLabels()
		delete(l, mesh.IstioInjectionLabel)
		delete(l, mesh.IstioRevLabel)
		delete(l, mesh.IstioDataplaneModeLabel)
		for _, k := range waypointLabels {
			delete(l, k)
		}
		out.SetLabels(l)
	}
	if !linkerd {
		a := out.GetAnnotations()
		delete(a, mesh.LinkerdInject)
		out.SetAnnotations(a)
	}
	return out
}

// WithoutLinkerdRetries returns a Service without its retry.linkerd.io/ and timeout.linkerd.io/
// annotations (u itself when it has none): without a Linkerd API read the cluster has no Linkerd,
// and its annotations add no layer (nor an error or a warning for a value Linkerd would refuse).
// u is not modified.
func WithoutLinkerdRetries(u *unstructured.Unstructured) *unstructured.Unstructured {
	ann := u.GetAnnotations()
	var drop []string
	for k := range ann {
		if strings.HasPrefix(k, "retry.linkerd.io/") || strings.HasPrefix(k, "timeout.linkerd.io/") {
			drop = append(drop, k)
		}
	}
	if len(drop) == 0 {
		return u
	}
	out := u.DeepCopy()
	ann = out.GetAnnotations()
	for _, k := range drop {
		delete(ann, k)
	}
	out.SetAnnotations(ann)
	return out
}

// withoutLabels returns u without the labels keys (u itself when it has none of them): a
// Service's ambient waypoint labels on a cluster without Istio add no layer. u is not modified.
func withoutLabels(u *unstructured.Unstructured, keys []string) *unstructured.Unstructured {
	l := u.GetLabels()
	if !slices.ContainsFunc(keys, func(k string) bool { _, ok := l[k]; return ok }) {
		return u
	}
	out := u.DeepCopy()
	l = out.GetLabels()
	for _, k := range keys {
		delete(l, k)
	}
	out.SetLabels(l)
	return out
}

// sameButVersion reports whether two trimmed objects differ in their resourceVersion only: a
// Service's update that touches nothing the Set reads (its status, a label) then changes no
// Set and reconciles no policy.
func sameButVersion(a, b *unstructured.Unstructured) bool {
	if a == nil || b == nil {
		return false
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	a.SetResourceVersion("")
	b.SetResourceVersion("")
	return equality.Semantic.DeepEqual(a.Object, b.Object)
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// prune keeps of v what tree names.
func prune(v any, tree any) any {
	switch t := tree.(type) {
	case bool:
		return v
	case keep:
		m, ok := v.(map[string]any)
		if !ok {
			// A scalar where the schema has an object: kept, so that decoding reports it.
			return v
		}
		out := make(map[string]any, len(t))
		for k, sub := range t {
			if x, ok := m[k]; ok {
				out[k] = prune(x, sub)
			}
		}
		return out
	case []any:
		l, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(l))
		for i, x := range l {
			out[i] = prune(x, t[0])
		}
		return out
	}
	return v
}

// Affected says whose policies a change of an object may change: the namespaces, or all
// (every RetryPolicy of the cluster) when callers in any namespace may see the object.
type Affected struct {
	All        bool
	Namespaces []string
}

// AffectedBy returns the namespaces whose RetryPolicies an object (as trimmed) bears on:
//   - a Namespace: itself (its callers' mesh membership);
//   - a VirtualService or a ServiceEntry exported to named namespaces only ("." is its own):
//     those; exported to every namespace (exportTo empty or "*"): all, since a caller in any
//     namespace may reach its hosts ("ratings.bookinfo", "api.stripe.com");
//   - an HTTPRoute or GRPCRoute with a Service parentRef (GAMMA; Linkerd's too) or a
//     ServiceEntry one (Istio's egress routes), a Service's
//     Linkerd annotations, the MeshConfig, a BackendTrafficPolicy (its route's backends may be
//     in other namespaces): all;
//   - a Gateway-parented route: its namespace and its backends';
//   - a Dapr Resiliency: its namespace (it applies to callers of its own namespace only);
//   - a Kuma Mesh, MeshRetry, MeshExternalService or MeshHTTPRoute, a Consul ServiceRouter: all (callers in any namespace);
//   - an Ingress: its namespace (its backends are Services of its namespace, entrypoints of
//     that namespace's RetryPolicies; a ClusterRetryPolicy selecting it is consulted by namespace
//     too); an IngressClass: all (it decides the controller of Ingresses in any namespace).
func AffectedBy(u *unstructured.Unstructured) Affected {
	ns := u.GetNamespace()
	switch u.GetKind() {
	case "Namespace":
		return Affected{Namespaces: []string{u.GetName()}}
	case "Ingress":
		if groupOf(u) == mesh.GroupNetworking {
			return Affected{Namespaces: []string{ns}}
		}
	case "Resiliency":
		return Affected{Namespaces: []string{ns}}
	case "VirtualService", "ServiceEntry":
		exp, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "exportTo")
		if len(exp) == 0 {
			return Affected{All: true}
		}
		var out []string
		for _, e := range exp {
			switch e {
			case "*":
				return Affected{All: true}
			case ".":
				out = append(out, ns)
			default:
				out = append(out, e)
			}
		}
		return Affected{Namespaces: out}
	case "HTTPRoute", "GRPCRoute":
		out := []string{ns}
		parents, _, _ := unstructured.NestedSlice(u.Object, "spec", "parentRefs")
		for _, p := range parents {
			// A Service parent (GAMMA) or a ServiceEntry one (Istio's egress form, mesh/egress.go):
			// callers in any namespace may call its host.
			if m, ok := p.(map[string]any); ok && (m["kind"] == "Service" || m["kind"] == "ServiceEntry") {
				return Affected{All: true}
			}
		}
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		for _, r := range rules {
			rm, _ := r.(map[string]any)
			refs, _ := rm["backendRefs"].([]any)
			for _, b := range refs {
				if bm, ok := b.(map[string]any); ok {
					if bns, ok := bm["namespace"].(string); ok && bns != "" {
						out = append(out, bns)
					}
				}
			}
		}
		return Affected{Namespaces: out}
	}
	return Affected{All: true}
}
