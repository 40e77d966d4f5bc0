package controller

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/controlplane"
	"github.com/retrycap/retrycap/internal/kubeobj"
	retrycapscheme "github.com/retrycap/retrycap/internal/scheme"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/workload"
)

// benchWorkloads is the size of the benchmark's namespace.
const benchWorkloads = 5000

// discardEvents is an events recorder that records nothing: the benchmark measures Reconcile,
// not the event broadcaster.
type discardEvents struct{}

func (discardEvents) Eventf(runtime.Object, runtime.Object, string, string, string, string, ...any) {}

// benchUpstreams gives workload i of n its upstreams: a binary tree (i calls 2i+1 and 2i+2),
// every third edge with 2 attempts, so the graph has 5k services, ~5k edges, depth 12 and an
// amplification of 64, above the cap (16 or 32): the analysis lists 20 violations and plans a
// rewrite, the expensive path.
func benchUpstreams(i, n int) string {
	var ups []string
	for _, c := range []int{2*i + 1, 2*i + 2} {
		if c < n {
			a := 1
			if c%3 == 0 {
				a = 2
			}
			ups = append(ups, fmt.Sprintf("svc-%04d=%d", c, a))
		}
	}
	return strings.Join(ups, ", ")
}

// BenchmarkReconcile5k measures Reconcile of one policy selecting 5,000 Deployments, read from
// a synced informer cache of a real API server (the workloads are created once, before the
// timer). Sub-benchmarks:
//
//   - noop: the steady state, nothing changed: get the policy and list the workloads from the
//     cache, build and analyse the graph, set the status, compare, no write.
//   - compute: the pure part alone (workload.Analyze + status.Set) on the same 5,000 workloads.
//   - write: the status changed (the cap flips between two values each iteration), so the
//     patch goes to the API server: what a workload change that moves the numbers costs.
func BenchmarkReconcile5k(b *testing.B) {
	ctx := context.Background()
	cpl, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cpl.Stop() }()
	ctrl.SetLogger(discardLogger())
	scheme := retrycapscheme.New()
	direct, err := client.New(cpl.Config, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	const ns = "bench"
	if err := direct.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	createWorkloads(ctx, b, direct, ns, benchWorkloads)
	b.Logf("created %d Deployments in %s", benchWorkloads, time.Since(start).Round(time.Millisecond))

	c, err := cache.New(cpl.Config, cache.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = c.Start(cctx) }()
	cached, err := client.New(cpl.Config, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: c}})
	if err != nil {
		b.Fatal(err)
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "all"}, Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 16}}
	if err := direct.Create(ctx, p); err != nil {
		b.Fatal(err)
	}
	key := types.NamespacedName{Namespace: ns, Name: "all"}
	counted := newCountingClient(cached)
	r := &RetryPolicyReconciler{Client: counted, Recorder: discardEvents{}}
	// Warm up: starts and syncs the informers, writes the first status; then wait until the
	// cache holds that status so that the noop runs write nothing.
	waitFor(b, func() bool {
		ws, err := kubeobj.ListWorkloads(ctx, cached, ns)
		return err == nil && len(ws) == benchWorkloads
	})
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
		b.Fatal(err)
	}
	waitFor(b, func() bool {
		var got v1alpha1.RetryPolicy
		return cached.Get(ctx, key, &got) == nil && got.Status.ObservedGeneration == 1
	})
	var st v1alpha1.RetryPolicy
	_ = cached.Get(ctx, key, &st)
	b.Logf("graph: %d services, %d edges, amplification %d, %d chains, %d violations",
		st.Status.Services, st.Status.Edges, st.Status.Amplification, len(st.Status.Chains), len(st.Status.Violations))

	b.Run("noop", func(b *testing.B) {
		before := counted.Counts(key).StatusWrites
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				b.Fatal(err)
			}
		}
		if w := counted.Counts(key).StatusWrites - before; w != 0 {
			b.Fatalf("%d status writes in the noop runs, want 0", w)
		}
	})
	b.Run("compute", func(b *testing.B) {
		var pol v1alpha1.RetryPolicy
		if err := cached.Get(ctx, key, &pol); err != nil {
			b.Fatal(err)
		}
		ws, err := kubeobj.ListWorkloads(ctx, cached, ns)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			res, a := workload.Analyze(workload.ForRetryPolicy(&pol), ws, nil)
			next := pol.Status.DeepCopy()
			status.Set(next, status.Input{Generation: pol.Generation, Result: res, Analysis: a, Now: metav1.Now()})
		}
	})
	b.Run("write", func(b *testing.B) {
		caps := []int32{32, 16}
		i := 0
		for b.Loop() {
			b.StopTimer()
			// Flip the cap, and wait until the cache has the new spec, so the timed Reconcile
			// sees a changed status and patches it.
			var pol v1alpha1.RetryPolicy
			if err := direct.Get(ctx, key, &pol); err != nil {
				b.Fatal(err)
			}
			pol.Spec.MaxAmplification = caps[i%2]
			i++
			if err := direct.Update(ctx, &pol); err != nil {
				b.Fatal(err)
			}
			waitFor(b, func() bool {
				var got v1alpha1.RetryPolicy
				return cached.Get(ctx, key, &got) == nil && got.Generation == pol.Generation && got.Status.ObservedGeneration == pol.Generation-1
			})
			writes := counted.Counts(key).StatusWrites
			b.StartTimer()
			if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			if counted.Counts(key).StatusWrites != writes+1 {
				b.Fatal("the status was not written")
			}
			b.StartTimer()
		}
	})
}

