package status

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

func dep(name, upstreams string) workload.Workload {
	return workload.Workload{Kind: workload.KindDeployment, Namespace: "shop", Name: name,
		Labels: workload.PairsOf(map[string]string{"part-of": "shop"}), Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: upstreams})}
}

func pol(cap int32, eps ...v1alpha1.Entrypoint) *v1alpha1.RetryPolicy {
	return &v1alpha1.RetryPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout", Generation: 4},
		Spec:       v1alpha1.RetryPolicySpec{MaxAmplification: cap, Entrypoints: eps, Retry: v1alpha1.RetrySettings{DefaultAttempts: 1}},
	}
}

var t0 = metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

func input(p *v1alpha1.RetryPolicy, ws ...workload.Workload) Input {
	r, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil)
	return Input{Generation: p.Generation, Selector: p.Spec.Selector, Result: r, Analysis: a, Now: t0}
}

// withObserved adds observed edges {from, to, attempts} to in's graph, as the controller's
// countObserved does, and analyses it again.
func withObserved(in Input, edges ...[3]string) Input {
	for _, e := range edges {
		a, _ := strconv.ParseInt(e[2], 10, 64)
		in.Result.Graph.AddEdge(e[0], e[1], a, 1)
	}
	in.Analysis, in.ObservedEdges = in.Result.Analyze(), len(edges)
	return in
}

type cond struct{ status, reason, message string }

func condOf(st *v1alpha1.RetryPolicyStatus, typ string) cond {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return cond{string(c.Status), c.Reason, c.Message}
		}
	}
	return cond{}
}

