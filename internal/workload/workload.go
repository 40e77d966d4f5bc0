package workload

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/api/v1alpha1/defaults"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
)

// Workload is what the graph needs from one workload: its identity and its pod template's labels
// and annotations (a bare Pod's own).
type Workload struct {
	Kind, Namespace, Name string
	Labels, Annotations   Pairs
	// AWS is the AWS SDKs' retry environment of the pod's containers (aws.go): the tries of an
	// upstream *.amazonaws.com listed without "=N".
	AWS AWSEnv
	// Proxies are the names of the pod template's containers and init containers that are a
	// mesh's proxy (mesh.IsProxyContainer: "istio-proxy", "linkerd-proxy"), a manifest already
	// injected being meshed whatever its namespace says. Only those: the rest of the containers
	// is read by nothing, and the manager's cache keeps this list, not the spec.
	Proxies []string
}

// meshCaller is w as the mesh layers read a caller. The mesh reads maps: made per call, which
// costs only where mesh layers are read.
func (w Workload) meshCaller() mesh.Caller {
	return mesh.Caller{Name: w.String(), Namespace: w.Namespace, Labels: w.Labels.Map(), Annotations: w.Annotations.Map(), Containers: w.Proxies}
}

// MeshCaller is w as the mesh layers read a caller (the mesh gate's view of a workload).
func (w Workload) MeshCaller() mesh.Caller { return w.meshCaller() }

