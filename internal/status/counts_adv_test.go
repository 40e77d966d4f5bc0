package status

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
)

// TestConditionsCountEveryViolation: one gateway fanning out to 10,000 upstreams with 2 tries
// each under cap 1 is 10,000 over-cap paths, of which status.violations lists the worst 20.
// WithinCap said "(and 19 more in status.violations)": the list's length, not the count.
func TestConditionsCountEveryViolation(t *testing.T) {
	ups := make([]string, 10000)
	for i := range ups {
		ups[i] = fmt.Sprintf("u%04d=2", i)
	}
	var st v1alpha1.RetryPolicyStatus
	Set(&st, input(pol(1), dep("gateway", strings.Join(ups, ","))))
	if len(st.Violations) != 20 || st.Services != 10001 || st.Edges != 10000 {
		t.Fatalf("%d violations, %d services, %d edges; want 20, 10001, 10000", len(st.Violations), st.Services, st.Edges)
	}
	want := "client -x1-> gateway -x2-> u0000 = 2 > cap 1 (and 9999 more; status.violations lists the worst 20 of 10000)"
	if c := condOf(&st, v1alpha1.ConditionWithinCap); c.message != want {
		t.Fatalf("WithinCap message\n got %q\nwant %q", c.message, want)
	}

	// The same for the chains over maxTimeToAnswer: 30 entrypoints, each 3 tries of 2s into db,
	// over 1s.
	p := pol(100)
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: time.Second}
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Second}
	var ws []workload.Workload
	for i := range 30 {
		ws = append(ws, dep(fmt.Sprintf("e%02d", i), "db=3"))
	}
	ws = append(ws, dep("db", ""))
	st = v1alpha1.RetryPolicyStatus{}
	Set(&st, input(p, ws...))
	if len(st.TimeViolations) != 20 {
		t.Fatalf("%d time violations, want 20", len(st.TimeViolations))
	}
	c := condOf(&st, v1alpha1.ConditionWithinMaxTime)
	if suffix := " (and 29 more; status.timeViolations lists the worst 20 of 30)"; c.reason != v1alpha1.ReasonMaxTimeExceeded || !strings.HasSuffix(c.message, suffix) {
		t.Fatalf("WithinMaxTime %s %q, want %s ending %q", c.reason, c.message, v1alpha1.ReasonMaxTimeExceeded, suffix)
	}
}

// TestWithinMaxTimeElidesTheChain: a chain of 1,000 services with 57-character names within
// maxTimeToAnswer gave a WithinMaxTime message of 58,058 bytes, the whole path, cut by the
// 32 KiB clip in the middle of a name. The chain is elided as every other path in the status.
func TestWithinMaxTimeElidesTheChain(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("s%s%05d", strings.Repeat("x", 51), i) }
	const depth = 1000
	var ws []workload.Workload
	for i := range depth {
		up := ""
		if i < depth-1 {
			up = name(i+1) + "=1"
		}
		ws = append(ws, dep(name(i), up))
	}
	p := pol(4)
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: 24 * time.Hour}
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Second}
	var st v1alpha1.RetryPolicyStatus
	Set(&st, input(p, ws...))
	path := append(append(names(name, 0, 32), "...(937 more)..."), names(name, depth-31, depth)...)
	want := "worst time to answer 2s <= maxTimeToAnswer 24h0m0s (chain " + strings.Join(path, ">") + ")"
	c := condOf(&st, v1alpha1.ConditionWithinMaxTime)
	if c.status != "True" || c.message != want {
		t.Fatalf("WithinMaxTime %s, message of %d bytes\n got %q\nwant %q", c.status, len(c.message), c.message, want)
	}
	if st.WorstTimePath != strings.Join(path, ">") {
		t.Fatalf("worstTimePath %q", st.WorstTimePath)
	}
	// WithinCap's "worst path" too (it was the whole path, clipped).
	if c := condOf(&st, v1alpha1.ConditionWithinCap); c.message != "amplification 1 <= cap 4 (worst path "+strings.Join(path, ">")+")" {
		t.Fatalf("WithinCap message of %d bytes: %.300q", len(c.message), c.message)
	}
}

// TestReadyCountsWarnings: 2,000 workloads named "api" that the Service api does not select
// are a warning each; Ready listed all of them, 278,059 bytes cut at 32 KiB in mid-warning. It
// lists MaxListedErrors and counts the rest.
func TestReadyCountsWarnings(t *testing.T) {
	var ws []workload.Workload
	for i := range 2000 {
		w := dep(fmt.Sprintf("w%04d", i), "db=1")
		w.Annotations = workload.PairsOf(map[string]string{annotations.Upstreams: "db=1", annotations.Service: "api"})
		ws = append(ws, w)
	}
	p := pol(4)
	r, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil, workload.Service{Namespace: "shop", Name: "api", Selector: map[string]string{"app": "api"}})
	var st v1alpha1.RetryPolicyStatus
	Set(&st, Input{Generation: p.Generation, Result: r, Analysis: a, Now: t0})
	var want strings.Builder
	want.WriteString("analysed 2000 selected workload(s): 0 service(s), 0 edge(s)")
	for i := range 10 {
		fmt.Fprintf(&want, `; warning: Service shop/api does not select Deployment shop/w%04d (service name "api"): callers of api reach the Service, not this workload`, i)
	}
	want.WriteString("; and 1990 more warning(s)")
	if c := condOf(&st, v1alpha1.ConditionReady); c.message != want.String() {
		t.Fatalf("Ready message of %d bytes\n got %.400q\nwant %.400q", len(c.message), c.message, want.String())
	}
}

// TestLoadUnboundedIsSaid: a service that calls itself with one attempt multiplies nothing
// (within any cap) but each request to it goes round without end: worstCaseLoad is 2^63-1, and
// WithinCap said only "amplification 1 <= cap 4". It says why the load is unbounded, as
// analyze does; with retries on the loop it is a retry cycle, as before.
func TestLoadUnboundedIsSaid(t *testing.T) {
	var st v1alpha1.RetryPolicyStatus
	Set(&st, input(pol(4), dep("gateway", "gateway=1")))
	want := cond{"True", v1alpha1.ReasonWithinCap, "amplification 1 <= cap 4 (worst path gateway); worst-case load unbounded: gateway calls itself: a request can go round without end"}
	if c := condOf(&st, v1alpha1.ConditionWithinCap); c != want || st.WorstCaseLoad == nil || st.WorstCaseLoad.Requests != math.MaxInt64 {
		t.Fatalf("WithinCap %+v, worstCaseLoad %+v\nwant %+v, 9223372036854775807", c, st.WorstCaseLoad, want)
	}
	st = v1alpha1.RetryPolicyStatus{}
	Set(&st, input(pol(4), dep("gateway", "gateway=2")))
	want = cond{"False", v1alpha1.ReasonRetryCycle, "retry cycle gateway -x2-> gateway: amplification unbounded > cap 4"}
	if c := condOf(&st, v1alpha1.ConditionWithinCap); c != want {
		t.Fatalf("WithinCap %+v, want %+v", c, want)
	}
}
