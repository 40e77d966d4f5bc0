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
	// keep is the largest value of the plan's key whose chains through the edge fit (planned:
	// the write raised that key; keep < plan.min: none fits).
	keep    int64
	planned bool
	// levers, when no value of the key fits, name what else can change (configMapPlan.levers).
	levers string
	// extra is the message after the policy's name, when the kind writes its own
	// (mesh_serviceentry.go: the entry's host, the chain and the VirtualService that lowers it).
	extra string
}

// levers names, for a verdict no value of the key fits, what else can bring e's chain within p,
// judged with the key at its fewest (what "even ... does not fit" names): the chain's other
// factors and layers by the fields that set them (workload.Result.Levers, the ConfigMap's own
// left out) when it is over the cap, the timeouts it waits on (timeLevers) when over the time
// alone; the policy's maximum in any case. It said "lower the chain's other layers or the
// callers' attempts", naming none of them (adv20).
func (pl *configMapPlan) levers(p judgedPolicy, obj meshObject, oldSet *mesh.Set, e raised) string {
	fallback := "raise " + p.Ref().String() + " spec.maxAmplification or spec.maxTimeToAnswer"
	data, err := pl.with(pl.min)
	if err != nil {
		return fallback
	}
	set, err := withObject(oldSet, obj, data)
	if err != nil {
		return fallback
	}
	r := p.build(set)
	skip := workload.LeverSkip{Object: obj.id()}
	if j := judgeAt(r, e); j.Over {
		return r.Levers(j.Path, j.Factors, skip)
	}
	if tj := timeAt(p, r, e); tj != nil {
		return timeLevers(r, set, tj, skip, "")
	}
	return fallback
}

// configMapPlan is the tries key a ConfigMap write raised, and how to write another value of it:
// ingress-nginx's proxy-next-upstream-tries (tries, at least 1), a MeshConfig's
// defaultHttpRetryPolicy.attempts (retries, at least 0).
type configMapPlan struct {
	key      string // "proxy-next-upstream-tries", "defaultHttpRetryPolicy.attempts"
	min, max int64  // the fewest it can say, and the value as sent
	retries  bool   // the value counts retries (tries - 1)
	with     func(n int64) ([]byte, error)
}

// render is value n as the message writes it: the ConfigMap's string, or the MeshConfig's number.
func (pl *configMapPlan) render(n int64) string {
	if pl.retries {
		return strconv.FormatInt(n, 10)
	}
	return strconv.Quote(strconv.FormatInt(n, 10))
}

// planConfigMap is the plan of the tries key the write raised (nil: none, e.g. retries turned on
// by removing "off", or a key it cannot decode).
func planConfigMap(raw []byte, oldCM, newCM configMapOf) *configMapPlan {
	doc := func(edit func(data map[string]any) error) ([]byte, error) {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		data, _ := m["data"].(map[string]any)
		if data == nil {
			return nil, fmt.Errorf("no data")
		}
		if err := edit(data); err != nil {
			return nil, err
		}
		return json.Marshal(m)
	}
	if v, ok := newCM.Data[mesh.IngressNginxKeyTries]; ok && v != oldCM.Data[mesh.IngressNginxKeyTries] {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		was := int64(mesh.IngressNginxDefaultTries)
		if o, ok := oldCM.Data[mesh.IngressNginxKeyTries]; ok {
			was, _ = strconv.ParseInt(strings.TrimSpace(o), 10, 64)
		}
		if err != nil || n <= 1 || n <= was {
			return nil
		}
		return &configMapPlan{key: mesh.IngressNginxKeyTries, min: 1, max: n, with: func(k int64) ([]byte, error) {
			return doc(func(data map[string]any) error {
				data[mesh.IngressNginxKeyTries] = strconv.FormatInt(k, 10)
				return nil
			})
		}}
	}
	attempts := func(y string) (int64, bool) {
		var mc struct {
			P *struct {
				Attempts *int64 `json:"attempts"`
			} `json:"defaultHttpRetryPolicy"`
		}
		if yaml.Unmarshal([]byte(y), &mc) != nil || mc.P == nil || mc.P.Attempts == nil {
			return 0, false
		}
		return *mc.P.Attempts, true
	}
	n, ok := attempts(newCM.Data[mesh.IstioConfigKey])
	if newCM.Metadata.Namespace != mesh.IstioConfigNamespace || !ok || n <= 0 {
		return nil
	}
	if was, ok := attempts(oldCM.Data[mesh.IstioConfigKey]); ok && n <= was {
		return nil
	}
	return &configMapPlan{key: "defaultHttpRetryPolicy.attempts", min: 0, max: n, retries: true, with: func(k int64) ([]byte, error) {
		return doc(func(data map[string]any) error {
			y, _ := data[mesh.IstioConfigKey].(string)
			var mc map[string]any
			if err := yaml.Unmarshal([]byte(y), &mc); err != nil {
				return err
			}
			p, _ := mc["defaultHttpRetryPolicy"].(map[string]any)
			if p == nil {
				return fmt.Errorf("no defaultHttpRetryPolicy")
			}
			p["attempts"] = k
			out, err := yaml.Marshal(mc)
			data[mesh.IstioConfigKey] = string(out)
			return err
		})
	}}
}

