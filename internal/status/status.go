package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/workload"
)

// ReasonInvalidSelector is the reason of Ready (False) and WithinCap (Unknown) when
// spec.selector cannot be parsed: the graph cannot be built at all.
const ReasonInvalidSelector = "InvalidSelector"

// MaxListedErrors is how many invalid annotations a condition message names; the rest are
// counted ("and 3 more"), so a namespace full of broken workloads cannot push the message past
// the API's 32 KiB limit.
const MaxListedErrors = 10

// Input is everything the setters read. The reconciler fills it after fetching; nothing here is
// read from a clock or the cluster by the setters themselves.
type Input struct {
	// Generation is the policy's metadata.generation.
	Generation int64
	// Selector is spec.selector (for the message when it is invalid).
	Selector *metav1.LabelSelector
	// SelectorError is the parse error of spec.selector; when set, Result and Analysis are nil.
	SelectorError error
	// SelectorField names the invalid selector in messages: "spec.selector" when empty; a
	// ClusterRetryPolicy's may be "spec.namespaceSelector" (Selector is then that one).
	SelectorField string
	// Result and Analysis are the shared builder's graph of the policy and its analysis.
	Result   *workload.Result
	Analysis *graph.Analysis
	// Time is the time analysis of Result (time.go); nil: computed from Result by Set.
	Time *graph.TimeAnalysis
	// MaxTimeToAnswer is spec.maxTimeToAnswer, read when there is no Result (an invalid
	// selector), so that WithinMaxTime still says why it is Unknown.
	MaxTimeToAnswer *metav1.Duration
	// Now is the time written as lastTransitionTime of a condition whose status changes.
	Now metav1.Time
	// Overridden is workload.Overridden for the policy: its selected workloads whose proxies
	// run a stricter policy's settings (the controller lists the other policies); "" when none.
	// Said in Ready as a warning.
	Overridden string
	// ObservedEdges is how many edges observed by telemetry, declared by no annotation, Result's
	// graph holds besides the declared ones (telemetry.AddUndeclared; 0: declarations alone).
	// WithinCap then says that they count with one application attempt each, and a policy whose
	// workloads declare nothing is checked on them (no NoUpstreamsDeclared).
	ObservedEdges int
}

// Set writes the whole status for in: every setter, in order.
func Set(st *v1alpha1.RetryPolicyStatus, in Input) {
	st.ObservedGeneration = in.Generation
	SetGraphSummary(st, in.Analysis)
	SetChains(st, in.Analysis)
	SetViolations(st, in.Analysis)
	SetReady(st, in)
	SetWithinCap(st, in)
	SetTime(st, in, in.timeOf())
}

// SetGraphSummary writes services, edges, amplification, bounded, worstPath (the retry cycle's
// path when there is one) and worstCaseLoad;
// with no analysis (invalid selector) it clears them rather than keep numbers of an older spec.
func SetGraphSummary(st *v1alpha1.RetryPolicyStatus, a *graph.Analysis) {
	if a == nil {
		st.Services, st.Edges, st.Amplification = 0, 0, 0
		st.Bounded, st.WorstPath, st.WorstCaseLoad = nil, "", nil
		return
	}
	st.Services = clampInt32(a.Services)
	st.Edges = clampInt32(a.Edges)
	st.Amplification = a.Amplification
	bounded := a.Bounded
	st.Bounded = &bounded
	// With a retry cycle the chains' paths stop where the cycle starts; the cycle itself is
	// the path worth showing in `kubectl get rp`.
	st.WorstPath = joinPath(a.WorstPath)
	if !a.Bounded && len(a.Cycle) > 0 {
		st.WorstPath = joinPath(a.Cycle)
	}
	st.WorstCaseLoad = nil
	if a.WorstCaseLoad.Service != "" {
		st.WorstCaseLoad = &v1alpha1.ServiceLoad{Service: a.WorstCaseLoad.Service, Requests: a.WorstCaseLoad.Requests}
	}
}

// SetChains writes one chain per entrypoint, worst first, at most graph.MaxChains (the CRD's
// MaxItems).
func SetChains(st *v1alpha1.RetryPolicyStatus, a *graph.Analysis) {
	st.Chains = nil
	if a == nil {
		return
	}
	for i, c := range a.Chains {
		if i == graph.MaxChains {
			break
		}
		st.Chains = append(st.Chains, v1alpha1.Chain{Entrypoint: c.Entrypoint, Amplification: c.Amplification, Path: elidePath(c.Path)})
	}
}

