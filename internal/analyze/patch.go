package analyze

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// Patch is one object's part of the combined fix: a workload's new retrycap.dev/upstreams
// value, or (Mesh set) a mesh object's lowered retry fields.
type Patch struct {
	Workload workload.Workload
	Source   Source
	Old, New string
	// Policies are the policies whose plans lower this object's values.
	Policies []string
	// Mesh is a mesh object's patch (Workload, Old and New are then empty).
	Mesh *MeshPatch
	// Env is the workload's container AWS_MAX_ATTEMPTS when an edge whose tries are the AWS
	// SDK's must make fewer (nil: none); Old and New are equal when the annotation stays.
	Env *workload.EnvFix
	// lowered: some upstream's attempts in the annotation were lowered (else New is Old).
	lowered bool
}

// Plan is the whole combined fix of every policy over the cap: for each policy the combined
// plan its status's fix text names (workload.Result.PlanFix: the whole-graph planner, retries
// kept nearest the entrypoints, each edge lowered to what fits under the worst path into it; a
// gateway route on an entrypoint's client attempts lowered where those alone exceed the cap),
// mapped back to the annotations and mesh fields that declare the edges; a workload several
// policies select gets the lowest value of any. The patches are then applied to the input and
// every policy analysed again: a policy still over its cap gets a note per chain that stays
// over, with why (its fix text:
// "no rewrite fits: client attempts 5 at entrypoint api exceed cap 4", a mesh field that cannot
// go lower); no note means every chain is within its cap once the patches are applied. Patches
// are sorted by workload.
func (m *Manifests) Plan() (patches []Patch, notes []string) {
	ps := append([]*v1alpha1.RetryPolicy(nil), m.Policies...)
	sort.Slice(ps, func(i, j int) bool {
		return ps[i].Namespace+"/"+ps[i].Name < ps[j].Namespace+"/"+ps[j].Name
	})
	// The graphs to plan: every RetryPolicy's, then every ClusterRetryPolicy's (by name) over
	// the namespaces whose labels the input gives.
	var results []*workload.Result
	for _, p := range ps {
		results = append(results, workload.Build(workload.ForRetryPolicy(p), m.Workloads, m.mesh, m.Services...))
	}
	cps := append([]*v1alpha1.ClusterRetryPolicy(nil), m.ClusterPolicies...)
	sort.Slice(cps, func(i, j int) bool { return cps[i].Name < cps[j].Name })
	for _, p := range cps {
		if s, err := workload.NewClusterScope(p, m.NamespaceLabels); err == nil {
			results = append(results, workload.Build(workload.ForClusterRetryPolicy(p, s), m.Workloads, m.mesh, m.Services...))
		}
	}
	cur := map[string][]annotations.Upstream{} // workload key -> upstreams being lowered
	byKey := map[string]*Patch{}
	demands := map[string]*meshDemand{} // a mesh layer's field -> the fewest tries it may give
	var over []overPolicy
	for _, r := range results {
		a := graph.Analyze(r.Graph, r.Cap)
		if a.WithinCap() {
			continue
		}
		over = append(over, overPolicy{r, max(a.ViolationsTotal, len(a.Violations))})
		// "shop/checkout" for a RetryPolicy (the patch's comment says "for RetryPolicy ..."),
		// "ClusterRetryPolicy checkout" for a cluster policy.
		name := strings.TrimPrefix(r.PolicyName(), workload.KindRetryPolicy+" ")
		// The combined fix the status's fix text reads too (workload.Result.PlanFix): the
		// whole-graph plan, with a gateway route on an entrypoint whose client attempts alone
		// exceed the cap lowered (the route is ours; to its field's fewest tries when it cannot
		// give what the chains ask) and the edges planned for the client attempts it leaves.
		// Whether that is enough, the analysis of the patched input says (remaining).
		fp := r.PlanFix(a)
		plan := fp.Plan
		for _, rt := range fp.Routes {
			// A route at its floor is asked for what it gives: the plan lowered the edges
			// below for that, so its "cannot give" is no note of a chain left over (the
			// re-analysis names those). One that cannot be lowered is asked for what the
			// chains wanted, so that the note says why.
			tries := rt.Tries
			if rt.Rewrite != nil {
				tries = rt.Give
			}
			addDemand(demands, rt.Layer, tries, name)
		}
		def := max(r.Spec().Retry.DefaultAttempts, 1)
		lower := func(w workload.Workload, key string) {
			pt := byKey[key]
			if pt == nil {
				pt = &Patch{Workload: w, Source: m.Sources[key], Old: w.Annotations.Get(annotations.Upstreams)}
				byKey[key] = pt
			}
			if !containsString(pt.Policies, name) {
				pt.Policies = append(pt.Policies, name)
			}
		}
		for _, w := range r.Selected {
			key := w.Key()
			// The nodes w's edges belong to: its service name, or the Services selecting it.
			nodes := r.Nodes(key)
			if len(nodes) == 0 {
				continue
			}
			ups, seen := cur[key]
			if !seen {
				var err error
				if ups, err = annotations.ParseUpstreams(w.Annotations.Get(annotations.Upstreams)); err != nil {
					continue // reported as an error already
				}
				cur[key] = ups
			}
			x := workload.Parse(w)
			for _, n := range nodes {
				// The edges out of n as the graph carries them: the app's attempts times the
				// mesh layers on w's calls.
				edges := r.IncomingEdges(x, n)
				if len(edges) != len(ups) {
					continue
				}
				for i, u := range ups {
					if x.SDKUpstream(i) {
						// The SDK's tries: the lever is the container's AWS_MAX_ATTEMPTS (one
						// value for every AWS call of the container: the lowest planned).
						if v, ok := plan.New(n, edges[i].To); ok {
							want := v / max(edges[i].Attempts()/max(edges[i].App, 1), 1)
							if pt := byKey[key]; pt != nil && pt.Env != nil {
								want = min(want, pt.Env.To)
							}
							if f, ok := workload.PlanEnvFix(x, max(want, 1)); ok {
								lower(w, key)
								byKey[key].Env = &f
							}
						}
						continue
					}
					now := int64(u.Attempts)
					if now == 0 {
						now = int64(def)
					}
					v, ok := plan.New(n, edges[i].To)
					if !ok || v >= now*(edges[i].Attempts()/max(edges[i].App, 1)) {
						continue
					}
					// The annotation first, then as many of the edge's layers as v needs
					// (mesh.Split, which the status's fix text reads too).
					sp := mesh.Split(now, edges[i].Layers, v)
					if sp.App < now {
						ups[i].Attempts = int32(sp.App)
						lower(w, key)
						byKey[key].lowered = true
					}
					for _, lf := range sp.Layers {
						if sp.Meshed && lf.Layer.Tries > 1 && lf.Tries < lf.Layer.Tries {
							addDemand(demands, lf.Layer, lf.Tries, name)
						}
					}
				}
			}
		}
	}
	for key, pt := range byKey {
		pt.New = pt.Old
		if pt.lowered {
			pt.New = annotations.FormatUpstreams(cur[key])
		}
		if pt.Env != nil && pt.Env.Container == "" {
			notes = append(notes, fmt.Sprintf("%s: no container to name: set env %s=%d on the container calling AWS (%s)", pt.Workload, workload.EnvAWSMaxAttempts, pt.Env.To, pt.Env.Suggestion()))
			pt.Env = nil
			if !pt.lowered {
				continue
			}
		}
		patches = append(patches, *pt)
	}
	sort.Slice(patches, func(i, j int) bool { return workload.Compare(patches[i].Workload, patches[j].Workload) < 0 })
	mp, mnotes := m.planMesh(demands)
	patches = append(patches, mp...)
	return patches, append(append(m.remaining(over, patches), notes...), mnotes...)
}

