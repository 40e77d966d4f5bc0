package webhook

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/gate"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/workload"
)

// MeshInput is everything the mesh gate decides on: pure data, no client (the handler reads it
// from the request, the manager's cache and the mesh watcher).
type MeshInput struct {
	// Policies are the RetryPolicies of the namespaces whose chains the object bears on (its
	// own; a VirtualService's exportTo namespaces, or every namespace: meshwatch.AffectedBy).
	Policies []*v1alpha1.RetryPolicy
	// ClusterPolicies are the ClusterRetryPolicies with their scopes and workloads; those whose
	// scope has none of the namespaces the object bears on are not consulted (MeshBearsOn).
	ClusterPolicies []MeshClusterPolicy
	// Workloads are the object's namespace's workloads, parsed and sorted (index.Index.Parsed),
	// and Services its Services (nil: none).
	Workloads []*workload.Parsed
	Services  *workload.ServiceSet
	// Namespaces are the workloads and Services of the other policies' namespaces (a policy of
	// a namespace missing here is judged on Workloads and Services).
	Namespaces map[string]MeshNamespace
	// Set is the cluster's mesh Set (it may hold the object's stored version); not modified.
	Set *mesh.Set
	// Object is the incoming object (JSON), Old the stored one on an update (nil on a create).
	Object, Old []byte
}

// MeshNamespace is one namespace's workloads (parsed, sorted) and Services, for MeshInput.
type MeshNamespace struct {
	Workloads []*workload.Parsed
	Services  *workload.ServiceSet
}

// MeshClusterPolicy is a ClusterRetryPolicy as the mesh gate judges it: its graph across the
// namespaces of Scope (workload.BuildParsed, nodes "name.ns") of Workloads and Services.
type MeshClusterPolicy struct {
	Policy *v1alpha1.ClusterRetryPolicy
	Scope  *workload.ClusterScope
	// Workloads are the stored workloads of the scope's namespaces that can change the verdict
	// (the handler's relevance walk from the callers whose edges the object raises), parsed and
	// sorted by workload.Compare; Services are those of the scope's namespaces (nil: none).
	Workloads []*workload.Parsed
	Services  *workload.ServiceSet
}

// judgedPolicy is a policy the mesh gate judges with what its graph is built from: the
// workloads and Services of its namespaces.
type judgedPolicy struct {
	*workload.Policy
	ws   []*workload.Parsed
	svcs *workload.ServiceSet
}

// build is p's graph with the mesh layers of set.
func (p judgedPolicy) build(set *mesh.Set) *workload.Result {
	return workload.BuildParsed(p.Policy, p.ws, p.svcs, set)
}

// judged are the policies in.Object is judged by (gate.Enforce puts them in name order,
// RetryPolicies before ClusterRetryPolicies, as the workload gate's).
func (in MeshInput) judged(bears MeshBearing) []judgedPolicy {
	out := make([]judgedPolicy, 0, len(in.Policies)+len(in.ClusterPolicies))
	for _, p := range in.Policies {
		jp := judgedPolicy{Policy: workload.ForRetryPolicy(p), ws: in.Workloads, svcs: in.Services}
		if n, ok := in.Namespaces[p.Namespace]; ok {
			jp.ws, jp.svcs = n.Workloads, n.Services
		}
		out = append(out, jp)
	}
	for _, c := range in.ClusterPolicies {
		if bears.Consults(c.Scope) {
			out = append(out, judgedPolicy{Policy: workload.ForClusterRetryPolicy(c.Policy, c.Scope), ws: c.Workloads, svcs: c.Services})
		}
	}
	return out
}

// MeshBearing is the namespaces whose callers a mesh object's layers reach (meshwatch.AffectedBy
// of the object as sent and as stored): its own, a VirtualService's exportTo namespaces, or
// every namespace (All).
type MeshBearing struct {
	All        bool
	Namespaces map[string]bool
}

