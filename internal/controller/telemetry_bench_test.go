package controller

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
)

// The scale: 5,000 workloads, 20,000 observed edges. Edges go from a lower to a higher
// index (no cycle), four per workload at most.
const telBenchWorkloads, telBenchObserved = 5000, 20000

func telBenchEdge(i int) (int, int) {
	from := i % telBenchWorkloads
	to := from + 1 + (i/telBenchWorkloads)*7 + i%13
	if to >= telBenchWorkloads {
		to = telBenchWorkloads - 1
		if from == to {
			from--
		}
	}
	return from, to
}

// telBenchIndex is an index of 5,000 Deployments (the manager's, fed as its informers would)
// declaring the observed edges i with declared(i): 3 attempts out of the first ten workloads,
// one elsewhere (more would saturate the amplification on chains thousands of hops long).
func telBenchIndex(ns string, declared func(i int) bool) *index.Index {
	ups := make([][]string, telBenchWorkloads)
	seen := map[[2]int]bool{} // an upstream named twice makes the annotation invalid
	for i := range telBenchObserved {
		f, t := telBenchEdge(i)
		if !declared(i) || seen[[2]int{f, t}] {
			continue
		}
		seen[[2]int{f, t}] = true
		up := fmt.Sprintf("s%04d", t)
		if f < 10 {
			up += "=3"
		}
		ups[f] = append(ups[f], up)
	}
	x := index.New()
	for i := range telBenchWorkloads {
		name := fmt.Sprintf("s%04d", i)
		w := workload.Workload{Kind: workload.KindDeployment, Namespace: ns, Name: name, Labels: workload.PairsFrom(annotations.NameLabel, name)}
		if len(ups[i]) > 0 {
			w.Annotations = workload.PairsFrom(annotations.Upstreams, strings.Join(ups[i], ", "))
		}
		x.Put(w)
	}
	return x
}

// telBenchObservation is one poll's graph: the 20,000 edges as Istio reports them.
func telBenchObservation(ns string) *telemetry.Observation {
	o := &telemetry.Observation{Window: 5 * time.Minute, Sources: []telemetry.Source{telemetry.SourceIstio}}
	for i := range telBenchObserved {
		f, t := telBenchEdge(i)
		o.Edges = append(o.Edges, telemetry.Edge{Source: telemetry.SourceIstio, From: telemetry.Caller{Namespace: ns, Name: fmt.Sprintf("s%04d", f)},
			To: telemetry.Callee{Namespace: ns, Name: fmt.Sprintf("s%04d", t)}, Requests: 300, RatePerSecond: 1 + float64(i%100)/10})
	}
	return o
}

// BenchmarkReconcileTelemetry measures one reconcile's work of a policy selecting 5,000
// workloads, as the manager does it (the shared index, the incremental graph, the status
// computed and compared; no write: the stored status is the last one), without telemetry and
// with an Observer holding 20,000 observed edges. The API server's Get (from the cache) and a
// patch are the same in both and left out. Cases:
//
//   - declared-10k: 10,000 edges declared, no telemetry (the anchor of half-declared).
//   - telemetry-half: the same, and 20,000 observed: 10,000 of them undeclared, counted in the
//     amplification (a graph built anew with them and analysed once per poll and declared
//     graph; the reconciles in between reuse it: countedViews).
//   - telemetry-half-newpoll: telemetry-half with a new poll before each reconcile (of the same
//     content): the view is computed anew every time, the cost of the first reconcile of each
//     policy after a poll.
//   - declared-20k: every observed edge declared, no telemetry (the anchor of complete).
//   - telemetry-complete: the same, 20,000 observed, all declared: compared once per poll,
//     nothing rebuilt.
//
// The heap each case keeps (the index, the kept graph and, with telemetry, the Observer's
// latest observation) is reported as retained-MiB.
func BenchmarkReconcileTelemetry(b *testing.B) {
	const ns = "bench"
	for _, tc := range []struct {
		name      string
		declared  func(int) bool
		telemetry bool
		newPoll   bool
	}{
		{"declared-10k", func(i int) bool { return i%2 == 0 }, false, false},
		{"telemetry-half", func(i int) bool { return i%2 == 0 }, true, false},
		{"telemetry-half-newpoll", func(i int) bool { return i%2 == 0 }, true, true},
		{"declared-20k", func(int) bool { return true }, false, false},
		{"telemetry-complete", func(int) bool { return true }, true, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			before := heapInUse()
			r := &RetryPolicyReconciler{Index: telBenchIndex(ns, tc.declared), Now: func() time.Time { return time.Unix(1_800_000_000, 0) }}
			if tc.telemetry {
				r.Observed = &Observer{}
				r.Observed.latest = &Observation{Graphs: true, Graph: telBenchObservation(ns), GraphAt: r.Now(), URL: "http://prometheus:9090", Window: 5 * time.Minute}
				r.Observed.latest.LastGraph, r.Observed.latest.LastGraphAt = r.Observed.latest.Graph, r.Observed.latest.GraphAt
			}
			p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all", Generation: 1}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 1000}}
			reconcile := func() *v1alpha1.RetryPolicyStatus {
				in, rebuild, err := r.compute(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				return r.nextStatus(p, in, rebuild)
			}
			p.Status = *reconcile() // the first reconcile wrote it; the kept graph exists
			retained := float64(heapInUse()-before) / (1 << 20)
			g := p.Status.Graph
			if tc.telemetry && (g == nil || g.Counts.Observed == 0) || len(r.Index.Parsed(ns)) != telBenchWorkloads {
				b.Fatalf("no observation in the status: %+v", g)
			}
			b.Logf("%s: %d services, %d edges, amplification %d; graph %+v", tc.name, p.Status.Services, p.Status.Edges, p.Status.Amplification, graphCounts(g))
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				if tc.newPoll {
					o := *r.Observed.latest // another poll that saw the same
					r.Observed.latest = &o
				}
				if next := reconcile(); !equality.Semantic.DeepEqual(&p.Status, next) {
					b.Fatal("the status changed between two reconciles of the same input")
				}
			}
			// The process's CPU time per reconcile (GC included): on a shared machine wall time
			// per op mostly measures the other processes.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
			b.ReportMetric(retained, "retained-MiB")
		})
	}
}

func graphCounts(g *v1alpha1.GraphStatus) any {
	if g == nil {
		return nil
	}
	return g.Counts
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