// SetViolations writes the over-cap paths with their suggestions, worst first, at most
// graph.MaxViolations (the CRD's MaxItems).
func SetViolations(st *v1alpha1.RetryPolicyStatus, a *graph.Analysis) {
	st.Violations = nil
	if a == nil {
		return
	}
	for i, v := range a.Violations {
		if i == graph.MaxViolations {
			break
		}
		st.Violations = append(st.Violations, v1alpha1.Violation{
			Path: elidePath(v.Path), Amplification: v.Amplification,
			Message: Clip(v.Message, MaxListedMessage), Suggestion: Clip(v.Suggestion, MaxListedMessage),
		})
	}
}

// SetReady writes the Ready condition: True (Reconciled) once the status is computed for this
// generation, invalid annotations included (the valid part is reported; WithinCap says what is
// wrong), with the builder's warnings appended to the message; False (InvalidSelector) when spec.selector cannot be parsed, naming the field and value.
func SetReady(st *v1alpha1.RetryPolicyStatus, in Input) {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: in.Generation, LastTransitionTime: in.Now}
	if in.SelectorError != nil {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonInvalidSelector
		c.Message = fmt.Sprintf("%s %s is invalid: %v", in.selectorField(), renderSelector(in.Selector), in.SelectorError)
	} else {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonReconciled
		c.Message = fmt.Sprintf("analysed %d selected workload(s): %d service(s), %d edge(s)",
			len(in.Result.Selected), in.Analysis.Services, in.Analysis.Edges)
		// Warnings (an entrypoint no selected workload provides) do not stop the analysis but
		// usually mean a typo in the spec: say so where `kubectl describe` shows it.
		// At most MaxListedErrors of them, the rest counted: 2,000 workloads that a Service of
		// their name does not select made a message of 278 KB, cut at 32 KiB in mid-warning.
		for i, w := range in.Result.Warnings {
			if i == MaxListedErrors {
				c.Message += fmt.Sprintf("; and %d more warning(s)", len(in.Result.Warnings)-i)
				break
			}
			c.Message += "; warning: " + w
		}
		// A duration stored before the CRD bounded it (issue 25), or a dedupUpstreams name
		// before the CRD's pattern: the graph is computed with it, but the injector refuses the
		// policy; say which field and value, where kubectl describe shows it.
		if p := in.Result.Policy; p != nil {
			for _, w := range append(workload.DurationProblems(p.Spec()), workload.DedupProblems(p.Spec())...) {
				c.Message += "; warning: " + w + " (the injector skips this policy's pods until it is fixed)"
			}
		}
		if in.Overridden != "" {
			c.Message += "; warning: " + in.Overridden
		}
	}
	SetCondition(&st.Conditions, c)
}

// SetWithinCap writes the WithinCap condition. Precedence of the reasons, first match wins:
//
//  1. InvalidSelector (Unknown): there is no graph to judge.
//  2. RetryCycle (False): the amplification is unbounded whatever else is wrong; the message
//     is the cycle's path with its factors.
//  3. InvalidAnnotation (False): the numbers cover only the valid part of the graph, so they
//     are a lower bound and cannot prove the policy within its cap; the message names each
//     workload (Kind namespace/name), the annotation, the token and the column, then what the
//     valid part shows.
//  4. InvalidEnv (False): a selected workload's container environment that the graph reads is
//     invalid (AWS_MAX_ATTEMPTS "three"): its SDK's upstreams are counted at the policy's
//     default, which proves nothing; the message names the workload, container, variable and
//     value, then what the rest shows. (With InvalidAnnotation, listed in its message.)
//  5. CapExceeded (False): the worst violation's message.
//  6. NothingSelected (Unknown): the policy selects no workload; a green WithinCap would claim a
//     check that did not happen. The message names the selector and the namespace.
//  7. NoUpstreamsDeclared (Unknown): no selected workload carries retrycap.dev/upstreams, so there
//     are no edges to check; the message says how many workloads are selected.
//  8. WithinCap (True).
func SetWithinCap(st *v1alpha1.RetryPolicyStatus, in Input) {
	c := metav1.Condition{Type: v1alpha1.ConditionWithinCap, ObservedGeneration: in.Generation, LastTransitionTime: in.Now}
	a := in.Analysis
	switch {
	case in.SelectorError != nil:
		c.Status, c.Reason = metav1.ConditionUnknown, ReasonInvalidSelector
		c.Message = "no graph: " + in.selectorField() + " is invalid (see condition Ready)"
	case !a.Bounded:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonRetryCycle
		c.Message = cycleMessage(a)
		if errs := annotationErrors(in.Result); len(errs) > 0 {
			c.Message += "; also " + listErrors(errs)
		}
		if errs := envErrors(in.Result); len(errs) > 0 {
			c.Message += "; also " + listEnvErrors(errs)
		}
	case len(annotationErrors(in.Result)) > 0:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidAnnotation
		c.Message = listErrors(annotationErrors(in.Result))
		if errs := envErrors(in.Result); len(errs) > 0 {
			c.Message += "; " + listEnvErrors(errs)
		}
		c.Message += "; the valid part: " + verdict(a)
	case len(envErrors(in.Result)) > 0:
		// An environment no SDK reads as a number (AWS_MAX_ATTEMPTS: "three"): the tries of
		// that workload's SDK edges are unknown (counted at the policy's default), so the
		// numbers cannot prove the policy within its cap, as analyze says ("not checked").
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonInvalidEnv
		c.Message = listEnvErrors(envErrors(in.Result)) + "; the valid part: " + verdict(a)
	case !a.WithinCap():
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonCapExceeded
		c.Message = verdict(a)
	case in.Result != nil && len(in.Result.Selected) == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNothingSelected
		c.Message = NothingSelected(in.Result)
	case in.Result != nil && in.Result.Declaring == 0 && in.ObservedEdges == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, v1alpha1.ReasonNoUpstreamsDeclared
		c.Message = NoUpstreamsMessage(len(in.Result.Selected))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonWithinCap
		c.Message = verdict(a)
	}
	if in.ObservedEdges > 0 && a != nil && c.Reason != v1alpha1.ReasonNothingSelected {
		c.Message += "; " + ObservedEdgesNote(in.ObservedEdges)
	}
	SetCondition(&st.Conditions, c)
}

