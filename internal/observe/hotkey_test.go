package observe

import (
	"fmt"
	"io"
	"testing"
)

// TestHotKeyTraceIDsLinear: one Idempotency-Key sent with every request, each with a trace id
// of its own (a client with a constant key), is counted exactly and in work linear in the
// lines: before, each line walked its key's trace ids so far (100,000 lines: 5e9 comparisons,
// 18 s of CPU; a million, half an hour).
func TestHotKeyTraceIDsLinear(t *testing.T) {
	const distinct, repeats = 100_000, 3
	pr, pw := io.Pipe()
	go func() {
		// every trace id three times, the repeats after all the first ones (the list's head
		// no longer holds them) and among them (the head does)
		for i := range distinct * repeats {
			id := i % distinct
			if i < 3*16 {
				id = i / 3
			}
			fmt.Fprintf(pw, "%s\n", rline(okTime, fmt.Sprintf(`,"trace_id":"%032x","idempotency_key":"same"`, id+1)))
		}
		pw.Close()
	}()
	g := NewGrouper()
	st, err := g.Consume(pr, Source{Name: "hot"}, DefaultMaxLine)
	if err != nil || st.Lines != distinct*repeats || st.Attempts != distinct*repeats {
		t.Fatalf("%+v %v", st, err)
	}
	kr, ok := g.Key("same")
	if !ok || kr.Attempts != distinct*repeats || kr.ChainLinks != distinct {
		t.Fatalf("key same: %d attempts, %d chain links (%v); want %d, %d", kr.Attempts, kr.ChainLinks, ok, distinct*repeats, distinct)
	}
	if limit := traceWalk * distinct * repeats; g.traceSteps > limit {
		t.Fatalf("%d trace list steps for %d lines, over %d (traceWalk per line)", g.traceSteps, distinct*repeats, limit)
	}
	// The set's answer is the list's: a second key with few trace ids keeps its list only.
	if _, ok := g.bigTraces[0]; !ok || len(g.bigTraces) != 1 || len(g.bigTraces[0]) != distinct {
		t.Fatalf("big trace sets: %d, of key 0: %d", len(g.bigTraces), len(g.bigTraces[0]))
	}
}