// MeshBearsOn is the bearing of the object raw in namespace ns (with its stored version old, nil
// on a create). A version that does not decode adds nothing: DecideMesh names it and its error.
func MeshBearsOn(ns string, raw, old []byte) MeshBearing {
	b := MeshBearing{Namespaces: map[string]bool{ns: true}}
	for _, data := range [][]byte{raw, old} {
		if data == nil {
			continue
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(data); err != nil {
			continue
		}
		a := meshwatch.AffectedBy(&u)
		b.All = b.All || a.All
		for _, n := range a.Namespaces {
			b.Namespaces[n] = true
		}
	}
	return b
}

// Consults reports whether a ClusterRetryPolicy of scope s can see the object's layers: its
// graph has a caller the layers reach only if s selects one of the namespaces they reach.
func (b MeshBearing) Consults(s *workload.ClusterScope) bool {
	if s.Len() == 0 {
		return false
	}
	if b.All {
		return true
	}
	for n := range b.Namespaces {
		if s.Has(n) {
			return true
		}
	}
	return false
}

// MeshDecision is the mesh gate's verdict.
type MeshDecision struct {
	Allowed bool
	// Message is why the request is denied.
	Message  string
	Warnings []string
	// Patch is the RFC 6902 patch of a rewrite (nil: none): the lowered fields and
	// retrycap.dev/rewritten-from.
	Patch []jsonpatch.JsonPatchOperation
	// rewrites are the rewrites Patch is made of, in the order applied (the tests compare Patch
	// with their static patches, mesh.Rewrite.StaticPatch).
	rewrites []*mesh.Rewrite
}

// meshVerdict is one policy's judgement of the incoming object.
type meshVerdict struct {
	policy judgedPolicy
	layer  mesh.Layer       // the object's layer that raised a chain over the cap
	edge   raised           // the edge (or entrypoint) it is on
	judge  *graph.Judgement // the chain, with the object as it is judged
	// time is the chain through the raised edge against the policy's spec.maxTimeToAnswer when
	// it is over it (nil otherwise): more tries on a layer are more time too.
	time *graph.TimeJudgement
	// keep is the largest number of tries of layer that fits (0: none does).
	keep int64
	// timeRaise, when not empty, says which of the layer's timeouts the object raised
	// ("VirtualService bookinfo/ratings spec.http[0]: timeout 4s -> 9s"): the verdict is over
	// maxTimeToAnswer through an edge whose tries did not grow (judgeTimeRaise).
	timeRaise string
	// alt, when not nil, are the routes other than the edge's counted one whose tries the
	// object raised (judgeAltTries), with the tries they may keep.
	alt *altVerdict
	// timeFrom, when not empty, names where the chain over maxTimeToAnswer waits longest when
	// that is not the layer's own route (waitSource): "reviews -> ratings: VirtualService
	// bookinfo/ratings spec.http[1] (1 try, per-try timeout unset, timeout 1m0s)".
	timeFrom string
	// keepBound, when not empty, is the route timeout the kept value needs to fit (zeroBound):
	// `spec.http[1].timeout: "60s" -> "9s"`.
	keepBound string
	// ownTimeout, when not empty, is the timeout of the verdict's own route the chain's time is
	// (ownWait): no count of tries fits under it, and the callers' attempts do not shorten it.
	ownTimeout string
	// levers, when no count of the layer's tries fits the cap, name what else on the chain can
	// change (workload.Result.Levers): "lower Deployment bookinfo/productpage
	// retrycap.dev/upstreams reviews=3, VirtualService bookinfo/reviews
	// spec.http[0].retries.attempts (3 tries), or raise RetryPolicy bookinfo/bookinfo
	// spec.maxAmplification: 4". "Lower the callers' attempts" was said where they were at 1.
	levers string
	// released, when not empty, is the object's route that took the edge's calls and no longer
	// does ("VirtualService bookinfo/ratings spec.http[0]", releasedBy): the calls fall to
	// layer, another object's or the mesh's default, which no field of the object lowers.
	released string
}

// ownWait is, for a verdict no count fits, the timeout of v's own route when the chain waits
// longest on that route and its timeout is the chain's time: "1m0s". A rule at an entrypoint
// created with attempts 1 and a timeout of 60s was told "even ... without spec.rules[0].retry
// (1 try) does not fit: lower the callers' attempts": its clients' attempts were 1 already,
// and the wait was its own 60s (rewrite18).
func ownWait(r *workload.Result, set *mesh.Set, v meshVerdict) string {
	if v.time == nil || !v.time.Over || v.keep > 0 {
		return ""
	}
	w, ok := waitRoute(r, set, v.time)
	if !ok || routeOf(w.layer) != routeOf(v.layer) || w.lt.Timeout <= 0 || w.lt.Delay > 0 || v.time.Chain.Time != w.lt.Timeout {
		return ""
	}
	return fmtBound(w.lt.Timeout)
}

// zeroBound is the route timeout a VirtualService route lowered to attempts 0 takes from its
// per-try timeout (mesh.Rewrite.ApplyChanges), when lowering l to tries does that: the keep was
// judged with it, so advice that names attempts 0 alone would name a value that does not fit (the
// route without its per-try bound). "" otherwise.
func zeroBound(l mesh.Layer, tries int64, raw objectJSON) string {
	rw, err := mesh.PlanRewrite(l, tries)
	if err != nil || !rw.ZeroAttempts() {
		return ""
	}
	data, err := raw()
	if err != nil {
		return ""
	}
	if _, changes, err := rw.ApplyChanges(data); err == nil && len(changes) > 1 {
		return changes[1]
	}
	return ""
}

// boundClause is what advice adds for keepBound.
func (v meshVerdict) boundClause() string {
	if v.keepBound == "" {
		return ""
	}
	return " with " + v.keepBound + " (Istio drops perTryTimeout at attempts 0)"
}

// meshSets are the cluster's Set without the object (with its stored version on an update) and
// with the incoming one in its place, and the object's identity: what DecideMesh compares, and
// what the handler finds the raised callers with. Set is not modified.
func meshSets(set *mesh.Set, raw, old []byte) (obj meshObject, before, after *mesh.Set, err error) {
	obj, err = objectHeader(raw)
	if err != nil {
		return meshObject{}, nil, nil, err
	}
	before = set.Clone()
	before.Remove(obj.group, obj.kind, obj.namespace, obj.name)
	if old != nil {
		// A stored object internal/mesh cannot read adds no layer: the incoming one is judged
		// against none.
		_, _ = before.AddJSON(old)
	}
	after, err = withObject(before, obj, raw)
	if err != nil {
		return meshObject{}, nil, nil, err
	}
	return obj, before, after, nil
}

// DecideMesh judges a create or update of a mesh object (VirtualService, HTTPRoute, GRPCRoute,
// Service with Linkerd retry annotations, BackendTrafficPolicy; a ServiceEntry is
// DecideMeshServiceEntry's) against every RetryPolicy of the
// namespaces it bears on (in.Policies), each on its own namespace's graph, and every
// ClusterRetryPolicy whose scope has one of those namespaces (in.ClusterPolicies), on its graph
// across its namespaces, as the workload gate judges workloads:
//
//   - only a change that raises the tries of one of the object's layers on some edge (or
//     entrypoint) is judged: a lowering always passes, so a chain over its cap can be repaired;
//     a route new to an edge is judged from the fewest tries its field gives (raisedBy), and by
//     its timeouts where it lengthens the chain or the chain waits longest on it (judgeTimeRaise);
//   - a raised edge whose caller's chains go over a policy's cap: Reject denies (the strictest
//     policy's message, workload.CompareRefs: lowest cap, a RetryPolicy before a
//     ClusterRetryPolicy, then namespace/name; naming the others after it, strictest first),
//     Rewrite lowers the field to the largest value that fits (or, when none does, to its floor
//     with a warning, only if the object so lowered is one Reject would admit: else it is
//     refused, stillOver) and records the old value in retrycap.dev/rewritten-from, Audit warns.
//
// An object internal/mesh cannot read (a negative attempts) is denied with the error naming the
// object, the field and the value.
func DecideMesh(in MeshInput) MeshDecision {
	d := MeshDecision{Allowed: true}
	obj, oldSet, newSet, err := meshSets(in.Set, in.Object, in.Old)
	if err != nil {
		return MeshDecision{Message: err.Error()}
	}
	if isServiceEntry(obj) {
		// No retry field of its own: never rewritten (mesh_serviceentry.go).
		return decideServiceEntry(in, obj, oldSet, newSet)
	}
	if isKumaNoField(obj) {
		return decideKumaNoField(in, obj, oldSet, newSet) // mesh_kuma_external.go
	}
	policies := in.judged(MeshBearsOn(obj.namespace, in.Object, in.Old))
	if n := newSet.Routes(obj.group, obj.kind, obj.namespace, obj.name); n > MaxMeshRoutes {
		return tooManyRoutes(policies, obj, n)
	}

	stored := in.Object
	// The Set with what will be stored, made once for the Audit policies (nil: the object
	// cannot be read back, and they are not judged).
	var storedSet *mesh.Set
	storedSetMade := false
	// refused is set when the rewrite cannot make the object admissible (stillOver).
	refused := ""
	e := gate.Enforce(policies, gate.Steps[judgedPolicy, meshVerdict]{
		Policy: func(p judgedPolicy) (workload.PolicyRef, v1alpha1.Enforcement) {
			return p.Ref(), p.Spec().Enforcement
		},
		Judge: func(p judgedPolicy) (meshVerdict, bool, error) {
			if p.Spec().Enforcement == v1alpha1.EnforcementRewrite {
				// Rewrite lowers tries, never a timeout (docs/decisions.md): a raised
				// timeout that leaves a chain over maxTimeToAnswer is refused.
				if v, over := judgeTimeRaise(p, obj, oldSet, newSet, false); over {
					return meshVerdict{}, false, fmt.Errorf("%s (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)", v.message(obj))
				}
			}
			v, over := judgeMesh(p, obj, oldSet, newSet, constJSON(in.Object))
			if over && v.timeRaise != "" && p.Spec().Enforcement == v1alpha1.EnforcementRewrite {
				// A new route whose own bound keeps the chain over whatever its tries.
				return meshVerdict{}, false, fmt.Errorf("%s (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)", v.message(obj))
			}
			if over && v.released != "" && p.Spec().Enforcement == v1alpha1.EnforcementRewrite {
				return meshVerdict{}, false, fmt.Errorf("%s (refused although enforcement is Rewrite: no field of %s sets the tries of calls it no longer takes)", v.message(obj), obj.id())
			}
			if over && v.alt == nil && v.timeRaise == "" && p.Spec().Enforcement == v1alpha1.EnforcementRewrite && noField(v.layer, obj) {
				// No field of the object gives these tries: as a ServiceEntry, refused, not
				// admitted as sent with "could not rewrite".
				return meshVerdict{}, false, fmt.Errorf("%s (refused although enforcement is Rewrite: %s has no field that sets these tries)", v.message(obj), obj.id())
			}
			return v, over, nil
		},
		Ref:     func(v meshVerdict) workload.PolicyRef { return v.policy.Ref() },
		Message: func(v meshVerdict) string { return v.message(obj) },
		Also: func(vs []meshVerdict) string {
			over := make([]gate.Over, len(vs))
			for i, v := range vs {
				over[i] = overOf(v.policy, v.judge, v.time)
			}
			return gate.AlsoOver(over)
		},
		Rewrite: func(rewrites []meshVerdict) []string {
			out, patch, warnings, applied, err := rewriteMesh(in, obj, oldSet, newSet, rewrites)
			if err != nil {
				// Unreachable unless the object changes under the planner: admit it as sent, and say so.
				return []string{fmt.Sprintf("retrycap could not rewrite %s: %v", obj.id(), err)}
			}
			if msg := stillOver(obj, oldSet, out, rewrites); msg != "" {
				refused = msg
				return nil
			}
			stored, d.Patch, d.rewrites = out, patch, applied
			return warnings
		},
		Audit: func(p judgedPolicy) (meshVerdict, bool) {
			if !storedSetMade {
				storedSetMade = true
				if set, err := withObject(oldSet, obj, stored); err == nil {
					storedSet = set
				}
			}
			if storedSet == nil {
				return meshVerdict{}, false
			}
			return judgeMesh(p, obj, oldSet, storedSet, constJSON(stored))
		},
	})
	if e.Denied {
		return MeshDecision{Message: e.Message}
	}
	if refused != "" {
		return MeshDecision{Message: refused}
	}
	d.Warnings = e.Warnings
	return d
}

// stillOver judges the object as Rewrite would store it (out) under each exceeded Rewrite
// policy as Reject would: the message of the first still over (its verdict as sent, then the
// rewritten object's), "" when none is. Rewrite lowered a route no count of whose tries fits to
// its floor and admitted it with a warning while the chain stayed over the cap or
// maxTimeToAnswer (a new route whose own timeout keeps the chain over; a floor of more tries
// than the edge had): a rewrite that cannot make the object admissible is refused, as Reject
// refuses it (docs/decisions.md, gate19). One the rewrite makes admissible (lowered back to its
// stored value, or to a floor that raises nothing) is admitted with its warning.
func stillOver(obj meshObject, oldSet *mesh.Set, out []byte, rewrites []meshVerdict) string {
	final, err := withObject(oldSet, obj, out)
	if err != nil {
		return fmt.Sprintf("%s (refused although enforcement is Rewrite: the rewritten object cannot be read back: %v)", rewrites[0].message(obj), err)
	}
	for _, v := range rewrites {
		nv, over := judgeMesh(v.policy, obj, oldSet, final, constJSON(out))
		if !over {
			continue
		}
		again := strings.TrimPrefix(nv.message(obj), v.policy.Ref().String()+": ")
		return fmt.Sprintf("%s (refused although enforcement is Rewrite: lowered as far as it goes, %s)", v.message(obj), again)
	}
	return ""
}

// MaxMeshRoutes is the most routes (a VirtualService's spec.http, a route's spec.rules) of an
// object the mesh gate judges. The webhook has 5 s (timeoutSeconds) and its failure policy is
// Ignore: an object the gate cannot judge in time is admitted unjudged. Rewrite of 10,000 routes
// takes 0.2-0.6 s on a loaded 2-core machine, of 50,000 minimal ones (1.35 MB, what etcd still
// stores) 1.8 s (docs/benchmarks.md): past 10,000 the object is refused by a Reject or Rewrite
// policy with its count, and an Audit policy warns.
const MaxMeshRoutes = 10000

// tooManyRoutes is the decision on an object of n > MaxMeshRoutes routes: denied when one of
// the policies it bears on enforces (Reject or Rewrite: the strictest, workload.CompareRefs,
// names itself), else
// admitted with the warning that it was not judged.
func tooManyRoutes(policies []judgedPolicy, obj meshObject, n int) MeshDecision {
	msg := fmt.Sprintf("%s has %d routes: retrycap judges mesh objects of at most %d (the webhook's 5 s would run out, and the object be admitted unjudged); split its routes across objects",
		obj.id(), n, MaxMeshRoutes)
	refs := make([]workload.PolicyRef, 0, len(policies))
	for _, p := range policies {
		if p.Spec().Enforcement != v1alpha1.EnforcementAudit {
			refs = append(refs, p.Ref())
		}
	}
	if len(refs) == 0 {
		return MeshDecision{Allowed: true, Warnings: []string{msg + " (admitted unjudged: every policy it bears on is Audit)"}}
	}
	slices.SortFunc(refs, workload.CompareRefs)
	return MeshDecision{Message: refs[0].String() + ": " + msg}
}

// meshObject is the identity of the incoming object.
type meshObject struct {
	group, kind, namespace, name string
}

func (o meshObject) id() string { return o.kind + " " + o.namespace + "/" + o.name }

func objectHeader(raw []byte) (meshObject, error) {
	var h struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name, Namespace string
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return meshObject{}, fmt.Errorf("decoding the object: %w", err)
	}
	g, _, ok := strings.Cut(h.APIVersion, "/")
	if !ok {
		g = ""
	}
	return meshObject{group: g, kind: h.Kind, namespace: h.Metadata.Namespace, name: h.Metadata.Name}, nil
}