func TestSet(t *testing.T) {
	shop := []workload.Workload{dep("gateway", "catalog=3"), dep("catalog", "db=3"), dep("db", "")}
	client2 := v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2}
	badSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}}
	tests := []struct {
		name          string
		in            Input
		amplification int64
		bounded       *bool
		worstPath     string
		violations    int
		ready, within cond
	}{
		{
			name: "over the cap", in: input(pol(3, client2), shop...),
			amplification: 18, bounded: ptr(true), worstPath: "gateway>catalog>db", violations: 1,
			ready:  cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 2 edge(s)"},
			within: cond{"False", "CapExceeded", "client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3"},
		},
		{
			name: "within the cap", in: input(pol(18, client2), shop...),
			amplification: 18, bounded: ptr(true), worstPath: "gateway>catalog>db",
			ready:  cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 2 edge(s)"},
			within: cond{"True", "WithinCap", "amplification 18 <= cap 18 (worst path gateway>catalog>db)"},
		},
		{
			name: "an entrypoint no workload provides is a warning on Ready", in: input(pol(3, v1alpha1.Entrypoint{Service: "gateway"}), dep("front", "db=2"), dep("db", "")),
			amplification: 1, bounded: ptr(true), worstPath: "gateway",
			ready:  cond{"True", "Reconciled", `analysed 2 selected workload(s): 3 service(s), 1 edge(s); warning: entrypoint "gateway" is not the service of any selected workload`},
			within: cond{"True", "WithinCap", "amplification 1 <= cap 3 (worst path gateway)"},
		},
		{
			// Not a green WithinCap: nothing was checked.
			name: "no workloads", in: input(pol(3)),
			ready:  cond{"True", "Reconciled", "analysed 0 selected workload(s): 0 service(s), 0 edge(s)"},
			within: cond{"Unknown", "NothingSelected", "namespace shop has no workload: nothing to check"}, bounded: ptr(true),
		},
		{
			name: "a selector that selects nothing", in: input(func() *v1alpha1.RetryPolicy {
				p := pol(3)
				p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}}
				return p
			}(), shop...),
			ready:  cond{"True", "Reconciled", "analysed 0 selected workload(s): 0 service(s), 0 edge(s)"},
			within: cond{"Unknown", "NothingSelected", `spec.selector {"matchLabels":{"team":"payments"}} selects no workload in namespace shop: nothing to check`}, bounded: ptr(true),
		},
		{
			name: "selected workloads that declare no upstreams", in: input(pol(3), dep("gateway", ""), dep("db", "")),
			amplification: 1, bounded: ptr(true), worstPath: "db",
			ready:  cond{"True", "Reconciled", "analysed 2 selected workload(s): 2 service(s), 0 edge(s)"},
			within: cond{"Unknown", "NoUpstreamsDeclared", "none of the 2 selected workload(s) declares retrycap.dev/upstreams: no edges, nothing to check"},
		},
		{
			// An edge telemetry observed (telemetry.AddUndeclared, 2 tries of a mesh layer) on
			// workloads that declare nothing: checked, and said to be counted.
			name: "observed edges on workloads that declare nothing", in: withObserved(input(pol(1), dep("gateway", ""), dep("db", "")), [3]string{"gateway", "db", "2"}),
			amplification: 2, bounded: ptr(true), worstPath: "gateway>db", violations: 1,
			ready:  cond{"True", "Reconciled", "analysed 2 selected workload(s): 2 service(s), 1 edge(s)"},
			within: cond{"False", "CapExceeded", "client -x1-> gateway -x2-> db = 2 > cap 1; " + ObservedEdgesNote(1)},
		},
		{
			name: "observed edges within the cap", in: withObserved(input(pol(3), dep("gateway", "db=1"), dep("db", ""), dep("cache", "")), [3]string{"db", "cache", "1"}),
			amplification: 1, bounded: ptr(true), worstPath: "gateway>db>cache",
			ready:  cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 2 edge(s)"},
			within: cond{"True", "WithinCap", "amplification 1 <= cap 3 (worst path gateway>db>cache); " + ObservedEdgesNote(1)},
		},
		{
			name: "client attempts over the cap without edges: CapExceeded first", in: input(pol(1, client2), dep("gateway", "")),
			amplification: 2, bounded: ptr(true), worstPath: "gateway", violations: 1,
			ready:  cond{"True", "Reconciled", "analysed 1 selected workload(s): 1 service(s), 0 edge(s)"},
			within: cond{"False", "CapExceeded", "client -x2-> gateway = 2 > cap 1"},
		},
		{
			name: "two branches, the worse one at the cap", in: input(pol(3), dep("a", "b=3, c=2"), dep("b", ""), dep("c", "")),
			amplification: 3, bounded: ptr(true), worstPath: "a>b",
			ready:  cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 2 edge(s)"},
			within: cond{"True", "WithinCap", "amplification 3 <= cap 3 (worst path a>b)"},
		},
		{
			name: "diamond over the cap", in: input(pol(2), dep("a", "b=3, c=4"), dep("b", ""), dep("c", "")),
			amplification: 4, bounded: ptr(true), worstPath: "a>c", violations: 2,
			ready:  cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 2 edge(s)"},
			within: cond{"False", "CapExceeded", "client -x1-> a -x4-> c = 4 > cap 2 (and 1 more in status.violations)"},
		},
		{
			name: "invalid annotation: the valid part is reported", in: input(pol(3, client2), dep("gateway", "catalog=3"), dep("catalog", "db=x"), dep("db", "")),
			amplification: 6, bounded: ptr(true), worstPath: "gateway>catalog", violations: 1,
			ready: cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 1 edge(s)"},
			within: cond{"False", "InvalidAnnotation", `1 invalid annotation(s): Deployment shop/catalog: annotation retrycap.dev/upstreams: token "db=x" at column 1: attempts must be an integer 1..100; ` +
				"the valid part: client -x2-> gateway -x3-> catalog = 6 > cap 3"},
		},
		{
			// An AWS_MAX_ATTEMPTS no SDK reads: before, the status read WithinCap True ("amplification
			// 1 <= cap 4") while analyze said "not checked" for the same workload.
			name: "invalid SDK environment: not within the cap", in: input(pol(4), func() workload.Workload {
				w := dep("uploader", "s3.eu-west-1.amazonaws.com")
				w.AWS = workload.AWSEnv{Container: "app", MaxAttempts: "three"}
				return w
			}()),
			amplification: 1, bounded: ptr(true), worstPath: "uploader>s3.eu-west-1.amazonaws.com",
			ready: cond{"True", "Reconciled", "analysed 1 selected workload(s): 2 service(s), 1 edge(s)"},
			within: cond{"False", "InvalidEnv", `1 invalid environment value(s), the tries of their SDK's upstreams unknown: Deployment shop/uploader: container app: env AWS_MAX_ATTEMPTS="three": want a whole number > 0; ` +
				"the valid part: amplification 1 <= cap 4 (worst path uploader>s3.eu-west-1.amazonaws.com)"},
		},
		{
			// A service that calls itself with retries: a call loop (a cycle through two services is
			// not one since the third stage: chains visit each service once).
			name: "retry cycle wins over an invalid annotation", in: input(pol(3, client2), dep("gateway", "catalog,gateway=2"), dep("catalog", ""), dep("db", "x=")),
			amplification: math.MaxInt64, bounded: ptr(false), worstPath: "gateway>gateway", violations: 1,
			ready: cond{"True", "Reconciled", "analysed 3 selected workload(s): 3 service(s), 2 edge(s)"},
			within: cond{"False", "RetryCycle", "retry cycle gateway -x2-> gateway: amplification unbounded > cap 3; " +
				`also 1 invalid annotation(s): Deployment shop/db: annotation retrycap.dev/upstreams: token "x=" at column 1: attempts must be an integer 1..100`},
		},
		{
			name: "invalid selector", in: Input{Generation: 4, Selector: badSel, SelectorError: errors.New(`"Near" is not a valid label selector operator`), Now: t0},
			ready:  cond{"False", "InvalidSelector", `spec.selector {"matchExpressions":[{"key":"team","operator":"Near"}]} is invalid: "Near" is not a valid label selector operator`},
			within: cond{"Unknown", "InvalidSelector", "no graph: spec.selector is invalid (see condition Ready)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Start from a stale status, as the reconciler does: every field must be rewritten.
			st := &v1alpha1.RetryPolicyStatus{ObservedGeneration: 1, Services: 9, Amplification: 99, WorstPath: "old",
				Chains: []v1alpha1.Chain{{Entrypoint: "old"}}, Violations: []v1alpha1.Violation{{Message: "old"}}}
			Set(st, tt.in)
			if st.ObservedGeneration != 4 {
				t.Errorf("observedGeneration %d, want 4", st.ObservedGeneration)
			}
			if st.Amplification != tt.amplification || !reflect.DeepEqual(st.Bounded, tt.bounded) || st.WorstPath != tt.worstPath {
				t.Errorf("amplification %d bounded %v worstPath %q; want %d %v %q", st.Amplification, deref(st.Bounded), st.WorstPath, tt.amplification, deref(tt.bounded), tt.worstPath)
			}
			if len(st.Violations) != tt.violations {
				t.Errorf("%d violations, want %d: %+v", len(st.Violations), tt.violations, st.Violations)
			}
			if got := condOf(st, v1alpha1.ConditionReady); got != tt.ready {
				t.Errorf("Ready\n got %+v\nwant %+v", got, tt.ready)
			}
			if got := condOf(st, v1alpha1.ConditionWithinCap); got != tt.within {
				t.Errorf("WithinCap\n got %+v\nwant %+v", got, tt.within)
			}
			for _, c := range st.Conditions {
				if c.ObservedGeneration != 4 || !c.LastTransitionTime.Equal(&t0) {
					t.Errorf("condition %s: observedGeneration %d, lastTransitionTime %v", c.Type, c.ObservedGeneration, c.LastTransitionTime)
				}
			}
		})
	}
}

