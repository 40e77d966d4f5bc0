package analyze

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/workload"
)

// Report is the analysis of every policy, in a stable JSON shape.
type Report struct {
	// Summary is what was read (nil when the report was not made from files).
	Summary *Summary `json:"summary,omitempty"`
	// Warnings are the reader's (see Warning), each with its source.
	Warnings []string `json:"warnings,omitempty"`
	// Unchecked says why the run checked nothing, or not everything: no policy, a policy that
	// selects no workload, a policy none of whose workloads declares upstreams. analyze exits 2
	// when it is not empty.
	Unchecked []string       `json:"unchecked,omitempty"`
	Policies  []PolicyReport `json:"policies"`
	// WithinCap is true when every policy is bounded and within its cap.
	WithinCap bool `json:"withinCap"`

	warnings        []Warning // with their sources, for SARIF
	failOnInversion bool      // SetFailOnInversion (time.go)
}

// KindCluster is PolicyReport.Kind of a ClusterRetryPolicy's report.
const KindCluster = "ClusterRetryPolicy"

// PolicyReport is one policy's analysis: a RetryPolicy's, or a ClusterRetryPolicy's (Kind
// KindCluster, Namespace empty, every node "name.ns").
type PolicyReport struct {
	// Kind is empty for a RetryPolicy, KindCluster for a ClusterRetryPolicy.
	Kind string `json:"kind,omitempty"`
	// Namespaces are the namespaces a ClusterRetryPolicy selects (nil for a RetryPolicy).
	Namespaces  []string `json:"namespaces,omitempty"`
	Namespace   string   `json:"namespace"`
	Name        string   `json:"name"`
	Cap         int64    `json:"cap"`
	Enforcement string   `json:"enforcement"`
	// Workloads is how many workloads the policy selects; WithUpstreams how many of them
	// declare retrycap.dev/upstreams.
	Workloads     int   `json:"workloads"`
	WithUpstreams int   `json:"withUpstreams"`
	Services      int   `json:"services"`
	Edges         int   `json:"edges"`
	Amplification int64 `json:"amplification"`
	Bounded       bool  `json:"bounded"`
	WithinCap     bool  `json:"withinCap"`
	// WorstPath and WorstPathFactors (client attempts, then each edge's attempts).
	WorstPath        []string `json:"worstPath"`
	WorstPathFactors []int64  `json:"worstPathFactors"`
	// WorstCaseLoad is per request at one entrypoint (LoadEntrypoint), the largest; never a sum
	// over entrypoints unless LoadIsBound.
	WorstCaseLoad  graph.ServiceLoad  `json:"worstCaseLoad"`
	LoadEntrypoint string             `json:"loadEntrypoint,omitempty"`
	LoadIsBound    bool               `json:"loadIsBound,omitempty"`
	Entrypoints    []graph.Entrypoint `json:"entrypoints"`
	Chains         []graph.Chain      `json:"chains"`
	Cycle          []string           `json:"cycle,omitempty"`
	// Cycles name the graph's cycles, which are not call loops: the numbers are over chains
	// that visit a service at most once (graph.CycleReport).
	Cycles []graph.CycleReport `json:"cycles,omitempty"`
	// AmplificationIsBound: the worst chain runs through a cycle too large to search exactly,
	// and Amplification is an upper bound.
	AmplificationIsBound bool `json:"amplificationIsBound,omitempty"`
	// LoadUnbounded says why WorstCaseLoad is unbounded.
	LoadUnbounded string            `json:"loadUnbounded,omitempty"`
	Violations    []graph.Violation `json:"violations"`
	// ViolationsTotal is how many over-cap paths there are; at most graph.MaxViolations are listed.
	ViolationsTotal int `json:"violationsTotal"`
	// Errors are invalid annotations (and a bad selector); Warnings are notes such as an
	// entrypoint no selected workload provides, then how upstream names resolved through
	// Services (workload.Result.Notes).
	Errors   []string  `json:"errors,omitempty"`
	Warnings []string  `json:"warnings,omitempty"`
	Graph    GraphView `json:"graph"`
	// Layers are the edges (and entrypoints' client attempts) a mesh or a gateway multiplies,
	// sorted by from and to; empty without mesh objects.
	Layers []EdgeLayers `json:"layers,omitempty"`
	// NotChecked says why nothing of the policy was checked (it then is not within its cap
	// either: WithinCap is false, and analyze exits 2 unless another policy is over its cap).
	NotChecked string `json:"notChecked,omitempty"`
	// TimeReport is the time along the chains (time.go), inline.
	TimeReport

	scopeText     string            // a cluster policy's namespaces and selector, for messages
	selectorErr   string            // an invalid selector (the policy selects nothing)
	source        Source            // where the policy was read, when from files
	serviceSource map[string]Source // node (service name or Service) or workload ("Deployment ns/name") -> where its first selected workload was read
}

