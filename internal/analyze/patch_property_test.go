package analyze

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// On random workloads (some sharing a service, some with cycles, some through Services) and a
// policy whose entrypoints' client attempts are sometimes over the cap on their own, -o patch
// applied leaves over the cap exactly the chains no rewrite fits: each violation left starts at
// an entrypoint whose client attempts exceed the cap and says so, and the notes name those chains
// and nothing else. Before the fix text was per chain (fixtext), a chain from another entrypoint
// read "no rewrite fits" too; the patch fixed it and its comment said it did not.
func TestPropertyPatchLeavesOnlyUnfitChains(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	unfitCases, mixed := 0, 0
	for i := range 400 {
		ws := workloadtest.RandomWorkloads(r, 3+r.IntN(10), i%2 == 0)
		var svcs []workload.Service
		if i%3 == 0 {
			svcs = workloadtest.WithRandomServices(r, ws)
		}
		cap := int64(1 + r.IntN(6))
		p := workloadtest.Policy("p", int32(cap), v1alpha1.EnforcementReject, nil)
		p.Spec.Entrypoints = nil
		for k := 1 + r.IntN(3); k > 0; k-- {
			p.Spec.Entrypoints = append(p.Spec.Entrypoints, v1alpha1.Entrypoint{Service: "s" + strconv.Itoa(r.IntN(6)), ClientAttempts: int32(1 + r.IntN(8))})
		}
		m := NewManifests()
		m.Workloads, m.Services, m.Policies = ws, svcs, []*v1alpha1.RetryPolicy{p}
		rep := m.Analyze()
		if len(rep.Policies) != 1 || rep.WithinCap {
			continue
		}
		unfit := map[string]bool{}
		for _, ep := range rep.Policies[0].Entrypoints {
			if ep.ClientAttempts > cap {
				unfit[ep.Service] = true
			}
		}
		// Before the patch: each chain's fix is its own (a retry cycle's is the cycle's).
		for _, v := range rep.Policies[0].Violations {
			if !rep.Policies[0].Bounded {
				break
			}
			if unfit[v.Path[0]] != strings.HasPrefix(v.Suggestion, "no rewrite fits") {
				t.Fatalf("case %d (cap %d): %s; fix: %s (unfit entrypoints %v)", i, cap, v.Message, v.Suggestion, unfit)
			}
		}
		patches, notes := m.Plan()
		after := NewManifests()
		after.Workloads, after.Services, after.Policies = append([]workload.Workload(nil), ws...), svcs, m.Policies
		for _, pt := range patches {
			for j, w := range after.Workloads {
				if w.Key() == pt.Workload.Key() {
					after.Workloads[j].Annotations = w.Annotations.With(annotations.Upstreams, pt.New)
				}
			}
		}
		ar := after.Analyze().Policies[0]
		if len(unfit) > 0 {
			unfitCases++
			if len(unfit) < len(rep.Policies[0].Entrypoints) {
				mixed++
			}
		}
		var want []string
		for _, v := range ar.Violations {
			if why := fmt.Sprintf("no rewrite fits: client attempts %d at entrypoint %s exceed cap %d", v.Factors[0], v.Path[0], cap); !unfit[v.Path[0]] || v.Suggestion != why {
				t.Fatalf("case %d (cap %d): after the patch %s; fix: %s (unfit entrypoints %v)\nnotes %q", i, cap, v.Message, v.Suggestion, unfit, notes)
			}
			if len(want) < MaxRemainingListed {
				want = append(want, "RetryPolicy shop/p:   "+v.Message+"; fix: "+v.Suggestion)
			}
		}
		var got []string
		for _, n := range notes {
			if strings.Contains(n, ":   ") && !strings.Contains(n, ":   ... and ") {
				got = append(got, n)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || (len(ar.Violations) == 0) != (len(notes) == 0) {
			t.Fatalf("case %d: notes %q, want the chains %q", i, notes, want)
		}
	}
	if unfitCases < 40 || mixed < 20 {
		t.Fatalf("only %d cases with an entrypoint over the cap on its own, %d with others beside it", unfitCases, mixed)
	}
}
