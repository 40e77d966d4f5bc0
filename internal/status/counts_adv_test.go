package status

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
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
}
