package gate

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Input is everything the gate decides on. All of it comes from the request and the manager's
// cache.
type Input struct {
	// Policies are the RetryPolicies of the workload's namespace.
	Policies []*v1alpha1.RetryPolicy
	// ClusterPolicies are the cluster's ClusterRetryPolicies: those whose scope (their
	// namespaceSelector over the Namespaces' labels) has the workload's namespace judge it on their
	// graph across namespaces. They need a Source that is a ClusterSource; without one they are
	// ignored and reported in PolicyErrors.
	ClusterPolicies []*v1alpha1.ClusterRetryPolicy
	// Source is the stored workloads of the namespace that can change the verdict (nil: none).
	Source Source
	// Incoming is the object being created or updated.
	Incoming workload.Workload
	// Old is the stored object on an update; nil on a create.
	Old *workload.Workload
	// ObjectAnnotations are the annotations on a templated workload's own metadata (a
	// Deployment's, a CronJob's: workload.Kinds) (Incoming holds its pod template's, which is what retrycap reads); nil for a Pod.
	ObjectAnnotations map[string]string
	// OldObjectAnnotations are ObjectAnnotations of Old (nil on a create, and for a Pod).
	OldObjectAnnotations map[string]string
	// JobTemplateAnnotations are the annotations on a CronJob's spec.jobTemplate.metadata (the
	// Jobs' own, not their pods'); nil for any other kind.
	JobTemplateAnnotations map[string]string
	// Mesh is the mesh retry layers the graphs count (the manager's meshwatch.Watcher.Set; nil:
	// none, only the applications' attempts). A prepared graph built with another Set is not
	// used.
	Mesh *mesh.Set
}

// Source is what the gate reads beyond the request for a selecting policy of either kind: the
// stored workloads of its namespaces and their Services, and its prepared graph of them. The
// handler's Source is Index.For (the relevant part of the namespaces, from the informers); a
// test's is a slice.
type Source interface {
	// Workloads returns the stored workloads of p's namespaces (p.Scope()) that can change the
	// verdict on the incoming one, parsed (sorted by workload.Compare spares a sort); the
	// incoming one's stored version may be among them, Decide puts the incoming one in its
	// place. Decide calls it only if p must judge the request, so an update that raises nothing
	// never reads the namespaces.
	Workloads(p *workload.Policy) []*workload.Parsed
	// Prepared returns p's prepared graph of the stored workloads of its namespaces
	// (workload.Base), or nil to build the graph of Workloads for the request. The verdict is
	// the same either way; the prepared graph spares a request whose chains reach much of a
	// large namespace the build and analysis of thousands of services.
	Prepared(p *workload.Policy) *workload.Base
	// Services returns the Services of p's namespaces (nil: none), through which callers reach
	// workloads (workload.ServiceSet.Nodes).
	Services(p *workload.Policy) *workload.ServiceSet
}

// ClusterSource is a Source that also knows the namespaces a ClusterRetryPolicy selects (by the
// Namespaces' labels). The handler's Source (Index.For) is one; a test's may be. Without one the
// ClusterRetryPolicies are ignored and reported in Decision.PolicyErrors.
type ClusterSource interface {
	Source
	// Scope returns the namespaces p selects; the error names the policy and its bad
	// namespaceSelector.
	Scope(p *v1alpha1.ClusterRetryPolicy) (*workload.ClusterScope, error)
}

// Decision is the gate's verdict.
type Decision struct {
	Allowed bool
	// Message is why the request is denied (empty when allowed).
	Message string
	// Warnings are returned to the client (kubectl prints them as "Warning: ...").
	Warnings []string
	// Rewrite, when not nil, is the new value of the workload's retrycap.dev/upstreams annotation
	// (on the pod template, or on a bare Pod) and the value it replaces.
	Rewrite *Rewrite
	// PolicyErrors are policies the gate had to ignore (an invalid selector the validator did not
	// see, e.g. created before the webhook): logged by the handler, not shown to the client, whose
	// workload is not at fault.
	PolicyErrors []error
}

