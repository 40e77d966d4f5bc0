package status

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

// timeOf is the time analysis the setters write: in.Time, else computed from in.Result (the
// reconciler need not compute it itself); nil without a graph.
func (in Input) timeOf() *graph.TimeAnalysis {
	if in.Time != nil || in.Result == nil {
		return in.Time
	}
	return in.Result.AnalyzeTime()
}

// SetTime writes the time along the chains (DESIGN.md, "Time along the chain"):
// worstTimeToAnswer ("unbounded" when no timeout bounds some chain) with its path and why,
// the chains over spec.maxTimeToAnswer, the timeout inversions (at most graph.MaxInversions, the
// CRD's MaxItems, with their total), and the WithinMaxTime condition when the spec sets
// maxTimeToAnswer (removed when it does not). Without a graph (an invalid selector) it clears
// them, as SetGraphSummary does.
func SetTime(st *v1alpha1.RetryPolicyStatus, in Input, ta *graph.TimeAnalysis) {
	st.WorstTimeToAnswer, st.WorstTimePath, st.WorstTimeUnbounded = "", "", ""
	st.TimeViolations, st.TimeoutInversions, st.TimeoutInversionsTotal = nil, nil, 0
	if ta != nil && len(ta.Chains) > 0 {
		st.WorstTimeToAnswer = graph.FormatTime(ta.Worst)
		st.WorstTimePath = joinPath(ta.WorstPath)
		st.WorstTimeUnbounded = ta.WorstUnbounded
		for i, v := range ta.Violations {
			if i == graph.MaxViolations {
				break
			}
			st.TimeViolations = append(st.TimeViolations, v1alpha1.TimeViolation{
				Path: elidePath(v.Path), WorstTimeToAnswer: graph.FormatTime(v.Time), Message: Clip(v.Message, MaxListedMessage)})
		}
		for _, inv := range ta.Inversions {
			st.TimeoutInversions = append(st.TimeoutInversions, v1alpha1.TimeoutInversion{
				Caller: inv.Caller, Callee: inv.Callee, Layer: inv.Layer,
				PerTryTimeout: graph.FormatTime(inv.PerTry), InnerTime: graph.FormatTime(inv.InnerTime),
				Message: Clip(inv.Message, MaxListedMessage), Fix: Clip(inv.Fix, MaxListedMessage)})
		}
		st.TimeoutInversionsTotal = int32(min(ta.InversionsTotal, 1<<31-1))
	}
	setWithinMaxTime(st, in, ta)
}

// setWithinMaxTime writes WithinMaxTime when spec.maxTimeToAnswer is set: Unknown without a
// graph or without anything to time (as WithinCap says), False (MaxTimeExceeded) with the worst
// chain's message, else True.
func setWithinMaxTime(st *v1alpha1.RetryPolicyStatus, in Input, ta *graph.TimeAnalysis) {
	var maxT *metav1.Duration
	if in.Result != nil {
		maxT = in.Result.Spec().MaxTimeToAnswer
	} else {
		maxT = in.MaxTimeToAnswer
	}
	if maxT == nil {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionWithinMaxTime)
		return
	}
	c := metav1.Condition{Type: v1alpha1.ConditionWithinMaxTime, ObservedGeneration: in.Generation, LastTransitionTime: in.Now}
	switch {
	case in.SelectorError != nil || ta == nil:
		c.Status, c.Reason = metav1.ConditionUnknown, ReasonInvalidSelector
		c.Message = "no graph: " + in.selectorField() + " is invalid (see condition Ready)"
	case len(in.Result.Selected) == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNothingSelected
		c.Message = NothingSelected(in.Result)
	case in.Result.Declaring == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoUpstreamsDeclared
		c.Message = NoUpstreamsMessage(len(in.Result.Selected))
	case len(ta.Violations) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonMaxTimeExceeded
		c.Message = ta.Violations[0].Message + moreListed(max(ta.ViolationsTotal, len(ta.Violations)), min(len(ta.Violations), graph.MaxViolations), "status.timeViolations")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonWithinMaxTime
		c.Message = "worst time to answer " + graph.FormatTime(ta.Worst) + " <= maxTimeToAnswer " + graph.FormatTime(maxT.Duration) +
			" (chain " + joinPath(ta.WorstPath) + ")"
	}
	SetCondition(&st.Conditions, c)
}