// withObject is base (not modified) with raw in place of the object.
func withObject(base *mesh.Set, obj meshObject, raw []byte) (*mesh.Set, error) {
	s := base.Clone()
	s.Remove(obj.group, obj.kind, obj.namespace, obj.name)
	if _, err := s.AddJSON(raw); err != nil {
		return nil, err
	}
	return s, nil
}

// raised is an edge (or, with from empty, an entrypoint's client attempts) whose attempts one of
// the object's layers raised.
type raised struct {
	from, to string
	layer    mesh.Layer
}

// raisedBy lists the edges of r whose attempts are above old's and carry a layer of obj, in
// edge order; entrypoints first. An edge whose layer is a route new there (created, or now
// binding the edge: newRoute) counts as raised when the route gives more tries than the fewest
// its field can (mesh.MinTries), as a route other than the counted one is judged
// (altTriesRaises): the edge's tries before were the mesh's default (Istio's 3), which the new
// route repeats without a word, and the chain over the cap was admitted though the route, which
// now owns the hop, could set fewer (gate18).
func raisedBy(r, old *workload.Result, oldSet *mesh.Set, obj meshObject) []raised {
	var out []raised
	for _, e := range layered(r, old, obj) {
		if e.attempts > e.was || newRoute(oldSet, e, obj) && (ownTries(e.layer, obj) || noField(e.layer, obj)) {
			out = append(out, e.raised)
		}
	}
	return out
}

// releasedBy lists the edges (entrypoints first) whose calls took a route of obj in old and take
// none of it in r, with more tries than before: an update that empties spec.http, keeps only tcp
// routes, delegates to a VirtualService that does not exist or exports the object away puts the
// calls back on the mesh's default (Istio's 3 tries) or another object's route, and raisedBy, which
// looks at the edges carrying a layer of the object, admitted it over the cap (gate19).
// layer is the edge's layer in r, oldLayer the object's in old.
func releasedBy(r, old *workload.Result, obj meshObject) []layeredEdge {
	var out []layeredEdge
	own := func(m workload.MeshEdge) *mesh.Layer {
		for _, l := range m.Layers {
			if l.Object == obj.id() {
				return &l
			}
		}
		return nil
	}
	check := func(from, to string, m, o workload.MeshEdge, hadOld bool) {
		if !hadOld || m.Attempts() <= o.Attempts() || own(m) != nil {
			return
		}
		ol := own(o)
		if ol == nil || len(m.Layers) == 0 {
			return
		}
		out = append(out, layeredEdge{raised: raised{from: from, to: to, layer: m.Layers[0]}, attempts: m.Attempts(), was: o.Attempts(), oldLayer: ol})
	}
	for _, k := range slices.Sorted(maps.Keys(r.MeshEntry)) {
		o, ok := old.MeshEntry[k]
		check("", k, r.MeshEntry[k], o, ok)
	}
	keys := slices.Collect(maps.Keys(r.MeshEdges))
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		o, ok := old.MeshEdges[k]
		check(k[0], k[1], r.MeshEdges[k], o, ok)
	}
	return out
}

// releasedMessage is the message of a verdict on calls the object's route no longer takes:
// "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0] no longer takes
// the calls reviews -> ratings (the object as sent gives them no route): they take 3 tries
// (Istio default, no VirtualService binds ratings), which makes ...; keep a route of
// VirtualService bookinfo/ratings for them with retries that fit, or lower Deployment
// bookinfo/productpage retrycap.dev/upstreams reviews=3, or raise RetryPolicy bookinfo/bookinfo
// spec.maxAmplification: 4" (the verdict's levers; over the time alone, its timeLevers).
func (v meshVerdict) releasedMessage() string {
	object, _, _ := strings.Cut(v.released, " spec.")
	call := v.edge.from + " -> " + v.edge.to
	if v.edge.from == "" {
		call = "to the entrypoint " + v.edge.to
	}
	remedy := v.remedy()
	return fmt.Sprintf("%s: %s no longer takes the calls %s (the object as sent gives them no route): they take %s, which makes %s; keep a route of %s for them with retries that fit, or %s",
		v.policy.Ref(), v.released, call, fmt.Sprintf("%d tries (%s)", v.layer.Tries, v.layer.Note), v.explain(), object, remedy)
}

// remedy is v.levers, or, where the verdict has none, the policy's limit it is over: never "lower
// the callers' attempts", which named no field and was wrong where they were at 1 (advice19) or
// the time was a timeout's (adv20).
func (v meshVerdict) remedy() string {
	if v.levers != "" {
		return v.levers
	}
	if v.judge == nil || !v.judge.Over {
		return "raise " + v.policy.Ref().String() + " spec.maxTimeToAnswer"
	}
	return "raise " + v.policy.Ref().String() + " spec.maxAmplification"
}

// noField reports whether l, a layer of obj, gives the mesh's default tries (more than 1) that no
// field of obj can set: a GRPCRoute's rule under Istio (the Gateway API's GRPCRoute has no retry,
// v1.6). Created, it was admitted over the cap as the default it repeats; it is judged, and
// refused under Rewrite too (nothing to rewrite), naming what to declare instead.
func noField(l mesh.Layer, obj meshObject) bool {
	if l.Object != obj.id() || !l.Default || l.Tries <= 1 {
		return false
	}
	_, err := mesh.Field(l)
	return err != nil
}

// newRoute reports whether e's layer is read from a route of obj that did not take the edge's
// calls before: the object had no layer on the edge, or none of its routes of that index
// ("spec.http[1]", "spec.rules[1]") was among the routes the calls could take.
func newRoute(oldSet *mesh.Set, e layeredEdge, obj meshObject) bool {
	if e.layer.Object != obj.id() {
		return false
	}
	if e.oldLayer == nil {
		return true
	}
	want := routeOf(e.layer)
	if routeOf(*e.oldLayer) == want {
		return false
	}
	for _, o := range oldSet.TimeAlternatives(*e.oldLayer) {
		if routeOf(o) == want {
			return false
		}
	}
	return true
}

// layeredEdge is an edge (or entrypoint) of r that carries a layer of the object, with its
// attempts in r and in old (old's layer, when old has one of the object on that edge).
type layeredEdge struct {
	raised
	attempts, was int64
	oldLayer      *mesh.Layer
	// alts and oldAlts are, for an entrypoint, the layers its calls may take in r and old
	// (workload.MeshEdge.Alternatives: every route to it at a Gateway or ingress), which
	// mesh.Set.TimeAlternatives does not give for entry layers.
	alts, oldAlts []mesh.Layer
}

// layered lists the edges of r that carry a layer of obj, in edge order; entrypoints first.
func layered(r, old *workload.Result, obj meshObject) []layeredEdge {
	var out []layeredEdge
	layerOf := func(m workload.MeshEdge) (mesh.Layer, bool) {
		for _, l := range m.Layers {
			if l.Object == obj.id() {
				return l, true
			}
		}
		return mesh.Layer{}, false
	}
	entries := make([]string, 0, len(r.MeshEntry))
	for k := range r.MeshEntry {
		entries = append(entries, k)
	}
	sort.Strings(entries)
	for _, k := range entries {
		m := r.MeshEntry[k]
		e := layeredEdge{attempts: m.Attempts(), was: m.App, alts: m.Alternatives}
		if o, ok := old.MeshEntry[k]; ok {
			e.was = o.Attempts()
			e.oldAlts = o.Alternatives
			if ol, ok := layerOf(o); ok {
				e.oldLayer = &ol
			}
		}
		if l, ok := layerOf(m); ok {
			e.raised = raised{to: k, layer: l}
			out = append(out, e)
		}
	}
	keys := make([][2]string, 0, len(r.MeshEdges))
	for k := range r.MeshEdges {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		m := r.MeshEdges[k]
		e := layeredEdge{attempts: m.Attempts(), was: m.App}
		if o, ok := old.MeshEdges[k]; ok {
			e.was = o.Attempts()
			if ol, ok := layerOf(o); ok {
				e.oldLayer = &ol
			}
		}
		if l, ok := layerOf(m); ok {
			e.raised = raised{from: k[0], to: k[1], layer: l}
			out = append(out, e)
		}
	}
	return out
}