// overPolicy is a policy over its cap before the patch, with how many chains were over.
type overPolicy struct {
	r      *workload.Result
	before int
}

// MaxRemainingListed is how many chains still over the cap after the patch the notes list per
// policy; the rest are counted.
const MaxRemainingListed = 5

// remaining analyses each policy of over again with the patches applied (the workloads' new
// upstreams and AWS_MAX_ATTEMPTS, the mesh objects as patched) and returns, for each still over
// its cap, a note per chain that stays over: its message and its fix text after the patch, which
// says why (an entrypoint's client attempts alone over the cap; a mesh field that cannot give
// fewer tries). So the notes and the patch cannot disagree: a policy without a note is within
// its cap once the patch is applied.
func (m *Manifests) remaining(over []overPolicy, patches []Patch) []string {
	if len(over) == 0 {
		return nil
	}
	ws := slices.Clone(m.Workloads)
	index := make(map[string]int, len(ws))
	for i, w := range ws {
		index[w.Key()] = i
	}
	set := m.mesh
	for _, pt := range patches {
		if pt.Mesh != nil {
			if m.mesh == nil {
				// Cannot happen (a mesh patch rewrites an object the Set read); if it does, say
				// so rather than claim a result.
				return []string{fmt.Sprintf("%s: no mesh objects were read: the patch below is not checked", pt.Mesh.Object)}
			}
			if set == m.mesh {
				set = m.mesh.Clone() // the input's Set stays as read
			}
			if _, err := set.AddJSON(pt.Mesh.JSON); err != nil {
				// Cannot happen for an object the Set read and Rewrite.Apply patched; if it
				// does, say so rather than claim a result.
				return []string{fmt.Sprintf("%s: the patched object does not read back (%v): the patch below is not checked", pt.Mesh.Object, err)}
			}
			continue
		}
		i, ok := index[pt.Workload.Key()]
		if !ok {
			continue
		}
		w := ws[i]
		if pt.New != pt.Old {
			ann := w.Annotations.Map()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[annotations.Upstreams] = pt.New
			w.Annotations = workload.PairsOf(ann)
		}
		if pt.Env != nil {
			w.AWS.MaxAttempts = strconv.FormatInt(pt.Env.To, 10)
			w.AWS.Container = pt.Env.Container
		}
		ws[i] = w
	}
	var notes []string
	for _, o := range over {
		r := o.r
		_, a := workload.Analyze(r.Policy, ws, set, m.Services...)
		if a.WithinCap() {
			continue
		}
		name := r.PolicyName()
		if len(a.Violations) == 0 {
			// Cannot happen (the patch lowers every retry of a cycle to 1, and an over-cap
			// analysis lists its chains); if it does, the note must not stay silent.
			notes = append(notes, fmt.Sprintf("%s: still over the cap after this patch: amplification %s > cap %d", name, graph.FormatAmount(a.Amplification), r.Cap))
			continue
		}
		total := max(a.ViolationsTotal, len(a.Violations))
		head := fmt.Sprintf("%s: %s over cap %d after this patch", name, chainCount(total), r.Cap)
		if o.before > total {
			head += fmt.Sprintf(" (%d before it: it brings the other %d within the cap)", o.before, o.before-total)
		}
		notes = append(notes, head+":")
		for i, v := range a.Violations {
			if i == MaxRemainingListed {
				notes = append(notes, fmt.Sprintf("%s:   ... and %d more: retrycap analyze on the patched manifests lists them", name, total-i))
				break
			}
			msg, _, _ := strings.Cut(v.Message, "; ") // the chain; the mesh layers' breakdown follows in the table
			fix := v.Suggestion
			if fix == "" {
				fix = "no fix found"
			}
			notes = append(notes, fmt.Sprintf("%s:   %s; fix: %s", name, msg, fix))
		}
	}
	return notes
}

