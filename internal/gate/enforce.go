package gate

import (
	"slices"
	"sort"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// Steps are what one admission gate supplies to Enforce, the skeleton the workload gate (Decide)
// and the mesh gate (internal/webhook's DecideMesh) share: P is a selecting policy of either
// kind, V one policy's verdict on the object.
type Steps[P, V any] struct {
	// Policy is p's name, cap and enforcement.
	Policy func(p P) (workload.PolicyRef, v1alpha1.Enforcement)
	// Check, when not nil, checks the incoming object under p before any judgement (an error
	// denies with its message), for every policy, Audit ones included.
	Check func(p P) error
	// Judge judges the incoming object as sent under a Reject or Rewrite policy: over is
	// whether a chain exceeds p's cap; an error denies with its message.
	Judge func(p P) (v V, over bool, err error)
	// Ref is the policy of verdict v; Message is v as the client reads it.
	Ref     func(v V) workload.PolicyRef
	Message func(v V) string
	// Also, when not nil, names the other exceeded Reject policies after the strictest's
	// message (vs: strictest first), e.g. "; also over the cap of ..."; nil: "; also over the
	// cap of" and CapList.
	Also func(vs []V) string
	// Rewrite applies the exceeded Rewrite policies' verdicts (in name order) to what will be
	// stored, and returns the warnings saying what changed.
	Rewrite func(vs []V) []string
	// Audit judges what will be stored (after Rewrite) under an Audit policy.
	Audit func(p P) (v V, over bool)
}

// Enforced is Enforce's outcome: denied with Message, or admitted with Warnings (the rewrite's,
// then the Audit policies').
type Enforced struct {
	Denied   bool
	Message  string
	Warnings []string
}

// Enforce is the one Reject/Rewrite/Audit skeleton of retrycap's admission gates:
//   - the policies in name order, RetryPolicies before ClusterRetryPolicies (Rewrite and Audit
//     warnings list them so); each checked (Check), then Reject and Rewrite ones judged on the
//     object as sent;
//   - any Reject policy exceeded denies, with the strictest's message (workload.CompareRefs:
//     the injector's ordering) and "; also over the cap of" the others, strictest first (CapList);
//   - else the exceeded Rewrite policies rewrite the object together (Rewrite);
//   - then the Audit policies judge what will be stored, each exceeded one a warning "...
//     (admitted: enforcement is Audit)".
//
// An empty Enforcement (a policy stored without defaulting) is Reject. policies is sorted in
// place.
func Enforce[P, V any](policies []P, s Steps[P, V]) Enforced {
	sort.SliceStable(policies, func(i, j int) bool {
		a, _ := s.Policy(policies[i])
		b, _ := s.Policy(policies[j])
		return workload.CompareNames(a, b) < 0
	})
	var rejects, rewrites []V
	var audits []P
	for _, p := range policies {
		if s.Check != nil {
			if err := s.Check(p); err != nil {
				return Enforced{Denied: true, Message: err.Error()}
			}
		}
		_, enforcement := s.Policy(p)
		if enforcement == v1alpha1.EnforcementAudit {
			audits = append(audits, p) // judged below, on what will be stored
			continue
		}
		v, over, err := s.Judge(p)
		if err != nil {
			return Enforced{Denied: true, Message: err.Error()}
		}
		if !over {
			continue
		}
		if enforcement == v1alpha1.EnforcementRewrite {
			rewrites = append(rewrites, v)
		} else {
			rejects = append(rejects, v)
		}
	}
	if len(rejects) > 0 {
		slices.SortStableFunc(rejects, func(a, b V) int { return workload.CompareRefs(s.Ref(a), s.Ref(b)) })
		msg := s.Message(rejects[0])
		if len(rejects) > 1 && s.Also != nil {
			msg += s.Also(rejects[1:])
		} else if len(rejects) > 1 {
			refs := make([]workload.PolicyRef, 0, len(rejects)-1)
			for _, v := range rejects[1:] {
				refs = append(refs, s.Ref(v))
			}
			msg += "; also over the cap of " + CapList(refs)
		}
		return Enforced{Denied: true, Message: msg}
	}
	var e Enforced
	if len(rewrites) > 0 {
		e.Warnings = append(e.Warnings, s.Rewrite(rewrites)...)
	}
	for _, p := range audits {
		if v, over := s.Audit(p); over {
			e.Warnings = append(e.Warnings, s.Message(v)+" (admitted: enforcement is Audit)")
		}
	}
	return e
}
