package workload

import (
	"fmt"
	"slices"
	"testing"
)

// TestBoundLevers: at most MaxLevers levers, those of the most tries (ties: the first on the
// chain), shown in the chain's order, then how many more and the most tries among them (adv20).
func TestBoundLevers(t *testing.T) {
	var ls []lever
	for i := range 12 {
		tries := int64(2)
		switch i {
		case 3:
			tries = 5
		case 10:
			tries = 4
		case 11:
			tries = 3
		}
		ls = append(ls, lever{fmt.Sprintf("f%d", i), tries})
	}
	got := boundLevers(ls)
	want := []string{"f0", "f1", "f2", "f3", "f4", "f5", "f10", "f11", "and 4 more of at most 2 tries each"}
	if !slices.Equal(got, want) {
		t.Fatalf("boundLevers = %q, want %q", got, want)
	}
	if got := boundLevers(ls[:MaxLevers]); len(got) != MaxLevers || got[MaxLevers-1] != "f7" {
		t.Fatalf("boundLevers of %d = %q, want them all", MaxLevers, got)
	}
	if got := leversOr(boundLevers(nil), "X spec.maxAmplification: 4"); got != "raise X spec.maxAmplification: 4" {
		t.Fatalf("no lever: %q", got)
	}
}
