package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
)

// The labels and annotations of Namespaces and Services that put workloads into a mesh layer
// (istio-injection, istio.io/rev, linkerd.io/inject, kuma.io/sidecar-injection), bind a Service
// to an ambient waypoint (istio.io/use-waypoint, istio.io/ingress-use-waypoint), or set a
// Service's Linkerd retries, timeouts and a port's protocol: mesh.NamespaceKeys and
// mesh.ServiceKeys; and a Service's spec.ports as the meshes decide a port's protocol by them
// (mesh.PortFields: a port turned from TCP to HTTP gains the mesh's retries); and the update of
// a waypoint Gateway's spec or istio.io/waypoint-for (waypointGatewayCondition). The mesh gate
// judges a create or an update that changes one of them, in a webhook of its own in
// MeshWebhookConfiguration whose match condition is written from those lists: the API server
// sends no other Namespace or Service write to the manager. A Service's
// create is judged (a new Service labelled istio.io/use-waypoint puts its callers' calls
// through the waypoint at once), and so is a Namespace's (istio.io/use-waypoint on a namespace
// binds the callees named in it before their Services exist). A delete is not judged: it only
// takes layers away. A label is never rewritten (its owner, a GitOps tool or a namespace
// template, would write it back): Rewrite refuses as Reject.

// MeshMembershipWebhookName is the Namespace and Service webhook of MeshWebhookConfiguration.
const MeshMembershipWebhookName = "membership.mesh.retrycap.dev"

// meshMembershipRequests counts the Namespace and Service requests the membership webhook of
// this process received (the tests read it: the match condition lets only a change of a key the
// manager reads reach it).
var meshMembershipRequests atomic.Int64

// MeshMembershipRequests is the number of Namespace and Service admission requests the mesh
// gates of this process received on MeshPath's membership webhook.
func MeshMembershipRequests() int64 { return meshMembershipRequests.Load() }

// membershipKeys are the keys of keys the cluster's meshes read (istio, linkerd: as
// meshwatch.ForMeshes keeps them; Kuma's are always read).
func membershipKeys(keys []mesh.MetaKey, istio, linkerd bool) []mesh.MetaKey {
	var out []mesh.MetaKey
	for _, k := range keys {
		if k.Mesh == mesh.Istio && !istio || k.Mesh == mesh.Linkerd && !linkerd {
			continue
		}
		out = append(out, k)
	}
	return out
}

// metaChangeCondition is the CEL expression true when the object's keys differ from oldObject's
// (null on a create: every key set is a change); "" when there is no key.
func metaChangeCondition(keys []mesh.MetaKey) string {
	var labels, anns, suffixes []string
	for _, k := range keys {
		q := strconv.Quote(k.Key) // a label or annotation key has no quote or backslash
		switch {
		case k.Suffix:
			suffixes = append(suffixes, q)
		case k.Annotation:
			anns = append(anns, q)
		default:
			labels = append(labels, q)
		}
	}
	// '' when the key is not set, '=' + the value when it is: unset and "" differ.
	value := func(o, field string) string {
		return fmt.Sprintf("(%s != null && has(%s.metadata.%s) && k in %s.metadata.%s ? '=' + %s.metadata.%s[k] : '')", o, o, field, o, field, o, field)
	}
	var or []string
	for _, f := range []struct {
		field string
		keys  []string
	}{{"labels", labels}, {"annotations", anns}} {
		if len(f.keys) > 0 {
			or = append(or, fmt.Sprintf("[%s].exists(k, %s != %s)", strings.Join(f.keys, ", "), value("object", f.field), value("oldObject", f.field)))
		}
	}
	for _, s := range suffixes {
		// Every annotation ending in s: one set or changed in object, or one of oldObject's gone.
		or = append(or, fmt.Sprintf("(has(object.metadata.annotations) && object.metadata.annotations.exists(k, k.endsWith(%s) && %s != %s))", s,
			value("object", "annotations"), value("oldObject", "annotations")),
			fmt.Sprintf("(oldObject != null && has(oldObject.metadata.annotations) && oldObject.metadata.annotations.exists(k, k.endsWith(%s) && %s != %s))", s,
				value("object", "annotations"), value("oldObject", "annotations")))
	}
	return strings.Join(or, " || ")
}

