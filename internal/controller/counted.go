package controller

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/status"
	"github.com/retrycap/retrycap/internal/workload"
)

// rebuilder builds a policy's declared graph anew (countObserved adds the observed edges to a
// graph of its own: the kept one is patched by later changes), and says what it is built of.
type rebuilder struct {
	build func() *workload.Result
	// inputs are the build's inputs; nil when they cannot be told apart cheaply (the path
	// without the Index lists the workloads on every reconcile): nothing is then reused.
	inputs *graphInputs
}

// graphInputs are everything a policy's declared graph is a function of, on the Index path: the
// policy's generation and spec, the workloads (the Index hands out a new *Parsed on every change
// of one, so equal pointers are the same versions), the Service set (a new one per change) and
// the mesh's layers (the watcher swaps in a new immutable Set per change). A cluster policy's
// selected namespaces are its workloads' and Service sets' (clusterGraph merges again when one
// of those changes), and scope names them besides, for a namespace without workloads.
type graphInputs struct {
	generation int64
	spec       any
	scope      []string
	ps         []*workload.Parsed
	svcs       *workload.ServiceSet
	set        *mesh.Set
}

func (a *graphInputs) equal(b *graphInputs) bool {
	return a != nil && b != nil && a.generation == b.generation && a.svcs == b.svcs && a.set == b.set &&
		slices.Equal(a.scope, b.scope) && slices.Equal(a.ps, b.ps) && equality.Semantic.DeepEqual(a.spec, b.spec)
}

// countedView is one reconcile's observed view of a policy and what countObserved made of it:
// observeGraph and countObserved are functions of the declared graph's inputs and the poll, and
// with undeclared edges they build the graph again and analyse it (~60 ms at 5,000 workloads and
// 20,000 observed edges: docs/benchmarks.md). A reconcile with the same inputs and the same
// poll (another policy's change, a resync, a status write's echo) reuses it.
type countedView struct {
	inputs *graphInputs
	obs    *Observation
	gv     graphView
	// counted says countObserved replaced the input's graph: result, analysis, time and edges
	// are then what it put in.
	counted  bool
	result   *workload.Result
	analysis *graph.Analysis
	time     *graph.TimeAnalysis
	edges    int
}

// countedViews are the policies' last counted views. A policy is reconciled by one worker at a
// time; the map is shared by the workers.
type countedViews struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*countedView
}

func (c *countedViews) get(k types.NamespacedName) *countedView {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *countedViews) put(k types.NamespacedName, v *countedView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]*countedView{}
	}
	c.m[k] = v
}

func (c *countedViews) forget(k types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// view is observeGraph then countObserved on in (the declared graph's input), reusing the
// policy's last view when its inputs and the poll are this reconcile's. The reused result and
// analysis are never changed after they were made (status.Set and the setters read them); the
// graph status goes into the status written, so each reconcile gets its own copy.
func (c *countedViews) view(k types.NamespacedName, o *Observer, in *status.Input, generation int64, rb *rebuilder) graphView {
	obs := o.Latest()
	var inputs *graphInputs
	if rb != nil {
		inputs = rb.inputs
	}
	if obs == nil || inputs == nil || in.Result == nil {
		// Nothing observed yet, or nothing to key on: computed, not kept.
		if inputs == nil {
			c.forget(k)
		}
		return observeAndCount(obs, in, generation, rb)
	}
	if last := c.get(k); last != nil && last.obs == obs && last.inputs.equal(inputs) {
		if last.counted {
			in.Result, in.Analysis, in.Time, in.ObservedEdges = last.result, last.analysis, last.time, last.edges
		}
		gv := last.gv
		gv.gs = gv.gs.DeepCopy()
		return gv
	}
	declared := in.Result
	gv := observeAndCount(obs, in, generation, rb)
	v := &countedView{inputs: inputs, obs: obs, gv: gv, counted: in.Result != declared}
	if v.counted {
		v.result, v.analysis, v.time, v.edges = in.Result, in.Analysis, in.Time, in.ObservedEdges
	}
	v.gv.gs = gv.gs.DeepCopy()
	c.put(k, v)
	return gv
}

func observeAndCount(obs *Observation, in *status.Input, generation int64, rb *rebuilder) graphView {
	gv := observeGraphOf(obs, in.Result, generation)
	var build func() *workload.Result
	if rb != nil {
		build = rb.build
	}
	countObserved(in, gv, build)
	return gv
}
