package analyze

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// On random workloads (some sharing a service, some with cycles, some through Services) and a
// policy whose entrypoints' client attempts are sometimes over the cap on their own, -o patch
// applied leaves over the cap exactly the chains no rewrite fits: each violation left starts at
// an entrypoint whose client attempts exceed the cap and says so, and the notes name those chains
// and nothing else. Before the fix text was per chain (fixtext), a chain from another entrypoint
// read "no rewrite fits" too; the patch fixed it and its comment said it did not.
func TestPropertyPatchLeavesOnlyUnfitChains(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	unfitCases, mixed := 0, 0
	for i := range 400 {
		ws := workloadtest.RandomWorkloads(r, 3+r.IntN(10), i%2 == 0)
		var svcs []workload.Service
		if i%3 == 0 {
			svcs = workloadtest.WithRandomServices(r, ws)
		}
		cap := int64(1 + r.IntN(6))
		p := workloadtest.Policy("p", int32(cap), v1alpha1.EnforcementReject, nil)
		p.Spec.Entrypoints = nil
		for k := 1 + r.IntN(3); k > 0; k-- {
			p.Spec.Entrypoints = append(p.Spec.Entrypoints, v1alpha1.Entrypoint{Service: "s" + strconv.Itoa(r.IntN(6)), ClientAttempts: int32(1 + r.IntN(8))})
		}
		m := NewManifests()
		m.Workloads, m.Services, m.Policies = ws, svcs, []*v1alpha1.RetryPolicy{p}
		rep := m.Analyze()
		if len(rep.Policies) != 1 || rep.WithinCap {
			continue
		}
		unfit := map[string]bool{}
		for _, ep := range rep.Policies[0].Entrypoints {
			if ep.ClientAttempts > cap {
				unfit[ep.Service] = true
			}
		}
		// Before the patch: each chain's fix is its own (a retry cycle's is the cycle's); one
		// from an entrypoint over the cap ends with why no rewrite fits (after the edges the
		// patch lowers on it: TestPropertyEntryRouteFixIsThePatch).
		for _, v := range rep.Policies[0].Violations {
			if !rep.Policies[0].Bounded {
				break
			}
			why := fmt.Sprintf("no rewrite fits: client attempts %d at entrypoint %s exceed cap %d", v.Factors[0], v.Path[0], cap)
			if unfit[v.Path[0]] != strings.HasSuffix(v.Suggestion, why) || strings.Count(v.Suggestion, "no rewrite fits") > 1 {
				t.Fatalf("case %d (cap %d): %s; fix: %s (unfit entrypoints %v)", i, cap, v.Message, v.Suggestion, unfit)
			}
		}
		patches, notes := m.Plan()
		after := NewManifests()
		after.Workloads, after.Services, after.Policies = append([]workload.Workload(nil), ws...), svcs, m.Policies
		for _, pt := range patches {
			for j, w := range after.Workloads {
				if w.Key() == pt.Workload.Key() {
					after.Workloads[j].Annotations = w.Annotations.With(annotations.Upstreams, pt.New)
				}
			}
		}
		ar := after.Analyze().Policies[0]
		if len(unfit) > 0 {
			unfitCases++
			if len(unfit) < len(rep.Policies[0].Entrypoints) {
				mixed++
			}
		}
		var want []string
		for _, v := range ar.Violations {
			if why := fmt.Sprintf("no rewrite fits: client attempts %d at entrypoint %s exceed cap %d", v.Factors[0], v.Path[0], cap); !unfit[v.Path[0]] || v.Suggestion != why {
				t.Fatalf("case %d (cap %d): after the patch %s; fix: %s (unfit entrypoints %v)\nnotes %q", i, cap, v.Message, v.Suggestion, unfit, notes)
			}
			if len(want) < MaxRemainingListed {
				want = append(want, "RetryPolicy shop/p:   "+v.Message+"; fix: "+v.Suggestion)
			}
		}
		var got []string
		for _, n := range notes {
			if strings.Contains(n, ":   ") && !strings.Contains(n, ":   ... and ") {
				got = append(got, n)
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || (len(ar.Violations) == 0) != (len(notes) == 0) {
			t.Fatalf("case %d: notes %q, want the chains %q", i, notes, want)
		}
	}
	if unfitCases < 40 || mixed < 20 {
		t.Fatalf("only %d cases with an entrypoint over the cap on its own, %d with others beside it", unfitCases, mixed)
	}
}

// On random workloads behind random Gateway API routes (an Istio ingress Gateway, whose rules
// without retry get Istio's 2 retries; or a BackendTrafficPolicy on the Gateway; or neither), so
// that an entry route often cannot give the tries its chains ask (a rule's fewest is 2 tries):
// each violation's fix text is exactly -o patch's changes on that chain (the route on its
// entrypoint's client attempts, each edge of its path, with the values the patch writes), and
// after the patch every chain still over the cap is one whose fix said "no rewrite fits". Before
// the fix text came from the combined plan (floorstatus), a route at its floor read "cannot give
// 1 try ... lower the callers' attempts" while the patch lowered the route and the edges below.
func TestPropertyEntryRouteFixIsThePatch(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	floors, floorEdges, routes, shared, several, fitChains, unroutedEdges := 0, 0, 0, 0, 0, 0, 0
	for i := range 1000 {
		ws := workloadtest.RandomWorkloads(r, 3+r.IntN(8), i%3 != 2)
		cap := int64(1 + r.IntN(6))
		p := workloadtest.Policy("p", int32(cap), v1alpha1.EnforcementReject, nil)
		p.Spec.Entrypoints = nil
		// None (the defaults: each route's backend, its tries as client attempts), some, or all
		// five (so that a rule's two backends often get different client attempts: one over the
		// cap, one within it through the same layer).
		if k := []int{0, 1 + r.IntN(3), 5}[r.IntN(3)]; k > 0 {
			for _, s := range r.Perm(5)[:k] {
				p.Spec.Entrypoints = append(p.Spec.Entrypoints, v1alpha1.Entrypoint{Service: "s" + strconv.Itoa(s), ClientAttempts: int32(1 + r.IntN(3))})
			}
		}
		input := randomEntryRoutes(r)
		m := NewManifests()
		if errs := (Reader{}).Read(m, "routes.yaml", strings.NewReader(input)); len(errs) > 0 {
			t.Fatalf("case %d: %v", i, errs)
		}
		m.Workloads, m.Policies = ws, []*v1alpha1.RetryPolicy{p}
		rep := m.Analyze()
		if len(rep.Policies) != 1 || rep.WithinCap || !rep.Policies[0].Bounded {
			continue
		}
		res := workload.Build(workload.ForRetryPolicy(p), ws, m.mesh)
		fp := res.PlanFix(graph.Analyze(res.Graph, res.Cap)) // only to count the cases
		patches, notes := m.Plan()
		// The patch's changes: per edge "from: to" the value written (one per node: every
		// workload of a node gets the plan's value), per mesh object its fields.
		edges := map[string]string{}
		var fields []string
		for _, pt := range patches {
			if pt.Mesh != nil {
				for _, ch := range pt.Mesh.Changes {
					fields = append(fields, pt.Mesh.Object+" "+ch)
				}
				continue
			}
			old, _ := annotations.ParseUpstreams(pt.Old)
			nu, _ := annotations.ParseUpstreams(pt.New)
			node := pt.Workload.Annotations.Get(annotations.Service)
			for j := range old {
				if nu[j].Attempts < old[j].Attempts {
					k, v := node+": "+nu[j].Name, strconv.Itoa(int(nu[j].Attempts))
					if prev, ok := edges[k]; ok && prev != v {
						t.Fatalf("case %d: the patch writes %s=%s and =%s", i, k, prev, v)
					}
					edges[k] = v
				}
			}
		}
		named := map[string]bool{} // what some fix text names
		unfit := map[string]bool{} // entrypoints whose chains' fix says no rewrite fits
		for _, v := range rep.Policies[0].Violations {
			var want []string
			e := v.Path[0]
			// The routes on the entrypoint's client attempts (the one it takes, and the others
			// to it), when the patch lowers them, in any order; then the edges in path order.
			me := res.MeshEntry[e]
			for _, f := range fields {
				if slices.ContainsFunc(append(slices.Clone(me.Layers), me.Alternatives...), func(l mesh.Layer) bool {
					return strings.HasPrefix(f, l.Object+" "+strings.TrimSuffix(l.FieldPath, ".attempts"))
				}) {
					want = append(want, f)
				}
			}
			slices.Sort(want)
			routed := len(want) > 0
			floorRoute := false
			for _, rt := range fp.Routes {
				if rt.Give > rt.Tries && slices.ContainsFunc(res.MeshEntry[e].Layers, func(l mesh.Layer) bool { return l.Note == rt.Layer.Note }) {
					floorRoute = true
				}
			}
			for j := 0; j+1 < len(v.Path); j++ {
				if nv, ok := edges[v.Path[j]+": "+v.Path[j+1]]; ok {
					want = append(want, v.Path[j]+": "+v.Path[j+1]+"="+nv)
				}
			}
			got := v.Suggestion
			if at := strings.Index(got, "no rewrite fits: "); at >= 0 {
				unfit[e] = true
				got = strings.TrimSuffix(got[:at], "; ")
			}
			var gotParts []string
			cannot := false
			for _, part := range strings.Split(got, "; ") {
				switch {
				case part == "":
				case edgeFix.MatchString(part), routeFix.MatchString(part):
					gotParts = append(gotParts, part)
					named[part] = true
				case strings.HasPrefix(part, "client -> "):
					cannot = true // a route that cannot be lowered: nothing to patch
				case !cannot:
					t.Fatalf("case %d: fix %q: part %q is neither a change nor why a route cannot change", i, v.Suggestion, part)
				}
			}
			if v.Factors[0] > cap && !res.MeshEntry[e].Multiplied() {
				// Client attempts over the cap that no route multiplies: the edges the patch
				// lowers on the chain (compared below), then why that is not enough. Before, "no
				// rewrite fits" alone, while the patch lowered those edges.
				if why := fmt.Sprintf("no rewrite fits: client attempts %d at entrypoint %s exceed cap %d", v.Factors[0], e, cap); !strings.HasSuffix(v.Suggestion, why) {
					t.Fatalf("case %d (cap %d): %s; fix: %s, want it to end with %q", i, cap, v.Message, v.Suggestion, why)
				}
				if len(want) > 0 {
					unroutedEdges++
				}
			}
			routeParts := slices.IndexFunc(gotParts, func(p string) bool { return edgeFix.MatchString(p) })
			if routeParts < 0 {
				routeParts = len(gotParts)
			}
			slices.Sort(gotParts[:routeParts])
			if routeParts > 1 {
				several++ // the route it takes and another to it, both lowered
			}
			if strings.Join(gotParts, "; ") != strings.Join(want, "; ") {
				t.Fatalf("case %d (cap %d): %s\nfix:   %s\npatch: %s\ninput:\n%s", i, cap, v.Message, v.Suggestion, strings.Join(want, "; "), input)
			}
			if routed {
				routes++
				if v.Factors[0] <= cap {
					shared++ // within the cap itself, through a layer another entrypoint's chains lower
				}
			}
			if floorRoute {
				floors++
				if len(want) > 1 {
					floorEdges++
				}
			}
			if !unfit[e] {
				fitChains++
			}
		}
		// No route the patch lowers goes unnamed. (An edge may: the planner lowers an edge of a
		// service no entrypoint reaches as if it were called once, and no chain runs there.)
		for _, f := range fields {
			if !named[f] && rep.Policies[0].ViolationsTotal <= len(rep.Policies[0].Violations) {
				var fixes []string
				for _, v := range rep.Policies[0].Violations {
					fixes = append(fixes, v.Message+"\n  fix: "+v.Suggestion)
				}
				t.Fatalf("case %d: the patch writes %s, which no fix names\n%s\ninput:\n%s", i, f, strings.Join(fixes, "\n"), input)
			}
		}
		// Applied, only chains whose fix said no rewrite fits stay over, and the notes name them.
		after := NewManifests()
		if errs := (Reader{}).Read(after, "routes.yaml", strings.NewReader(input)); len(errs) > 0 {
			t.Fatal(errs)
		}
		for _, pt := range patches {
			if pt.Mesh != nil {
				if errs := (Reader{}).Read(after, "patch.json", strings.NewReader(string(pt.Mesh.JSON))); len(errs) > 0 {
					t.Fatal(errs)
				}
			}
		}
		after.Workloads, after.Policies = append([]workload.Workload(nil), ws...), m.Policies
		for _, pt := range patches {
			for j, w := range after.Workloads {
				if pt.Mesh == nil && w.Key() == pt.Workload.Key() {
					after.Workloads[j].Annotations = w.Annotations.With(annotations.Upstreams, pt.New)
				}
			}
		}
		ar := after.Analyze().Policies[0]
		for _, v := range ar.Violations {
			if !unfit[v.Path[0]] {
				t.Fatalf("case %d (cap %d): after the patch %s; fix: %s, its fix before did not say it cannot fit\nnotes %q\ninput:\n%s", i, cap, v.Message, v.Suggestion, notes, input)
			}
		}
		chainNotes := 0
		for _, n := range notes {
			if strings.Contains(n, ":   ") {
				chainNotes++
			}
		}
		if min(len(ar.Violations), MaxRemainingListed) != min(chainNotes, MaxRemainingListed) {
			t.Fatalf("case %d: notes %q with %d chains over the cap after the patch", i, notes, len(ar.Violations))
		}
	}
	counts := fmt.Sprintf("%d chains with a route at its floor, %d of them with edges too, %d with a route (%d from an entrypoint within the cap, %d with several routes lowered), %d that fit, %d from an entrypoint over the cap with no route and edges lowered",
		floors, floorEdges, routes, shared, several, fitChains, unroutedEdges)
	t.Log(counts)
	if floors < 300 || floorEdges < 150 || routes < 600 || shared < 10 || several < 50 || fitChains < 700 || unroutedEdges < 50 {
		t.Fatal("too few cases: " + counts)
	}
}

// A fix's parts: an edge's new attempts ("s1: s3=1"), a route's field ("HTTPRoute shop/web
// spec.rules[0].retry.attempts: 3 -> 1", "BackendTrafficPolicy shop/retry spec.retry.numRetries:
// 2 -> 0").
var (
	edgeFix  = regexp.MustCompile(`^[^ :]+: [^ =]+=[0-9]+$`)
	routeFix = regexp.MustCompile(`^(HTTPRoute|BackendTrafficPolicy) shop/[a-z]+ spec\.[^ ]+: .+ -> .+$`)
)

// randomEntryRoutes is an HTTPRoute shop/web with parent Gateway eg and up to 3 rules, each to
// one or two of s0..s4 (a backend may be in several), with retry attempts 1..5 or none; eg is
// Istio's ingress (a rule without retry: Istio's 2 retries), or a BackendTrafficPolicy targets
// it (numRetries 0..2), or neither.
func randomEntryRoutes(r *rand.Rand) string {
	var b strings.Builder
	switch r.IntN(3) {
	case 0:
		b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: eg, namespace: shop}\nspec: {gatewayClassName: istio, listeners: [{name: http, port: 80, protocol: HTTP}]}\n---\n")
	case 1:
		fmt.Fprintf(&b, "apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: BackendTrafficPolicy\nmetadata: {name: retry, namespace: shop}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: eg}]\n  retry: {numRetries: %d}\n---\n", r.IntN(3))
	}
	b.WriteString("apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: shop}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n")
	for k := 1 + r.IntN(3); k > 0; k-- {
		b.WriteString("  - backendRefs: [")
		for j, s := range r.Perm(5)[:1+r.IntN(2)] {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{name: s%d, port: 80}", s)
		}
		b.WriteString("]\n")
		if r.IntN(4) > 0 {
			fmt.Fprintf(&b, "    retry: {attempts: %d}\n", 1+r.IntN(5))
		}
	}
	return b.String()
}