// meshMembershipCondition is the match condition of the membership webhook for a cluster whose
// meshes are istio and linkerd (Kuma's keys always): a Namespace write that changes one of
// mesh.NamespaceKeys, a Service write that changes one of mesh.ServiceKeys or the fields of its
// spec.ports the meshes decide a port's protocol by (portsChangeCondition).
func meshMembershipCondition(istio, linkerd bool) string {
	gateways := ""
	if istio { // the webhook has a gateways rule only then
		gateways = "request.resource.resource == 'gateways' ? " + waypointGatewayCondition() + " : "
	}
	return "request.resource.resource == 'namespaces' ? (" + metaChangeCondition(membershipKeys(mesh.NamespaceKeys(), istio, linkerd)) +
		") : " + gateways + "(" + metaChangeCondition(membershipKeys(mesh.ServiceKeys(), istio, linkerd)) + " || " + portsChangeCondition(istio, linkerd) + ")"
}

// waypointGatewayCondition is the CEL expression true when an update of a Gateway of class
// istio-waypoint (before or after) changes its spec (class, listeners: the HBONE listener's
// allowedRoutes) or a key of mesh.WaypointGatewayKeys (istio.io/waypoint-for): what can turn a
// named waypoint into one that takes service traffic. A create is not sent: the Set assumes a
// named waypoint whose Gateway is not in the input, so creating it raises nothing.
func waypointGatewayCondition() string {
	class := strconv.Quote(mesh.IstioWaypointClass)
	return "(oldObject != null && (object.spec.gatewayClassName == " + class + " || oldObject.spec.gatewayClassName == " + class + ") && " +
		"(object.spec != oldObject.spec || " + metaChangeCondition(mesh.WaypointGatewayKeys()) + "))"
}

// portsChangeCondition is the CEL expression true when an update changes what the Set reads of
// a Service's spec.ports (mesh.PortFields: a port turned from TCP to HTTP gains the mesh's
// retries): each port as its name, appProtocol and protocol, and its number only where a mesh
// read decides the protocol by it: Istio on its well-known ports (mesh.IstioWellKnownPorts),
// Linkerd on a port without appProtocol (its opaque-ports lists, the namespace's among them,
// which the condition cannot see), Kuma when the Service has a
// "<port>.service.kuma.io/protocol" annotation. So a port renumbered from 8080 to 8081 is not
// sent. A create is not: a Service without ports counts every layer's retries (mesh.Set
// onlyHTTP), so ports first written only lower them.
func portsChangeCondition(istio, linkerd bool) string {
	ports := func(o string) string {
		var parts []string
		for _, f := range mesh.PortFields() {
			if f == "port" {
				continue
			}
			parts = append(parts, fmt.Sprintf("(has(p.%s) ? p.%s : '')", f, f))
		}
		var byNumber []string
		if istio {
			var wk []string
			for _, n := range mesh.IstioWellKnownPorts() {
				wk = append(wk, strconv.Itoa(int(n)))
			}
			byNumber = append(byNumber, "p.port in ["+strings.Join(wk, ", ")+"]")
		}
		if linkerd {
			byNumber = append(byNumber, "!has(p.appProtocol) || p.appProtocol == ''")
		}
		byNumber = append(byNumber, fmt.Sprintf("(has(%s.metadata.annotations) && %s.metadata.annotations.exists(k, k.endsWith(%s)))", o, o, strconv.Quote(mesh.KumaProtocolAnnotationSuffix)))
		parts = append(parts, "(("+strings.Join(byNumber, " || ")+") ? string(p.port) : '')")
		return fmt.Sprintf("(has(%s.spec.ports) ? %s.spec.ports.map(p, %s) : [])", o, o, strings.Join(parts, " + '/' + "))
	}
	return "(oldObject != null && " + ports("object") + " != " + ports("oldObject") + ")"
}

