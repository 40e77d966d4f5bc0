package controller

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/telemetry"
	"github.com/retrycap/retrycap/internal/workload"
)

// countedRandomWorkload is workload i of ns with random upstreams among n workloads (attempts 1
// to 3), labelled with its name and, at random, a tier label a Service may select.
func countedRandomWorkload(rng *rand.Rand, ns string, i, n int) workload.Workload {
	name := fmt.Sprintf("w%d", i)
	labels := []string{annotations.NameLabel, name}
	if rng.IntN(2) == 0 {
		labels = append(labels, "tier", fmt.Sprintf("t%d", rng.IntN(2)))
	}
	w := workload.Workload{Kind: workload.KindDeployment, Namespace: ns, Name: name, Labels: workload.PairsFrom(labels...)}
	var ups []string
	seen := map[int]bool{}
	for range rng.IntN(3) {
		t := rng.IntN(n)
		if t == i || seen[t] {
			continue
		}
		seen[t] = true
		ups = append(ups, fmt.Sprintf("w%d=%d", t, 1+rng.IntN(3)))
	}
	if len(ups) > 0 {
		w.Annotations = workload.PairsFrom(annotations.Upstreams, strings.Join(ups, ", "))
	}
	return w
}

// countedRandomObservation is a poll of random edges between the n workloads (and a Service "tier"
// some of them are behind), with a gateway-called entrypoint at random.
func countedRandomObservation(rng *rand.Rand, ns string, n int) *telemetry.Observation {
	o := &telemetry.Observation{Window: 5 * time.Minute, Sources: []telemetry.Source{telemetry.SourceIstio}}
	for range rng.IntN(3 * n) {
		f, t := rng.IntN(n), rng.IntN(n+1)
		to := fmt.Sprintf("w%d", t)
		if t == n {
			to = "tier"
		}
		o.Edges = append(o.Edges, telemetry.Edge{Source: telemetry.SourceIstio, From: telemetry.Caller{Namespace: ns, Name: fmt.Sprintf("w%d", f)},
			To: telemetry.Callee{Namespace: ns, Name: to}, Requests: 30, RatePerSecond: float64(1+rng.IntN(40)) / 10})
	}
	if rng.IntN(2) == 0 {
		o.Entrypoints = append(o.Entrypoints, telemetry.Entrypoint{Callee: telemetry.Callee{Namespace: ns, Name: fmt.Sprintf("w%d", rng.IntN(n))}, Via: "istio-system/istio-ingressgateway", Source: telemetry.SourceIstio, RatePerSecond: 2})
	}
	return o
}

// TestCountedViewEqualsFullPath: over random sequences of changes (a workload's upstreams or
// labels, one added or removed, a Service added, changed or removed, the policy's cap, a new
// poll, a failed poll, nothing at all), a reconciler that reuses its counted views writes exactly
// the status of one that computes every view anew, reconcile after reconcile; and the reuse
// happens (a reconcile with nothing changed hits the kept view).
func TestCountedViewEqualsFullPath(t *testing.T) {
	const ns, n = "shop", 12
	ctx := context.Background()
	at := time.Unix(1_800_000_000, 0)
	hits := 0
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 27))
		x := index.New()
		for i := range n {
			x.Put(countedRandomWorkload(rng, ns, i, n))
		}
		obs := &Observer{}
		poll := func(fail bool) {
			next := &Observation{Graphs: true, GraphAt: at, URL: "http://prometheus:9090", Window: 5 * time.Minute}
			if last := obs.latest; last != nil {
				next.LastGraph, next.LastGraphAt = last.LastGraph, last.LastGraphAt
			}
			if fail {
				next.GraphErr = fmt.Errorf("connection refused")
			} else {
				next.Graph = countedRandomObservation(rng, ns, n)
				next.LastGraph, next.LastGraphAt = next.Graph, next.GraphAt
			}
			at = at.Add(time.Minute)
			obs.latest = next
		}
		poll(false)
		now := func() time.Time { return at }
		cached := &RetryPolicyReconciler{Index: x, Observed: obs, Now: now}
		full := &RetryPolicyReconciler{Index: x, Observed: obs, Now: now}
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all", Generation: 1}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 9}}
		for step := range 30 {
			change := "nothing"
			switch k := rng.IntN(9); k {
			case 0:
				x.Put(countedRandomWorkload(rng, ns, rng.IntN(n), n))
				change = "a workload changed"
			case 1:
				x.Remove(workload.Workload{Kind: workload.KindDeployment, Namespace: ns, Name: fmt.Sprintf("w%d", rng.IntN(n))})
				change = "a workload removed"
			case 2:
				x.PutService(workload.Service{Namespace: ns, Name: "tier", Selector: map[string]string{"tier": fmt.Sprintf("t%d", rng.IntN(2))}})
				change = "Service tier put"
			case 3:
				x.RemoveService(workload.Service{Namespace: ns, Name: "tier"})
				change = "Service tier removed"
			case 4:
				p.Spec.MaxAmplification = int32(3 + rng.IntN(20))
				p.Generation++
				change = "the cap changed"
			case 5:
				poll(false)
				change = "a poll"
			case 6:
				poll(true)
				change = "a failed poll"
			}
			in, rb, err := cached.compute(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
			kept := cached.counted.get(key)
			got := cached.nextStatus(p, in, rb)
			if change == "nothing" && kept != nil {
				// The same inputs and the same poll: the kept view must be the one used.
				if cached.counted.get(key) != kept {
					t.Fatalf("seed %d step %d: nothing changed, yet the view was computed anew", seed, step)
				}
				hits++
			}
			full.counted = countedViews{} // every view computed anew
			in, rb, err = full.compute(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			want := full.nextStatus(p, in, rb)
			if !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("seed %d step %d (%s): the kept view's status differs from the full path's:\n got %+v\nwant %+v", seed, step, change, got, want)
			}
			p.Status = *want
		}
	}
	if hits == 0 {
		t.Fatal("no reconcile reused its kept view: the cache was never exercised")
	}
	t.Logf("%d reconciles with nothing changed reused the kept view", hits)
}