// chainCount is "1 chain stays" or "3 chains stay".
func chainCount(n int) string {
	if n == 1 {
		return "1 chain stays"
	}
	return strconv.Itoa(n) + " chains stay"
}

// addDemand records that policy name allows layer l's field at most tries.
func addDemand(demands map[string]*meshDemand, l mesh.Layer, tries int64, name string) {
	k := l.Object + " " + l.FieldPath + " " + l.Note
	if d := demands[k]; d == nil {
		demands[k] = &meshDemand{layer: l, tries: tries, policies: []string{name}}
	} else {
		d.tries = min(d.tries, tries)
		if !containsString(d.policies, name) {
			d.policies = append(d.policies, name)
		}
	}
}

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// RenderPatch writes the combined fix as a stream of YAML documents, one merge patch per
// object, each headed by a comment naming the object, where it was read and the old and new
// values: usable as kustomize patches, or with kubectl patch. The value is written on the pod
// template (a bare Pod's own metadata), where it belongs and wins over the workload's own.
func RenderPatch(w io.Writer, patches []Patch, notes []string) error {
	var b strings.Builder
	for _, n := range notes {
		fmt.Fprintf(&b, "# %s\n", n)
	}
	if len(patches) == 0 {
		if len(notes) == 0 {
			b.WriteString("# nothing to change: every chain is within its cap\n")
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	for i, pt := range patches {
		if i > 0 || len(notes) > 0 {
			b.WriteString("---\n")
		}
		if pt.Mesh != nil {
			// The whole object with its retry fields lowered (a list such as spec.http cannot be
			// merge-patched one item at a time): kubectl apply takes it as it is.
			fmt.Fprintf(&b, "# %s (%s), for %s: %s\n", pt.Mesh.Object, pt.Source, policyList(pt.Policies), strings.Join(pt.Mesh.Changes, "; "))
			out, err := yaml.JSONToYAML(pt.Mesh.JSON)
			if err != nil {
				return fmt.Errorf("rendering %s: %w", pt.Mesh.Object, err)
			}
			b.Write(out)
			if len(out) > 0 && out[len(out)-1] != '\n' {
				b.WriteByte('\n')
			}
			continue
		}
		var changes []string
		if pt.Old != pt.New {
			changes = append(changes, fmt.Sprintf("%s %q -> %q", annotations.Upstreams, pt.Old, pt.New))
		}
		if pt.Env != nil {
			// The same words as the suggestion's; a strategic merge patch (kubectl patch's
			// default for these kinds, and kustomize's), which merges containers and env by name.
			changes = append(changes, strings.TrimPrefix(pt.Env.Suggestion(), pt.Workload.String()+" "))
		}
		fmt.Fprintf(&b, "# %s (%s), for %s: %s\n", pt.Workload, pt.Source, policyList(pt.Policies), strings.Join(changes, "; "))
		if pt.Env != nil && pt.Workload.Kind == workload.KindPod {
			b.WriteString("# a Pod's env cannot change in place: recreate the Pod with this value\n")
		}
		kind, _ := workload.KindOf(pt.Workload.Kind)
		obj := map[string]any{
			"apiVersion": kind.APIVersion(),
			"kind":       pt.Workload.Kind,
			"metadata":   map[string]any{"name": pt.Workload.Name, "namespace": pt.Workload.Namespace},
		}
		podMeta, podSpec := map[string]any{}, map[string]any{}
		if pt.Old != pt.New {
			podMeta["annotations"] = map[string]string{annotations.Upstreams: pt.New}
		}
		if pt.Env != nil {
			podSpec["containers"] = []any{map[string]any{"name": pt.Env.Container,
				"env": []any{map[string]any{"name": workload.EnvAWSMaxAttempts, "value": strconv.FormatInt(pt.Env.To, 10)}}}}
		}
		if pt.Workload.Kind == workload.KindPod {
			maps.Copy(obj["metadata"].(map[string]any), podMeta)
			if len(podSpec) > 0 {
				obj["spec"] = podSpec
			}
		} else {
			tmpl := map[string]any{}
			if len(podMeta) > 0 {
				tmpl["metadata"] = podMeta
			}
			if len(podSpec) > 0 {
				tmpl["spec"] = podSpec
			}
			// Nested along the kind's template path (a CronJob's is spec.jobTemplate.spec.template).
			var v any = tmpl
			for i := len(kind.TemplatePath) - 1; i >= 1; i-- {
				v = map[string]any{kind.TemplatePath[i]: v}
			}
			obj[kind.TemplatePath[0]] = v
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		b.Write(out)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// policyList names a patch's policies: "RetryPolicy shop/a, shop/b" when all are RetryPolicies
// (named "ns/name" in Patch.Policies), else each by kind ("RetryPolicy shop/a, ClusterRetryPolicy
// checkout").
func policyList(ps []string) string {
	cluster := false
	for _, p := range ps {
		cluster = cluster || strings.HasPrefix(p, "ClusterRetryPolicy ")
	}
	if !cluster {
		return "RetryPolicy " + strings.Join(ps, ", ")
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p
		if !strings.HasPrefix(p, "ClusterRetryPolicy ") {
			out[i] = "RetryPolicy " + p
		}
	}
	return strings.Join(out, ", ")
}