// ProxiesOf lists the containers and init containers of spec that are a mesh's proxy, in spec
// order (nil when none).
func ProxiesOf(spec *corev1.PodSpec) []string {
	var out []string
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for _, c := range cs {
			if mesh.IsProxyContainer(c.Name) && !slices.Contains(out, c.Name) {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// Same reports whether a and b are the same workload with the same inputs of the graph: key,
// labels, annotations, AWS SDK environment and mesh proxies.
func (w Workload) Same(b Workload) bool {
	return w.Kind == b.Kind && w.Namespace == b.Namespace && w.Name == b.Name &&
		w.Labels.Equal(b.Labels) && w.Annotations.Equal(b.Annotations) &&
		w.AWS.Equal(b.AWS) && slices.Equal(w.Proxies, b.Proxies)
}

// String is "Deployment shop/gateway".
func (w Workload) String() string { return w.Kind + " " + w.Namespace + "/" + w.Name }

// Key identifies a workload across versions (Kind, Namespace, Name).
func (w Workload) Key() string { return w.Kind + "/" + w.Namespace + "/" + w.Name }

// FromObject reads a workload of Kinds: a Deployment, StatefulSet, DaemonSet, CronJob, a Job or
// ReplicaSet no controller owns, or a bare Pod. It returns false for any other object, and for
// the Pods, Jobs and ReplicaSets a controller owns (a Deployment's ReplicaSet, a CronJob's Job,
// any controller's Pod): those are covered by their owner (KindInfo.OwnedIsCovered).
func FromObject(obj runtime.Object) (Workload, bool) {
	if kind, meta, tmpl, ok := TemplateOf(obj); ok {
		return FromTemplate(kind, *meta, tmpl.ObjectMeta, &tmpl.Spec)
	}
	if o, ok := obj.(*corev1.Pod); ok {
		if Covered(KindPod, o) {
			return Workload{}, false
		}
		return fromTemplate(KindPod, o.ObjectMeta, o.ObjectMeta, &o.Spec), true
	}
	return Workload{}, false
}

func fromTemplate(kind string, meta, tmpl metav1.ObjectMeta, spec *corev1.PodSpec) Workload {
	return Workload{Kind: kind, Namespace: meta.Namespace, Name: meta.Name, Labels: PairsOf(tmpl.Labels), Annotations: PairsOf(tmpl.Annotations), AWS: AWSEnvFor(spec, tmpl.Annotations[annotations.Upstreams]), Proxies: ProxiesOf(spec)}
}

// ServiceName is the annotation retrycap.dev/service, else the label app.kubernetes.io/name,
// else the workload's name.
func (w Workload) ServiceName() string {
	if s := w.Annotations.Get(annotations.Service); s != "" {
		return s
	}
	if s := w.Labels.Get(annotations.NameLabel); s != "" {
		return s
	}
	return w.Name
}

// selectParsed is the part of ps that p selects, in order; none on a bad selector.
func selectParsed(p *Policy, ps []*Parsed) []*Parsed {
	if p.selErr != nil {
		return nil
	}
	sel := make([]*Parsed, 0, len(ps))
	for _, x := range ps {
		if p.selects(x.Workload) {
			sel = append(sel, x)
		}
	}
	return sel
}

// AnnotationError is an invalid retrycap annotation on one workload.
type AnnotationError struct {
	Workload   Workload
	Annotation string
	Value      string
	// Err is the parser's error: a *annotations.ParseError for upstreams.
	Err error
}

func (e *AnnotationError) Error() string {
	return fmt.Sprintf("%s: annotation %s: %v", e.Workload, e.Annotation, e.Err)
}

func (e *AnnotationError) Unwrap() error { return e.Err }

// Result is the graph of one policy of either kind.
type Result struct {
	// Policy is the policy the graph is of; its nodes are named as Policy.Node names them (a
	// ClusterRetryPolicy's "name.ns", in ServiceOf and NodesOf too).
	Policy *Policy
	Graph  *graph.Graph
	Cap    int64
	// Selected are the workloads the policy selects, sorted by namespace, name and kind.
	Selected []Workload
	// ServiceOf maps each selected workload's Key to its service name's node (a cluster
	// policy's: "name.ns").
	ServiceOf map[string]string
	// Errors are the invalid annotations (each an *AnnotationError) and a bad selector. A
	// workload with an invalid upstreams annotation is still a service in the graph, but none of
	// its upstreams are (a value is valid whole or not at all); with an invalid service
	// annotation it is left out. Either way the error is reported here, never dropped silently.
	Errors []error
	// Warnings are facts worth showing that are not errors, e.g. an entrypoint no selected
	// workload provides, or a Service that shadows a workload's service name without selecting
	// it.
	Warnings []string
	// Notes say how upstream names were resolved through Services (a Service that selects
	// differently named workloads, a Service that is a leaf): shown by analyze, not in the
	// status.
	Notes []string
	// Declaring is how many selected workloads carry a non-blank retrycap.dev/upstreams
	// annotation (valid or not).
	Declaring int
	// Services are the Services the graph was built with (nil: none).
	Services *ServiceSet
	// NodesOf maps each selected workload's Key to the nodes its edges belong to (see
	// ServiceSet.Nodes); nil when the input has no Services (each is ServiceOf's node).
	NodesOf map[string][]string
	// MeshEdges are the edges a mesh multiplies (Build with a mesh Set; nil without one), keyed by
	// [from, to]: the edge's attempts in the graph are App x the layers' tries.
	MeshEdges map[[2]string]MeshEdge
	// MeshEntry are the entrypoints whose client attempts a Gateway-parented route multiplies
	// (Set.Entry), keyed by service: From is empty, App the spec's client attempts.
	MeshEntry map[string]MeshEdge
	// fronts are, per Service node, the selected workloads it selects, sorted.
	fronts map[string][]*Parsed
	// kept are the selected workloads with a valid service name, sorted: the graph's input
	// (what Incremental patches).
	kept []*Parsed
	// mesh is the Set the graph was built with (nil: none).
	mesh *mesh.Set
}

// MeshEdge is an edge (or an entrypoint's client attempts) with the mesh layers on it.
type MeshEdge struct {
	From, To string
	// App is the attempts the application makes (the annotation's, or the client attempts);
	// Caller names the workload that declares them ("Deployment bookinfo/productpage").
	App    int64
	Caller string
	Layers []mesh.Layer
	// Alternatives are, for an entrypoint's client attempts (Result.MeshEntry), the layers
	// Layers[0] is the largest of (mesh.Set.EntryLayers: every rule and ingress route to it).
	Alternatives []mesh.Layer
}

// Attempts is App times the layers' tries.
func (e MeshEdge) Attempts() int64 { return e.App * mesh.Edge{Layers: e.Layers}.Tries() }

// Explain is "6 = 2 (Deployment productpage) x 3 (Istio default, no VirtualService binds
// reviews)": the layers of 1 try are left out of the product.
func (e MeshEdge) Explain() string {
	parts := []string{fmt.Sprintf("%d (%s)", e.App, e.Caller)}
	for _, l := range e.Layers {
		if l.Tries != 1 {
			parts = append(parts, l.String())
		}
	}
	return fmt.Sprintf("%d = %s", e.Attempts(), strings.Join(parts, " x "))
}

// Multiplied reports whether some layer has more than 1 try.
func (e MeshEdge) Multiplied() bool { return mesh.Edge{Layers: e.Layers}.Tries() > 1 }

// Nodes returns the nodes the selected workload key's edges belong to: NodesOf, else its service
// name; nil for a workload the result does not hold.
func (r *Result) Nodes(key string) []string {
	if r.NodesOf != nil {
		return r.NodesOf[key]
	}
	if s, ok := r.ServiceOf[key]; ok {
		return []string{s}
	}
	return nil
}

// Build reads the workloads of ws that p selects into p's graph: a node per name callers use
// (p.Node), an edge per upstream (attempts default spec.retry.defaultAttempts, calls default 1;
// the larger values count when two workloads of one node declare the same upstream), and the
// entrypoints of the spec (clientAttempts default 1), or the graph's defaults when the spec
// lists none. ws may span any namespaces; only those of p's scope count: an upstream into one
// of them resolves through its Services, one into another namespace is a leaf. svcs are the
// Services of the input (see ServiceSet.Nodes for how they name nodes); without them every
// workload is the node of its service name. set is the retry layers of a service mesh or a
// gateway (nil: none): an edge's attempts are the application's times the tries of set.Edge
// for its caller, and an entrypoint's client attempts are multiplied by set.Entry when a
// Gateway-parented route of p's scope routes to it; mesh warnings go into Result.Warnings.
// Workloads are processed in sorted order so the result does not depend on the order of ws.
func Build(p *Policy, ws []Workload, set *mesh.Set, svcs ...Service) *Result {
	var sel []*Parsed
	if p.selErr == nil {
		for _, w := range ws {
			if p.selects(w) {
				sel = append(sel, Parse(w))
			}
		}
	}
	return build(p, sel, NewServiceSet(svcs), set)
}

// Parsed is a workload with what Build reads from its annotations parsed once, so that a caller
// building many graphs over mostly the same workloads (the admission gate's index) parses each
// workload once per version rather than once per graph. Immutable once made: share it freely.
type Parsed struct {
	Workload Workload
	key      string
	service  string
	// serviceErr is an invalid service name (*AnnotationError): the workload is left out.
	serviceErr error
	// upstreams are as written, names normalised for the workload's namespace (a policy selects
	// only workloads of its own namespace); Attempts 0 is the policy's default, Calls 0 is 1.
	upstreams    []annotations.Upstream
	upstreamsErr error
	// hasUpstreams: the annotation is present (BuildJudged drops a sibling's).
	hasUpstreams bool
	// awsNotes say which upstreams took the AWS SDK's tries (aws.go); envErr is an invalid
	// AWS SDK environment (*EnvError): its AWS upstreams keep the policy's default.
	awsNotes []string
	envErr   error
	// sdk marks the upstreams whose tries are the AWS SDK's (nil when none): SDKUpstream.
	sdk []bool
	// q is service and the upstreams' names as a cluster policy's graph names them
	// (QualifiedName), computed on the first cluster graph that reads them rather than per
	// graph, and not at all for a namespace no ClusterRetryPolicy selects: at 20,000 workloads
	// computing them up front held ~2.7 MB of strings no namespaced policy reads.
	q atomic.Pointer[qualified]
}

// qualified are a Parsed's names in a cluster policy's graph.
type qualified struct {
	service   string
	upstreams []string
}

// qualified returns x.q, computing it if need be. Builds of several policies may race to compute
// it: each computes the same names, and the first stored is kept.
func (x *Parsed) qualified() *qualified {
	if q := x.q.Load(); q != nil {
		return q
	}
	q := &qualified{service: QualifiedNode(x.service, x.Workload.Namespace)}
	if len(x.upstreams) > 0 {
		q.upstreams = make([]string, len(x.upstreams))
		for i, u := range x.upstreams {
			q.upstreams[i] = qualifiedName(u.Name, x.Workload.Namespace)
		}
	}
	x.q.CompareAndSwap(nil, q)
	return x.q.Load()
}

// Parse reads w's service name and upstreams the way Build does.
func Parse(w Workload) *Parsed {
	x := &Parsed{Workload: w, key: w.Key(), service: w.ServiceName()}
	if err := EmptyServiceError(w); err != nil {
		x.serviceErr = err
	} else if reason := annotations.ValidateLabel(x.service); reason != "" {
		src := annotations.Service
		if w.Annotations.Get(annotations.Service) == "" {
			src = "label " + annotations.NameLabel
			if w.Labels.Get(annotations.NameLabel) == "" {
				src = "name"
			}
		}
		x.serviceErr = &AnnotationError{Workload: w, Annotation: src, Value: x.service,
			Err: fmt.Errorf("service name %q is not a DNS-1123 label: %s", x.service, reason)}
	}
	val, ok := w.Annotations.Lookup(annotations.Upstreams)
	x.hasUpstreams = ok
	ups, err := annotations.ParseUpstreams(val)
	if err != nil {
		x.upstreamsErr = &AnnotationError{Workload: w, Annotation: annotations.Upstreams, Value: val, Err: err}
		ups = nil
	}
	for i := range ups {
		ups[i].Name = NormalizeUpstream(ups[i].Name, w.Namespace)
	}
	x.upstreams = ups
	x.awsNotes, x.envErr = applyAWS(x)
	return x
}

// declares reports whether x carries a non-blank upstreams annotation (valid or not): what
// Result.Declaring counts.
func (x *Parsed) declares() bool {
	return x.hasUpstreams && strings.TrimSpace(x.Workload.Annotations.Get(annotations.Upstreams)) != ""
}

// Key is Workload.Key, computed once.
func (x *Parsed) Key() string { return x.key }

// ServiceName is Workload.ServiceName, computed once (possibly invalid: see Parse).
func (x *Parsed) ServiceName() string { return x.service }

// UpstreamNames are the graph nodes x calls, normalised for its namespace; nil for a malformed
// annotation, which has no edges in any graph.
func (x *Parsed) UpstreamNames() []string {
	if len(x.upstreams) == 0 {
		return nil
	}
	names := make([]string, len(x.upstreams))
	for i, u := range x.upstreams {
		names[i] = u.Name
	}
	return names
}

// Compare orders workloads the way Build processes them: by namespace, name and kind.
func Compare(a, b Workload) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
}

func compareParsed(a, b *Parsed) int { return Compare(a.Workload, b.Workload) }

// BuildParsed is Build over workloads parsed beforehand (of several namespaces for a policy
// across them, e.g. the shared workload index's per namespace concatenated) and Services indexed
// beforehand (nil: none, or MergeServiceSets of the namespaces'). Already sorted by Compare,
// they are not sorted again; ps is not modified. The manager builds from the index with it.
func BuildParsed(p *Policy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) *Result {
	return build(p, selectParsed(p, ps), svcs, set)
}

// build is the one graph builder behind Build, BuildParsed, BuildWith and BuildJudged: p is the
// policy and how its graph names nodes, sel the selected workloads (sorted here unless they
// already are), svcs the Services of the namespaces (nil: none).
func build(p *Policy, sel []*Parsed, svcs *ServiceSet, set *mesh.Set) *Result {
	edges := 0
	for _, x := range sel {
		edges += len(x.upstreams)
	}
	// Upstream-only services (leaves, other namespaces) come on top of the selected ones; the
	// edge count bounds them.
	r := &Result{Policy: p, Graph: graph.NewSized(len(sel)+edges/2, edges), Cap: int64(p.spec.MaxAmplification),
		ServiceOf: make(map[string]string, len(sel)), Services: svcs, mesh: set}
	def := defaultAttempts(p.spec)
	if p.selErr != nil {
		r.Errors = append(r.Errors, p.selErr)
	}
	// slices.SortFunc, not sort.Slice: no reflection per swap, which showed at 5k workloads; and
	// not at all when the caller keeps them sorted (the shared workload index).
	if !slices.IsSortedFunc(sel, compareParsed) {
		slices.SortFunc(sel, compareParsed)
	}
	kept := sel[:0:0]
	for _, x := range sel {
		if x.serviceErr != nil {
			r.Errors = append(r.Errors, x.serviceErr)
			continue
		}
		if x.upstreamsErr != nil {
			r.Errors = append(r.Errors, x.upstreamsErr)
		}
		if x.envErr != nil {
			r.Errors = append(r.Errors, x.envErr)
		}
		r.Notes = append(r.Notes, x.awsNotes...)
		if x.declares() {
			r.Declaring++
		}
		kept = append(kept, x)
		r.ServiceOf[x.key] = r.serviceNode(x)
	}
	if len(kept) == 0 {
		kept = nil // one form of none, which Incremental's removals also leave
	}
	r.kept = kept
	if len(kept) > 0 {
		r.Selected = make([]Workload, len(kept))
		for i, x := range kept {
			r.Selected[i] = x.Workload
		}
	}
	if svcs == nil {
		// Without Services each workload is the node of its service name: the common case,
		// kept free of the resolution's maps.
		for _, x := range kept {
			r.Graph.AddService(r.serviceNode(x))
		}
		for _, x := range kept {
			from := r.serviceNode(x)
			for i, u := range x.upstreams {
				a, c := edgeValues(u, def)
				to := r.upstreamNode(x, i)
				r.Graph.AddEdge(from, to, r.meshAttempts(x, from, u.Name, u.Port, to, a), c)
			}
		}
	} else {
		r.resolve(kept, def)
	}
	for _, e := range p.spec.Entrypoints {
		node, ref := p.Entrypoint(e.Service)
		if !r.HasNode(node) {
			r.Warnings = append(r.Warnings, entrypointWarning(e.Service))
		}
		client := int64(max(orDefault(e.ClientAttempts, defaults.ClientAttempts), 1))
		if set != nil {
			if me := set.Entry(ref); len(me.Layers) > 0 {
				if r.MeshEntry == nil {
					r.MeshEntry = map[string]MeshEdge{}
				}
				m := MeshEdge{To: node, App: client, Caller: "client attempts", Layers: me.Layers, Alternatives: set.EntryLayers(ref)}
				r.MeshEntry[node] = m
				r.addMeshWarnings(me.Warnings)
				client = m.Attempts()
			}
		}
		r.Graph.SetEntrypoint(node, client)
	}
	if len(p.spec.Entrypoints) == 0 {
		r.gatewayEntrypoints() // mesh_entry.go
	}
	return r
}

// entrypointWarning is the warning on an entrypoint no selected workload provides.
func entrypointWarning(service string) string {
	return fmt.Sprintf("entrypoint %q is not the service of any selected workload", service)
}

// meshAttempts is the attempts on the edge from -> to that x declares with app attempts: app
// without a mesh Set, else app times the tries of the mesh's layers on x's calls to callee (the
// upstream as x's namespace names it, which is what the mesh resolves; to is its graph node),
// recorded in MeshEdges, the largest when several workloads of from declare to.
func (r *Result) meshAttempts(x *Parsed, from, callee string, port int32, to string, app int64) int64 {
	if r.mesh == nil {
		return app
	}
	w := x.Workload
	// The port the upstream names picks the Service port whose protocol decides whether the
	// mesh retries at all (HTTP and gRPC only: mesh.EdgePort).
	e := r.mesh.EdgePort(w.meshCaller(), callee, port)
	r.addMeshWarnings(e.Warnings)
	if len(e.Layers) == 0 {
		return app
	}
	m := MeshEdge{From: from, To: to, App: app, Caller: w.Kind + " " + w.Name, Layers: e.Layers}
	if r.MeshEdges == nil {
		r.MeshEdges = map[[2]string]MeshEdge{}
	}
	k := [2]string{from, to}
	if prev, ok := r.MeshEdges[k]; !ok || m.Attempts() > prev.Attempts() {
		r.MeshEdges[k] = m
	}
	return m.Attempts()
}

// addMeshWarnings adds the mesh's warnings, each once.
func (r *Result) addMeshWarnings(ws []string) {
	for _, w := range ws {
		if !slices.Contains(r.Warnings, w) {
			r.Warnings = append(r.Warnings, w)
		}
	}
}

// HasNode reports whether name is a node of some selected workload: its service name, or a
// Service fronting it (an own-name node a Service fronts is one, though not selected in the
// graph).
func (r *Result) HasNode(name string) bool {
	if r.Graph.IsSelected(name) {
		return true
	}
	for _, nodes := range r.NodesOf {
		if slices.Contains(nodes, name) {
			return true
		}
	}
	return false
}

// resolve adds kept's nodes and edges when the input has Services: each workload's edges go to
// every node it is reached under (ServiceSet.Nodes); a Service node is selected (a default
// entrypoint candidate) when it fronts a selected workload, an own-name node only when no
// Service fronts its workload.
func (r *Result) resolve(kept []*Parsed, def int64) {
	svcs := r.Services
	r.NodesOf = make(map[string][]string, len(kept))
	r.fronts = map[string][]*Parsed{}
	for _, x := range kept {
		nodes, fronted := svcs.Nodes(x)
		ns := x.Workload.Namespace
		qnodes := r.Policy.nodes(nodes, ns)
		r.NodesOf[x.key] = qnodes
		for i, n := range nodes {
			q := qnodes[i]
			if n == x.service && !svcs.Has(ns, n) {
				if !fronted {
					r.Graph.AddService(q)
				}
				continue
			}
			r.Graph.AddService(q)
			r.fronts[q] = append(r.fronts[q], x)
		}
		if s, ok := svcs.Get(ns, x.service); ok && !s.Selects(x.Workload) {
			node := r.serviceNode(x)
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s does not select %s (service name %q): callers of %s reach the Service, not this workload", s, x.Workload, x.service, node))
		}
	}
	for _, x := range kept {
		for _, n := range r.NodesOf[x.key] {
			for i, u := range x.upstreams {
				a, c := edgeValues(u, def)
				to := r.upstreamNode(x, i)
				r.Graph.AddEdge(n, to, r.meshAttempts(x, n, u.Name, u.Port, to, a), c)
			}
		}
	}
	r.addNotes(kept)
}

// addNotes adds what the resolution through Services did, once per Service a selected workload
// of kept calls, in the order the workloads first call them.
func (r *Result) addNotes(kept []*Parsed) {
	noted := map[string]bool{}
	for _, x := range kept {
		for i := range x.upstreams {
			to := r.upstreamNode(x, i)
			if noted[to] {
				continue
			}
			if _, ok := r.upstreamService(x, i); !ok {
				continue
			}
			noted[to] = true
			if n, ok := r.note(x, i); ok {
				r.Notes = append(r.Notes, n)
			}
		}
	}
}

// note is the note on x's i-th upstream, a Service's name: a leaf (ExternalName, or no
// selector), or resolved to the edges of workloads of other service names it selects; false when
// there is nothing to say (not a Service, or one that selects only workloads of its own name).
func (r *Result) note(x *Parsed, i int) (string, bool) {
	to := r.upstreamNode(x, i)
	s, ok := r.upstreamService(x, i)
	if !ok {
		return "", false
	}
	switch {
	case s.ExternalName:
		return fmt.Sprintf("upstream %q is %s of type ExternalName: a leaf", to, s), true
	case s.Leaf():
		return fmt.Sprintf("upstream %q is %s without a selector: a leaf", to, s), true
	}
	var other []string
	for _, f := range r.fronts[to] {
		if r.serviceNode(f) != to {
			other = append(other, f.Workload.String())
		}
	}
	if len(other) == 0 {
		return "", false
	}
	return fmt.Sprintf("upstream %q is %s, which selects %s: resolved to their edges", to, s, strings.Join(other, ", ")), true
}

// serviceNode is x's service name as r's graph names it (Policy.Node).
func (r *Result) serviceNode(x *Parsed) string { return r.Policy.serviceNode(x) }

// upstreamNode is x's i-th upstream as r's graph names it (Policy.UpstreamNode).
func (r *Result) upstreamNode(x *Parsed, i int) string { return r.Policy.upstreamNode(x, i) }

// upstreamService is the Service x's i-th upstream resolves through (nil Services: none).
func (r *Result) upstreamService(x *Parsed, i int) (Service, bool) {
	return r.Policy.upstreamService(r.Services, x, i)
}

// Fronted returns the selected workloads whose edges node n carries because Service n selects
// them, sorted; nil for a node that is no Service's.
func (r *Result) Fronted(n string) []Workload {
	var out []Workload
	for _, x := range r.fronts[n] {
		out = append(out, x.Workload)
	}
	return out
}

// NameWorkloads rewrites a's suggestions so that a change on an edge out of a Service's node
// names the workloads whose annotation to change: "reviews: ratings=1" becomes
// "Deployment bookinfo/reviews-v2: ratings=1" for each workload behind Service reviews that
// declares ratings with more attempts than that. Suggestions about other nodes (a workload's
// own service name) are left as they are. A change on an edge whose tries are the AWS SDK's
// becomes the container's AWS_MAX_ATTEMPTS (EnvFix), the only thing that changes the SDK.
func (r *Result) NameWorkloads(a *graph.Analysis) {
	if a == nil {
		return
	}
	def := defaultAttempts(r.Spec())
	var byNode map[string][]*Parsed
	for i := range a.Violations {
		v := &a.Violations[i]
		if v.Suggestion == "" {
			continue
		}
		if byNode == nil {
			byNode = r.keptByNode()
		}
		parts := strings.Split(v.Suggestion, "; ")
		var out []string
		for _, part := range parts {
			// An edge whose tries are the AWS SDK's: its container's AWS_MAX_ATTEMPTS (aws.go);
			// a sibling that declares the same upstream with "=N" keeps the annotation's unit.
			fixes, sdk, others := r.sdkFixes(part, byNode)
			out = append(out, fixes...)
			if !sdk || others {
				out = append(out, r.nameWorkloads(part, def)...)
			}
		}
		v.Suggestion = strings.Join(out, "; ")
	}
}

// nameWorkloads is NameWorkloads of one "node: upstream=attempts" part.
func (r *Result) nameWorkloads(part string, def int64) []string {
	node, change, ok := strings.Cut(part, ": ")
	fronted := r.fronts[node]
	if !ok || len(fronted) == 0 {
		return []string{part}
	}
	eq := strings.LastIndexByte(change, '=')
	if eq < 0 {
		return []string{part}
	}
	up := change[:eq]
	n, err := strconv.ParseInt(change[eq+1:], 10, 64)
	if err != nil {
		return []string{part}
	}
	var out []string
	for _, x := range fronted {
		for i, u := range x.upstreams {
			if a, _ := edgeValues(u, def); r.upstreamNode(x, i) == up && a > n && !x.SDKUpstream(i) {
				out = append(out, x.Workload.String()+": "+change)
				break
			}
		}
	}
	if len(out) == 0 {
		return []string{part}
	}
	return out
}

// edgeValues are an upstream's attempts and calls in the graph: 0 (not written) is the policy's
// default attempts, and 1 call.
func edgeValues(u annotations.Upstream, defaultAttempts int64) (attempts, calls int64) {
	attempts, calls = int64(u.Attempts), int64(u.Calls)
	if attempts == 0 {
		attempts = defaultAttempts
	}
	if calls == 0 {
		calls = 1
	}
	return attempts, calls
}

// defaultAttempts is the policy's spec.retry.defaultAttempts (unset: the CRD's default), at least 1.
func defaultAttempts(spec *v1alpha1.RetryPolicySpec) int64 {
	return max(int64(orDefault(spec.Retry.DefaultAttempts, defaults.Attempts)), 1)
}

// orDefault is v, or def when v is unset (0).
func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// Base is a policy's graph of a namespace's stored workloads (BuildParsed), analysed once
// (graph.Prepared), against which the admission gate judges an incoming workload without
// building and analysing the namespace's graph again. Read-only; safe for concurrent use.
type Base struct {
	r    *Result
	prep *graph.Prepared
	def  int64
}

// NewBase builds p's graph of ps (sorted by Compare, as the shared workload index keeps them; ps
// is not modified) with the Services svcs (nil: none) and the mesh layers of set (nil: none):
// BuildParsed's result, analysed once.
func NewBase(p *Policy, ps []*Parsed, svcs *ServiceSet, set *mesh.Set) *Base {
	return newBase(BuildParsed(p, ps, svcs, set))
}

func newBase(r *Result) *Base {
	return &Base{r: r, prep: graph.Prepare(r.Graph), def: defaultAttempts(r.Spec())}
}

// Judge is graph.Judge and graph.PlanLocal of incoming's service on the graph
// BuildJudged builds with incoming in place of its stored version, incoming being selected
// by the base's policy: the same verdict, numbers and plan (graph.Prepared.JudgeWith says which
// path is named on a tie). ok is false when only that build can tell: the service on a cycle
// or the incoming edges closing one, a service name that is invalid, or an update that moves
// its workload to another service, or a workload reached under more than one node or under a
// Service's name that is not its own (Services; see ServiceSet.Nodes); the caller then builds it.
func (b *Base) Judge(incoming *Parsed) (j *graph.Judgement, plan *graph.Plan, ok bool) {
	if incoming.serviceErr != nil {
		return nil, nil, false
	}
	node := b.r.serviceNode(incoming)
	if prev, stored := b.r.ServiceOf[incoming.key]; stored && prev != node {
		// The stored version's edges and selection belong to another service.
		return nil, nil, false
	}
	if b.r.Services != nil {
		nodes, _ := b.r.Services.Nodes(incoming)
		if len(nodes) != 1 || nodes[0] != incoming.service {
			return nil, nil, false
		}
		if prev, stored := b.r.NodesOf[incoming.key]; stored && (len(prev) != 1 || prev[0] != node) {
			return nil, nil, false
		}
	}
	edges := make([]graph.Edge, len(incoming.upstreams))
	for i, u := range incoming.upstreams {
		a, c := edgeValues(u, b.def)
		edges[i] = graph.Edge{From: node, To: b.r.upstreamNode(incoming, i), Attempts: a, Calls: c}
	}
	if b.r.mesh != nil {
		// The attempts with the mesh layers on each call, as build counts them.
		for i, e := range b.r.IncomingEdges(incoming, node) {
			edges[i].Attempts = e.Attempts()
		}
	}
	return b.prep.JudgeWith(b.r.Cap, node, edges)
}

// BuildWith is Build with incoming in place of the stored workload of the same Kind, Namespace
// and Name (or added, for a create): the pod injector decides a pod's default entrypoints on it
// (with set, a Gateway-routed Service is one).
func BuildWith(p *Policy, ws []Workload, incoming Workload, set *mesh.Set, svcs ...Service) *Result {
	all := make([]Workload, 0, len(ws)+1)
	for _, w := range ws {
		if w.Key() != incoming.Key() {
			all = append(all, w)
		}
	}
	return Build(p, append(all, incoming), set, svcs...)
}

// BuildJudged is BuildParsed with incoming in place of its stored version, for the admission
// gate, which judges the incoming workload's own edges: other workloads sharing a node with it
// (its service name in its namespace; with Services, a Service that selects it too: versions,
// canaries) keep their nodes but contribute no outgoing edges, so the node's edges are exactly
// the incoming ones with the incoming attempts. Otherwise a canary declaring order->payment=3
// would make the merged (larger) edge refuse a sibling that declares payment=1, and the
// suggestion would be about its numbers. ps sorted by Compare (as the shared workload index
// keeps them) are not sorted again; ps is not modified.
//
// The siblings' calls still count as calls: without explicit entrypoints, a service only they
// call is no default entrypoint (graph.MarkCalled), so the judged build's entrypoints are the
// full graph's, the status's.
func BuildJudged(p *Policy, ps []*Parsed, incoming *Parsed, svcs *ServiceSet, set *mesh.Set) *Result {
	all, stripped := judged(ps, incoming, svcs)
	r := BuildParsed(p, all, svcs, set)
	if len(p.spec.Entrypoints) > 0 {
		return r
	}
	for _, x := range selectParsed(p, stripped) {
		for i := range x.upstreams {
			if n := r.upstreamNode(x, i); r.Graph.Has(n) {
				r.Graph.MarkCalled(n)
			}
		}
	}
	return r
}

// judged is ps with incoming in place of its stored version (in its sorted place) and the
// workloads sharing a node with it stripped of their upstreams: BuildJudged's input. ps
// is not modified. stripped are the originals of the workloads stripped.
func judged(ps []*Parsed, incoming *Parsed, svcs *ServiceSet) (out, stripped []*Parsed) {
	all := make([]*Parsed, 0, len(ps)+1)
	var inNodes []string
	if svcs != nil {
		inNodes, _ = svcs.Nodes(incoming)
	}
	for _, x := range ps {
		if x.key == incoming.key {
			continue
		}
		if x.hasUpstreams && sharesNode(x, incoming, inNodes, svcs) {
			stripped = append(stripped, x)
			x = withoutUpstreams(x)
		}
		all = append(all, x)
	}
	// In its sorted place, so that a sorted ps stays sorted; build sorts anything else.
	at, _ := slices.BinarySearchFunc(all, incoming, compareParsed)
	return slices.Insert(all, at, incoming), stripped
}

// sharesNode reports whether x's edges go to one of the incoming workload's nodes inNodes: of
// the same namespace (a cluster policy's ps span several, and "order" of another namespace is
// another node).
func sharesNode(x, incoming *Parsed, inNodes []string, svcs *ServiceSet) bool {
	if x.Workload.Namespace != incoming.Workload.Namespace {
		return false
	}
	if svcs == nil {
		return x.service == incoming.service
	}
	nodes, _ := svcs.Nodes(x)
	for _, n := range nodes {
		if slices.Contains(inNodes, n) {
			return true
		}
	}
	return false
}

// withoutUpstreams is x as if it had no upstreams annotation (a copy: x is shared).
func withoutUpstreams(x *Parsed) *Parsed {
	// Field by field, not *x: q is an atomic (not to be copied), and is computed anew.
	c := &Parsed{Workload: x.Workload, key: x.key, service: x.service, serviceErr: x.serviceErr}
	c.Workload.Annotations = x.Workload.Annotations.Without(annotations.Upstreams)
	return c
}

// Analyze is Build followed by Result.Analyze: graph.Analyze with the policy's cap, the
// violations explained with their mesh layers and the suggestions naming the workloads behind a
// Service's node.
func Analyze(p *Policy, ws []Workload, set *mesh.Set, svcs ...Service) (*Result, *graph.Analysis) {
	r := Build(p, ws, set, svcs...)
	return r, r.Analyze()
}

// ExplainMesh appends to each violation's message the mesh layers of its factors ("; 6 = 2
// (Deployment productpage) x 3 (Istio default, no VirtualService binds reviews)") and marks a
// suggested value on a mesh-multiplied edge as the edge's attempts, layers included. A no-op
// without mesh layers.
func (r *Result) ExplainMesh(a *graph.Analysis) {
	if a == nil || len(a.Violations) == 0 || (len(r.MeshEdges) == 0 && len(r.MeshEntry) == 0) {
		return
	}
	// An entrypoint over the cap through a gateway route: every fix is the combined plan's
	// (PlanFix, which analyze -o patch applies), the route's and the edges' together.
	// So is every fix of a graph with an edge whose layers cannot all go to 1 try (floors): the
	// graph's own suggestion is planned without them.
	var fp *FixPlan
	if r.needsRoutes(a) || r.hasFloors() {
		fp = r.PlanFix(a)
	}
	for i := range a.Violations {
		v := &a.Violations[i]
		var ex []string
		for j, n := range v.Path {
			m, ok := r.MeshEntry[n]
			if j > 0 {
				m, ok = r.MeshEdges[[2]string{v.Path[j-1], n}]
			}
			if ok && m.Multiplied() {
				from := m.From
				if j == 0 {
					from = "client"
				}
				ex = append(ex, fmt.Sprintf("%s -x%d-> %s: %s", from, m.Attempts(), n, m.Explain()))
			}
		}
		if len(ex) > 0 {
			v.Message += "; " + strings.Join(ex, "; ")
		}
		if v.Suggestion == "" {
			continue
		}
		v.Suggestion = r.meshSuggestion(v, fp)
	}
}

// NormalizeUpstream maps an upstream name to its node in the graph of a policy in namespace ns:
// "order", "order.ns", "order.ns.svc" and "order.ns.svc.cluster.local" are all "order";
// "order.other", "order.other.svc" and "order.other.svc.cluster.local" are "order.other" (a leaf
// from this policy's view); any other host (api.stripe.com) stays as written, a leaf. It is
// annotations.UpstreamNode, the rule the proxy matches request hosts by too.
func NormalizeUpstream(name, ns string) string { return annotations.UpstreamNode(name, ns) }

// Upstreams returns w's upstreams as the graph sees them in a policy of namespace ns with the
// given default attempts: names normalised, attempts and calls filled in.
func Upstreams(w Workload, ns string, defaultAttempts int32) ([]annotations.Upstream, error) {
	ups, err := annotations.ParseUpstreams(w.Annotations.Get(annotations.Upstreams))
	if err != nil {
		return nil, &AnnotationError{Workload: w, Annotation: annotations.Upstreams, Value: w.Annotations.Get(annotations.Upstreams), Err: err}
	}
	for i := range ups {
		ups[i].Name = NormalizeUpstream(ups[i].Name, ns)
		if ups[i].Attempts == 0 {
			ups[i].Attempts = max(defaultAttempts, 1)
		}
		if ups[i].Calls == 0 {
			ups[i].Calls = 1
		}
	}
	return ups, nil
}

// RaisesRetries reports whether updating old to incoming (versions of one workload) raises an
// attempt or adds an upstream, as p's graph sees them: the admission gate judges only such
// updates (and creates), so a chain already over its cap can still be repaired. Names are read
// in the workload's namespace, which compares them exactly as p's nodes would (a cluster
// policy's "name.ns" qualifies both sides alike). An invalid annotation on incoming is an error;
// an invalid one on old counts as no upstreams.
func RaisesRetries(p *Policy, old, incoming Workload) (bool, error) {
	def := p.spec.Retry.DefaultAttempts
	nu, err := Upstreams(incoming, incoming.Namespace, def)
	if err != nil {
		return false, err
	}
	ou, _ := Upstreams(old, incoming.Namespace, def)
	if old.ServiceName() != incoming.ServiceName() {
		return len(nu) > 0, nil
	}
	prev := map[string]annotations.Upstream{}
	for _, u := range ou {
		prev[u.Name] = u
	}
	for _, u := range nu {
		o, ok := prev[u.Name]
		if !ok || u.Attempts > o.Attempts {
			return true, nil
		}
	}
	return false, nil
}
