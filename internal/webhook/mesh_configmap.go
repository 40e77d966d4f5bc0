package webhook

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/workload"
)

// The ConfigMaps whose retries the manager counts: Istio's MeshConfigs (istio-system/istio, a
// revision's istio-system/istio-<rev> labelled istio.io/rev: mesh.IsMeshConfig) and each
// ConfigMap an ingress-nginx controller names with --configmap. The mesh gate judges their
// creates and updates as it judges a VirtualService, in a webhook of their own in
// MeshWebhookConfiguration whose match condition names exactly those ConfigMaps: the API server
// sends no other ConfigMap write of the cluster to the manager. A delete is not judged (it
// returns the defaults: 3 tries for ingress-nginx, Istio's 2 retries): refusing it would block
// `helm uninstall` and a namespace's deletion; the policies' status counts it. A ConfigMap is
// never rewritten (its owner, usually Helm, would write it back): Rewrite refuses as Reject.

// MeshConfigMapWebhookName is the ConfigMap webhook of MeshWebhookConfiguration.
const MeshConfigMapWebhookName = "configmaps.mesh.retrycap.dev"

// meshConfigMapCondition is the CEL match condition of the ConfigMaps read: Istio's MeshConfigs
// (when istio: Istio's API is read) as mesh.IsMeshConfig says, and the ingress-nginx ConfigMaps
// refs ("namespace/name"); "" when none is read.
func meshConfigMapCondition(istio bool, refs []string) string {
	var or []string
	if istio {
		// The labels of the object as sent (a create or an update); istio-<rev> only with its
		// revision's label, "default" excepted, as istiod reads it.
		or = append(or, fmt.Sprintf("(request.namespace == '%s' && (request.name == '%s' || "+
			"(object != null && has(object.metadata.labels) && '%s' in object.metadata.labels && "+
			"object.metadata.labels['%s'] != 'default' && request.name == '%s-' + object.metadata.labels['%s'])))",
			mesh.IstioConfigNamespace, mesh.IstioConfigName, mesh.IstioRevLabel, mesh.IstioRevLabel, mesh.IstioConfigName, mesh.IstioRevLabel))
	}
	if len(refs) > 0 {
		quoted := make([]string, len(refs))
		for i, r := range refs {
			quoted[i] = strconv.Quote(r) // a Kubernetes name has no quote or backslash
		}
		or = append(or, "(request.namespace + '/' + request.name) in ["+strings.Join(quoted, ", ")+"]")
	}
	return strings.Join(or, " || ")
}

// istioRead reports whether one of apis is Istio's (the manager then reads istio-system's
// MeshConfigs).
func istioRead(apis []meshwatch.API) bool {
	return slices.ContainsFunc(apis, func(a meshwatch.API) bool {
		for _, c := range meshwatch.Candidates {
			if c.Istio && c.Group == a.Group && c.Resource == a.Resource {
				return true
			}
		}
		return false
	})
}

// MeshConfigMapWebhook is the ConfigMap webhook for the ConfigMaps the manager reads with apis
// and the ingress-nginx ConfigMaps refs, reached as mesh is (MeshWebhook's clientConfig,
// namespaceSelector, failure policy Ignore: a ConfigMap gate must never block a cluster's
// ConfigMap writes while the manager is down; the status still counts the change); false when
// it reads none.
func MeshConfigMapWebhook(apis []meshwatch.API, refs []string, meshHook admissionregistrationv1.MutatingWebhook) (admissionregistrationv1.MutatingWebhook, bool) {
	cond := meshConfigMapCondition(istioRead(apis), refs)
	if cond == "" {
		return admissionregistrationv1.MutatingWebhook{}, false
	}
	h := *meshHook.DeepCopy()
	h.Name = MeshConfigMapWebhookName
	scope := admissionregistrationv1.NamespacedScope
	h.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}, Scope: &scope}}}
	h.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "configmaps-retrycap-reads", Expression: cond}}
	return h, true
}

// readsConfigMap reports whether the ConfigMap namespace/name (labels as sent, or as stored) is
// one the manager counts retries from, with set and apis: the handler's own check behind the
// match condition.
func readsConfigMap(set *mesh.Set, apis []meshwatch.API, namespace, name string, labels ...map[string]string) bool {
	if slices.Contains(set.IngressNginxConfigMaps(), namespace+"/"+name) {
		return true
	}
	if !istioRead(apis) {
		return false
	}
	for _, l := range labels {
		if mesh.IsMeshConfig(namespace, name, l) {
			return true
		}
	}
	return false
}

// configMapOf is the part of a ConfigMap the gate reads.
type configMapOf struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data map[string]string `json:"data"`
}