// keep is the largest value of pl's key (below the value sent) whose chains through e fit p's
// cap and maxTimeToAnswer, by bisection (fewer tries never make a chain longer); pl.min - 1 when
// none does. More tries than the cap never fit (a chain through e multiplies them): the search
// starts under it.
func (pl *configMapPlan) keep(p judgedPolicy, obj meshObject, oldSet *mesh.Set, e raised) int64 {
	fits := func(k int64) bool {
		data, err := pl.with(k)
		if err != nil {
			return false
		}
		set, err := withObject(oldSet, obj, data)
		if err != nil {
			return false
		}
		r := p.build(set)
		return !judgeAt(r, e).Over && timeAt(p, r, e) == nil
	}
	lo, hi := pl.min-1, pl.max // lo fits (or is below the fewest), hi does not
	if c := int64(p.Spec().MaxAmplification); c > 0 && c < hi {
		hi = c + 1 // c + 1 tries (c retries + 1) never fit; c may
		if pl.retries {
			hi = c
		}
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
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
	plan := planConfigMap(in.Object, oldCM, newCM)
	judge := func(p judgedPolicy) (configMapVerdict, bool) {
		v, e, over := judgeConfigMap(p, oldSet, newSet)
		if over && plan != nil {
			v.keep, v.planned = plan.keep(p, obj, oldSet, e), true
			if v.keep < plan.min {
				v.levers = plan.levers(p, obj, oldSet, e)
			}
		}
		return v, over
	}
	message := func(v configMapVerdict) string {
		msg := v.policy.Ref().String() + ": " + change + " makes " + v.explain()
		switch {
		case !v.planned:
		case v.keep >= plan.min:
			msg += fmt.Sprintf("; %s may keep %s: %s", obj.id(), plan.key, plan.render(v.keep))
		default:
			msg += fmt.Sprintf("; even %s %s: %s does not fit: %s", obj.id(), plan.key, plan.render(plan.min), v.levers)
		}
		if v.policy.Spec().Enforcement == v1alpha1.EnforcementRewrite {
			msg += " (refused although enforcement is Rewrite: retrycap does not rewrite a ConfigMap, whose owner would write it back; lower the value)"
		}
		return msg
	}
	return enforceUnrewritable(policies, judge, message)
}

// judgeConfigMap reports whether p's graph with set goes over p's cap through an edge (or
// entrypoint) whose tries set raises over oldSet's, or over maxTimeToAnswer through one whose
// tries or layers' time it raises; the first such edge in edge order, entrypoints first, with it.
func judgeConfigMap(p judgedPolicy, oldSet, set *mesh.Set) (configMapVerdict, raised, bool) {
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
			return v, e.raised, true
		}
	}
	return configMapVerdict{}, raised{}, false
}

// firstRaisedOver is the verdict on p of the first call an object's change raised (changedEdges
// from oldSet to newSet) whose chain is over p's cap or its maxTimeToAnswer, its message after
// the policy written by extra; false when none is. The judges of objects with no retry field to
// lower (a ServiceEntry, Kuma's MeshExternalService and MeshHTTPRoute) share it.
func firstRaisedOver(p judgedPolicy, oldSet, newSet *mesh.Set, extra func(r *workload.Result, e raised, v configMapVerdict) string) (configMapVerdict, bool) {
	old := p.build(oldSet)
	r := p.build(newSet)
	for _, e := range changedEdges(r, old, oldSet, newSet) {
		v := configMapVerdict{policy: p, time: timeAt(p, r, e.raised)}
		if e.attempts > e.was {
			if j := judgeAt(r, e.raised); j.Over {
				v.judge = j
			}
		}
		if v.judge == nil && v.time == nil {
			continue
		}
		v.extra = extra(r, e.raised, v)
		return v, true
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
			before := oldSet.LayerTime(mesh.Layer{Kind: l.Kind}) // no layer before: no timeout
			if had && i < len(o.Layers) {
				before = oldSet.LayerTime(o.Layers[i])
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

// enforceUnrewritable is gate.Enforce for an object retrycap never rewrites (a ConfigMap, a
// Namespace's or Service's labels, a waypoint Gateway: their owners would write them back): a
// Rewrite policy refuses it, and message says so.
func enforceUnrewritable(policies []judgedPolicy, judge func(judgedPolicy) (configMapVerdict, bool), message func(configMapVerdict) string) MeshDecision {
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
				over[i] = overOf(v.policy, v.judge, v.time)
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

// overOf is what "also over the cap of" says of one policy's verdict: over its cap, over its
// maxTimeToAnswer, or both.
func overOf(p judgedPolicy, j *graph.Judgement, t *graph.TimeJudgement) gate.Over {
	o := gate.Over{Ref: p.Ref(), Cap: j != nil && j.Over}
	if t != nil {
		o.MaxTime = t.Max
	}
	return o
}