// delayed lists, for an Envoy Gateway BackendTrafficPolicy, the layers of r's entrypoints and
// edges that are not obj's own: its spec.faultInjection.delay lands on the entry layer of each
// route it covers (mesh.Set.LayerTime), whichever object sets that route's retry, and a policy
// with a delay but no retry has no layer at all, so layered alone never showed the time gate
// such a delay (the analysis counted it). Each layer is paired with its old version (the same
// object's layer there), whose delay judgeTimeRaise compares.
func delayed(r, old *workload.Result, obj meshObject) []layeredEdge {
	var out []layeredEdge
	add := func(from, to string, m workload.MeshEdge, o workload.MeshEdge, hadOld bool) {
		for _, l := range m.Layers {
			if l.Object == obj.id() || l.Object == "" {
				continue
			}
			e := layeredEdge{raised: raised{from: from, to: to, layer: l}, attempts: m.Attempts(), was: m.App}
			if hadOld {
				e.was = o.Attempts()
				for _, ol := range o.Layers {
					if ol.Object == l.Object {
						e.oldLayer = &ol
						break
					}
				}
			}
			out = append(out, e)
		}
	}
	entries := slices.Sorted(maps.Keys(r.MeshEntry))
	for _, k := range entries {
		o, ok := old.MeshEntry[k]
		add("", k, r.MeshEntry[k], o, ok)
	}
	keys := slices.Collect(maps.Keys(r.MeshEdges))
	slices.SortFunc(keys, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	for _, k := range keys {
		o, ok := old.MeshEdges[k]
		add(k[0], k[1], r.MeshEdges[k], o, ok)
	}
	return out
}

// judgeAt is the judgement of the chains through a raised edge: those through its caller's
// edges, or through the entrypoint.
func judgeAt(r *workload.Result, e raised) *graph.Judgement {
	n := e.from
	if n == "" {
		n = e.to
	}
	return graph.Judge(r.Graph, r.Cap, n)
}

// judgeMesh reports whether p's graph with set goes over the cap (or maxTimeToAnswer) through an
// edge the object's layer raised (compared with oldSet), and the largest tries of that layer that
// fit; else whether tries it raised on a route other than an edge's counted one are over
// maxTimeToAnswer (judgeAltTries); else whether a timeout the object raised is (judgeTimeRaise). raw
// gives the object's JSON as set holds it (read only when a candidate cannot be judged on the
// Set's decoded object: lowerOnEdge).
func judgeMesh(p judgedPolicy, obj meshObject, oldSet, set *mesh.Set, raw objectJSON) (meshVerdict, bool) {
	old := p.build(oldSet)
	r := p.build(set)
	edges := raisedBy(r, old, oldSet, obj)
	for i, e := range edges {
		j := judgeAt(r, e)
		tj := timeAt(p, r, e)
		if !j.Over && tj == nil {
			continue
		}
		v := meshVerdict{policy: p, layer: e.layer, edge: e, judge: j, time: tj}
		v.keep = keepOn(p, obj, set, raw, r, e, e.layer.Tries)
		// The same field on the object's later edges (a Linkerd Service's limit is on every
		// caller's edge, a VirtualService route on every sidecar's): the value kept must fit
		// there too, judged by their own chains (judgeAt sees only the chains through an edge's
		// caller). The keep of this edge alone was offered (Reject) and written (Rewrite) while
		// another caller's chain stayed over with it, which no count fitted.
		for _, o := range edges[i+1:] {
			if v.keep == 0 {
				break
			}
			if o.layer.Object != e.layer.Object || o.layer.FieldPath != e.layer.FieldPath {
				continue
			}
			oj, otj := judgeAt(r, o), timeAt(p, r, o)
			if !oj.Over && otj == nil || fitsWith(p, obj, set, raw, o, v.keep) {
				continue // within at the tries sent, so at fewer; or within at the keep
			}
			if k := keepOn(p, obj, set, raw, r, o, v.keep); k > 0 {
				v.keep = k
			} else {
				// No count fits o: its chain is the verdict's (the one to name).
				v = meshVerdict{policy: p, layer: o.layer, edge: o, judge: oj, time: otj}
			}
		}
		v.timeFrom = waitSource(r, set, v)
		v.ownTimeout = ownWait(r, set, v)
		if v.keep > 0 {
			v.keepBound = zeroBound(v.layer, v.keep, raw)
		} else if v.judge.Over {
			v.levers = r.Levers(v.judge.Path, v.judge.Factors, workload.LeverSkip{Object: v.layer.Object})
		} else if v.time != nil && v.ownTimeout == "" {
			v.levers = floorTimeLevers(p, obj, set, raw, r, v)
		}
		return v, true
	}
	for _, e := range releasedBy(r, old, obj) {
		j, tj := judgeAt(r, e.raised), timeAt(p, r, e.raised)
		if !j.Over && tj == nil {
			continue
		}
		v := meshVerdict{policy: p, layer: e.layer, edge: e.raised, judge: j, time: tj, released: routeOf(*e.oldLayer)}
		if j.Over {
			v.levers = r.Levers(j.Path, j.Factors, workload.LeverSkip{Layers: [2]string{e.from, e.to}})
		} else {
			v.levers = timeLevers(r, set, tj, workload.LeverSkip{}, "")
		}
		return v, true
	}
	if v, over := judgeAltTries(p, obj, oldSet, set, raw, r, old); over {
		if !v.alt.fits {
			// No count of the new route's tries fits: when the chain waits on its own
			// timeout, or the route lengthens it, that bound is what to name (judged as a new
			// route of its fewest tries is), not "lower the callers' attempts" (gate19).
			if tv, tover := judgeTimeRaise(p, obj, oldSet, set, true); tover {
				return tv, true
			}
		}
		return v, true
	}
	return judgeTimeRaise(p, obj, oldSet, set, false)
}

// floorTimeLevers names, for a verdict over maxTimeToAnswer alone that no count of the layer's
// tries fits, what else can shorten the chain, judged with the layer at its fewest tries (what
// "even ... does not fit" names): timeLevers of the chain then, or of the chain as sent when the
// layer cannot be lowered. "Lower the callers' attempts" was said of a time no attempt of theirs
// made (adv20): a time's levers are timeouts and the policy's maximum.
func floorTimeLevers(p judgedPolicy, obj meshObject, set *mesh.Set, raw objectJSON, r *workload.Result, v meshVerdict) string {
	skip := workload.LeverSkip{Object: v.layer.Object}
	if floor := mesh.MinTries(v.layer); floor < v.layer.Tries {
		if _, next, fr, ok := lowerOnEdge(p, obj, set, raw, v.edge, floor); ok {
			if tj := timeAt(p, fr, v.edge); tj != nil {
				return timeLevers(fr, next, tj, skip, v.timeFrom)
			}
		}
	}
	return timeLevers(r, set, v.time, skip, v.timeFrom)
}

// timeLevers is workload.Result.TimeLevers of tj's chain: the timeouts of the route it waits on
// longest (waitRoute), the application attempts on it above 1, or the policy's maximum raised to
// the chain's time: "lower the timeouts of VirtualService bookinfo/ratings spec.http[1] (1 try,
// per-try timeout unset, timeout 1m0s), or raise RetryPolicy bookinfo/bookinfo
// spec.maxTimeToAnswer: 1m0s". waitSaid, the message's waitClause, says the route's bounds
// already: the lever names the route alone then.
func timeLevers(r *workload.Result, set *mesh.Set, tj *graph.TimeJudgement, skip workload.LeverSkip, waitSaid string) string {
	if tj == nil {
		return ""
	}
	path := tj.Chain.Path
	factors := []int64{tj.Chain.ClientAttempts}
	for k := 1; k < len(path); k++ {
		ge, _ := r.Graph.Edge(path[k-1], path[k])
		factors = append(factors, ge.Attempts)
	}
	wait := ""
	if w, ok := waitRoute(r, set, tj); ok {
		name := w.lt.Source
		if name == "" || !strings.HasPrefix(name, w.layer.Object) {
			name = routeOf(w.layer)
		}
		wait = "the timeouts of " + name
		if waitSaid == "" {
			wait += fmt.Sprintf(" (%s, %s)", triesWord(w.layer.Tries), describeBounds(w.lt))
		}
	}
	return r.TimeLevers(path, factors, skip, wait, tj.Chain.Time)
}

// triesWord is "1 try" or "N tries".
func triesWord(n int64) string {
	if n == 1 {
		return "1 try"
	}
	return strconv.FormatInt(n, 10) + " tries"
}

// keepOn is the largest number of tries below hi of the object's layers on e that takes e's
// chains within p's cap and time (0: none), by bisection over [1, hi): fewer tries never make a
// chain longer. A chain through the edge multiplies its tries, so more than the cap does not
// fit (checked once, then the bisection starts there): attempts: 2^40 costs the steps of the
// cap, not 41 (each a build of the graph). A layer's floor (mesh.MinTries) is the fewest.
func keepOn(p judgedPolicy, obj meshObject, set *mesh.Set, raw objectJSON, r *workload.Result, e raised, hi int64) int64 {
	lo, top := int64(0), hi // lo fits (0: none known), hi does not
	if c := r.Cap + 1; r.Cap > 0 && c < hi-1 {
		if fitsWith(p, obj, set, raw, e, c) {
			lo = c
		} else {
			hi = c
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fitsWith(p, obj, set, raw, e, mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if floor := mesh.MinTries(e.layer); lo == 0 && floor < top && fitsWith(p, obj, set, raw, e, floor) {
		lo = floor
	}
	return lo
}

// objectJSON returns the object's JSON as a Set holds it.
type objectJSON func() ([]byte, error)

// constJSON is an objectJSON of data.
func constJSON(data []byte) objectJSON { return func() ([]byte, error) { return data, nil } }

// fitsWith reports whether the chains through e fit p's cap with the object's layers on e's
// edge lowered to tries (set: the cluster's Set with the object as judged).
func fitsWith(p judgedPolicy, obj meshObject, set *mesh.Set, raw objectJSON, e raised, tries int64) bool {
	_, _, r, ok := lowerOnEdge(p, obj, set, raw, e, tries)
	return ok && !judgeAt(r, e).Over && timeAt(p, r, e) == nil
}

// maxEdgeRounds bounds how many times lowerOnEdge looks at the edge again after lowering (each
// is a build of the policy's graph), and edgeJSONBytes how many bytes of object it may re-read
// from JSON for one edge (a rewrite mesh.Set.Lowered cannot judge on the decoded object: a
// Linkerd annotation, a Kuma, Dapr or Consul field; those objects are small): the request has
// timeoutSeconds (5) in all.
const (
	maxEdgeRounds = 8
	edgeJSONBytes = 1 << 20
)

// lowerOnEdge returns the rewrites that lower every layer of the object on e's edge to at most
// tries, set (the cluster's Set with the object as judged, where e was found) with them, and
// p's graph on it. The mesh counts an edge's worst route (a VirtualService with two routes to
// ratings, both retries.attempts: 3, gives the edge the first one's layer): lowering only the
// field the judgement named left the other route's tries on the edge, so a two-route object was
// judged unfixable ("even attempts: 0 does not fit") and Rewrite lowered one route and admitted
// the object still over the cap. It lowers the layer's siblings over tries at once (every route
// of a VirtualService for sidecars: mesh.Set.Siblings), judged on the Set's decoded object
// (mesh.Set.Lowered: no JSON read), builds, and goes on with the object's layer that then
// carries the edge, for at most maxEdgeRounds rounds (more: not ok, as when a field cannot be
// rewritten).
func lowerOnEdge(p judgedPolicy, obj meshObject, set *mesh.Set, raw objectJSON, e raised, tries int64) ([]*mesh.Rewrite, *mesh.Set, *workload.Result, bool) {
	var all []*mesh.Rewrite
	cur, l := set, e.layer
	entry, isEntry := entryService(p, set, e)
	jsonBytes := 0
	for range maxEdgeRounds {
		var batch []*mesh.Rewrite
		seen := map[string]bool{}
		siblings := func() []mesh.Layer {
			if isEntry {
				return cur.EntrySiblings(obj.group, l, entry)
			}
			return cur.Siblings(obj.group, l)
		}
		for _, sl := range append([]mesh.Layer{l}, siblings()...) {
			if sl.Tries <= tries || seen[sl.FieldPath] {
				continue
			}
			seen[sl.FieldPath] = true
			rw, err := mesh.PlanRewrite(sl, tries)
			if err != nil {
				return nil, nil, nil, false
			}
			batch = append(batch, rw)
		}
		next, ok := cur.Lowered(obj.group, batch)
		if !ok {
			data, err := raw()
			if err != nil {
				return nil, nil, nil, false
			}
			jsonBytes += len(data)
			if jsonBytes > edgeJSONBytes {
				return nil, nil, nil, false
			}
			doc, err := mesh.NewDoc(data)
			if err != nil {
				return nil, nil, nil, false
			}
			for _, rw := range append(slices.Clone(all), batch...) {
				if err := doc.Apply(rw); err != nil {
					return nil, nil, nil, false
				}
			}
			out, err := doc.Bytes()
			if err != nil {
				return nil, nil, nil, false
			}
			if next, err = withObject(cur, obj, out); err != nil {
				return nil, nil, nil, false
			}
			raw = constJSON(data) // the rewrites so far are applied to it again next time
		}
		all = append(all, batch...)
		r := p.build(next)
		nl, on := layerOnEdge(r, obj, e)
		if !on || nl.Tries <= tries {
			return all, next, r, true
		}
		if seen[nl.FieldPath] {
			return nil, nil, nil, false // the rewrite did not take: never loop on it
		}
		l, cur = nl, next
	}
	return nil, nil, nil, false
}

// entryService is the Service of e's entrypoint (e.from empty) in p's graph: one of p's
// entrypoints, or a north-south backend of set (Set.Backends) that is a default entrypoint.
func entryService(p judgedPolicy, set *mesh.Set, e raised) (mesh.ServiceRef, bool) {
	if e.from != "" {
		return mesh.ServiceRef{}, false
	}
	for _, ep := range p.Spec().Entrypoints {
		if node, ref := p.Entrypoint(ep.Service); node == e.to {
			return ref, true
		}
	}
	for _, ref := range set.Backends() {
		if p.Node(ref.Name, ref.Namespace) == e.to {
			return ref, true
		}
	}
	return mesh.ServiceRef{}, false
}

// layerOnEdge is the object's layer on e's edge (or entrypoint) in r, if it still has one.
func layerOnEdge(r *workload.Result, obj meshObject, e raised) (mesh.Layer, bool) {
	var m workload.MeshEdge
	var ok bool
	if e.from == "" {
		m, ok = r.MeshEntry[e.to]
	} else {
		m, ok = r.MeshEdges[[2]string{e.from, e.to}]
	}
	if !ok {
		return mesh.Layer{}, false
	}
	for _, l := range m.Layers {
		if l.Object == obj.id() {
			return l, true
		}
	}
	return mesh.Layer{}, false
}

// judgeTimeRaise reports whether the object raised a timeout (or backoff) of one of its layers
// on an edge whose tries it did not raise, and p's chains through that edge are over p's
// spec.maxTimeToAnswer with set (compared with oldSet): a longer timeout is more time as surely
// as more tries are, and the tries gate (judgeMesh) sees no raise there. A lowering (or no
// change) passes, as for tries, so a chain over its maximum can be repaired. The verdict's keep
// is 0: no count of tries is planned for it.
func judgeTimeRaise(p judgedPolicy, obj meshObject, oldSet, set *mesh.Set, ownNew bool) (meshVerdict, bool) {
	if maxT := p.Spec().MaxTimeToAnswer; maxT == nil || maxT.Duration <= 0 {
		return meshVerdict{}, false
	}
	old := p.build(oldSet)
	r := p.build(set)
	edges := layered(r, old, obj)
	if obj.kind == "BackendTrafficPolicy" {
		edges = append(edges, delayed(r, old, obj)...)
	}
	for _, e := range edges {
		if e.attempts > e.was {
			continue // a raise of tries: judgeMesh's
		}
		before := oldSet.LayerTime(mesh.Layer{Kind: e.layer.Kind}) // no object: no timeout
		if e.oldLayer != nil {
			before = oldSet.LayerTime(*e.oldLayer)
		}
		after := set.LayerTime(e.layer)
		change := timeRaises(before, after)
		if e.layer.Object != obj.id() {
			// Another object's layer: only its delay can be the incoming object's, and, for a
			// BackendTrafficPolicy, its timeout where that is the one the route takes (Source
			// names it, mesh envoyGatewayTimeout): a policy of a timeout alone has no layer of
			// its own, so its requestTimeout raised from 10s to 60s was admitted while the chain
			// went from 10s to 60s (rewrite18).
			switch {
			case obj.kind == "BackendTrafficPolicy" && (strings.Contains(after.Source, obj.id()) || strings.Contains(before.Source, obj.id())):
				change = timeRaises(before, after)
			case after.Delay > before.Delay:
				change = fmt.Sprintf("fault delay %s -> %s", graph.FormatTime(before.Delay), graph.FormatTime(after.Delay))
			default:
				change = ""
			}
		}
		if change == "" {
			// Another route of the object that takes the same calls: the time model counts
			// each (mesh.Set.Hops), so a timeout raised there lengthens the hop too.
			before, after, change = altTimeRaise(oldSet, set, e, obj)
		}
		var tj *graph.TimeJudgement
		if change == "" && obj.kind == "BackendTrafficPolicy" && e.layer.Object != obj.id() {
			// A policy's timeout new to the route, shorter than what the route waited before
			// (none): judged as a new route is, when the chain is over and waits longest on the
			// route it bounds (rewrite18).
			was := oldSet.LayerTime(mesh.Layer{Kind: e.layer.Kind})
			if e.oldLayer != nil {
				was = oldSet.LayerTime(*e.oldLayer)
			}
			now := set.LayerTime(e.layer)
			if strings.Contains(now.Source, obj.id()) && !strings.Contains(was.Source, obj.id()) {
				if tj = timeAt(p, r, e.raised); tj != nil {
					if w, waits := waitRoute(r, set, tj); waits && w.from == e.from && w.to == e.to && routeOf(w.layer) == routeOf(e.layer) {
						before, after = was, now
						change = describeBounds(now) + " (a new bound, the one the chain waits on longest)"
					}
				}
			}
		}
		if change == "" {
			// A route new to the edge: no bound of its own was raised, but the calls may
			// now take it (gate18). One with tries above its fewest is judgeAltTries', at an
			// entrypoint too (gate19): Rewrite lowers its tries.
			if nl, ok := newRouteOn(oldSet, set, e, obj); ok && (ownNew || !ownTries(nl, obj)) {
				if tj = timeAt(p, r, e.raised); tj != nil {
					// Judged when it lengthens the chain, or when the chain waits longest on
					// it (a created object shortens the mesh default's unbounded hop, yet its
					// own timeout keeps the chain over: analyze and the status name it).
					was := chainTime(p, old, e.raised)
					w, waits := waitRoute(r, set, tj)
					waits = waits && w.from == e.from && w.to == e.to && routeOf(w.layer) == routeOf(nl)
					// The route waits on a bound of its own only if it sets one: a route of no
					// timeout, per-try timeout or delay, created where the chain was over on the
					// application's per-try timeout (Istio's default route sets none either),
					// lengthens nothing, and was refused, under Rewrite too, as "the one the
					// chain waits on longest" with nothing to lower (gate19: the bookinfo sample
					// VirtualService ratings with retries.attempts 0).
					if lt := set.LayerTime(nl); lt.Timeout <= 0 && lt.PerTry <= 0 && lt.Delay <= 0 {
						waits = false
					}
					if was < tj.Chain.Time || waits {
						before, after = mesh.LayerTime{}, set.LayerTime(nl)
						change = newRouteBounds(after, was, was < tj.Chain.Time)
						if after.Source == "" {
							after.Source = routeOf(nl)
						}
					}
				}
			}
		}
		if change == "" {
			continue
		}
		if tj == nil {
			tj = timeAt(p, r, e.raised)
		}
		if tj == nil {
			continue
		}
		source := after.Source
		if source == "" {
			source = before.Source
		}
		if source == "" {
			source = e.layer.Object
		}
		return meshVerdict{policy: p, layer: e.layer, time: tj, timeRaise: source + ": " + change}, true
	}
	if obj.kind != "Service" && obj.kind != "HTTPRoute" && obj.kind != "GRPCRoute" {
		return meshVerdict{}, false // no Linkerd annotations: no Linkerd route's timeouts
	}
	// A route of the callee's Service other than the counted one, or the Service whose
	// timeouts such a route inherits (mesh_linkerd_time.go).
	return judgeLinkerdRoutes(p, r, old, oldSet, set, obj)
}

// newRouteOn is the route of obj on e's edge that is new there (no route of the object with its
// "spec.http[i]" or "spec.rules[i]" took the edge's calls before: the object or the route was
// created, or now binds the edge), the one of them whose own bound is the longest; ok false
// when none is. Its timeouts raise nothing (judgeTimeRaise compares a route with its old self),
// yet the time model times the calls over it too (mesh.Set.TimeAlternatives): a route of one
// try and a timeout of 60s beside a route of 3s lengthens the hop to 60s, and was admitted while
// the status showed the chain over maxTimeToAnswer (docs/decisions.md, gate18).
func newRouteOn(oldSet, set *mesh.Set, e layeredEdge, obj meshObject) (mesh.Layer, bool) {
	had := map[string]bool{}
	if e.oldLayer != nil {
		had[routeOf(*e.oldLayer)] = true
		for _, o := range routeAlternatives(oldSet, *e.oldLayer, e.from, e.oldAlts) {
			had[routeOf(o)] = true
		}
	}
	cands := []mesh.Layer{e.layer}
	cands = append(cands, routeAlternatives(set, e.layer, e.from, e.alts)...)
	var best mesh.Layer
	var bestT time.Duration
	found := false
	for _, l := range cands {
		if l.Object != obj.id() || had[routeOf(l)] {
			continue
		}
		if d := routeBound(l, set.LayerTime(l)); !found || d > bestT {
			best, bestT, found = l, d, true
		}
	}
	return best, found
}

// routeAlternatives are the routes a call may take in l's place: for an entrypoint (from empty)
// entry, its client attempts' (workload.MeshEdge.Alternatives: every route of every object to
// it); else set.TimeAlternatives. A route added to an HTTPRoute on a Gateway, or to a
// VirtualService bound to an ingress gateway, of a 60s timeout beside a rule of 3s was no new
// route to the gate (TimeAlternatives gives none for entry layers) and admitted while the chain
// went from 3s to 60s (rewrite18).
func routeAlternatives(set *mesh.Set, l mesh.Layer, from string, entry []mesh.Layer) []mesh.Layer {
	if from == "" {
		return entry
	}
	return set.TimeAlternatives(l)
}

// ownTries reports whether l's tries are obj's to lower (above the fewest its field gives): a
// new route with such tries is judgeAltTries' (Rewrite lowers them to the most that fit); one
// at its fewest, or whose tries another object gives, is judged by its timeouts alone.
func ownTries(l mesh.Layer, obj meshObject) bool {
	if l.Object != obj.id() || l.Tries <= mesh.MinTries(l) {
		return false
	}
	_, err := mesh.Field(l)
	return err == nil
}

// routeOf is the route a layer is read from: "VirtualService ns/n spec.http[1]", the object
// alone for a layer of the whole object.
func routeOf(l mesh.Layer) string {
	if i := strings.IndexByte(l.FieldPath, ']'); i >= 0 {
		return l.Object + " " + l.FieldPath[:i+1]
	}
	return l.Object
}

// routeBound is the longest a route's tries can take when nothing else bounds them, to choose
// which new route to name: its timeout, else its tries times the per-try timeout and backoff,
// graph.Forever when neither bounds them; its delay comes on top.
func routeBound(l mesh.Layer, lt mesh.LayerTime) time.Duration {
	d := graph.Forever
	switch {
	case lt.Timeout > 0:
		d = lt.Timeout
	case lt.PerTry > 0 && lt.LastTry == 0:
		d = graph.TimeLayer{Tries: l.Tries, BackoffBase: lt.BackoffBase, BackoffMax: lt.BackoffMax}.BackoffTotal()
		d += time.Duration(max(l.Tries, 1)) * lt.PerTry
	}
	if d < graph.Forever-lt.Delay {
		d += lt.Delay
	}
	return d
}

// newRouteBounds names a new route's bounds, as timeRaises names raised ones, and the chain's
// worst time before it when it lengthened it: "per-try timeout unset, timeout 60s (a new route;
// the chain's worst time was 3s)", else that the chain waits longest on it.
func newRouteBounds(lt mesh.LayerTime, was time.Duration, lengthened bool) string {
	if !lengthened {
		return describeBounds(lt) + " (a new route, the one the chain waits on longest)"
	}
	return describeBounds(lt) + " (a new route; the chain's worst time was " + graph.FormatTime(was) + ")"
}

// describeBounds is a route's bounds as the messages write them: "per-try timeout unset, timeout
// 1m0s", with the last try's and a fault delay where set.
func describeBounds(lt mesh.LayerTime) string {
	parts := []string{"per-try timeout " + fmtBound(lt.PerTry)}
	if lt.LastTry != 0 {
		parts = append(parts, "last-try timeout "+fmtBound(lastTry(lt)))
	}
	parts = append(parts, "timeout "+fmtBound(lt.Timeout))
	if lt.Delay > 0 {
		parts = append(parts, "fault delay "+graph.FormatTime(lt.Delay))
	}
	return strings.Join(parts, ", ")
}

// chainTime is the worst time of the chains through e in r (0 when no entrypoint reaches it).
func chainTime(p judgedPolicy, r *workload.Result, e raised) time.Duration {
	d := p.Spec().MaxTimeToAnswer.Duration
	if e.from == "" {
		return graph.EntryTime(r.Graph, r.Timing(), e.to, d).Chain.Time
	}
	return graph.JudgeTimeEdge(r.Graph, r.Timing(), e.from, e.to, d).Chain.Time
}

// altTimeRaise is the first route of obj among e's layer's alternatives (mesh.Set.TimeAlternatives)
// whose timeouts set lengthens from oldSet's same route (by its "spec.http[i]" or "spec.rules[i]";
// a route new to the object against no bound), with both times and the change; "" when none.
func altTimeRaise(oldSet, set *mesh.Set, e layeredEdge, obj meshObject) (before, after mesh.LayerTime, change string) {
	rule := func(l mesh.Layer) string {
		if i := strings.IndexByte(l.FieldPath, ']'); i >= 0 {
			return l.Object + " " + l.FieldPath[:i+1]
		}
		return l.Object + " " + l.FieldPath
	}
	old := map[string]mesh.Layer{}
	if e.oldLayer != nil {
		for _, o := range oldSet.TimeAlternatives(*e.oldLayer) {
			old[rule(o)] = o
		}
	}
	alts := set.TimeAlternatives(e.layer)
	if e.from == "" {
		// An entrypoint's routes are its Alternatives (TimeAlternatives gives none for entry
		// layers): a rule of an HTTPRoute on a Gateway other than the counted one, its per-try
		// 9s raised to a request timeout of 60s, was admitted while the chain went from 18s
		// to 60s (gate19). A rule new there is newRouteOn's.
		for _, o := range e.oldAlts {
			old[rule(o)] = o
		}
		alts = e.alts
	}
	for _, a := range alts {
		if a.Object != obj.id() {
			continue
		}
		before = oldSet.LayerTime(mesh.Layer{Kind: a.Kind}) // no route before: no timeout
		o, ok := old[rule(a)]
		if ok {
			before = oldSet.LayerTime(o)
		} else if e.from == "" {
			continue
		}
		after = set.LayerTime(a)
		if change = timeRaises(before, after); change != "" {
			return before, after, change
		}
	}
	return mesh.LayerTime{}, mesh.LayerTime{}, ""
}

// timeRaises names the bounds of a layer that after lengthens from before, "" when none does:
// "per-try timeout 1s -> 3s, timeout 4s -> unset" (an unset timeout is no bound: the longest),
// the last try's bound where either side sets one apart (LastTry), then the backoff's base and
// maximum when they grow.
func timeRaises(before, after mesh.LayerTime) string {
	var parts []string
	bound := func(name string, b, a time.Duration) {
		if b != 0 && (a == 0 || a > b) {
			parts = append(parts, fmt.Sprintf("%s %s -> %s", name, fmtBound(b), fmtBound(a)))
		}
	}
	bound("per-try timeout", before.PerTry, after.PerTry)
	if before.LastTry != 0 || after.LastTry != 0 {
		// Linkerd's last try has the response timeout alone (LastTry): raising that one where a
		// shorter retry timeout is PerTry moves only this bound.
		bound("last-try timeout", lastTry(before), lastTry(after))
	}
	bound("timeout", before.Timeout, after.Timeout)
	if after.BackoffBase > before.BackoffBase {
		parts = append(parts, fmt.Sprintf("backoff base %s -> %s", graph.FormatTime(before.BackoffBase), graph.FormatTime(after.BackoffBase)))
	}
	if after.BackoffMax > before.BackoffMax {
		parts = append(parts, fmt.Sprintf("backoff max %s -> %s", graph.FormatTime(before.BackoffMax), graph.FormatTime(after.BackoffMax)))
	}
	// Istio's fault delay holds each request before the router's timeouts start
	// (mesh.LayerTime.Delay): adding or lengthening one lengthens the hop as a timeout does.
	if after.Delay > before.Delay {
		parts = append(parts, fmt.Sprintf("fault delay %s -> %s", graph.FormatTime(before.Delay), graph.FormatTime(after.Delay)))
	}
	return strings.Join(parts, ", ")
}

// lastTry is the bound of a layer's last try: LastTry where set, else PerTry; 0 when nothing
// bounds it (graph.Forever too: unbounded, the longest, as an unset timeout).
func lastTry(l mesh.LayerTime) time.Duration {
	d := l.PerTry
	if l.LastTry != 0 {
		d = l.LastTry
	}
	if d >= graph.Forever {
		return 0
	}
	return d
}

// fmtBound is a timeout as the messages write it: "unset" for none.
func fmtBound(d time.Duration) string {
	if d == 0 {
		return "unset"
	}
	return graph.FormatTime(d)
}

// timeAt judges the chains through raised edge e of r against p's spec.maxTimeToAnswer: the
// judgement when over it, nil when within it or when p sets none.
func timeAt(p judgedPolicy, r *workload.Result, e raised) *graph.TimeJudgement {
	d := p.Spec().MaxTimeToAnswer
	if d == nil || d.Duration <= 0 {
		return nil
	}
	var tj *graph.TimeJudgement
	if e.from == "" {
		tj = graph.EntryTime(r.Graph, r.Timing(), e.to, d.Duration)
	} else {
		tj = graph.JudgeTimeEdge(r.Graph, r.Timing(), e.from, e.to, d.Duration)
	}
	if !tj.Over {
		return nil
	}
	return tj
}

// explain is v's chain: the cap's when over it, the time's when over it, or both joined by "; ".
func (v meshVerdict) explain() string {
	var parts []string
	if v.judge != nil && v.judge.Over {
		parts = append(parts, v.judge.Explain())
	}
	if v.time != nil {
		parts = append(parts, v.time.Explain())
	}
	return strings.Join(parts, "; ")
}

// field is the last part of a layer's field path, as "may keep" names it: "attempts",
// "numRetries", "retry.linkerd.io/limit".
func fieldName(path string) string {
	if i := strings.LastIndex(path, `["`); i >= 0 {
		return strings.TrimSuffix(path[i+2:], `"]`)
	}
	return path[strings.LastIndexByte(path, '.')+1:]
}

// message is the gate's format plus the object and field path (a ClusterRetryPolicy named
// "ClusterRetryPolicy chain: ..."):
// "RetryPolicy shop/checkout: VirtualService shop/ratings spec.http[0].retries.attempts: 3 makes
// productpage -x3-> reviews -x4-> ratings = 12 > cap 4; VirtualService shop/ratings may keep attempts: 1".
func (v meshVerdict) message(obj meshObject) string {
	if v.released != "" {
		return v.releasedMessage()
	}
	if v.alt != nil {
		return v.altMessage()
	}
	if v.timeRaise != "" {
		// "RetryPolicy shop/a: VirtualService shop/ratings spec.http[0]: timeout 4s -> 9s makes
		// client -x4-> ... > maxTimeToAnswer 5s".
		return v.policy.Ref().String() + ": " + v.timeRaise + " makes " + v.explain()
	}
	// The field as it is (its path with attempts: the plan of its fewest tries may remove the
	// block instead), and the fewest tries it can give (a Gateway API rule: 2, mesh.MinTries).
	floor := mesh.MinTries(v.layer)
	field, err := mesh.Field(v.layer)
	if err != nil {
		// A route new to the edge whose tries are the mesh's default and no field of the
		// object sets (a GRPCRoute's rule: noField): the error says what to do instead.
		return v.policy.Ref().String() + ": " + v.layer.Note + " makes " + v.explain() + "; " + v.withLevers(strings.TrimPrefix(err.Error(), v.layer.Note+": ")) + v.waitClause()
	}
	msg := fmt.Sprintf("%s: %s %s: %s makes %s", v.policy.Ref(), field.Object, field.FieldPath, field.From, v.explain())
	return msg + v.advice(field, floor) + v.defaultClause(field) + v.waitClause()
}

// withLevers puts v.levers (the chain's other factors and the policy's cap, by name) in place of
// the policy's cap that mesh.PlanRewrite's error ends with (mesh.CapTail), where the verdict has
// them (advice19).
func (v meshVerdict) withLevers(text string) string {
	if v.levers == "" || !strings.HasSuffix(text, mesh.CapTail) {
		return text
	}
	return strings.TrimSuffix(text, mesh.CapTail) + ", or " + v.levers
}

// defaultClause says, for a route that sets no retry and so takes Istio's default, where its
// tries come from and the two ways to lower them: "; HTTPRoute bookinfo/ratings spec.rules[1]
// sets no retry: its 3 tries are Istio's default (2 retries); set spec.rules[1].retry.attempts,
// or lower the mesh's defaultHttpRetryPolicy". "unset (2)" alone did not say whose 2 they were
// (gate18).
func (v meshVerdict) defaultClause(field *mesh.Rewrite) string {
	l := v.layer
	if !l.Default || l.Object == "" || !strings.HasPrefix(l.Note, "Istio default") {
		return ""
	}
	src := "Istio's default (" + strconv.FormatInt(l.Tries-1, 10) + " retries)"
	if head, _, ok := strings.Cut(l.Note, ", "); ok && head != "Istio default" {
		// "from ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.attempts: 3",
		// "--istio-default-retries=3": the count is in it.
		src = "Istio's default" + strings.TrimPrefix(head, "Istio default")
	}
	return fmt.Sprintf("; %s sets no retry: its %d tries are %s; set %s, or lower the mesh's defaultHttpRetryPolicy",
		routeOf(l), l.Tries, src, field.FieldPath)
}

// waitClause is "; the wait comes from <hop>: <route> (<bounds>)" when v's chain waits longest
// on a route other than v's own (waitSource), else "".
func (v meshVerdict) waitClause() string {
	if v.timeFrom == "" {
		return ""
	}
	return "; the wait over maxTimeToAnswer comes from " + v.timeFrom
}

// advice is what message says can be kept, or that nothing can: "; VirtualService
// bookinfo/ratings may keep attempts: 1".
func (v meshVerdict) advice(field *mesh.Rewrite, floor int64) string {
	msg := ""
	if v.keep == 0 {
		full, err := mesh.PlanRewrite(v.layer, floor)
		if err != nil {
			return msg
		}
		remedy := v.remedy()
		if v.ownTimeout != "" {
			remedy = "the chain waits on its own timeout of " + v.ownTimeout + ": lower that"
		}
		if full.RemovesBlock() {
			return msg + fmt.Sprintf("; even %s without %s (1 try) does not fit: %s", full.Object, full.FieldPath, remedy)
		}
		msg += fmt.Sprintf("; even %s %s: %s does not fit: %s", full.Object, fieldName(full.FieldPath), full.To, remedy)
		if floor > 1 {
			msg += fmt.Sprintf(" (the Gateway API CRD's attempts is at least 1, and without retry the rule gets %d tries)", v.layer.Unset)
		}
		return msg
	}
	if rw, err := mesh.PlanRewrite(v.layer, v.keep); err == nil {
		if rw.RemovesBlock() {
			return msg + fmt.Sprintf("; %s may keep 1 try: remove %s", rw.Object, rw.FieldPath)
		}
		return msg + fmt.Sprintf("; %s may keep %s: %s", field.Object, fieldName(rw.FieldPath), rw.To) + v.boundClause()
	}
	return msg
}

// rewriteMesh lowers the object's fields for the exceeded Rewrite policies, each to the
// largest value that fits all of them (rounds: a lowered field may leave another policy over
// through another field), and returns the object to store, the patch, the warnings and the rewrites applied, in order. set is
// oldSet with the object as sent. The object is decoded once (mesh.Doc), the rewrites applied
// to it, and the patch computed over the fields they touched.
func rewriteMesh(in MeshInput, obj meshObject, oldSet, set *mesh.Set, rewrites []meshVerdict) ([]byte, []jsonpatch.JsonPatchOperation, []string, []*mesh.Rewrite, error) {
	doc, err := mesh.NewDoc(in.Object)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("decoding %s: %w", obj.id(), err)
	}
	// The object's JSON as cur holds it, encoded only when a rewrite needs it (memoized per round).
	var curJSON []byte
	raw := func() ([]byte, error) {
		if curJSON == nil {
			data, err := doc.Bytes()
			if err != nil {
				return nil, err
			}
			curJSON = data
		}
		return curJSON, nil
	}
	cur := set
	var warnings, explains []string
	var applied []*mesh.Rewrite
	var refs []workload.PolicyRef
	pending := rewrites
	for round := 0; len(pending) > 0 && round < 16; round++ {
		v := pending[0]
		keep := max(v.keep, mesh.MinTries(v.layer))
		var rws []*mesh.Rewrite
		var next *mesh.Set
		ok := false
		if v.alt != nil {
			// Routes other than the counted one: they alone, together, to the most tries that
			// fit, else back to their old tries (a new route: its fewest).
			if rws, ok = v.alt.rewrites(v.alt.keep); !ok {
				return nil, nil, nil, nil, fmt.Errorf("%s: %s cannot be lowered", obj.id(), v.layer.FieldPath)
			}
		} else {
			rws, next, _, ok = lowerOnEdge(v.policy, obj, cur, raw, v.edge, keep)
		}
		if !ok {
			// Each field on its own: the first one's error says why.
			rw, err := mesh.PlanRewrite(v.layer, keep)
			if err != nil {
				return nil, nil, nil, nil, err
			}
			rws, next = []*mesh.Rewrite{rw}, nil
		}
		applied = append(applied, rws...)
		for _, rw := range rws {
			if err := doc.Apply(rw); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		curJSON = nil
		if next == nil {
			data, err := raw()
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("encoding %s: %w", obj.id(), err)
			}
			if next, err = withObject(oldSet, obj, data); err != nil {
				return nil, nil, nil, nil, err
			}
		}
		cur = next
		if !slices.Contains(refs, v.policy.Ref()) {
			// The chain each policy's first lowering was for, as judged then.
			refs = append(refs, v.policy.Ref())
			explains = append(explains, v.explain())
		}
		if v.alt != nil && !v.alt.fits {
			warnings = append(warnings, v.message(obj)+" (admitted: enforcement is Rewrite; lowered back to "+v.altFloor()+", its value before the raise or, new, its fewest tries)")
		} else if v.alt == nil && v.keep == 0 {
			wv := v
			if round > 0 {
				wv = asSent(v, obj, set) // its field and chain as sent, not as lowered so far
			}
			warnings = append(warnings, wv.message(obj)+" (admitted: enforcement is Rewrite; "+obj.id()+" is rewritten as far as it goes)")
		}
		pending = pending[:0:0]
		for _, w := range rewrites {
			// A verdict no count fits goes on too, to the layer's floor (with its warning):
			// dropped, the object was admitted lowered for another chain only, and the one
			// still over was named nowhere. A timeout's verdict does not: no count is its fix,
			// and lowering the edge's counted route for it would cut a route the user did not
			// change, 16 times over with its warning (a new route lowered to its fewest tries
			// whose own timeouts keep the chain over, gate18).
			if nv, over := judgeMesh(w.policy, obj, oldSet, cur, raw); over && nv.timeRaise == "" && nv.layer.Tries > 1 && (nv.keep > 0 || nv.layer.Tries > mesh.MinTries(nv.layer)) {
				pending = append(pending, nv)
			}
		}
	}
	changed, err := doc.Patch()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("diffing %s: %w", obj.id(), err)
	}
	changes, from := describeChanges(doc, changed)
	if err := doc.SetAnnotation(annotations.RewrittenFrom, clipRewrittenFrom(strings.Join(from, "; "), doc.AnnotationBytes(annotations.RewrittenFrom))); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("annotating %s: %w", obj.id(), err)
	}
	final, err := doc.Bytes()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("encoding %s: %w", obj.id(), err)
	}
	ops, err := doc.Patch()
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("diffing %s: %w", obj.id(), err)
	}
	// In path order, for a stable response: the operations replace or add distinct members (no
	// list insertions), so their order does not matter to the result.
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	w := fmt.Sprintf("%s rewrote %s: %s (%s)", gate.Rewriters(refs), obj.id(), strings.Join(changes, ", "), strings.Join(explains, "; "))
	return final, ops, append([]string{w}, warnings...), applied, nil
}

