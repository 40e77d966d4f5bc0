package webhook

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Kuma's MeshExternalService and MeshHTTPRoute set no retry of their own, yet each decides which
// calls a MeshRetry's conf reaches (mesh/kuma.go): a MeshExternalService's spec.match.protocol
// turned from tcp to http or grpc gives its host's callers the mesh's retries (Kuma's default
// 5 retries, 6 tries), and a MeshHTTPRoute whose to[] names a callee brings that callee's calls
// under a MeshRetry item naming the route. The gate's DecideMesh judges the layers an object's
// own fields set, and so admitted both (mesx20's envtest: 6 -> 36 over cap 10). Like an Istio
// ServiceEntry (mesh_serviceentry.go) they are judged by every chain they change, the graph
// built with and without the object, and never rewritten: Rewrite refuses, naming the object and
// the field; Audit warns.

// kumaExternalSpec is what the message names of a MeshExternalService (its protocol and port)
// and of a MeshHTTPRoute (its to[] callees).
type kumaExternalSpec struct {
	Spec struct {
		Match struct {
			Port     int32  `json:"port"`
			Protocol string `json:"protocol"`
		} `json:"match"`
		To []struct {
			TargetRef struct {
				Kind   string            `json:"kind"`
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"targetRef"`
		} `json:"to"`
	} `json:"spec"`
}

// isKumaNoField: obj is a Kuma MeshExternalService or MeshHTTPRoute, which carry no retry
// field and are judged by decideKumaNoField.
func isKumaNoField(obj meshObject) bool {
	return obj.group == mesh.GroupKuma && (obj.kind == "MeshExternalService" || obj.kind == "MeshHTTPRoute")
}

// decideKumaNoField judges a create or update of a MeshExternalService or MeshHTTPRoute: every
// edge (or entrypoint) of each policy's graph whose tries it raises, or whose layers' timeouts
// it lengthens, against the policy's cap and maxTimeToAnswer; a lowering passes. Reject and
// Rewrite refuse, Audit warns; the message names the object, the field that changed (a
// MeshExternalService's "spec.match.protocol: tcp -> http", a MeshHTTPRoute's "spec.to[0]:
// MeshService api"), the chain and the MeshRetry layer the change brings to the call.
func decideKumaNoField(in MeshInput, obj meshObject, oldSet, newSet *mesh.Set) MeshDecision {
	var spec, was kumaExternalSpec
	if err := json.Unmarshal(in.Object, &spec); err != nil {
		return MeshDecision{Message: fmt.Sprintf("decoding %s: %v", obj.id(), err)}
	}
	if in.Old != nil {
		// A stored version that does not decode is judged as none (meshSets does the same).
		if err := json.Unmarshal(in.Old, &was); err != nil {
			in.Old = nil
		}
	}
	policies := in.judged(MeshBearsOn(obj.namespace, in.Object, in.Old))
	judge := func(p judgedPolicy) (configMapVerdict, bool) {
		return firstRaisedOver(p, oldSet, newSet, func(r *workload.Result, e raised, v configMapVerdict) string {
			return kumaNoFieldMessage(obj, spec, was, in.Old != nil, r, e, v)
		})
	}
	message := func(v configMapVerdict) string {
		msg := v.policy.Ref().String() + ": " + v.extra
		if v.policy.Spec().Enforcement == v1alpha1.EnforcementRewrite {
			msg += fmt.Sprintf(" (refused although enforcement is Rewrite: a %s has no retry field to lower; lower the MeshRetry's numRetries for the call)", obj.kind)
		}
		return msg
	}
	return enforceUnrewritable(policies, judge, message) // mesh_configmap.go
}

// kumaNoFieldMessage is the verdict's message after the policy: the object and its changed
// field, the chain, the Kuma layer on the raised call and what else on the chain can change.
func kumaNoFieldMessage(obj meshObject, spec, was kumaExternalSpec, update bool, r *workload.Result, e raised, cv configMapVerdict) string {
	what := obj.id() + " " + kumaChangedField(obj, spec, was, update, e.to)
	v := meshVerdict{judge: cv.judge, time: cv.time}
	if v.judge == nil {
		v.judge = judgeAt(r, e)
	}
	msg := what + " makes " + v.explain()
	if v.judge != nil && v.judge.Over {
		// The MeshRetry (or Kuma's default) whose conf the change brings to the call is named
		// there with its field: the lever, with the callers' attempts and the cap.
		msg += "; " + r.Levers(v.judge.Path, v.judge.Factors, workload.LeverSkip{})
	}
	return msg
}

// kumaChangedField names what of obj makes the raise on a call to host: a MeshExternalService's
// protocol ("spec.match.protocol: tcp -> http"; "spec.match.protocol: http" on a create), a
// MeshHTTPRoute's to[] item naming the callee ("spec.to[0].targetRef: MeshService api").
func kumaChangedField(obj meshObject, spec, was kumaExternalSpec, update bool, host string) string {
	if obj.kind == "MeshExternalService" {
		proto := func(s kumaExternalSpec) string {
			if s.Spec.Match.Protocol == "" {
				return "tcp" // the CRD's default, as Kuma reads it unset
			}
			return s.Spec.Match.Protocol
		}
		if update && proto(was) != proto(spec) {
			return fmt.Sprintf("spec.match.protocol: %s -> %s", proto(was), proto(spec))
		}
		if update && was.Spec.Match.Port != spec.Spec.Match.Port {
			return fmt.Sprintf("spec.match.port: %d -> %d (protocol %s)", was.Spec.Match.Port, spec.Spec.Match.Port, proto(spec))
		}
		return "spec.match.protocol: " + proto(spec)
	}
	// The callee's display name: a MeshService's is the node's name, a MeshExternalService's
	// the host's first label.
	callee, _, _ := strings.Cut(strings.TrimSuffix(host, mesh.KumaExtSvcSuffix), ".")
	for i, t := range spec.Spec.To {
		name := t.TargetRef.Name
		if name == "" {
			name = t.TargetRef.Labels[mesh.KumaDisplayName]
		}
		if name == callee {
			return fmt.Sprintf("spec.to[%d].targetRef: %s %s", i, t.TargetRef.Kind, name)
		}
	}
	return "spec.to"
}