func TestSetIsIdempotent(t *testing.T) {
	in := input(pol(3, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2}), dep("gateway", "catalog=3"), dep("catalog", "db=3"), dep("db", ""))
	st := &v1alpha1.RetryPolicyStatus{}
	Set(st, in)
	again := st.DeepCopy()
	later := in
	later.Now = metav1.NewTime(t0.Add(time.Hour))
	Set(again, later)
	if !reflect.DeepEqual(st, again) {
		t.Fatalf("the same input changed the status (a write loop):\n%+v\n%+v", st, again)
	}
}

func TestTransitionTimeChangesOnlyWithStatus(t *testing.T) {
	p := pol(3, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2})
	st := &v1alpha1.RetryPolicyStatus{}
	Set(st, input(p, dep("gateway", "catalog=3"), dep("catalog", "db=3"), dep("db", "")))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	in := input(p, dep("gateway", "catalog=3"), dep("catalog", "db=1"), dep("db", ""))
	in.Now = t1
	Set(st, in) // 6 > 3: still False, so the time stays
	if c := st.Conditions[1]; !c.LastTransitionTime.Equal(&t0) || c.Message != "client -x2-> gateway -x3-> catalog -x1-> db = 6 > cap 3" {
		t.Fatalf("WithinCap after 18 -> 6: %+v", c)
	}
	in = input(p, dep("gateway", "catalog=1"), dep("catalog", "db=1"), dep("db", ""))
	in.Now = t1
	Set(st, in) // 2 <= 3: True, a transition
	if c := st.Conditions[1]; !c.LastTransitionTime.Equal(&t1) || c.Status != metav1.ConditionTrue {
		t.Fatalf("WithinCap after 6 -> 2: %+v", c)
	}
}