// asSent is v judged on set (the cluster with the object as sent) at v's edge, as the warning of
// a rewrite that goes as far as it can names it: a verdict of a later round is judged on the
// object as lowered so far, whose values the client never sent.
func asSent(v meshVerdict, obj meshObject, set *mesh.Set) meshVerdict {
	r := v.policy.build(set)
	l, ok := layerOnEdge(r, obj, v.edge)
	if !ok {
		return v
	}
	e := raised{from: v.edge.from, to: v.edge.to, layer: l}
	v.layer, v.edge, v.judge, v.time = l, e, judgeAt(r, e), timeAt(v.policy, r, e)
	v.timeFrom = waitSource(r, set, v)
	return v
}

// waitSource names where v's chain over maxTimeToAnswer waits longest, when that is not v's
// own route: the hop of the chain that adds the most to its time (a service's worst time less
// its callee's on the chain; a leaf's unknown time adds nothing), and on it the route of the
// longest bound (mesh.Set.TimeAlternatives: every route the calls may take), with its bounds.
// The gate named the route whose tries rose, and, no count of them fitting, told to lower the
// callers' attempts, while the time was another route's timeout (gate18). "" when v is not over
// the time, or the wait is in v's own route, or no mesh route bounds the hop (the application's
// own timeouts, which the chain's times already show).
func waitSource(r *workload.Result, set *mesh.Set, v meshVerdict) string {
	if v.time == nil || !v.time.Over {
		return ""
	}
	w, ok := waitRoute(r, set, v.time)
	if !ok || routeOf(w.layer) == routeOf(v.layer) {
		return ""
	}
	name := w.lt.Source
	if name == "" || !strings.HasPrefix(name, w.layer.Object) {
		name = routeOf(w.layer)
	}
	tries := fmt.Sprintf("%d tries", w.layer.Tries)
	if w.layer.Tries == 1 {
		tries = "1 try"
	}
	from := w.from
	if from == "" {
		from = "client"
	}
	return fmt.Sprintf("%s -> %s: %s (%s, %s)", from, w.to, name, tries, describeBounds(w.lt))
}

