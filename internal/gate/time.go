package gate

import (
	"slices"
	"strings"
	"time"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/workload"
)

// The gate for spec.maxTimeToAnswer (DESIGN.md, "Time along the chain"): a workload that pushes
// a chain it takes part in over the selecting policy's maximum is judged as one over the cap is
// (Reject refuses, Rewrite lowers its attempts, Audit warns), on the chains through its own
// edges only (graph.JudgeTime). A chain over both reads as one message naming both. Where no
// count of attempts brings the chain within the maximum, Rewrite refuses what Reject would
// refuse (stillOver), for the time as for the cap.

// timeVerdict is one policy's judgement of the incoming workload against its maxTimeToAnswer.
type timeVerdict struct {
	judge *graph.TimeJudgement
	// node is the node judged (the incoming workload's service name, or a Service it is reached
	// under whose chains are the slowest).
	node string
	// plan lowers the workload's own attempts (its annotation's counts) so that its chains fit.
	plan *graph.Plan
}

// maxTime is p's spec.maxTimeToAnswer, 0 when unset.
func maxTime(p *workload.Policy) time.Duration {
	if d := p.Spec().MaxTimeToAnswer; d != nil && d.Duration > 0 {
		return d.Duration
	}
	return 0
}

// judgeTime judges the incoming workload's nodes in r against p's maxTimeToAnswer: the slowest
// chain over them (the first node on a tie: its own name before Services'), and the plan that
// keeps the chains through every node within it (the lower count of each upstream), named by
// the node judged. nil when p sets no maximum or no chain through the workload is over it.
func judgeTime(p *workload.Policy, r *workload.Result, incoming *workload.Parsed) *timeVerdict {
	maxT := maxTime(p)
	if maxT == 0 {
		return nil
	}
	t := r.Timing()
	var tv *timeVerdict
	var plans []*graph.Plan
	for _, n := range r.Nodes(incoming.Key()) {
		j, plan := graph.JudgeTime(r.Graph, t, n, maxT)
		if !j.Over {
			continue
		}
		plans = append(plans, plan)
		if tv == nil || j.Chain.Time > tv.judge.Chain.Time {
			tv = &timeVerdict{judge: j, node: n}
		}
	}
	if tv == nil {
		return nil
	}
	for _, plan := range plans {
		tv.plan = graph.MergePlans(tv.plan, renamed(plan, tv.node))
	}
	return tv
}

// renamed is plan with its edges' callers named node: the workload's edges are the same out of
// every node it is reached under, and the rewrite reads the plan at the node judged.
func renamed(plan *graph.Plan, node string) *graph.Plan {
	out := &graph.Plan{Cap: plan.Cap, Fits: plan.Fits, Reason: plan.Reason, Floor: plan.Floor, Attempts: map[graph.EdgeKey]int64{}}
	for k, v := range plan.Attempts {
		out.Attempts[graph.EdgeKey{From: node, To: k.To}] = v
	}
	for _, ch := range plan.Changes {
		ch.From = node
		out.Changes = append(out.Changes, ch)
	}
	return out
}

// capOver reports whether v's cap judgement is over (a verdict may be over the time only).
func (v verdict) capOver() bool { return v.judge != nil && v.judge.Over }

// explain is v's judgement without the policy or the plan (the rewrite's warning says it): the
// cap's, the time's, or both joined by "; ".
func (v verdict) explain() string {
	var parts []string
	if v.capOver() {
		parts = append(parts, v.judge.Explain())
	}
	if v.time != nil {
		parts = append(parts, v.time.judge.Explain())
	}
	return strings.Join(parts, "; ")
}

// timeMessage is v's message when it is over maxTimeToAnswer: the cap's part first when it is
// over too, then the time's worst chain, then the plan that fits both:
// "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; client -x2->
// gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s; order may keep payment=1".
func (v verdict) timeMessage() string {
	var parts []string
	if v.capOver() {
		parts = append(parts, v.judge.Explain())
		if v.layers != "" {
			parts = append(parts, v.layers)
		}
	}
	parts = append(parts, v.time.judge.Explain())
	msg := workload.KindRetryPolicy + " " + v.policy.Ref().QualifiedName() + ": " + strings.Join(parts, "; ") + graph.PlanSuffix(v.node, v.plan)
	if v.timeLevers != "" {
		msg += ": " + v.timeLevers
	}
	return msg
}

