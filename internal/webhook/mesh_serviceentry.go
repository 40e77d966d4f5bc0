package webhook

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// An Istio ServiceEntry registers an external host; a sidecar's call to it that no
// VirtualService binds then takes Istio's default route, with the default retries
// (mesh/serviceentry.go), and an HTTPRoute may name the entry as its parent (mesh/egress.go).
// Creating one can thus raise a chain over its cap with no retry field of its own: the layer's
// tries are Istio's default, lowered by a VirtualService for the host. So a ServiceEntry is
// judged as a Namespace's labels are (any edge whose tries it raises), and never rewritten: a
// Rewrite policy refuses it, saying so; Audit warns.

// serviceEntrySpec is what the message names of a ServiceEntry: its hosts.
type serviceEntrySpec struct {
	Spec struct {
		Hosts []string `json:"hosts"`
	} `json:"spec"`
}

// isServiceEntry: obj is an Istio ServiceEntry.
func isServiceEntry(obj meshObject) bool {
	return obj.group == mesh.GroupIstio && obj.kind == "ServiceEntry"
}

// DecideMeshServiceEntry judges a create or update of an Istio ServiceEntry: the Set with the
// entry as sent in place of the stored one, and every edge (or entrypoint) of each policy's graph
// whose tries it raises, or whose layers' timeouts it lengthens, judged against the policy's cap
// and maxTimeToAnswer; a lowering (an entry deleted, a port made TCP) passes. Reject and Rewrite
// refuse (a ServiceEntry has no retry field to lower), Audit warns; the message names the entry,
// its host (spec.hosts[i]) and port the raised call takes, the chain, and the VirtualService
// field that would lower the layer, with the largest value that fits:
// "RetryPolicy shop/a: ServiceEntry shop/googleapis spec.hosts[0]: www.googleapis.com (port 80
// HTTP) makes details-v2 -x3-> www.googleapis.com = 3 > cap 2; Istio's default route retries
// it: a VirtualService for host www.googleapis.com may keep spec.http[].retries.attempts: 1".
func DecideMeshServiceEntry(in MeshInput) MeshDecision {
	obj, oldSet, newSet, err := meshSets(in.Set, in.Object, in.Old)
	if err != nil {
		return MeshDecision{Message: err.Error()}
	}
	return decideServiceEntry(in, obj, oldSet, newSet)
}

// decideServiceEntry is DecideMeshServiceEntry on the Sets meshSets made.
func decideServiceEntry(in MeshInput, obj meshObject, oldSet, newSet *mesh.Set) MeshDecision {
	var se serviceEntrySpec
	if err := json.Unmarshal(in.Object, &se); err != nil {
		return MeshDecision{Message: fmt.Sprintf("decoding %s: %v", obj.id(), err)}
	}
	policies := in.judged(MeshBearsOn(obj.namespace, in.Object, in.Old))
	judge := func(p judgedPolicy) (configMapVerdict, bool) {
		return firstRaisedOver(p, oldSet, newSet, func(r *workload.Result, e raised, _ configMapVerdict) string {
			return serviceEntryLever(p, obj, se, newSet, r, e)
		})
	}
	message := func(v configMapVerdict) string {
		msg := v.policy.Ref().String() + ": " + v.extra
		if v.policy.Spec().Enforcement == v1alpha1.EnforcementRewrite {
			msg += " (refused although enforcement is Rewrite: a ServiceEntry has no retry field to lower; declare the retries in a VirtualService for the host)"
		}
		return msg
	}
	return enforceUnrewritable(policies, judge, message) // mesh_configmap.go
}

