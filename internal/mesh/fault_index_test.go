package mesh

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDelayOfIndexed: delayOf reads the per-gateway index (delayIndex) where it scanned every
// rule for each route's layer (quadratic: 50,000 routes of one VirtualService took 9 s); it gives
// what the scan gave, the first of the longest delays on a tie, on random scopes and delays.
func TestDelayOfIndexed(t *testing.T) {
	scan := func(rules []ruleTime, i int) (time.Duration, string) {
		var d time.Duration
		var field string
		for j := range rules {
			if r := &rules[j]; r.delay.d > d && slices.ContainsFunc(rules[i].scope, func(g string) bool { return slices.Contains(r.scope, g) }) {
				d, field = r.delay.d, r.delay.field
			}
		}
		return d, field
	}
	rng := rand.New(rand.NewPCG(1, 18))
	gws := []string{"mesh", "gw-a", "gw-b", "gw-c"}
	for c := range 2000 {
		rules := make([]ruleTime, 1+rng.IntN(8))
		for j := range rules {
			for _, g := range gws {
				if rng.IntN(3) == 0 {
					rules[j].scope = append(rules[j].scope, g)
				}
			}
			if len(rules[j].scope) == 0 {
				rules[j].scope = []string{"mesh"}
			}
			if rng.IntN(2) == 0 {
				rules[j].delay = faultDelay{d: time.Duration(rng.IntN(4)) * time.Second, field: fmt.Sprintf("spec.http[%d].fault.delay.fixedDelay", j)}
			}
		}
		ot := objTimes{rules: rules, longest: delayIndex(rules)}
		for i := range rules {
			wd, wf := scan(rules, i)
			if d, f := delayOf(&ot, i); d != wd || f != wf {
				t.Fatalf("case %d, rule %d of %+v: %v %q, want %v %q", c, i, rules, d, f, wd, wf)
			}
		}
	}
}