// withTimeLevers sets v.timeLevers when v's plan does not fit for the time (the workload at 1
// attempt is still over maxTimeToAnswer): the chain then (Plan.Floor) waits on timeouts and on
// other attempts, which the message names in their units, with the policy's maximum (small20;
// the mesh gate's since adv20). The chain at the floor goes through the judged edge, whose
// attempts are the workload's own, at 1 already.
func withTimeLevers(v verdict, r *workload.Result) verdict {
	if v.plan == nil || v.plan.Fits || v.plan.Floor == nil {
		return v
	}
	ch := v.plan.Floor
	factors := []int64{ch.ClientAttempts}
	for k := 1; k < len(ch.Path); k++ {
		ge, _ := r.Graph.Edge(ch.Path[k-1], ch.Path[k])
		factors = append(factors, ge.Attempts)
	}
	var skip [2]string
	if i := slices.Index(ch.Path, v.time.node); i >= 0 && i+1 < len(ch.Path) {
		skip = [2]string{v.time.node, ch.Path[i+1]}
	}
	v.timeLevers = r.TimeLevers(ch.Path, factors, workload.LeverSkip{App: skip}, strings.Join(r.TimeoutLevers(*ch), ", "), ch.Time)
	return v
}

// raisesTime reports whether updating old to incoming lengthens a try of one of its upstreams
// (a per-try timeout raised, or dropped where the policy's is longer): the gate judges such an
// update against maxTimeToAnswer even when it raises no attempt. An upstream new to incoming
// counts (RaisesRetries says so too).
func raisesTime(spec *v1alpha1.RetryPolicySpec, old, incoming workload.Workload) bool {
	nu, err := workload.Upstreams(incoming, incoming.Namespace, 1)
	if err != nil {
		return false // the caller denies a malformed annotation before
	}
	ou, _ := workload.Upstreams(old, old.Namespace, 1)
	prev := map[string]time.Duration{}
	for _, u := range ou {
		prev[u.Name] = workload.OwnLayer(spec, old, u).PerTry
	}
	for _, u := range nu {
		o, ok := prev[u.Name]
		if !ok || workload.OwnLayer(spec, incoming, u).PerTry > o {
			return true
		}
	}
	return false
}

// TimeList names policies with their maxTimeToAnswer, as CapList does their caps: "RetryPolicy
// shop/a (maxTimeToAnswer 5s), ClusterRetryPolicy chain (maxTimeToAnswer 8s)".
func TimeList(refs []workload.PolicyRef, maxes []time.Duration) string {
	return policyList(refs, func(i int) string { return "maxTimeToAnswer " + graph.FormatTime(maxes[i]) })
}

// also names the other exceeded Reject policies after the strictest's message (AlsoOver).
func also(vs []verdict) string {
	over := make([]Over, len(vs))
	for i, v := range vs {
		over[i] = Over{Ref: v.policy.Ref(), Cap: v.capOver()}
		if v.time != nil {
			over[i].MaxTime = maxTime(v.policy)
		}
	}
	return AlsoOver(over)
}

// Over is what one exceeded policy is over: its cap, and/or its maxTimeToAnswer (MaxTime > 0).
type Over struct {
	Ref     workload.PolicyRef
	Cap     bool
	MaxTime time.Duration
}

// AlsoOver names the other exceeded Reject policies after the strictest's message, as both
// admission gates do: those over the cap ("; also over the cap of ..."), then those over their
// maxTimeToAnswer ("; also over the maxTimeToAnswer of ..."), in the given order (strictest
// first); a policy over both is in both.
func AlsoOver(vs []Over) string {
	var caps, times []workload.PolicyRef
	var maxes []time.Duration
	for _, v := range vs {
		if v.Cap {
			caps = append(caps, v.Ref)
		}
		if v.MaxTime > 0 {
			times = append(times, v.Ref)
			maxes = append(maxes, v.MaxTime)
		}
	}
	var s string
	if len(caps) > 0 {
		s += "; also over the cap of " + CapList(caps)
	}
	if len(times) > 0 {
		s += "; also over the maxTimeToAnswer of " + TimeList(times, maxes)
	}
	return s
}