// Rewrite is the gate's change to a workload in Rewrite mode.
type Rewrite struct {
	// Upstreams is the new retrycap.dev/upstreams value, in canonical form.
	Upstreams string
	// RewrittenFrom is the value it replaces, as the client sent it; stored in
	// retrycap.dev/rewritten-from.
	RewrittenFrom string
}

// verdict is one selecting policy's judgement of the incoming workload.
type verdict struct {
	policy *workload.Policy
	judge  *graph.Judgement
	plan   *graph.Plan
	// node is the node judged: the incoming workload's service name, or the Service it is
	// reached under whose paths are the worst.
	node string
	// via is the incoming workload ("Deployment ns/name") when node is a Service's name, not its
	// own: the message's suggestion names the workload whose annotation to change.
	via string
	// layers are the mesh layers of the path's multiplied factors (Result.ExplainJudgement),
	// "" without any.
	layers string
	// time is the judgement against the policy's maxTimeToAnswer when a chain through the
	// workload is over it (time.go); nil otherwise. judge is then nil when the cap is not over.
	time *timeVerdict
	// timeVia is the incoming workload when the time's node is a Service's name, not its own.
	timeVia string
	// levers, when the cap's plan does not fit, name what else can lower the chain
	// (workload.Result.Levers): "lower Deployment shop/gateway retrycap.dev/upstreams order=5, or
	// raise RetryPolicy shop/checkout spec.maxAmplification: 4".
	levers string
	// timeLevers, when the plan does not fit for the time, name the timeouts and attempts the
	// chain at the floor waits on, or the maximum to raise (withTimeLevers).
	timeLevers string
	// envFixes are the plan's changes on the incoming workload's edges whose tries are the AWS
	// SDK's, in their unit ("Deployment shop/audit container app env AWS_MAX_ATTEMPTS: 3 -> 1",
	// workload.EnvFix): taken out of the plan, whose "may keep up=N" would only tell retrycap a
	// number and leave the SDK as it is.
	envFixes []string
	// sdkNodes are the upstream nodes of those changes (Rewrite mode leaves them alone).
	sdkNodes []string
}

// sdkVerdict moves v's plan changes on SDK edges of the incoming workload into v.envFixes.
func sdkVerdict(v verdict, incoming *workload.Parsed) verdict {
	if v.plan == nil || len(v.plan.Changes) == 0 {
		return v
	}
	plan := *v.plan
	plan.Changes = nil
	for _, ch := range v.plan.Changes {
		if ch.From == v.node {
			if f, ok, sdk := incoming.SDKFix(v.policy, ch.To, ch.New); sdk {
				if ok {
					v.envFixes = append(v.envFixes, f.Suggestion())
				}
				v.sdkNodes = append(v.sdkNodes, ch.To)
				continue
			}
		}
		plan.Changes = append(plan.Changes, ch)
	}
	v.plan = &plan
	return v
}

func (v verdict) message() string {
	ref := v.policy.Ref()
	var msg string
	if v.time != nil {
		msg = v.timeMessage()
	} else {
		msg = v.capMessage()
	}
	// AdmissionMessage names a RetryPolicy; the policy's own kind in its place.
	msg = ref.Kind + strings.TrimPrefix(msg, workload.KindRetryPolicy)
	if len(v.envFixes) > 0 {
		msg += "; " + strings.Join(v.envFixes, "; ")
	}
	if v.via != "" {
		msg = strings.Replace(msg, "; "+v.node+" may keep ", "; "+v.via+" may keep ", 1)
		msg = strings.Replace(msg, "even with "+v.node+": ", "even with "+v.via+": ", 1)
	}
	if v.timeVia != "" {
		msg = strings.Replace(msg, "even with "+v.time.node+": ", "even with "+v.timeVia+": ", 1)
	}
	return msg
}