// ObservedEdgesNote says that n undeclared observed edges are in the amplification, and what
// is not known of them.
func ObservedEdgesNote(n int) string {
	return fmt.Sprintf("counting %d edge(s) observed by telemetry that no annotation declares, each with one application attempt times its mesh layers: the applications' own attempts on them are unknown (see GraphComplete)", n)
}

// NothingSelected is the NothingSelected message for r's policy of either kind
// (NothingSelectedMessage).
func NothingSelected(r *workload.Result) string { return NothingSelectedMessage(r.Policy) }

// MaxListedNamespaces is how many selected namespaces a message names; the rest are counted.
const MaxListedNamespaces = 10

// NothingSelectedMessage says that policy p, over the namespaces of its scope, selects no
// workload: "namespace shop has no workload: nothing to check", "spec.selector {...} selects no
// workload in namespace shop: nothing to check" (a RetryPolicy's, or a ClusterRetryPolicy's over
// one namespace), "namespaces orders, shop have no workload: nothing to check", or, for a
// ClusterRetryPolicy that selects no namespace, "spec.namespaceSelector {...} selects no
// namespace: nothing to check".
func NothingSelectedMessage(p *workload.Policy) string {
	nss := p.Scope().Namespaces()
	if len(nss) == 0 {
		return "spec.namespaceSelector " + renderSelector(p.NamespaceSelector()) + " selects no namespace: nothing to check"
	}
	list := nss
	more := ""
	if len(list) > MaxListedNamespaces {
		list, more = list[:MaxListedNamespaces], fmt.Sprintf(" and %d more", len(nss)-MaxListedNamespaces)
	}
	word := "namespaces "
	if len(nss) == 1 {
		word = "namespace "
	}
	named := word + strings.Join(list, ", ") + more
	if p.Spec().Selector == nil {
		verb := " have"
		if len(nss) == 1 {
			verb = " has"
		}
		return named + verb + " no workload: nothing to check"
	}
	return "spec.selector " + renderSelector(p.Spec().Selector) + " selects no workload in " + named + ": nothing to check"
}

func (in Input) selectorField() string {
	if in.SelectorField == "" {
		return "spec.selector"
	}
	return in.SelectorField
}

// NoUpstreamsMessage says that none of the n selected workloads declares upstreams.
func NoUpstreamsMessage(n int) string {
	return fmt.Sprintf("none of the %d selected workload(s) declares retrycap.dev/upstreams: no edges, nothing to check", n)
}

// cycleMessage is the cycle violation's message: "retry cycle a -x2-> b -x1-> a: amplification
// unbounded > cap 4".
func cycleMessage(a *graph.Analysis) string {
	if len(a.Violations) > 0 {
		return a.Violations[0].Message
	}
	return "retry cycle " + strings.Join(a.Cycle, ">") + ": amplification unbounded > cap " + strconv.FormatInt(a.Cap, 10)
}