// MeshMembershipWebhook is the Namespace and Service webhook for a cluster whose mesh APIs are
// apis, reached as the mesh webhook is (gateHook's clientConfig with MeshMembershipPath, its
// namespaceSelector, which a Namespace matches by its own labels). Failure policy Ignore, as
// MeshWebhook's: it must never block a namespace's labels (or a Service) while the manager is
// down, nor once it is uninstalled and its configuration left behind; the policies' status
// still counts the change.
func MeshMembershipWebhook(apis []meshwatch.API, gateHook admissionregistrationv1.MutatingWebhook) (admissionregistrationv1.MutatingWebhook, error) {
	h, err := MeshWebhook(apis, gateHook)
	if err != nil {
		return h, err
	}
	if h.ClientConfig, err = clientConfigAt(gateHook, MeshMembershipPath); err != nil {
		return h, err
	}
	istio, linkerd := meshwatch.HasMeshes(apis)
	h.Name = MeshMembershipWebhookName
	ops := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}
	cluster, namespaced := admissionregistrationv1.ClusterScope, admissionregistrationv1.NamespacedScope
	h.Rules = []admissionregistrationv1.RuleWithOperations{
		{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}, Scope: &cluster}},
		{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"services"}, Scope: &namespaced}},
	}
	if istio {
		// Only Istio reads waypoint Gateways; their updates only (waypointGatewayCondition).
		h.Rules = append(h.Rules, admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{mesh.GroupGateway}, APIVersions: []string{"*"}, Resources: []string{"gateways"}, Scope: &namespaced}})
	}
	h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "mesh-membership-keys-change", Expression: meshMembershipCondition(istio, linkerd)}}
	return h, nil
}

// MeshMembershipPath is where the membership webhook reaches the manager (its own path: a
// Service write may reach the mesh webhook too, for its Linkerd retry annotations, and is
// judged there as a mesh object).
const MeshMembershipPath = "/gate-mesh-membership"

// MeshMembershipGate is the admission.Handler of the membership webhook.
type MeshMembershipGate struct{ g *MeshGate }

// Handle implements admission.Handler.
func (m *MeshMembershipGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	meshMembershipRequests.Add(1)
	g := m.g
	isNamespace := req.Kind.Kind == "Namespace"
	ns := req.Namespace
	if isNamespace {
		ns = req.Name
	}
	if g.skip[ns] {
		return admission.Allowed("retrycap does not gate namespace " + ns)
	}
	isGateway := req.Kind.Group == mesh.GroupGateway && req.Kind.Kind == "Gateway"
	if req.Kind.Group != "" && !isGateway || !isNamespace && !isGateway && req.Kind.Kind != "Service" ||
		req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	set := g.mesh.Set()
	if set == nil {
		return admission.Allowed("")
	}
	istio, linkerd := meshwatch.HasMeshes(g.mesh.Read())
	keys := mesh.ServiceKeys()
	switch {
	case isNamespace:
		keys = mesh.NamespaceKeys()
	case isGateway:
		keys = mesh.WaypointGatewayKeys()
	}
	keys = membershipKeys(keys, istio, linkerd)
	var generated string // the incoming object's generateName, when it has no name yet
	read := func(raw []byte, what string) ([]byte, error) {
		var err error
		if !isNamespace {
			var g string
			if raw, g, err = withIdentity(raw, ns); err != nil {
				return nil, err
			}
			if what == "the incoming" {
				generated = g
			}
		}
		if raw, err = forMeshes(raw, istio, linkerd); err != nil {
			return nil, fmt.Errorf("decoding %s %s %s: %w", what, req.Kind.Kind, strings.TrimPrefix(req.Namespace+"/"+req.Name, "/"), err)
		}
		return raw, nil
	}
	raw, err := read(req.Object.Raw, "the incoming")
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old []byte
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		if old, err = read(req.OldObject.Raw, "the stored"); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if resp, ok := waitSynced(ctx, g.index.HasSynced, "retrycap mesh gate"); !ok {
		return resp
	}
	bears := MeshBearing{All: true}
	policies, err := g.affectedPolicies(ctx, bears)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	clusterNS := ns
	if isNamespace && req.Operation == admissionv1.Create {
		clusterNS = "" // not in the cache yet, and in no scope: no wait for it
	}
	clusters, err := g.clusterPolicies(ctx, clusterNS, bears, set, raw, old)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	if len(policies) == 0 && len(clusters) == 0 {
		return admission.Allowed("")
	}
	in := MeshInput{Policies: policies, ClusterPolicies: clusters, Workloads: g.index.Parsed(ns), Services: g.index.Services(ns),
		Set: set, Object: raw, Old: old}
	for _, p := range policies {
		if _, ok := in.Namespaces[p.Namespace]; p.Namespace == ns || ok {
			continue
		}
		if in.Namespaces == nil {
			in.Namespaces = map[string]MeshNamespace{}
		}
		in.Namespaces[p.Namespace] = MeshNamespace{Workloads: g.index.Parsed(p.Namespace), Services: g.index.Services(p.Namespace)}
	}
	d := DecideMeshMembership(in, keys)
	d = d.renamed(generated)
	return verdictResponse(d.Allowed, d.Message, d.Warnings, nil)
}