// withLevers sets v.levers when v is over the cap alone and no count of the workload's attempts
// fits: the workload at 1 attempt is not what to change, and the message names what is.
func withLevers(v verdict, r *workload.Result, incoming *workload.Parsed) verdict {
	if v.time != nil || !v.capOver() || v.plan == nil || v.plan.Fits {
		return v
	}
	var skip [2]string
	if i := slices.Index(v.judge.Path, v.node); i >= 0 && i+1 < len(v.judge.Path) {
		skip = [2]string{v.node, v.judge.Path[i+1]}
	}
	v.levers = r.Levers(v.judge.Path, v.judge.Factors, workload.LeverSkip{App: skip}, r.IncomingEdges(incoming, v.node)...)
	return v
}

// capMessage is the message of a verdict over the cap alone.
func (v verdict) capMessage() string {
	msg := graph.AdmissionMessage(v.policy.Ref().QualifiedName(), v.judge, v.plan)
	if v.levers != "" {
		msg += ": " + v.levers
	}
	if v.layers != "" {
		// After the path, before the suggestion: "... = 9 > cap 4; productpage -x3-> reviews: 3 =
		// 1 (Deployment productpage) x 3 (Istio default, ...); ...", as the controller's messages.
		head := graph.AdmissionMessage(v.policy.Ref().QualifiedName(), v.judge, nil)
		msg = head + "; " + v.layers + msg[len(head):]
	}
	return msg
}

