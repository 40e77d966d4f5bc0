package workload

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/sidecar"
)

// Time along the chain (DESIGN.md; the model is graph.AnalyzeTime's): the hops of r's graph with
// their timeouts, kept apart from the graph (graph.Timing) so that a Result others read is not
// changed.

// OwnLayer is the time layer of workload w's own calls to upstream u (attempts and calls filled
// in, as Upstreams gives them): u's attempts, its per-try timeout from the annotation
// ("payment=3/2s") or else the policy's spec.retry.perTryTimeout, and the policy's backoff,
// which retrycap's proxy applies. Named after the workload, whose annotation sets it.
func OwnLayer(spec *v1alpha1.RetryPolicySpec, w Workload, u annotations.Upstream) graph.TimeLayer {
	l := graph.TimeLayer{Name: w.String(), Tries: int64(max(u.Attempts, 1)), PerTry: u.PerTryTimeout,
		BackoffBase: defaults.BackoffBase, BackoffMax: defaults.BackoffMax}
	if l.PerTry == 0 {
		l.PerTry = duration(spec.Retry.PerTryTimeout, defaults.PerTryTimeout)
	}
	l.BackoffBase = duration(spec.Retry.Backoff.Base, defaults.BackoffBase)
	l.BackoffMax = duration(spec.Retry.Backoff.Max, defaults.BackoffMax)
	return l
}

func duration(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// MaxTimeToAnswer is the policy's spec.maxTimeToAnswer, 0 when unset.
func (r *Result) MaxTimeToAnswer() time.Duration {
	if d := r.Spec().MaxTimeToAnswer; d != nil {
		return d.Duration
	}
	return 0
}

// Timing returns the hops of r's graph: for every edge a selected workload declares, its own
// layer (OwnLayer) and the mesh's layers under it (mesh.Set.CallHops: one hop per route a
// request may take), each declaration of a shared edge kept (the worst counts); for every entrypoint a
// north-south route reaches, the route's layer with the client's own tries (mesh.Set.EntryHops:
// one per rule or route to it). r's graph is not changed.
func (r *Result) Timing() *graph.Timing {
	t := graph.NewTiming(r.Graph)
	spec := r.Spec()
	def := defaultAttempts(spec)
	for _, x := range r.kept {
		nodes := []string{r.serviceNode(x)}
		if r.NodesOf != nil {
			nodes = r.NodesOf[x.key]
		}
		for i, u := range x.upstreams {
			a, _ := edgeValues(u, def)
			u.Attempts = int32(a)
			own := OwnLayer(spec, x.Workload, u)
			var me mesh.Edge
			if r.mesh != nil {
				me = r.mesh.Edge(x.Workload.meshCaller(), u.Name)
			}
			to := r.upstreamNode(x, i)
			for _, h := range r.mesh.CallHops(own, x.Workload.meshCaller(), u.Name, me) {
				for _, n := range nodes {
					t.AddHop(n, to, h)
				}
			}
		}
	}
	for node, m := range r.MeshEntry {
		for _, h := range r.mesh.EntryHops(mesh.Edge{Layers: m.Layers}, m.Alternatives) {
			t.AddEntryHop(node, m.App, h)
		}
	}
	return t
}

// MeshCall is one call the time model times (Timing): a selected workload's upstream, on graph
// edge From -> To, with the caller and the callee as the mesh reads them.
type MeshCall struct {
	From, To string
	Caller   mesh.Caller
	Callee   string
}

// MeshCalls are the calls Timing times through the mesh, in its order (a workload of several
// nodes: one call each): the mesh gate asks the Set which routes each may take
// (mesh.Set.LinkerdRoutes). None without a mesh Set.
func (r *Result) MeshCalls() []MeshCall {
	if r.mesh == nil {
		return nil
	}
	var out []MeshCall
	for _, x := range r.kept {
		nodes := []string{r.serviceNode(x)}
		if r.NodesOf != nil {
			nodes = r.NodesOf[x.key]
		}
		for i, u := range x.upstreams {
			to := r.upstreamNode(x, i)
			for _, n := range nodes {
				out = append(out, MeshCall{From: n, To: to, Caller: x.Workload.meshCaller(), Callee: u.Name})
			}
		}
	}
	return out
}

// AnalyzeTime is graph.AnalyzeTimeWith of r's graph and Timing, checked against the policy's
// spec.maxTimeToAnswer.
func (r *Result) AnalyzeTime() *graph.TimeAnalysis {
	return graph.AnalyzeTimeWith(r.Graph, r.Timing(), r.MaxTimeToAnswer())
}

// DedupProblems are spec.retry.dedupUpstreams names that are no upstream name
// (annotations.ValidateHost: lower case, as the annotation writes them), each naming the field
// and the value. The API server refuses them; a policy stored before the CRD's pattern still has
// them: the injector refuses it (InvalidPolicy, with the first) and the status says so.
func DedupProblems(spec *v1alpha1.RetryPolicySpec) []string {
	var out []string
	for _, u := range spec.Retry.DedupUpstreams {
		if r := annotations.ValidateHost(u); r != "" {
			out = append(out, fmt.Sprintf("spec.retry.dedupUpstreams %q: is not an upstream name: %s", u, r))
		}
	}
	return out
}

// DurationProblems are spec's durations out of the CRD's bounds (api/v1alpha1/defaults), in the
// order of the CRD, each naming the field and the value as the proxy's flag would be written
// ("spec.retry.perTryTimeout 99999h: must be between 1ms and 1h"); unset fields take their
// defaults, which are in bounds. The API server refuses such a value; a policy stored before
// the bounds (or built in code) still has them: the injector refuses it (InvalidPolicy, with the
// first) and the status says so (status.SetReady), never clamping one silently.
func DurationProblems(spec *v1alpha1.RetryPolicySpec) []string {
	var out []string
	for _, f := range []struct {
		field  string
		d      *metav1.Duration
		lo, hi time.Duration
	}{
		{"spec.maxTimeToAnswer", spec.MaxTimeToAnswer, defaults.MaxTimeToAnswerMin, defaults.MaxTimeToAnswerMax},
		{"spec.retry.perTryTimeout", spec.Retry.PerTryTimeout, defaults.PerTryTimeoutMin, defaults.PerTryTimeoutMax},
		{"spec.retry.backoff.base", spec.Retry.Backoff.Base, defaults.BackoffBoundMin, defaults.BackoffBoundMax},
		{"spec.retry.backoff.max", spec.Retry.Backoff.Max, defaults.BackoffBoundMin, defaults.BackoffBoundMax},
		{"spec.budget.window", spec.Budget.Window, defaults.BudgetWindowMin, defaults.BudgetWindowMax},
		{"spec.circuitBreaker.window", spec.CircuitBreaker.Window, defaults.BreakerWindowMin, defaults.BreakerWindowMax},
		{"spec.circuitBreaker.openFor", spec.CircuitBreaker.OpenFor, defaults.BreakerOpenForMin, defaults.BreakerOpenForMax},
	} {
		if f.d == nil {
			continue
		}
		if why := defaults.CheckDuration(f.d.Duration, f.lo, f.hi); why != "" {
			out = append(out, f.field+" "+sidecar.Duration(f.d.Duration)+": "+why)
		}
	}
	return out
}
