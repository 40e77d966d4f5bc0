package webhooks

import (
	"fmt"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/workload"
)

// fiveThousand is a namespace of 5000 workloads in chains of five (svc-i calls svc-i+1 with 2
// attempts), all selected by one policy, like the handler benchmark in docs/benchmarks.
func fiveThousand() []workload.Workload {
	ws := make([]workload.Workload, 0, 5000)
	for i := 0; i < 5000; i++ {
		ups := ""
		if i%5 != 4 {
			ups = fmt.Sprintf("svc-%d=2", i+1)
		}
		ws = append(ws, deployment(fmt.Sprintf("svc-%d", i), ups))
	}
	return ws
}

func BenchmarkDecide5k(b *testing.B) {
	ws := fiveThousand()
	p := testPolicy("checkout", 4, v1alpha1.EnforcementReject, partOfShop)
	p.Spec.Entrypoints = nil
	in := GateInput{Policies: []*v1alpha1.RetryPolicy{p}, Workloads: ws, Incoming: deployment("svc-2", "svc-3=3")}
	if d := Decide(in); d.Allowed {
		b.Fatalf("expected a denial")
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(in)
	}
}

// BenchmarkGateDecision5k is what the handler does per request once decoded: pick the relevant
// workloads from the index of a 5k-workload namespace, then Decide.
func BenchmarkGateDecision5k(b *testing.B) {
	x := newWorkloadIndex()
	for _, w := range fiveThousand() {
		x.put(w)
	}
	p := testPolicy("checkout", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = nil
	incoming := deployment("svc-2", "svc-3=3")
	decide := func() Decision {
		return Decide(GateInput{Policies: []*v1alpha1.RetryPolicy{p}, Workloads: x.Relevant("shop", incoming.ServiceName(), upstreamServices(incoming)), Incoming: incoming})
	}
	if d := decide(); d.Allowed || d.Message != Decide(GateInput{Policies: []*v1alpha1.RetryPolicy{p}, Workloads: x.Workloads("shop"), Incoming: incoming}).Message {
		b.Fatalf("the relevant subset decides differently: %q", d.Message)
	}
	b.ReportAllocs()
	for b.Loop() {
		decide()
	}
}

// BenchmarkGateWorstCase5k is the handler's worst case once decoded: a create of the shared
// "auth" that all 5000 workloads reach, with a new retrying upstream, so every workload of the
// namespace is relevant and the whole namespace's graph is built and judged.
func BenchmarkGateWorstCase5k(b *testing.B) {
	x := newWorkloadIndex()
	for i := 0; i < 4999; i++ {
		ups := fmt.Sprintf("svc-%d=2", i+1)
		if i%5 == 4 {
			ups = "auth=2"
		}
		x.put(deployment(fmt.Sprintf("svc-%d", i), ups))
	}
	p := testPolicy("checkout", 64, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = nil
	incoming := deployment("auth", "db=3")
	decide := func() Decision {
		return Decide(GateInput{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: incoming, LoadParsed: func() []*workload.Parsed {
			return x.RelevantParsed("shop", incoming.ServiceName(), upstreamServices(incoming))
		}})
	}
	if d := decide(); d.Allowed || !strings.Contains(d.Message, "= 96 > cap 64") {
		b.Fatalf("expected a denial at 96: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		decide()
	}
}