func decodeConfigMap(raw []byte) (configMapOf, error) {
	var cm configMapOf
	if raw == nil {
		return cm, nil
	}
	err := json.Unmarshal(raw, &cm)
	return cm, err
}

// configMapVerdict is one policy's judgement of a ConfigMap write.
type configMapVerdict struct {
	policy judgedPolicy
	judge  *graph.Judgement     // the chain over the cap (nil, or not Over: within it)
	time   *graph.TimeJudgement // the chain over maxTimeToAnswer (nil: within it)
}

func (v configMapVerdict) explain() string {
	return meshVerdict{judge: v.judge, time: v.time}.explain()
}

// DecideMeshConfigMap judges a create or update of a ConfigMap the manager counts retries from
// (an Istio MeshConfig, an ingress-nginx controller's) as DecideMesh judges a VirtualService:
// the Set with the ConfigMap as sent in place of the stored one, and every edge (or entrypoint)
// of each policy's graph whose tries it raises, or whose layers' timeouts it lengthens, judged
// against the policy's cap and maxTimeToAnswer; a lowering passes. Reject and Rewrite refuse
// (a ConfigMap is never rewritten), Audit warns; the message names the ConfigMap, the keys
// changed with their old and new values, and the chain. A value internal/mesh cannot read is
// refused naming the ConfigMap, the key and the value.
func DecideMeshConfigMap(in MeshInput) MeshDecision {
	obj, oldSet, newSet, err := meshSets(in.Set, in.Object, in.Old)
	if err != nil {
		return MeshDecision{Message: err.Error()}
	}
	newCM, err := decodeConfigMap(in.Object)
	if err != nil {
		return MeshDecision{Message: fmt.Sprintf("decoding %s: %v", obj.id(), err)}
	}
	oldCM, _ := decodeConfigMap(in.Old) // meshSets read it, or ignored it as the stored Set does
	change := configMapChange(obj, oldCM.Data, newCM.Data)
	policies := in.judged(MeshBearsOn(obj.namespace, in.Object, in.Old))
	judge := func(p judgedPolicy) (configMapVerdict, bool) { return judgeConfigMap(p, oldSet, newSet) }
	message := func(v configMapVerdict) string {
		msg := v.policy.Ref().String() + ": " + change + " makes " + v.explain()
		if v.policy.Spec().Enforcement == v1alpha1.EnforcementRewrite {
			msg += " (refused although enforcement is Rewrite: retrycap does not rewrite a ConfigMap, whose owner would write it back; lower the value)"
		}
		return msg
	}
	e := gate.Enforce(policies, gate.Steps[judgedPolicy, configMapVerdict]{
		Policy: func(p judgedPolicy) (workload.PolicyRef, v1alpha1.Enforcement) {
			en := p.Spec().Enforcement
			if en == v1alpha1.EnforcementRewrite {
				en = v1alpha1.EnforcementReject // never rewritten: refused, named as Rewrite in the message
			}
			return p.Ref(), en
		},
		Judge: func(p judgedPolicy) (configMapVerdict, bool, error) {
			v, over := judge(p)
			return v, over, nil
		},
		Ref:     func(v configMapVerdict) workload.PolicyRef { return v.policy.Ref() },
		Message: message,
		Also: func(vs []configMapVerdict) string {
			over := make([]gate.Over, len(vs))
			for i, v := range vs {
				over[i] = gate.Over{Ref: v.policy.Ref(), Cap: v.judge != nil && v.judge.Over}
				if v.time != nil {
					over[i].MaxTime = v.time.Max
				}
			}
			return gate.AlsoOver(over)
		},
		Rewrite: func([]configMapVerdict) []string { return nil }, // unreachable: Policy maps Rewrite to Reject
		Audit:   judge,
	})
	if e.Denied {
		return MeshDecision{Message: e.Message}
	}
	return MeshDecision{Allowed: true, Warnings: e.Warnings}
}

// judgeConfigMap reports whether p's graph with set goes over p's cap through an edge (or
// entrypoint) whose tries set raises over oldSet's, or over maxTimeToAnswer through one whose
// tries or layers' time it raises; the first such edge in edge order, entrypoints first.
func judgeConfigMap(p judgedPolicy, oldSet, set *mesh.Set) (configMapVerdict, bool) {
	old := p.build(oldSet)
	r := p.build(set)
	for _, e := range changedEdges(r, old, oldSet, set) {
		var v configMapVerdict
		if e.attempts > e.was {
			if j := judgeAt(r, e.raised); j.Over {
				v.judge = j
			}
		}
		v.time = timeAt(p, r, e.raised)
		if v.judge != nil || v.time != nil {
			v.policy = p
			return v, true
		}
	}
	return configMapVerdict{}, false
}