// Decide judges one admission of a workload:
//
//   - A retrycap annotation on a workload's own metadata rather than its pod template (where
//     retrycap reads it) gets a warning, whatever else is decided.
//   - The selecting policies are the RetryPolicies of the workload's namespace that select it and
//     the ClusterRetryPolicies whose scope (namespaceSelector) has its namespace and whose
//     selector selects it; a cluster policy judges on its graph across the namespaces of its
//     scope (nodes "name.ns").
//   - A workload no policy selects passes untouched; a malformed retrycap annotation on it (what
//     analyze calls an error) is said as a warning.
//   - A malformed retrycap annotation on it is denied whatever the policies' modes; the message
//     names the workload, the annotation, the token and the column (for upstreams) or the value
//     (retrycap.dev/inject: only "true" or "false").
//   - A create, an update that raises an attempt or adds an upstream, or an update that brings
//     the workload under a policy that did not select it before, is judged by every selecting
//     policy (graph.Judge on its graph with the incoming object in place); any other update
//     passes, so a chain already over its cap can always be repaired.
//   - Reject: denied when any Reject policy is exceeded. Several exceeded: the message is the
//     strictest's (workload.CompareRefs: lowest cap, a RetryPolicy before a ClusterRetryPolicy,
//     then namespace/name) and names the others after it, strictest first ("; also over the cap
//     of RetryPolicy shop/a (cap 6), ClusterRetryPolicy chain (cap 8)").
//   - Rewrite: the incoming attempts drop to the minimum over the exceeded Rewrite policies'
//     local plans, of either kind; retrycap.dev/rewritten-from keeps the value replaced and a warning says what
//     changed. What Rewrite would store is judged again as Reject judges it (stillOver): when
//     even that is over (the path into the workload is over the cap or maxTimeToAnswer on its
//     own, on a create, or on an update that still raises something) it is refused, as Reject
//     refuses it; an update lowered back to what it raises nothing over is admitted with a
//     warning that the chain is still over (docs/decisions.md, wgate19).
//   - Audit: admitted with a warning, judged on what will be stored (after any rewrite).
func Decide(in Input) Decision {
	// The annotations as analyze reads them (the workload's own metadata's filling in for the
	// template's): their malformed values and stray keys are judged wherever on the object they
	// sit, as analyze judges them. The graph is judged on the template's alone (Incoming), as the
	// controller reads it.
	view := workload.ReadView(in.Incoming, in.ObjectAnnotations)
	_, unknown := workload.StrayKeys(view)
	warnings := append(misplacedAnnotations(in), workload.JobTemplateWarnings(in.Incoming, in.JobTemplateAnnotations)...)
	d := Decision{Allowed: true, Warnings: append(append(warnings, unknown...), workload.UpstreamsWarnings(view)...)}
	deny := func(msg string) Decision {
		return Decision{Message: msg, Warnings: d.Warnings, PolicyErrors: d.PolicyErrors}
	}
	var selecting []*workload.Policy
	selected := func(p *workload.Policy) {
		ok, err := p.Selects(in.Incoming)
		if err != nil {
			d.PolicyErrors = append(d.PolicyErrors, err)
		} else if ok {
			selecting = append(selecting, p)
		}
	}
	for _, p := range in.Policies {
		selected(workload.ForRetryPolicy(p))
	}
	if len(in.ClusterPolicies) > 0 {
		cs, _ := in.Source.(ClusterSource)
		for _, p := range in.ClusterPolicies {
			if cs == nil {
				d.PolicyErrors = append(d.PolicyErrors, fmt.Errorf("ClusterRetryPolicy %s: the gate has no source of namespaces to judge it with", p.Name))
				continue
			}
			scope, err := cs.Scope(p)
			if err != nil {
				d.PolicyErrors = append(d.PolicyErrors, err)
				continue
			}
			if scope.Has(in.Incoming.Namespace) {
				selected(workload.ForClusterRetryPolicy(p, scope))
			}
		}
	}
	malformed := workload.AnnotationErrors(view)
	if len(selecting) == 0 {
		// Nothing judges it: admitted untouched, and what analyze calls an error in it (a
		// malformed value, a miscased key) is said as a warning, like the misplaced ones.
		for _, err := range malformed {
			d.Warnings = append(d.Warnings, err.Error())
		}
		return d
	}
	if len(malformed) > 0 {
		if !keepsMalformed(in, view, selecting) {
			return deny(malformed[0].Error())
		}
		// Stored so before a policy selected it, and left as it is: refusing the update would
		// block a label change, a restart or a finalizer's removal (and so a deletion) until
		// someone fixes a value the update does not touch. Said, as for a workload no policy
		// selects; the graph reads nothing from it, so nothing is raised.
		for _, err := range malformed {
			d.Warnings = append(d.Warnings, err.Error())
		}
		return d
	}
	toStore := in.Incoming
	src := in.Source
	if src == nil {
		src = none{}
	}
	// refused is set when the rewrite cannot make the workload admissible (stillOver).
	refused := ""
	e := Enforce(selecting, Steps[*workload.Policy, verdict]{
		Policy: func(p *workload.Policy) (workload.PolicyRef, v1alpha1.Enforcement) {
			return p.Ref(), p.Spec().Enforcement
		},
		// The incoming workload's own annotations first, on a graph of it alone: the same errors
		// Build reports, without building the namespace.
		Check: func(p *workload.Policy) error {
			return incomingError(workload.Build(p, []workload.Workload{in.Incoming}, nil), in.Incoming)
		},
		Judge: func(p *workload.Policy) (verdict, bool, error) {
			return judge(p, in.Incoming, in.Old, src, in.Mesh)
		},
		Ref:     func(v verdict) workload.PolicyRef { return v.policy.Ref() },
		Message: verdict.message,
		Also:    also,
		Rewrite: func(vs []verdict) []string {
			rw, warnings := rewrite(in.Incoming, vs)
			stored := in.Incoming
			if rw != nil {
				stored = withUpstreams(in.Incoming, rw.Upstreams)
			}
			if msg := stillOver(vs, stored, in.Old, src, in.Mesh); msg != "" {
				refused = msg
				return nil
			}
			d.Rewrite, toStore = rw, stored
			return warnings
		},
		Audit: func(p *workload.Policy) (verdict, bool) {
			v, over, err := judge(p, toStore, in.Old, src, in.Mesh)
			return v, err == nil && over
		},
	})
	if e.Denied {
		return deny(e.Message)
	}
	if refused != "" {
		return deny(refused)
	}
	// The verdict's warnings (what Rewrite changed, what Audit let through) first: the API server
	// keeps only the first 4 KiB of a response's warnings (FitWarnings).
	d.Warnings = append(e.Warnings, d.Warnings...)
	return d
}