// wait is where a chain waits longest: the hop from -> to, and on it the route of layer (with
// its times lt).
type wait struct {
	from, to string
	layer    mesh.Layer
	lt       mesh.LayerTime
}

// waitRoute is where tj's chain waits longest (waitSource): the hop that adds the most to its
// time, and on it the route of the longest bound, then of the most tries; ok false when no
// route an object declares is on that hop.
func waitRoute(r *workload.Result, set *mesh.Set, tj *graph.TimeJudgement) (wait, bool) {
	from, to, ok := longestHop(tj)
	if !ok {
		return wait{}, false
	}
	var m workload.MeshEdge
	if from == "" {
		m, ok = r.MeshEntry[to]
	} else {
		m, ok = r.MeshEdges[[2]string{from, to}]
	}
	if !ok {
		return wait{}, false
	}
	w := wait{from: from, to: to}
	srcB := time.Duration(-1)
	for _, l := range m.Layers {
		alts := routeAlternatives(set, l, from, m.Alternatives)
		if len(alts) == 0 {
			alts = []mesh.Layer{l}
		}
		for _, a := range alts {
			if a.Object == "" {
				continue // a default no object declares: the chain's layers name it
			}
			// The longest bound, then the most tries: a route of no bound multiplies what
			// its callee takes by its tries.
			lt := set.LayerTime(a)
			if b := routeBound(a, lt); b > srcB || b == srcB && a.Tries > w.layer.Tries {
				w.layer, w.lt, srcB = a, lt, b
			}
		}
	}
	return w, srcB >= 0
}