// verdict is the worst violation's message, or "amplification A <= cap C (worst path P)".
func verdict(a *graph.Analysis) string {
	if len(a.Violations) > 0 {
		return a.Violations[0].Message + moreListed(max(a.ViolationsTotal, len(a.Violations)), min(len(a.Violations), graph.MaxViolations), "status.violations") + loadNote(a)
	}
	msg := "amplification " + graph.FormatAmount(a.Amplification) + " <= cap " + strconv.FormatInt(a.Cap, 10)
	if len(a.WorstPath) > 0 {
		msg += " (worst path " + joinPath(a.WorstPath) + ")"
	}
	return msg + loadNote(a)
}

// loadNote says why the worst-case load is unbounded, when it is and the amplification is not
// (a retry cycle's message says it already): status.worstCaseLoad then shows 2^63-1, which
// alone reads as a number. A service calling itself with one attempt is within any cap, and
// each request to it still goes round without end.
func loadNote(a *graph.Analysis) string {
	if !a.Bounded || a.LoadUnbounded == "" {
		return ""
	}
	return "; worst-case load unbounded: " + a.LoadUnbounded
}

// moreListed is what a condition message adds after the first of total items of which listed
// are in the status list named field: "" for one, " (and 4 more in status.violations)" when
// the list has them all, else " (and 9999 more; status.violations lists the worst 20 of
// 10000)". The
// count is the total, never the list's length: with 10,000 over-cap paths the message said
// "and 19 more".
func moreListed(total, listed int, field string) string {
	n := total - 1
	switch {
	case n <= 0:
		return ""
	case total <= listed:
		return fmt.Sprintf(" (and %d more in %s)", n, field)
	}
	return fmt.Sprintf(" (and %d more; %s lists the worst %d of %d)", n, field, listed, total)
}

func annotationErrors(r *workload.Result) []error {
	if r == nil {
		return nil
	}
	var out []error
	for _, err := range r.Errors {
		var ae *workload.AnnotationError
		if errors.As(err, &ae) {
			out = append(out, err)
		}
	}
	return out
}

// envErrors are r's invalid container environments (*workload.EnvError).
func envErrors(r *workload.Result) []error {
	if r == nil {
		return nil
	}
	var out []error
	for _, err := range r.Errors {
		if _, ok := errors.AsType[*workload.EnvError](err); ok {
			out = append(out, err)
		}
	}
	return out
}

func listErrors(errs []error) string { return listOf("invalid annotation(s)", errs) }

func listEnvErrors(errs []error) string {
	return listOf("invalid environment value(s), the tries of their SDK's upstreams unknown", errs)
}

func listOf(what string, errs []error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s: ", len(errs), what)
	for i, err := range errs {
		if i == MaxListedErrors {
			fmt.Fprintf(&b, "; and %d more", len(errs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

func renderSelector(s *metav1.LabelSelector) string {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Sprintf("%v", s)
	}
	return string(data)
}

func clampInt32(n int) int32 {
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(n)
}

// WithinCapEvent is the event for a change of the WithinCap condition between two statuses:
// its type (Normal when the policy is now within its cap, else Warning), reason (the
// condition's new reason) and note (its message). ok is false when neither the condition's
// status nor its reason changed: a new amplification that keeps the verdict is not an event.
func WithinCapEvent(old, next *v1alpha1.RetryPolicyStatus) (eventType, reason, note string, ok bool) {
	n := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionWithinCap)
	if n == nil {
		return "", "", "", false
	}
	if o := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionWithinCap); o != nil && o.Status == n.Status && o.Reason == n.Reason {
		return "", "", "", false
	}
	eventType = "Warning"
	if n.Status == metav1.ConditionTrue {
		eventType = "Normal"
	}
	return eventType, n.Reason, n.Message, true
}

// AmplificationGauge is the value of retrycap_policy_amplification for a status: the
// amplification, +Inf when a retry cycle makes it unbounded, NaN when there is no graph
// (invalid selector), so a dashboard never shows a made-up number.
func AmplificationGauge(st *v1alpha1.RetryPolicyStatus) float64 {
	switch {
	case st.Bounded == nil:
		return math.NaN()
	case !*st.Bounded:
		return math.Inf(1)
	}
	return float64(st.Amplification)
}

// WithinCapGauge is the value of retrycap_policy_within_cap: 1 when WithinCap is True, else 0.
func WithinCapGauge(st *v1alpha1.RetryPolicyStatus) float64 {
	if meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ConditionWithinCap) {
		return 1
	}
	return 0
}