// keepsMalformed reports whether an update leaves every retrycap.dev/ annotation as the stored
// object has it (where analyze reads them: view), every selecting policy selected the stored
// object too, and it raises nothing (a service renamed by its label, with valid upstreams beside
// a malformed inject, does): then a malformed value is not the update's doing.
func keepsMalformed(in Input, view workload.Workload, selecting []*workload.Policy) bool {
	if in.Old == nil {
		return false
	}
	if !maps.Equal(retrycapKeys(view), retrycapKeys(workload.ReadView(*in.Old, in.OldObjectAnnotations))) {
		return false
	}
	for _, p := range selecting {
		if ok, err := p.Selects(*in.Old); err != nil || !ok {
			return false
		}
		// judge's rule for an update that raises nothing; with the upstreams malformed, none is
		// read (RaisesRetries errs), so none is raised.
		raises, err := workload.RaisesRetries(p, *in.Old, in.Incoming)
		if err == nil && raises || workload.RaisesMeshRetries(in.Mesh, *in.Old, in.Incoming) ||
			maxTime(p) > 0 && raisesTime(p.Spec(), *in.Old, in.Incoming) {
			return false
		}
	}
	return true
}

// retrycapKeys are w's annotations under the retrycap.dev/ prefix, case-insensitively (a
// miscased key is one of them).
func retrycapKeys(w workload.Workload) map[string]string {
	out := map[string]string{}
	for k, v := range w.Annotations.All() {
		if len(k) >= len(retrycapPrefix) && strings.EqualFold(k[:len(retrycapPrefix)], retrycapPrefix) {
			out[k] = v
		}
	}
	return out
}

const retrycapPrefix = "retrycap.dev/"

// CapList names policies with their caps, in the given order, the kind written where it changes
// (the workload gate's and the mesh gate's "also over the cap of ..."):
// "RetryPolicy shop/a (cap 6), shop/b (cap 7), ClusterRetryPolicy chain (cap 8)".
func CapList(refs []workload.PolicyRef) string {
	return policyList(refs, func(i int) string { return "cap " + strconv.FormatInt(int64(refs[i].Cap), 10) })
}

// policyList is CapList's and TimeList's form: refs in the given order, the kind written where it
// changes, each name followed by its detail(i) in parentheses.
func policyList(refs []workload.PolicyRef, detail func(i int) string) string {
	var b strings.Builder
	for i, r := range refs {
		if i > 0 {
			b.WriteString(", ")
		}
		if i == 0 || refs[i-1].Kind != r.Kind {
			b.WriteString(r.Kind + " ")
		}
		b.WriteString(r.QualifiedName() + " (" + detail(i) + ")")
	}
	return b.String()
}

// misplacedAnnotations warns of each retrycap annotation on a workload's own metadata that its
// pod template does not carry with the same value: retrycap (like Kubernetes, for the pods it
// creates) reads only the template's, so the annotation does nothing where it is.
func misplacedAnnotations(in Input) []string {
	var out []string
	for _, k := range workload.ReadAnnotations {
		v, ok := in.ObjectAnnotations[k]
		if !ok {
			continue
		}
		if tv, tok := in.Incoming.Annotations.Lookup(k); tok && tv == v {
			continue
		}
		kind, _ := workload.KindOf(in.Incoming.Kind)
		out = append(out, fmt.Sprintf("%s: annotation %s=%q is on the %s's own metadata, which retrycap does not read; put it on %s.metadata.annotations",
			in.Incoming, k, workload.Clip(v), in.Incoming.Kind, kind.TemplateField()))
	}
	return out
}

// incomingError returns the first invalid annotation, or invalid SDK environment
// (AWS_MAX_ATTEMPTS "three": its edges' tries unknown, analyze's "not checked"), of the incoming
// workload that Build reported, or nil. Other workloads' errors are the controller's to report,
// not this request's.
func incomingError(r *workload.Result, incoming workload.Workload) error {
	for _, err := range r.Errors {
		if ae, ok := err.(*workload.AnnotationError); ok && ae.Workload.Key() == incoming.Key() {
			return ae
		}
		if ee, ok := err.(*workload.EnvError); ok && ee.Workload.Key() == incoming.Key() {
			return ee
		}
	}
	return nil
}