// serviceEntryLever is the verdict's message after the policy: the entry's host and port the
// raised call e takes, the chain, and what would lower the layer.
func serviceEntryLever(p judgedPolicy, obj meshObject, se serviceEntrySpec, set *mesh.Set, r *workload.Result, e raised) string {
	var m workload.MeshEdge
	if e.from == "" {
		m = r.MeshEntry[e.to]
	} else {
		m = r.MeshEdges[[2]string{e.from, e.to}]
	}
	// The layer the entry gives the call: Istio's default route names the entry that
	// registers the host (Layer.Registers); a route parented to the entry (mesh/egress.go) is
	// a layer of that route.
	var layer mesh.Layer
	for _, l := range m.Layers {
		if l.Registers == obj.id() {
			layer = l
			break
		}
	}
	if layer.Kind == "" && len(m.Layers) > 0 {
		layer = m.Layers[0]
		for _, l := range m.Layers {
			if l.Kind == mesh.Istio || l.Kind == mesh.GAMMA {
				layer = l
				break
			}
		}
	}
	host, hostField := e.to, "spec.hosts"
	for i, h := range se.Spec.Hosts {
		if seHostMatches(h, e.to) {
			host, hostField = h, fmt.Sprintf("spec.hosts[%d]", i)
			break
		}
	}
	what := fmt.Sprintf("%s %s: %s", obj.id(), hostField, host)
	if layer.Registers == obj.id() && layer.RegisteredPorts != "" {
		what += " (port " + layer.RegisteredPorts + ")"
	}
	v := meshVerdict{judge: judgeAt(r, e), time: timeAt(p, r, e)}
	msg := what + " makes " + v.explain()
	if layer.Object != "" && layer.Object != obj.id() && layer.FieldPath != "" && !strings.HasPrefix(layer.Object, "ConfigMap ") {
		// A route parented to the entry: its own retry field is the lever (the mesh gate judges
		// a change of it).
		return msg + fmt.Sprintf("; %s %s gives %d tries: lower it there", layer.Object, layer.FieldPath, layer.Tries)
	}
	if !v.judge.Over {
		return msg
	}
	keep := serviceEntryKeep(p, obj, set, e, layer.Tries)
	if keep == 0 {
		// What else on the chain can change (wgate19): the callers' attempts only where above 1.
		levers := r.Levers(v.judge.Path, v.judge.Factors, workload.LeverSkip{Layers: [2]string{e.from, e.to}})
		return msg + fmt.Sprintf("; Istio's default route retries it: even a VirtualService for host %s with spec.http[].retries.attempts: 0 does not fit: %s", e.to, levers)
	}
	return msg + fmt.Sprintf("; Istio's default route retries it: a VirtualService for host %s may keep spec.http[].retries.attempts: %d", e.to, keep-1)
}

// serviceEntryKeep is the largest tries (at most tries-1) a VirtualService for e's host, declared
// beside the entry, may give the call with p's chains through e within the cap; 0 when none
// does. Judged by adding that VirtualService to set, as analyze would read it.
func serviceEntryKeep(p judgedPolicy, obj meshObject, set *mesh.Set, e raised, tries int64) int64 {
	fits := func(t int64) bool {
		vs := map[string]any{
			"apiVersion": mesh.GroupIstio + "/v1", "kind": "VirtualService",
			"metadata": map[string]any{"name": "retrycap-probe-" + obj.name, "namespace": obj.namespace},
			"spec": map[string]any{"hosts": []any{e.to}, "http": []any{map[string]any{
				"route":   []any{map[string]any{"destination": map[string]any{"host": e.to}}},
				"retries": map[string]any{"attempts": t - 1},
			}}},
		}
		data, err := json.Marshal(vs)
		if err != nil {
			return false
		}
		s := set.Clone()
		if _, err := s.AddJSON(data); err != nil {
			return false
		}
		r := p.build(s)
		return !judgeAt(r, e).Over && timeAt(p, r, e) == nil
	}
	lo, hi := int64(0), tries // lo fits (0: none known), hi does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// seHostMatches: entry host h (maybe "*.example.com") names host, as Istio's host.Name.Matches
// (and mesh/serviceentry.go) read it.
func seHostMatches(h, host string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	host = strings.ToLower(host)
	switch {
	case h == "*":
		return false
	case strings.HasPrefix(h, "*."):
		return strings.HasSuffix(host, h[1:])
	}
	return h == host
}