func createWorkloads(ctx context.Context, b *testing.B, c client.Client, ns string, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				name := fmt.Sprintf("svc-%04d", i)
				d := &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
					Spec: appsv1.DeploymentSpec{
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": name}},
						Template: corev1.PodTemplateSpec{
							ObjectMeta: metav1.ObjectMeta{
								Labels:      map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"},
								Annotations: map[string]string{"retrycap.dev/upstreams": benchUpstreams(i, n)},
							},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "retrycap/lab-app:v0.1.0"}}},
						},
					},
				}
				if err := c.Create(ctx, d); err != nil {
					select {
					case errs <- fmt.Errorf("creating %s: %w", name, err):
					default:
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// waitFor polls cond (the benchmark has no Gomega) until it holds, for at most two minutes.
func waitFor(b *testing.B, cond func() bool) {
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 2*time.Minute, true,
		func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		b.Fatalf("waiting: %v", err)
	}
}

func discardLogger() logr.Logger { return logr.Discard() }

// BenchmarkCompute5k is the pure part of Reconcile (shared builder, analysis, status setters)
// on the same 5,000 workloads built in memory: no API server, so it is stable where
// BenchmarkReconcile5k shares the cores with kube-apiserver and etcd.
func BenchmarkCompute5k(b *testing.B) {
	ws := make([]workload.Workload, benchWorkloads)
	for i := range ws {
		name := fmt.Sprintf("svc-%04d", i)
		ws[i] = workload.Workload{Kind: workload.KindDeployment, Namespace: "bench", Name: name,
			Labels:      workload.PairsOf(map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bench"}),
			Annotations: workload.PairsOf(map[string]string{"retrycap.dev/upstreams": benchUpstreams(i, benchWorkloads)})}
	}
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "all", Generation: 1},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 16, Retry: v1alpha1.RetrySettings{DefaultAttempts: 1}}}
	b.ReportAllocs()
	for b.Loop() {
		res, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil)
		var st v1alpha1.RetryPolicyStatus
		status.Set(&st, status.Input{Generation: p.Generation, Result: res, Analysis: a, Now: metav1.Now()})
		if len(st.Violations) != 20 {
			b.Fatalf("%d violations, want 20", len(st.Violations))
		}
	}
}