// EdgeLayers are the mesh layers on one edge: Attempts (the graph's) = App x the layers' tries.
type EdgeLayers struct {
	// From is "client" for an entrypoint's client attempts.
	From     string `json:"from"`
	To       string `json:"to"`
	Attempts int64  `json:"attempts"`
	App      int64  `json:"app"`
	// Caller declares App ("Deployment productpage"; "client attempts" for an entrypoint).
	Caller string      `json:"caller"`
	Layers []LayerView `json:"layers"`
	// Explain is "6 = 2 (Deployment productpage) x 3 (Istio default, no VirtualService binds reviews)".
	Explain string `json:"explain"`
}

// LayerView is one mesh.Layer.
type LayerView struct {
	Kind      string `json:"kind"`
	Object    string `json:"object,omitempty"`
	FieldPath string `json:"fieldPath,omitempty"`
	Tries     int64  `json:"tries"`
	Default   bool   `json:"default,omitempty"`
	Note      string `json:"note"`
}

func edgeLayers(from string, e workload.MeshEdge) EdgeLayers {
	el := EdgeLayers{From: from, To: e.To, Attempts: e.Attempts(), App: e.App, Caller: e.Caller, Explain: e.Explain()}
	for _, l := range e.Layers {
		el.Layers = append(el.Layers, LayerView{Kind: string(l.Kind), Object: l.Object, FieldPath: l.FieldPath, Tries: l.Tries, Default: l.Default, Note: l.Note})
	}
	return el
}