// judge reports whether p's graph, with the incoming workload in place, is over the cap through
// the incoming workload's edges, for a request p must judge at all (see Decide). The graph is
// built only then: an update that raises nothing costs no graph.
func judge(p *workload.Policy, w workload.Workload, old *workload.Workload, src Source, set *mesh.Set) (verdict, bool, error) {
	if old != nil {
		wasSelected, err := p.Selects(*old)
		if err != nil {
			return verdict{}, false, err
		}
		if wasSelected {
			raises, err := workload.RaisesRetries(p, *old, w)
			if err != nil {
				return verdict{}, false, err
			}
			if !raises && !workload.RaisesMeshRetries(set, *old, w) && (maxTime(p) == 0 || !raisesTime(p.Spec(), *old, w)) {
				return verdict{}, false, nil
			}
		}
	}
	incoming := workload.Parse(w)
	own := p.Node(incoming.ServiceName(), w.Namespace)
	// A policy with a maxTimeToAnswer is judged on a build: a prepared graph carries no hops.
	if b := src.Prepared(p); b != nil && b.Mesh() == set && maxTime(p) == 0 {
		if j, plan, ok := b.Judge(incoming); ok {
			if !j.Over {
				return verdict{}, false, nil
			}
			v := meshVerdict(verdict{policy: p, judge: j, plan: plan, node: own}, b.Result(), incoming)
			return sdkVerdict(withLevers(v, b.Result(), incoming), incoming), true, nil
		}
	}
	// The incoming workload's own edges, not the merged edges of its service: see BuildJudged.
	r := workload.BuildJudged(p, src.Workloads(p), incoming, src.Services(p), set)
	// Every node the workload is reached under carries its edges; the worst is judged (the
	// first, own name before Services by name, on a tie).
	var j *graph.Judgement
	svc := ""
	for _, n := range r.Nodes(incoming.Key()) {
		nj := graph.Judge(r.Graph, r.Cap, n)
		if j == nil || nj.Over && (!j.Over || nj.Amplification > j.Amplification) {
			j, svc = nj, n
		}
	}
	tv := judgeTime(p, r, incoming)
	capOver := j != nil && j.Over
	if !capOver && tv == nil {
		return verdict{}, false, nil
	}
	v := verdict{policy: p, node: svc, time: tv}
	if capOver {
		// PlanLocal's error only repeats plan.Reason (no rewrite fits); the plan says it with Fits.
		v.judge = j
		v.plan, _ = graph.PlanLocal(r.Graph, r.Cap, svc)
	} else {
		v.node = tv.node
	}
	if v.node != own {
		v.via = w.String()
	}
	v = withLevers(meshVerdict(v, r, incoming), r, incoming)
	if tv != nil {
		// The time's plan is in the application's attempts already (graph.JudgeTime).
		v.plan = graph.MergePlans(v.plan, renamed(tv.plan, v.node))
		if tv.node != own {
			v.timeVia = w.String()
		}
		v = withTimeLevers(v, r)
	}
	return sdkVerdict(v, incoming), true, nil
}