// changedEdges are the edges (and entrypoints) of r whose attempts are above old's, or whose
// layers' time (set's) is longer than old's (oldSet's), in edge order; entrypoints first.
func changedEdges(r, old *workload.Result, oldSet, set *mesh.Set) []layeredEdge {
	var out []layeredEdge
	check := func(m workload.MeshEdge, o workload.MeshEdge, had bool, e raised) {
		le := layeredEdge{raised: e, attempts: m.Attempts(), was: m.App}
		if had {
			le.was = o.Attempts()
		}
		longer := false
		for i, l := range m.Layers {
			before := mesh.LayerTime{}
			if had && i < len(o.Layers) {
				before = oldSet.LayerTime(o.Layers[i])
			} else {
				before = oldSet.LayerTime(mesh.Layer{Kind: l.Kind})
			}
			if timeRaises(before, set.LayerTime(l)) != "" {
				longer = true
				break
			}
		}
		if le.attempts > le.was || longer {
			out = append(out, le)
		}
	}
	entries := make([]string, 0, len(r.MeshEntry))
	for k := range r.MeshEntry {
		entries = append(entries, k)
	}
	sort.Strings(entries)
	for _, k := range entries {
		o, had := old.MeshEntry[k]
		check(r.MeshEntry[k], o, had, raised{to: k})
	}
	keys := make([][2]string, 0, len(r.MeshEdges))
	for k := range r.MeshEdges {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		o, had := old.MeshEdges[k]
		check(r.MeshEdges[k], o, had, raised{from: k[0], to: k[1]})
	}
	return out
}

// configMapChange names the ConfigMap and the keys retrycap reads that the write changes, old
// and new: `ConfigMap ingress-nginx/ingress-nginx-controller data["proxy-next-upstream-tries"]:
// "3" -> "10"`; a MeshConfig's data["mesh"] by its retry policies' fields:
// `ConfigMap istio-system/istio data["mesh"] defaultHttpRetryPolicy.attempts: 2 -> 6`.
func configMapChange(obj meshObject, old, cur map[string]string) string {
	var parts []string
	if obj.namespace == mesh.IstioConfigNamespace && (old[mesh.IstioConfigKey] != "" || cur[mesh.IstioConfigKey] != "") {
		before, after := meshRetryFields(old[mesh.IstioConfigKey]), meshRetryFields(cur[mesh.IstioConfigKey])
		for _, k := range unionKeys(before, after) {
			if before[k] != after[k] {
				parts = append(parts, fmt.Sprintf("data[%q] %s: %s -> %s", mesh.IstioConfigKey, k, orUnset(before[k]), orUnset(after[k])))
			}
		}
	}
	for _, k := range mesh.IngressNginxConfigKeys() {
		b, hadB := old[k]
		a, hasA := cur[k]
		if hadB == hasA && b == a {
			continue
		}
		bs, as := "unset", "unset"
		if hadB {
			bs = strconv.Quote(b)
		}
		if hasA {
			as = strconv.Quote(a)
		}
		parts = append(parts, fmt.Sprintf("data[%q]: %s -> %s", k, bs, as))
	}
	if len(parts) == 0 {
		return obj.id()
	}
	return obj.id() + " " + strings.Join(parts, ", ")
}

// meshRetryFields are the fields of a MeshConfig's retry policies (defaultHttpRetryPolicy,
// defaultInboundHttpRetryPolicy), "defaultHttpRetryPolicy.attempts" -> "6"; none when the YAML
// does not decode (internal/mesh refuses it, naming the error).
func meshRetryFields(data string) map[string]string {
	out := map[string]string{}
	var mc map[string]any
	if yaml.Unmarshal([]byte(data), &mc) != nil {
		return out
	}
	for _, p := range []string{"defaultHttpRetryPolicy", "defaultInboundHttpRetryPolicy"} {
		m, _ := mc[p].(map[string]any)
		for k, v := range m {
			out[p+"."+k] = render(v)
		}
	}
	return out
}

func unionKeys(a, b map[string]string) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return s
}

// readsConfigMap reports whether req's ConfigMap is one the manager reads now (its labels as
// sent, or as stored).
func (g *MeshGate) readsConfigMap(set *mesh.Set, req admission.Request) bool {
	var labels []map[string]string
	for _, raw := range [][]byte{req.Object.Raw, req.OldObject.Raw} {
		if cm, err := decodeConfigMap(raw); err == nil && len(raw) > 0 {
			labels = append(labels, cm.Metadata.Labels)
		}
	}
	if len(labels) == 0 {
		labels = append(labels, nil)
	}
	return readsConfigMap(set, g.mesh.Read(), req.Namespace, req.Name, labels...)
}