// meshLayers lists r's mesh layers: the entrypoints', then the edges', sorted.
func meshLayers(r *workload.Result) []EdgeLayers {
	var out []EdgeLayers
	for _, k := range slices.Sorted(maps.Keys(r.MeshEntry)) {
		out = append(out, edgeLayers("client", r.MeshEntry[k]))
	}
	keys := slices.SortedFunc(maps.Keys(r.MeshEdges), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	for _, k := range keys {
		out = append(out, edgeLayers(k[0], r.MeshEdges[k]))
	}
	return out
}

// GraphView is the graph itself, for renderers.
type GraphView struct {
	Services []graph.Service `json:"services"`
	Edges    []graph.Edge    `json:"edges"`
}

// ForPolicy analyses one policy over the given workloads and Services.
func ForPolicy(p *v1alpha1.RetryPolicy, ws []workload.Workload, svcs ...workload.Service) PolicyReport {
	r, a := workload.Analyze(workload.ForRetryPolicy(p), ws, nil, svcs...)
	return FromAnalysis(p, r, a)
}

// FromAnalysis builds a report from an existing build and analysis (the controller's or the
// graph command's) of RetryPolicy p.
func FromAnalysis(_ *v1alpha1.RetryPolicy, r *workload.Result, a *graph.Analysis) PolicyReport {
	return FromResult(r, a)
}

// Title names the policy: "RetryPolicy shop/checkout" or "ClusterRetryPolicy checkout".
func (p *PolicyReport) Title() string {
	if p.Kind == KindCluster {
		return KindCluster + " " + p.Name
	}
	return "RetryPolicy " + p.Namespace + "/" + p.Name
}

// ID is the policy's short name in graphs: "shop/checkout", or "checkout" for a cluster policy.
func (p *PolicyReport) ID() string {
	if p.Kind == KindCluster {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

// FromResult builds a report from a build of either kind of policy and its analysis.
func FromResult(r *workload.Result, a *graph.Analysis) PolicyReport {
	spec := r.Spec()
	enf := string(spec.Enforcement)
	if enf == "" {
		enf = defaults.Enforcement
	}
	pr := PolicyReport{
		Cap: a.Cap, Enforcement: enf,
		Services: a.Services, Edges: a.Edges, Amplification: a.Amplification, Bounded: a.Bounded,
		WithinCap: a.WithinCap(), WorstPath: a.WorstPath, WorstCaseLoad: a.WorstCaseLoad,
		LoadEntrypoint: a.LoadEntrypoint, LoadIsBound: a.LoadIsBound,
		Entrypoints: a.Entrypoints, Chains: a.Chains, Cycle: a.Cycle, Violations: a.Violations,
		Cycles: a.Cycles, AmplificationIsBound: a.AmplificationIsBound, LoadUnbounded: a.LoadUnbounded,
		ViolationsTotal: a.ViolationsTotal, Workloads: len(r.Selected),
		Warnings: append(append([]string(nil), r.Warnings...), r.Notes...),
		Graph:    GraphView{Services: r.Graph.Services(), Edges: r.Graph.Edges()},
		Layers:   meshLayers(r),
	}
	pr.TimeReport = timeReport(r) // time.go
	ref := r.Policy.Ref()
	pr.Namespace, pr.Name = ref.Namespace, ref.Name
	if ref.Kind == workload.KindClusterRetryPolicy {
		// The report's schema: kind and namespaces are said of a cluster policy only.
		pr.Kind, pr.Namespaces = KindCluster, r.Policy.Scope().Namespaces()
		if pr.Namespaces == nil {
			pr.Namespaces = []string{}
		}
	}
	for _, w := range r.Selected {
		if strings.TrimSpace(w.Annotations.Get(annotations.Upstreams)) != "" {
			pr.WithUpstreams++
		}
	}
	if len(a.Chains) > 0 {
		pr.WorstPathFactors = PathFactors(r.Graph, a.Chains[0].ClientAttempts, a.WorstPath)
	}
	for _, err := range r.Errors {
		pr.Errors = append(pr.Errors, err.Error())
	}
	if err := r.Policy.SelectorErr(); err != nil {
		pr.selectorErr = err.Error()
	}
	for _, s := range []*[]graph.Entrypoint{&pr.Entrypoints} {
		if *s == nil {
			*s = []graph.Entrypoint{}
		}
	}
	if pr.Chains == nil {
		pr.Chains = []graph.Chain{}
	}
	if pr.Violations == nil {
		pr.Violations = []graph.Violation{}
	}
	if pr.WorstPath == nil {
		pr.WorstPath = []string{}
	}
	return pr
}

// PathFactors returns the client attempts, then the attempts of each edge along path.
func PathFactors(g *graph.Graph, client int64, path []string) []int64 {
	f := []int64{client}
	for i := 0; i+1 < len(path); i++ {
		e, _ := g.Edge(path[i], path[i+1])
		f = append(f, e.Attempts)
	}
	return f
}

// markNotChecked records that nothing of p was checked: not within its cap, and no
// amplification to show.
func (p *PolicyReport) markNotChecked(why string) {
	p.NotChecked, p.WithinCap = why, false
}

// OverCap reports whether some checked policy is over its cap (or unbounded): analyze's exit 1,
// which wins over "not checked" (exit 2) for the others.
func (r *Report) OverCap() bool {
	for _, p := range r.Policies {
		if p.NotChecked == "" && !p.WithinCap {
			return true
		}
	}
	return false
}

// NewReport collects policy reports.
func NewReport(prs []PolicyReport) *Report {
	rep := &Report{Policies: prs, WithinCap: true}
	if rep.Policies == nil {
		rep.Policies = []PolicyReport{}
	}
	for _, p := range prs {
		if !p.WithinCap {
			rep.WithinCap = false
		}
	}
	return rep
}
