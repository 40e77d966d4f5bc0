package status

import (
	"errors"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// The policy's defaults: per-try timeout 2s, backoff 100ms..2s. catalog -> db: 3 x 2s + 100ms +
// 200ms = 6.3s; gateway -> catalog: 3 x min(2s, 6.3s) + 300ms = 6.3s (an inversion: 2s < 6.3s);
// the client's 2 tries: 12.6s.
func TestSetTime(t *testing.T) {
	withMax := func(d time.Duration) *v1alpha1.RetryPolicy {
		p := pol(100, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2})
		if d > 0 {
			p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: d}
		}
		return p
	}
	inv := v1alpha1.TimeoutInversion{Caller: "gateway", Callee: "catalog", Layer: "Deployment shop/gateway", PerTryTimeout: "2s", InnerTime: "6.3s",
		Message: "gateway -> catalog: Deployment shop/gateway per-try timeout 2s < catalog's worst time 6.3s: gateway retries while catalog still works on the abandoned try",
		Fix:     "Deployment shop/gateway per-try timeout for catalog >= 6.3s, or a timeout of at most 2s on catalog's own calls"}
	over := "client -x2-> gateway 6.3s -> catalog 6.3s -> db ? = 12.6s > maxTimeToAnswer 5s"
	for _, tc := range []struct {
		name       string
		max        time.Duration
		ups        string
		worst      string
		violations []v1alpha1.TimeViolation
		within     cond
	}{
		{name: "no maxTimeToAnswer: reported, no condition", ups: "catalog=3", worst: "12.6s"},
		{name: "over maxTimeToAnswer", max: 5 * time.Second, ups: "catalog=3", worst: "12.6s",
			violations: []v1alpha1.TimeViolation{{Path: []string{"gateway", "catalog", "db"}, WorstTimeToAnswer: "12.6s", Message: over}},
			within:     cond{"False", "MaxTimeExceeded", over}},
		{name: "within maxTimeToAnswer", max: 20 * time.Second, ups: "catalog=3", worst: "12.6s",
			within: cond{"True", "WithinMaxTime", "worst time to answer 12.6s <= maxTimeToAnswer 20s (chain gateway>catalog>db)"}},
		// A per-try timeout in the annotation that covers catalog's worst time: no inversion,
		// 3 x 6.3s + 300ms = 19.2s per client try.
		{name: "per-upstream timeout fixes the inversion", max: 40 * time.Second, ups: "catalog=3/6300ms", worst: "38.4s",
			within: cond{"True", "WithinMaxTime", "worst time to answer 38.4s <= maxTimeToAnswer 40s (chain gateway>catalog>db)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := input(withMax(tc.max), dep("gateway", tc.ups), dep("catalog", "db=3"), dep("db", ""))
			st := &v1alpha1.RetryPolicyStatus{WorstTimeToAnswer: "old", TimeoutInversionsTotal: 9,
				Conditions: []metav1.Condition{{Type: v1alpha1.ConditionWithinMaxTime, Status: "True", Reason: "Old"}}}
			Set(st, in)
			if st.WorstTimeToAnswer != tc.worst || st.WorstTimePath != "gateway>catalog>db" || st.WorstTimeUnbounded != "" {
				t.Errorf("worst %q %q %q, want %q gateway>catalog>db", st.WorstTimeToAnswer, st.WorstTimePath, st.WorstTimeUnbounded, tc.worst)
			}
			if !reflect.DeepEqual(st.TimeViolations, tc.violations) {
				t.Errorf("time violations\n got %+v\nwant %+v", st.TimeViolations, tc.violations)
			}
			wantInv := []v1alpha1.TimeoutInversion{inv}
			if tc.ups != "catalog=3" {
				wantInv = nil
			}
			if !reflect.DeepEqual(st.TimeoutInversions, wantInv) || int(st.TimeoutInversionsTotal) != len(wantInv) {
				t.Errorf("inversions %d\n got %+v\nwant %+v", st.TimeoutInversionsTotal, st.TimeoutInversions, wantInv)
			}
			if got := condOf(st, v1alpha1.ConditionWithinMaxTime); got != tc.within {
				t.Errorf("WithinMaxTime\n got %+v\nwant %+v", got, tc.within)
			}
		})
	}
}

var errBad = errors.New(`"Near" is not a valid label selector operator`)

func TestSetTimeNothingToTime(t *testing.T) {
	p := pol(100)
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: time.Minute}
	// No upstreams declared: nothing timed, whatever the lone entrypoint's own time.
	st := &v1alpha1.RetryPolicyStatus{}
	Set(st, input(p, dep("gateway", "")))
	if got := condOf(st, v1alpha1.ConditionWithinMaxTime); got != (cond{"Unknown", "NoUpstreamsDeclared",
		"none of the 1 selected workload(s) declares retrycap.dev/upstreams: no edges, nothing to check"}) {
		t.Errorf("WithinMaxTime %+v", got)
	}
	// The invalid selector: no graph, the time fields cleared.
	st = &v1alpha1.RetryPolicyStatus{WorstTimeToAnswer: "1s", WorstTimePath: "a"}
	Set(st, Input{Generation: 4, SelectorError: errBad, MaxTimeToAnswer: p.Spec.MaxTimeToAnswer, Now: t0})
	if st.WorstTimeToAnswer != "" || st.WorstTimePath != "" {
		t.Errorf("not cleared: %+v", st)
	}
	if got := condOf(st, v1alpha1.ConditionWithinMaxTime); got != (cond{"Unknown", "InvalidSelector", "no graph: spec.selector is invalid (see condition Ready)"}) {
		t.Errorf("WithinMaxTime %+v", got)
	}
}