// longestHop is the hop of tj's chain that adds the most to its time: a service's worst time
// less its callee's on the chain (a leaf's unknown time adds nothing). The client's hop to the
// entrypoint (from empty) adds the chain's time less the entrypoint's; when its route's bound
// cuts the entrypoint's time (the chain shorter than it), the chain waits on that hop alone:
// nothing below it is waited for longer. It was never named, so a route created at an entrypoint
// whose own timeout kept the chain over was not "the one the chain waits on" (rewrite18). A hop
// between services whose route cuts its callee's time (the caller's worst shorter than the
// callee's) is read the same way: it adds the caller's time, and the hops below it nothing.
func longestHop(tj *graph.TimeJudgement) (from, to string, ok bool) {
	ch := tj.Chain
	if len(ch.Path) > 0 && len(ch.Times) > 0 && ch.Times[0] > ch.Time {
		return "", ch.Path[0], true
	}
	best, bestD := -1, time.Duration(-1)
	entryD := time.Duration(-1)
	if len(ch.Path) > 0 && len(ch.Times) > 0 && ch.Times[0] != graph.Forever {
		entryD = ch.Time - ch.Times[0]
	}
	for i := 0; i+1 < len(ch.Path) && i+1 < len(ch.Times); i++ {
		next := ch.Times[i+1]
		if next == graph.Forever && i+2 == len(ch.Path) {
			next = 0 // a leaf's unknown time
		}
		d := ch.Times[i] - next
		if ch.Times[i] == graph.Forever {
			d = graph.Forever
		}
		if next > ch.Times[i] {
			// The hop's route cuts the callee's time: the caller waits its bound, and nothing
			// below it longer (a VirtualService created with a route of 60s over a callee of
			// 2m was never the hop named, rewrite18).
			if ch.Times[i] > bestD {
				best, bestD = i, ch.Times[i]
			}
			break
		}
		if d > bestD {
			best, bestD = i, d
		}
	}
	if entryD > bestD {
		return "", ch.Path[0], true
	}
	if best < 0 {
		return "", "", false
	}
	return ch.Path[best], ch.Path[best+1], true
}