func TestCaps(t *testing.T) {
	// 60 entrypoints over the cap: chains stop at 50, violations at 20 (the CRD's MaxItems).
	p := pol(1)
	var ws []workload.Workload
	for i := range 60 {
		ws = append(ws, dep("svc-"+string(rune('a'+i/26))+string(rune('a'+i%26)), "db=2"))
	}
	ws = append(ws, dep("db", ""))
	st := &v1alpha1.RetryPolicyStatus{}
	Set(st, input(p, ws...))
	if len(st.Chains) != 50 || len(st.Violations) != 20 {
		t.Fatalf("%d chains, %d violations; want 50, 20", len(st.Chains), len(st.Violations))
	}
	if c := condOf(st, v1alpha1.ConditionWithinCap); c.message != "client -x1-> svc-aa -x2-> db = 2 > cap 1 (and 59 more; status.violations lists the worst 20 of 60)" {
		t.Fatalf("WithinCap message %q", c.message)
	}
}

func TestListErrorsIsBounded(t *testing.T) {
	var ws []workload.Workload
	for i := range 15 {
		ws = append(ws, dep("w"+string(rune('a'+i)), "db=0"))
	}
	st := &v1alpha1.RetryPolicyStatus{}
	Set(st, input(pol(3), ws...))
	msg := condOf(st, v1alpha1.ConditionWithinCap).message
	if !strings.HasPrefix(msg, "15 invalid annotation(s): Deployment shop/wa: ") || !strings.Contains(msg, "; and 5 more; the valid part: amplification 1 <= cap 3") {
		t.Fatalf("message %q", msg)
	}
	if n := strings.Count(msg, "Deployment shop/"); n != MaxListedErrors {
		t.Fatalf("%d workloads named, want %d", n, MaxListedErrors)
	}
}