// rewrite lowers the incoming workload's attempts to the minimum the exceeded Rewrite policies'
// local plans allow. It returns nil when nothing changes, and the warnings for the client.
func rewrite(incoming workload.Workload, rewrites []verdict) (*Rewrite, []string) {
	old := incoming.Annotations.Get(annotations.Upstreams)
	ups, err := annotations.ParseUpstreams(old)
	if err != nil {
		// Unreachable: Decide denies a malformed value before it plans.
		return nil, []string{err.Error()}
	}
	var warnings, explains []string
	var lowering []workload.PolicyRef
	changed := false
	for _, v := range rewrites {
		if v.plan == nil {
			continue
		}
		lowered := false
		for i, u := range ups {
			to := v.policy.UpstreamNode(u.Name, incoming.Namespace)
			if slices.Contains(v.sdkNodes, to) {
				continue // the SDK's tries: an annotation value would not change them
			}
			n, ok := v.plan.Changed(v.node, to)
			if !ok {
				continue
			}
			if u.Attempts == 0 || int64(u.Attempts) > n {
				ups[i].Attempts = int32(n)
				changed, lowered = true, true
			}
		}
		if lowered {
			lowering = append(lowering, v.policy.Ref())
			explains = append(explains, v.explain())
		}
		switch {
		case !v.plan.Fits:
			// Admitted only when stillOver finds the lowered update raises nothing: the chain
			// stays over, as it was stored.
			warnings = append(warnings, v.message()+" (admitted: enforcement is Rewrite; "+incoming.String()+" is lowered as far as it goes, which raises nothing over the stored object)")
		case len(v.envFixes) > 0:
			warnings = append(warnings, v.message()+" (admitted: enforcement is Rewrite, which rewrites only "+annotations.Upstreams+"; the AWS SDK's tries change with the container's env)")
		}
	}
	if !changed {
		return nil, warnings
	}
	value := annotations.FormatUpstreams(ups)
	w := fmt.Sprintf("%s rewrote %s of %s: %s -> %s (%s)", Rewriters(lowering), annotations.Upstreams, incoming, old, value, strings.Join(explains, "; "))
	return &Rewrite{Upstreams: value, RewrittenFrom: rewrittenFrom(incoming, value, old)}, append([]string{w}, warnings...)
}

// stillOver judges the workload as Rewrite would store it (stored) under each exceeded Rewrite
// policy as Reject would (judge, against the stored version old): the message of the first
// still over (its verdict as sent, then what the lowered object is still over), "" when none
// is. Rewrite admitted a create whose path into it was over the cap on its own, lowered to 1
// attempt, which Reject refuses; and refused an update over maxTimeToAnswer that, lowered, raised
// nothing, which Reject admits. What Rewrite stores is now what Reject would admit (the mesh
// gate's rule, docs/decisions.md gate19 and wgate19).
func stillOver(vs []verdict, stored workload.Workload, old *workload.Workload, src Source, set *mesh.Set) string {
	for _, v := range vs {
		nv, over, err := judge(v.policy, stored, old, src, set)
		if err != nil {
			// Unreachable: the same annotations were judged as sent.
			return fmt.Sprintf("%s (refused although enforcement is Rewrite: %v)", v.message(), err)
		}
		if !over {
			continue
		}
		if len(nv.envFixes) > 0 {
			// The message already names the env to change; an annotation value would not.
			return fmt.Sprintf("%s (refused although enforcement is Rewrite, which rewrites only %s: the AWS SDK's tries change with the container's env)", v.message(), annotations.Upstreams)
		}
		return fmt.Sprintf("%s (refused although enforcement is Rewrite: lowered as far as it goes, %s annotation %s=%q still makes %s)",
			v.message(), stored, annotations.Upstreams, workload.Clip(stored.Annotations.Get(annotations.Upstreams)), nv.explain())
	}
	return ""
}

// maxAnnotationBytes is the API's limit on an object's (and a pod template's) annotations, keys
// and values together (apimachinery's TotalAnnotationSizeLimitB).
const maxAnnotationBytes = 256 << 10

