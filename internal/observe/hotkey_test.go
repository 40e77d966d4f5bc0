package observe

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
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
	if limit := 2 * traceWalk * distinct * repeats; g.traceSteps > limit {
		t.Fatalf("%d list steps for %d lines, over %d (traceWalk per line for the trace ids and the services)", g.traceSteps, distinct*repeats, limit)
	}
	// The set's answer is the list's: a second key with few trace ids keeps its list only.
	if _, ok := g.bigTraces[0]; !ok || len(g.bigTraces) != 1 || len(g.bigTraces[0]) != distinct {
		t.Fatalf("big trace sets: %d, of key 0: %d", len(g.bigTraces), len(g.bigTraces[0]))
	}
}

// TestHotKeyServicesLinear: one key sent to 50,000 services (a constant x-request-id across a
// scanner's Host headers; with the pod's service as the caller, a call edge each) is folded and
// laid out in work linear in the lines: before, each line walked the key's services and edges
// so far, and the depths walked the services for each edge (50,000 lines: 5 s of CPU to fold,
// the depths cubic).
func TestHotKeyServicesLinear(t *testing.T) {
	const targets, repeats = 50_000, 2
	g := NewGrouper()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range targets * repeats {
		// edge > gateway > every target
		g.Add(Attempt{Direction: Outbound, Time: t0.Add(time.Duration(i)), Caller: "gateway", Target: fmt.Sprintf("h%05d", i%targets), Status: 503, RequestID: "same"})
	}
	g.Add(Attempt{Direction: Outbound, Time: t0, Caller: "edge", Target: "gateway", Status: 200, RequestID: "same"})
	if limit := 2 * traceWalk * (targets*repeats + 1); g.traceSteps > limit {
		t.Fatalf("%d list steps for %d attempts, over %d", g.traceSteps, targets*repeats+1, limit)
	}
	before := g.traceSteps
	kr, ok := g.Key("same")
	if !ok || kr.Attempts != targets*repeats+1 || len(kr.Services) != targets+1 || kr.Services[0].Service != "gateway" || kr.Services[0].Depth != 1 ||
		kr.Services[1].Depth != 2 || kr.Services[targets].Depth != 2 || kr.Services[targets].Attempts != repeats || kr.Amplification != repeats ||
		len(kr.Callers) != 1 || kr.Callers[0] != "edge" {
		t.Fatalf("key same: %d attempts, %d services, first %+v, callers %v", kr.Attempts, len(kr.Services), kr.Services[:2], kr.Callers)
	}
	if steps, limit := g.traceSteps-before, 4*(targets+2); steps > limit {
		t.Fatalf("the depths took %d edge steps for %d edges, over %d", steps, targets+2, limit)
	}
}

// TestMethodsPast63: a key's methods are its own however many methods the run saw. Methods
// are a bit each in a 64-bit word; the 64th and later shared the last bit, so a key sent only
// "M70" was shown with every method from the 64th on ("M63,...,M99").
func TestMethodsPast63(t *testing.T) {
	g := NewGrouper()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 100 {
		g.Add(Attempt{Direction: Outbound, Time: t0, Target: "web", Status: 200, RequestID: "all", Method: fmt.Sprintf("M%02d", i)})
	}
	g.Add(Attempt{Direction: Outbound, Time: t0, Target: "web", Status: 200, RequestID: "one", Method: "M70"})
	g.Add(Attempt{Direction: Outbound, Time: t0, Target: "web", Status: 200, RequestID: "two", Method: "M63"})
	g.Add(Attempt{Direction: Outbound, Time: t0, Target: "web", Status: 200, RequestID: "two", Method: "GET"})
	g.Add(Attempt{Direction: Outbound, Time: t0, Target: "web", Status: 200, RequestID: "two", Method: "M99"})
	for key, want := range map[string]string{"one": "M70", "two": "GET,M63,M99"} {
		if kr, _ := g.Key(key); kr.Methods != want {
			t.Errorf("key %s: methods %q, want %q", key, kr.Methods, want)
		}
	}
	if kr, _ := g.Key("all"); len(strings.Split(kr.Methods, ",")) != 100 {
		t.Errorf("key all: %d methods, want 100", len(strings.Split(kr.Methods, ",")))
	}
}
