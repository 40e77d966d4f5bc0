package status

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// TestSetBoundsAHugeStatus: 50 entrypoints into a chain of 600 services with 57-character names
// made a status of over 3 MB (each chain and violation listing the 601 services), which no
// write could store. Paths are elided to MaxPathServices, saying how many were left out, and
// the status stays far below etcd's 1.5 MiB.
func TestSetBoundsAHugeStatus(t *testing.T) {
	name := func(i int) string { return fmt.Sprintf("s%s%05d", strings.Repeat("x", 51), i) }
	const depth, entries = 600, 50
	var ws []workload.Workload
	for i := range depth {
		up := ""
		if i < depth-1 {
			up = name(i+1) + "=2"
		}
		ws = append(ws, dep(name(i), up))
	}
	for i := range entries {
		ws = append(ws, dep(fmt.Sprintf("entry%02d", i), name(0)+"=2"))
	}
	var st v1alpha1.RetryPolicyStatus
	in := input(pol(4), ws...)
	Set(&st, in)

	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 1<<20 {
		t.Errorf("status is %d bytes, want at most 1 MiB (etcd stores at most 1.5 MiB per object)", len(b))
	}
	if len(st.Chains) != entries {
		t.Fatalf("%d chains, want %d", len(st.Chains), entries)
	}
	// entryNN, then the 600 services: 601, of which 32 + 31 are kept.
	want := append(append([]string{st.Chains[0].Entrypoint}, names(name, 0, 31)...), "...(538 more)...")
	want = append(want, names(name, depth-31, depth)...)
	if got := st.Chains[0].Path; strings.Join(got, ">") != strings.Join(want, ">") {
		t.Errorf("chains[0].path = %v\nwant %v", got, want)
	}
	if st.WorstPath != strings.Join(want, ">") {
		t.Errorf("worstPath = %q, want the elided path", st.WorstPath)
	}
	if len(st.Violations) == 0 {
		t.Fatal("no violations")
	}
	for i, v := range st.Violations {
		if len(v.Path) > MaxPathServices || len(v.Message) > MaxListedMessage || !strings.HasSuffix(v.Message, " bytes)") {
			t.Errorf("violations[%d]: %d services, message of %d bytes ending %q", i, len(v.Path), len(v.Message), v.Message[max(0, len(v.Message)-40):])
		}
	}
	for _, c := range st.Conditions {
		if len(c.Message) > MaxConditionMessage {
			t.Errorf("condition %s: message of %d bytes", c.Type, len(c.Message))
		}
	}
	t.Logf("status: %d bytes", len(b))
}

// names is name(i) for i in [from, to).
func names(name func(int) string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, name(i))
	}
	return out
}