// maxAnnotationBytes is the API's limit on an object's annotations, keys and values together
// (apimachinery's TotalAnnotationSizeLimitB).
const maxAnnotationBytes = 256 << 10

// clipRewrittenFrom is from as stored in retrycap.dev/rewritten-from beside annotations of used
// bytes: whole when it fits in the API's 256 KiB, else cut after its last whole field that fits,
// ending "... (truncated from N bytes)" (the workload gate cuts its copy the same way). 10,000
// lowered routes are 370 KB of old values: the rewritten object was refused ("Too long").
func clipRewrittenFrom(from string, used int) string {
	room := maxAnnotationBytes - used - len(annotations.RewrittenFrom)
	if len(from) <= room {
		return from
	}
	tail := "... (truncated from " + strconv.Itoa(len(from)) + " bytes)"
	n := max(room-len(tail), 0)
	cut := strings.LastIndex(from[:n], "; ")
	if cut <= 0 {
		return "" // no room even for one field: the warning names them
	}
	return from[:cut] + tail
}

// describeChanges renders the patch ops of a rewrite, "spec.http[0].retries.attempts: 3 -> 1"
// each, and the old values, "spec.http[0].retries.attempts: 3" each (unset fields: "unset"), in
// path order.
func describeChanges(doc *mesh.Doc, ops []jsonpatch.JsonPatchOperation) (changes, from []string) {
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	for _, op := range ops {
		old, ok := doc.Original(op.Path)
		oldS := "unset"
		if ok {
			oldS = render(old)
		}
		newS := "removed"
		if op.Operation != "remove" {
			newS = render(op.Value)
		}
		path := pointerToPath(op.Path)
		changes = append(changes, fmt.Sprintf("%s: %s -> %s", path, oldS, newS))
		from = append(from, path+": "+oldS)
	}
	return changes, from
}

func render(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case map[string]any, []any:
		data, _ := json.Marshal(x)
		return string(data)
	case float64:
		// As written: fmt's %v wrote attempts 2147483647 as "2.147483647e+09" in the warning
		// and in retrycap.dev/rewritten-from (gate19).
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// pointerToPath renders "/spec/http/0/retries/attempts" as "spec.http[0].retries.attempts" and
// "/metadata/annotations/retry.linkerd.io~1limit" as `metadata.annotations["retry.linkerd.io/limit"]`.
func pointerToPath(ptr string) string {
	var b strings.Builder
	toks := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, tok := range toks {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		isIndex := tok != "" && strings.Trim(tok, "0123456789") == ""
		switch {
		case isIndex:
			b.WriteString("[" + tok + "]")
		case i > 0 && toks[0] == "metadata" && i == 2 && toks[1] == "annotations":
			b.WriteString(`["` + tok + `"]`)
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(tok)
		}
	}
	return b.String()
}
