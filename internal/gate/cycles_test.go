package gate

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// TestGateAgreesWithStatusOnCycles is the differential test of the gate and the status (the
// controller's and analyze's workload.Result.Analyze) on namespaces whose services call each
// other round cycles (#28): when the status finds every chain within the cap, the gate admits
// every workload of the namespace as a create; when it finds one over, the gate refuses a
// workload on it; and no workload is refused for a chain longer than the status's worst.
func TestGateAgreesWithStatusOnCycles(t *testing.T) {
	r := rand.New(rand.NewPCG(28, 30))
	within, overs, cyclic := 0, 0, 0
	withSiblings := map[int]bool{}
	siblingOvers, siblingWithin := 0, 0
	for round := range 400 {
		// Every other round one workload per service; the others keep several workloads of a
		// service (the gate judges a workload on its own edges, its siblings' stripped by
		// workload.BuildJudged, while the status merges them; a service only a sibling calls
		// stays no default entrypoint: graph.MarkCalled).
		var ws []workload.Workload
		seen := map[string]bool{}
		for _, w := range workloadtest.RandomWorkloads(r, 4+r.IntN(14), false) {
			if seen[w.ServiceName()] && round%2 == 0 {
				continue
			}
			if seen[w.ServiceName()] {
				withSiblings[round] = true
			}
			seen[w.ServiceName()] = true
			ws = append(ws, w)
		}
		p := workloadtest.Policy("p", int32(2+r.IntN(10)), v1alpha1.EnforcementReject, nil)
		p.Spec.Entrypoints = nil
		if r.IntN(2) == 0 {
			p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: fmt.Sprintf("s%d", r.IntN(4)), ClientAttempts: int32(1 + r.IntN(2))}}
		}
		res := workload.Build(workload.ForRetryPolicy(p), ws, nil)
		a := res.Analyze()
		if len(a.Cycles) == 0 && a.Bounded {
			continue
		}
		cyclic++
		var refused []string
		for i, w := range ws {
			rest := append(append([]workload.Workload(nil), ws[:i]...), ws[i+1:]...)
			d := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(rest), Incoming: w})
			if d.Allowed {
				continue
			}
			refused = append(refused, w.ServiceName())
			if a.Bounded && !strings.Contains(d.Message, fmt.Sprintf("= %d > cap", a.Amplification)) && !strings.Contains(d.Message, " > cap ") {
				t.Fatalf("round %d: %s refused with %q", round, w, d.Message)
			}
			var amp int64
			if _, err := fmt.Sscanf(d.Message[strings.LastIndex(strings.SplitN(d.Message, " > cap", 2)[0], "= ")+2:], "%d", &amp); err == nil && a.Bounded && amp > a.Amplification {
				t.Fatalf("round %d: %s refused for %d, the status's worst chain is %d: %q", round, w, amp, a.Amplification, d.Message)
			}
		}
		switch {
		case a.WithinCap():
			within++
			if withSiblings[round] {
				siblingWithin++
			}
			if len(refused) > 0 {
				t.Fatalf("round %d: the status is within cap %d (amplification %d, cycles %v), the gate refuses %v", round, p.Spec.MaxAmplification, a.Amplification, a.Cycles, refused)
			}
		case len(a.Violations) > 0 && len(a.Violations[0].Path) > 1:
			overs++
			if withSiblings[round] {
				siblingOvers++
			}
			if len(refused) == 0 {
				t.Fatalf("round %d: the status is over (%s), the gate admits every workload", round, a.Violations[0].Message)
			}
			onChain := false
			for _, s := range refused {
				for _, n := range a.Violations[0].Path[:len(a.Violations[0].Path)-1] {
					onChain = onChain || n == s
				}
			}
			if !a.Bounded {
				onChain = true // the retrying self-loop's workload; checked above to be refused
			}
			if !onChain {
				t.Fatalf("round %d: the status's worst chain %v, the gate refuses %v, none on it", round, a.Violations[0].Path, refused)
			}
		}
	}
	if within < 30 || overs < 100 || cyclic < 200 || siblingWithin < 10 || siblingOvers < 40 {
		t.Fatalf("within %d (%d with siblings), over %d (%d with siblings) of %d cyclic namespaces: too few", within, siblingWithin, overs, siblingOvers, cyclic)
	}
	t.Logf("%d cyclic namespaces: %d within (%d with siblings), %d over (%d with siblings)", cyclic, within, siblingWithin, overs, siblingOvers)
}