func TestWithinCapEvent(t *testing.T) {
	withCond := func(s metav1.ConditionStatus, reason, msg string) *v1alpha1.RetryPolicyStatus {
		return &v1alpha1.RetryPolicyStatus{Conditions: []metav1.Condition{{Type: v1alpha1.ConditionWithinCap, Status: s, Reason: reason, Message: msg}}}
	}
	over := withCond(metav1.ConditionFalse, "CapExceeded", "18 > cap 3")
	tests := []struct {
		name              string
		old, next         *v1alpha1.RetryPolicyStatus
		typ, reason, note string
		ok                bool
	}{
		{"first verdict", &v1alpha1.RetryPolicyStatus{}, over, "Warning", "CapExceeded", "18 > cap 3", true},
		{"same verdict, new number", over, withCond(metav1.ConditionFalse, "CapExceeded", "6 > cap 3"), "", "", "", false},
		{"back within", over, withCond(metav1.ConditionTrue, "WithinCap", "2 <= cap 3"), "Normal", "WithinCap", "2 <= cap 3", true},
		{"new reason", over, withCond(metav1.ConditionFalse, "RetryCycle", "cycle"), "Warning", "RetryCycle", "cycle", true},
		{"no condition", over, &v1alpha1.RetryPolicyStatus{}, "", "", "", false},
	}
	for _, tt := range tests {
		typ, reason, note, ok := WithinCapEvent(tt.old, tt.next)
		if typ != tt.typ || reason != tt.reason || note != tt.note || ok != tt.ok {
			t.Errorf("%s: got %q %q %q %v", tt.name, typ, reason, note, ok)
		}
	}
}

func TestGauges(t *testing.T) {
	tests := []struct {
		st        v1alpha1.RetryPolicyStatus
		amp, with float64
	}{
		{v1alpha1.RetryPolicyStatus{Amplification: 18, Bounded: ptr(true)}, 18, 0},
		{v1alpha1.RetryPolicyStatus{Amplification: math.MaxInt64, Bounded: ptr(false)}, math.Inf(1), 0},
		{v1alpha1.RetryPolicyStatus{Amplification: 2, Bounded: ptr(true), Conditions: []metav1.Condition{{Type: "WithinCap", Status: "True"}}}, 2, 1},
	}
	for i, tt := range tests {
		if a, w := AmplificationGauge(&tt.st), WithinCapGauge(&tt.st); a != tt.amp || w != tt.with {
			t.Errorf("%d: %v %v, want %v %v", i, a, w, tt.amp, tt.with)
		}
	}
	if a := AmplificationGauge(&v1alpha1.RetryPolicyStatus{}); !math.IsNaN(a) {
		t.Errorf("no graph: %v, want NaN", a)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

// A violation through a Service's node names the workloads whose annotation to change.
func TestSetNamesTheWorkloadsBehindAService(t *testing.T) {
	lbl := func(app string) map[string]string { return map[string]string{"app": app} }
	w := func(name, app, ups string) workload.Workload {
		return workload.Workload{Kind: workload.KindDeployment, Namespace: "bookinfo", Name: name, Labels: workload.PairsOf(lbl(app)), Annotations: workload.PairsOf(map[string]string{annotations.Upstreams: ups})}
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: "p", Generation: 4},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Retry: v1alpha1.RetrySettings{DefaultAttempts: 1}}}
	ws := []workload.Workload{w("productpage-v1", "productpage", "reviews=3"), w("reviews-v1", "reviews", ""), w("reviews-v2", "reviews", "ratings=3"), w("ratings-v1", "ratings", "")}
	svcs := []workload.Service{
		{Namespace: "bookinfo", Name: "productpage", Selector: lbl("productpage")},
		{Namespace: "bookinfo", Name: "reviews", Selector: lbl("reviews")},
		{Namespace: "bookinfo", Name: "ratings", Selector: lbl("ratings")},
	}
	r, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil, svcs...)
	st := &v1alpha1.RetryPolicyStatus{}
	Set(st, Input{Generation: 4, Result: r, Analysis: a, Now: t0})
	want := []v1alpha1.Violation{{Path: []string{"productpage", "reviews", "ratings"}, Amplification: 9,
		Message:    "client -x1-> productpage -x3-> reviews -x3-> ratings = 9 > cap 4",
		Suggestion: "Deployment bookinfo/reviews-v2: ratings=1"}}
	if !reflect.DeepEqual(st.Violations, want) {
		t.Fatalf("violations\n %+v\nwant\n %+v", st.Violations, want)
	}
	if got := condOf(st, v1alpha1.ConditionWithinCap); got != (cond{"False", "CapExceeded", want[0].Message}) {
		t.Fatalf("WithinCap %+v", got)
	}
}