// rewrittenFrom is the value stored in retrycap.dev/rewritten-from: old, the value the rewrite
// replaces, as much of it as fits in the annotations beside the rewritten value. A copy of an
// upstreams value of 150 KB took the template's annotations past the API's 256 KiB, and the
// rewritten object was refused ("Too long") instead of admitted: old is then cut, ending in
// "... (truncated from N bytes)". (The admission warning quotes it too, but the API server cuts
// warnings past 4 KiB: the whole old value is in the manifest the client applied.)
func rewrittenFrom(incoming workload.Workload, value, old string) string {
	used := len(annotations.Upstreams) + len(value) + len(annotations.RewrittenFrom)
	for k, v := range incoming.Annotations.All() {
		if k != annotations.Upstreams && k != annotations.RewrittenFrom {
			used += len(k) + len(v)
		}
	}
	room := maxAnnotationBytes - used
	if len(old) <= room {
		return old
	}
	tail := "... (truncated from " + strconv.Itoa(len(old)) + " bytes)"
	n := max(room-len(tail), 0)
	for n > 0 && !utf8.RuneStart(old[n]) {
		n--
	}
	if n == 0 {
		return "" // no room even for the note: the warning keeps the old value
	}
	return old[:n] + tail
}

// Rewriters names the policies that lowered the attempts, by kind: "RetryPolicy shop/a",
// "RetryPolicies shop/a, shop/b", "RetryPolicy shop/a and ClusterRetryPolicy chain".
func Rewriters(refs []workload.PolicyRef) string {
	var parts []string
	for _, kind := range []string{workload.KindRetryPolicy, workload.KindClusterRetryPolicy} {
		var names []string
		for _, r := range refs {
			if r.Kind == kind {
				names = append(names, r.QualifiedName())
			}
		}
		switch len(names) {
		case 0:
		case 1:
			parts = append(parts, kind+" "+names[0])
		default:
			parts = append(parts, strings.TrimSuffix(kind, "y")+"ies "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, " and ")
}

// withUpstreams returns w with its upstreams annotation set to value (a copy; w's maps belong to
// the request or the cache).
func withUpstreams(w workload.Workload, value string) workload.Workload {
	w.Annotations = w.Annotations.With(annotations.Upstreams, value)
	return w
}

// none is the Source of a gate given none: no stored workloads, Services or prepared graphs.
type none struct{}

func (none) Workloads(*workload.Policy) []*workload.Parsed  { return nil }
func (none) Prepared(*workload.Policy) *workload.Base       { return nil }
func (none) Services(*workload.Policy) *workload.ServiceSet { return nil }

// WarningBudget is how much of an admission response's warnings the gate sends, in characters:
// the API server keeps about 4 KiB of them (k8s.io/apiserver's warning recorder truncates each
// and drops the rest past 4,096 runes, without saying so).
const WarningBudget = 3500

// FitWarnings returns warnings as the client will see them: all of them when they fit in budget
// characters; else in order while they fit, the first that does not cut to the room left (a
// Rewrite's warning quotes the old value, up to 256 KiB), and, for the rest, one line saying how
// many were left out and where to read them all. A workload with thousands of stray
// retrycap.dev/ keys gets thousands of warnings, and the API server would drop the tail in
// silence, whatever it held.
func FitWarnings(warnings []string, budget int) []string {
	return FitWarningsWhere(warnings, budget, "retrycap analyze -f on the manifest lists them all")
}

// FitWarningsWhere is FitWarnings whose last line says where to read them all: where (the pod
// injector's are per container, and analyze does not list them).
func FitWarningsWhere(warnings []string, budget int, where string) []string {
	total := 0
	for _, w := range warnings {
		total += utf8.RuneCountInString(w)
	}
	if total <= budget {
		return warnings
	}
	const summaryRoom, minCut = 200, 200
	room := budget - summaryRoom
	var out []string
	i := 0
	for ; i < len(warnings); i++ {
		n := utf8.RuneCountInString(warnings[i])
		if n <= room {
			out = append(out, warnings[i])
			room -= n
			continue
		}
		if room >= minCut {
			tail := fmt.Sprintf("... (cut from %d bytes)", len(warnings[i]))
			out = append(out, cutRunes(warnings[i], room-utf8.RuneCountInString(tail))+tail)
			i++
		}
		break
	}
	if i < len(warnings) {
		out = append(out, fmt.Sprintf("%d more warning(s) not shown (the API server keeps about 4 KiB of them): %s", len(warnings)-i, where))
	}
	return out
}

// cutRunes is s's first n runes.
func cutRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
