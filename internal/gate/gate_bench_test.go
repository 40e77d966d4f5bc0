package gate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
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
		ws = append(ws, workloadtest.Deployment(fmt.Sprintf("svc-%d", i), ups))
	}
	return ws
}

func BenchmarkDecide5k(b *testing.B) {
	ws := fiveThousand()
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, partOfShop)
	p.Spec.Entrypoints = nil
	in := Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(ws), Incoming: workloadtest.Deployment("svc-2", "svc-3=3")}
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
	x := index.New()
	for _, w := range fiveThousand() {
		x.Put(w)
	}
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = nil
	incoming := workloadtest.Deployment("svc-2", "svc-3=3")
	decide := func() Decision {
		return Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(relevant(x, "shop", incoming.ServiceName(), index.UpstreamServices(incoming))), Incoming: incoming})
	}
	if d := decide(); d.Allowed || d.Message != Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: workloads(x.Workloads("shop")), Incoming: incoming}).Message {
		b.Fatalf("the relevant subset decides differently: %q", d.Message)
	}
	b.ReportAllocs()
	for b.Loop() {
		decide()
	}
}

// worstCaseIndex is 5000 workloads in chains of five, the last of each calling the shared
// "auth", which is not a workload yet, all selected by one Reject policy of cap 64: a create of
// auth with a retrying upstream is judged on paths from all 5000.
func worstCaseIndex() (*index.Index, *v1alpha1.RetryPolicy, workload.Workload) {
	x := index.New()
	for i := 0; i < 4999; i++ {
		ups := fmt.Sprintf("svc-%d=2", i+1)
		if i%5 == 4 {
			ups = "auth=2"
		}
		x.Put(workloadtest.Deployment(fmt.Sprintf("svc-%d", i), ups))
	}
	p := workloadtest.Policy("checkout", 64, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = nil
	return x, p, workloadtest.Deployment("auth", "db=3")
}

// handlerInput is the Input the handler gives Decide (see WorkloadGate.Handle), with the
// prepared graph always or never used.
func handlerInput(x *index.Index, p *v1alpha1.RetryPolicy, incoming workload.Workload, useBase bool) Input {
	mode := index.BaseNever
	if useBase {
		mode = index.BaseAlways
	}
	return Input{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: incoming, Source: x.ForMode(incoming, mode)}
}

// BenchmarkGateWorstCase5k is the handler's worst case once decoded: a create of the shared
// "auth" that all 5000 workloads reach, judged against the policy's prepared graph of the
// namespace (built by the first request after a change, then shared).
func BenchmarkGateWorstCase5k(b *testing.B) {
	x, p, incoming := worstCaseIndex()
	if rc := x.RelevantCount("shop", []string{"auth"}, []string{"db"}); !x.WantsBase("shop", rc) {
		b.Fatalf("the handler would not use the prepared graph for %d relevant workloads", rc)
	}
	if d := Decide(handlerInput(x, p, incoming, true)); d.Allowed || !strings.Contains(d.Message, "= 96 > cap 64; auth may keep db=2") {
		b.Fatalf("expected a denial at 96: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(handlerInput(x, p, incoming, true))
	}
}

// BenchmarkGateWorstCase5kAfterChange is the same request right after a change to the namespace:
// the first request pays for the prepared graph. Every iteration changes a workload first.
func BenchmarkGateWorstCase5kAfterChange(b *testing.B) {
	x, p, incoming := worstCaseIndex()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		x.Put(workloadtest.Deployment("svc-0", fmt.Sprintf("svc-1=%d", 1+i%2)))
		if d := Decide(handlerInput(x, p, incoming, true)); d.Allowed {
			b.Fatal("admitted")
		}
	}
}

// BenchmarkGateWorstCase5kBuild is the same request with the graph built for it, as the gate did
// before it kept prepared graphs (and still does for a request whose chains are a small part of
// the namespace).
func BenchmarkGateWorstCase5kBuild(b *testing.B) {
	x, p, incoming := worstCaseIndex()
	if d := Decide(handlerInput(x, p, incoming, false)); d.Allowed || !strings.Contains(d.Message, "= 96 > cap 64; auth may keep db=2") {
		b.Fatalf("expected a denial at 96: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(handlerInput(x, p, incoming, false))
	}
}

// clusterWorstCaseIndex is worstCaseIndex across ten namespaces: chains of five whose every hop
// goes into the next namespace (svc-i of bench-c<i%10> calls svc-i+1 of bench-c<(i+1)%10>), the
// last of each calling the shared "auth" of bench-c0, which is not a workload yet; one Reject
// ClusterRetryPolicy of cap 64 over the ten namespaces: a create of auth with a retrying upstream
// is judged on paths from all 5000.
func clusterWorstCaseIndex() (*index.Index, *v1alpha1.ClusterRetryPolicy, workload.Workload) {
	x := index.New()
	ns := func(i int) string { return fmt.Sprintf("bench-c%d", i%10) }
	for i := 0; i < 10; i++ {
		x.PutNamespace(ns(i), map[string]string{"bench": "cluster"})
	}
	for i := 0; i < 4999; i++ {
		ups := fmt.Sprintf("svc-%d.%s=2", i+1, ns(i+1))
		if i%5 == 4 {
			ups = "auth.bench-c0=2"
		}
		x.Put(teamDeployment(ns(i), fmt.Sprintf("svc-%d", i), ups))
	}
	p := clusterPolicy("chain", 64, v1alpha1.EnforcementReject)
	p.Spec.NamespaceSelector.MatchLabels = map[string]string{"bench": "cluster"}
	p.UID, p.Generation = "bench", 1
	return x, p, teamDeployment("bench-c0", "auth", "db=3")
}

func clusterHandlerInput(x *index.Index, p *v1alpha1.ClusterRetryPolicy, incoming workload.Workload, mode index.BaseMode) Input {
	return Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Incoming: incoming, Source: x.ForMode(incoming, mode)}
}

// BenchmarkGateClusterWorstCase5k is BenchmarkGateWorstCase5k for a ClusterRetryPolicy over ten
// namespaces: the handler's path (the prepared cluster graph when the relevant workloads are a
// large share of the scope's).
func BenchmarkGateClusterWorstCase5k(b *testing.B) {
	x, p, incoming := clusterWorstCaseIndex()
	const want = "= 96 > cap 64; auth.bench-c0 may keep db.bench-c0=2"
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAuto} {
		if d := Decide(clusterHandlerInput(x, p, incoming, mode)); d.Allowed || !strings.Contains(d.Message, want) {
			b.Fatalf("mode %d: expected a denial at 96: %+v", mode, d)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(clusterHandlerInput(x, p, incoming, index.BaseAuto))
	}
}

// BenchmarkGateClusterWorstCase5kBuild is the same request with the cluster graph built for it.
func BenchmarkGateClusterWorstCase5kBuild(b *testing.B) {
	x, p, incoming := clusterWorstCaseIndex()
	b.ReportAllocs()
	for b.Loop() {
		Decide(clusterHandlerInput(x, p, incoming, index.BaseNever))
	}
}

// BenchmarkGateWorstCase5kAuto is BenchmarkGateWorstCase5k on the handler's own path (the
// relevant workloads counted to decide on the prepared graph): the RetryPolicy figure to set
// BenchmarkGateClusterWorstCase5k against.
func BenchmarkGateWorstCase5kAuto(b *testing.B) {
	x, p, incoming := worstCaseIndex()
	in := func() Input {
		return Input{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: incoming, Source: x.ForMode(incoming, index.BaseAuto)}
	}
	if d := Decide(in()); d.Allowed || !strings.Contains(d.Message, "= 96 > cap 64; auth may keep db=2") {
		b.Fatalf("expected a denial at 96: %+v", d)
	}
	b.ReportAllocs()
	for b.Loop() {
		Decide(in())
	}
}