// metaOf is the part of a Namespace or a Service the change is named from.
type metaOf struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// forMeshes is raw (a Namespace or a Service) with only the keys of the meshes the cluster has,
// as the watcher's Set holds it (meshwatch.ForMeshes); nil stays nil.
func forMeshes(raw []byte, istio, linkerd bool) ([]byte, error) {
	if raw == nil {
		return nil, nil
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	return meshwatch.ForMeshes(&u, istio, linkerd).MarshalJSON()
}

// membershipChange names the object and the keys of keys the write changes, old and new:
// `Namespace shop metadata.labels["istio-injection"]: unset -> "enabled"`.
func membershipChange(id string, keys []mesh.MetaKey, oldRaw, newRaw []byte) string {
	var before, after metaOf
	if oldRaw != nil {
		_ = json.Unmarshal(oldRaw, &before) // decoded before (meshSets)
	}
	_ = json.Unmarshal(newRaw, &after)
	var parts []string
	for _, ann := range []bool{false, true} {
		b, a, field := before.Metadata.Labels, after.Metadata.Labels, "labels"
		if ann {
			b, a, field = before.Metadata.Annotations, after.Metadata.Annotations, "annotations"
		}
		var names []string
		for _, k := range keys {
			if k.Annotation != ann {
				continue
			}
			if !k.Suffix {
				names = append(names, k.Key)
				continue
			}
			for _, m := range []map[string]string{b, a} {
				for n := range m {
					if strings.HasSuffix(n, k.Key) {
						names = append(names, n)
					}
				}
			}
		}
		sort.Strings(names)
		for i, n := range names {
			if i > 0 && names[i-1] == n {
				continue
			}
			ov, had := b[n]
			nv, has := a[n]
			if had == has && ov == nv {
				continue
			}
			parts = append(parts, fmt.Sprintf("metadata.%s[%q]: %s -> %s", field, n, quotedOrUnset(ov, had), quotedOrUnset(nv, has)))
		}
	}
	if oldRaw != nil {
		parts = append(parts, portChanges(oldRaw, newRaw)...)
		parts = append(parts, gatewayChanges(oldRaw, newRaw)...)
	}
	if len(parts) == 0 {
		return id
	}
	return id + " " + strings.Join(parts, ", ")
}

// gatewayOf is the part of a waypoint Gateway's spec the Set reads.
type gatewayOf struct {
	Spec struct {
		GatewayClassName *string `json:"gatewayClassName"`
		Listeners        []any   `json:"listeners"`
	} `json:"spec"`
}

// gatewayChanges names a Gateway's class change and a listeners change (a Service has neither).
func gatewayChanges(oldRaw, newRaw []byte) []string {
	var before, after gatewayOf
	_ = json.Unmarshal(oldRaw, &before) // decoded before (meshSets)
	_ = json.Unmarshal(newRaw, &after)
	var parts []string
	if b, a := before.Spec.GatewayClassName, after.Spec.GatewayClassName; b != nil && a != nil && *b != *a {
		parts = append(parts, fmt.Sprintf("spec.gatewayClassName: %q -> %q", *b, *a))
	}
	if !reflect.DeepEqual(before.Spec.Listeners, after.Spec.Listeners) {
		parts = append(parts, "spec.listeners changed")
	}
	return parts
}

// portOf is the part of a Service port the Set reads (mesh.PortFields); nil: not set.
type portOf struct {
	Name        *string `json:"name"`
	Port        *int64  `json:"port"`
	AppProtocol *string `json:"appProtocol"`
	Protocol    *string `json:"protocol"`
}

type portsOf struct {
	Spec struct {
		Ports []portOf `json:"ports"`
	} `json:"spec"`
}

// portChanges names each field of mesh.PortFields that differs between the ports of oldRaw and
// newRaw, by index: `spec.ports[0].name: "tcp-db" -> "http-db"`, `spec.ports[1].port: unset ->
// 8080` (a port added).
func portChanges(oldRaw, newRaw []byte) []string {
	var before, after portsOf
	_ = json.Unmarshal(oldRaw, &before) // decoded before (meshSets)
	_ = json.Unmarshal(newRaw, &after)
	str := func(v *string) string {
		if v == nil {
			return "unset"
		}
		return strconv.Quote(*v)
	}
	num := func(v *int64) string {
		if v == nil {
			return "unset"
		}
		return strconv.FormatInt(*v, 10)
	}
	var parts []string
	for i := range max(len(before.Spec.Ports), len(after.Spec.Ports)) {
		var b, a portOf
		if i < len(before.Spec.Ports) {
			b = before.Spec.Ports[i]
		}
		if i < len(after.Spec.Ports) {
			a = after.Spec.Ports[i]
		}
		for _, f := range mesh.PortFields() {
			var ov, nv string
			switch f {
			case "name":
				ov, nv = str(b.Name), str(a.Name)
			case "port":
				ov, nv = num(b.Port), num(a.Port)
			case "appProtocol":
				ov, nv = str(b.AppProtocol), str(a.AppProtocol)
			case "protocol":
				ov, nv = str(b.Protocol), str(a.Protocol)
			}
			if ov != nv {
				parts = append(parts, fmt.Sprintf("spec.ports[%d].%s: %s -> %s", i, f, ov, nv))
			}
		}
	}
	return parts
}

func quotedOrUnset(v string, set bool) string {
	if !set {
		return "unset"
	}
	return strconv.Quote(v)
}

// DecideMeshMembership judges a create or update of a Namespace or a Service whose mesh keys
// (mesh.NamespaceKeys, mesh.ServiceKeys; keys: those of the cluster's meshes) change, as
// DecideMesh judges a VirtualService: the Set with the object as sent in place of the stored one,
// and every edge (or entrypoint) of each policy's graph whose tries it raises, or whose layers'
// timeouts it lengthens, judged against the policy's cap and maxTimeToAnswer; a lowering (a
// label removed: a namespace leaving a mesh) passes. in.Object and in.Old are as the Set holds
// them (forMeshes). Reject and Rewrite refuse (a label is never rewritten, nor a port), Audit
// warns; the message names the object, the keys and spec.ports fields changed with their old and
// new values, and the chain.
func DecideMeshMembership(in MeshInput, keys []mesh.MetaKey) MeshDecision {
	obj, oldSet, newSet, err := meshSets(in.Set, in.Object, in.Old)
	if err != nil {
		return MeshDecision{Message: err.Error()}
	}
	id := obj.kind + " " + obj.name
	if obj.kind != "Namespace" {
		id = obj.id()
	}
	change := membershipChange(id, keys, in.Old, in.Object)
	// A Namespace's labels reach its callers and, through its callees (a waypoint, Istio's
	// inbound retries, a port's protocol), the callers of every namespace; a Service's likewise.
	policies := in.judged(MeshBearing{All: true})
	judge := func(p judgedPolicy) (configMapVerdict, bool) {
		v, _, over := judgeConfigMap(p, oldSet, newSet) // mesh_configmap.go: any raised edge
		if over || obj.kind != "Service" || p.Spec().MaxTimeToAnswer == nil || p.Spec().MaxTimeToAnswer.Duration <= 0 {
			return v, over
		}
		// The timeouts of a Linkerd route other than the edge's counted one, which it
		// inherits from the Service (mesh_linkerd_time.go): changedEdges sees the counted
		// layers only.
		mv, over := judgeLinkerdRoutes(p, p.build(newSet), p.build(oldSet), oldSet, newSet, obj)
		return configMapVerdict{policy: p, time: mv.time}, over
	}
	message := func(v configMapVerdict) string {
		msg := v.policy.Ref().String() + ": " + change + " makes " + v.explain()
		if v.policy.Spec().Enforcement == v1alpha1.EnforcementRewrite {
			msg += fmt.Sprintf(" (refused although enforcement is Rewrite: retrycap does not rewrite a %s's labels or annotations, whose owner would write them back; lower the mesh's retries on the chain or leave the change out)", obj.kind)
		}
		return msg
	}
	return enforceUnrewritable(policies, judge, message)
}
