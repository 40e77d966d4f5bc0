package workload

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

// randomWorkload is a workload of namespace ns (shop, or other: never selected) with random
// labels (tier, app.kubernetes.io/name), a random service annotation (shared names: several
// workloads per service), and random upstreams: services of the pool, an external host, one of
// another namespace, itself, with attempts and calls written or not, now and then malformed or
// blank.
func randomWorkload(rng *rand.Rand, ns, name string) (w Workload) {
	w = Workload{Kind: KindDeployment, Namespace: ns, Name: name}
	lbls, ann := map[string]string{}, map[string]string{}
	defer func() { w.Labels, w.Annotations = PairsOf(lbls), PairsOf(ann) }()
	if rng.IntN(3) > 0 {
		lbls["tier"] = []string{"a", "b"}[rng.IntN(2)]
	}
	switch rng.IntN(6) {
	case 0:
		lbls[annotations.NameLabel] = fmt.Sprintf("s%d", rng.IntN(6))
	case 1:
		ann[annotations.Service] = fmt.Sprintf("s%d", rng.IntN(6))
	case 2:
		ann[annotations.Service] = "Bad_Name" // invalid: left out
	}
	switch rng.IntN(8) {
	case 0:
		return w // no upstreams annotation
	case 1:
		ann[annotations.Upstreams] = "  "
		return w
	case 2:
		ann[annotations.Upstreams] = "s1=x"
		return w
	}
	pool := []string{"s0", "s1", "s2", "s3", "s4", "s5", "leaf1", "leaf2", "api.stripe.com", "s1.other", "s0.pay", name}
	var ups []string
	for _, k := range rng.Perm(len(pool))[:rng.IntN(4)] {
		u := pool[k]
		switch rng.IntN(4) {
		case 0:
			u += fmt.Sprintf("=%d", 1+rng.IntN(4))
		case 1:
			u += fmt.Sprintf("=%d/%d", 1+rng.IntN(4), 1+rng.IntN(3))
		}
		ups = append(ups, u)
	}
	ann[annotations.Upstreams] = strings.Join(ups, ", ")
	return w
}

// checkSame fails unless got (patched) equals want (built): the Result field by field, the graph
// in its order (nodes, edges, entrypoints, lookups), and the analysis.
func checkSame(t *testing.T, step string, got, want *Result) {
	t.Helper()
	g, w := *got, *want
	g.Graph, w.Graph = nil, nil
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s: result\n got %+v\nwant %+v", step, g, w)
	}
	gg, wg := got.Graph, want.Graph
	if !reflect.DeepEqual(gg.Services(), wg.Services()) {
		t.Fatalf("%s: services\n got %v\nwant %v", step, gg.Services(), wg.Services())
	}
	if !reflect.DeepEqual(gg.Edges(), wg.Edges()) {
		t.Fatalf("%s: edges\n got %v\nwant %v", step, gg.Edges(), wg.Edges())
	}
	if !reflect.DeepEqual(gg.Entrypoints(), wg.Entrypoints()) {
		t.Fatalf("%s: entrypoints\n got %v\nwant %v", step, gg.Entrypoints(), wg.Entrypoints())
	}
	for i, e := range wg.Edges() {
		if k, ok := gg.EdgeIndex(e.From, e.To); !ok || k != i {
			t.Fatalf("%s: EdgeIndex(%s, %s) = %d, %v; want %d", step, e.From, e.To, k, ok, i)
		}
	}
	for _, n := range []string{"s0", "s1", "s2", "s3", "s4", "s5", "leaf1", "leaf2", "api.stripe.com", "s1.other", "gone"} {
		if gg.Has(n) != wg.Has(n) {
			t.Fatalf("%s: Has(%q) = %v, want %v", step, n, gg.Has(n), wg.Has(n))
		}
	}
	if ga, wa := got.Analyze(), want.Analyze(); !reflect.DeepEqual(ga, wa) {
		t.Fatalf("%s: analysis\n got %+v\nwant %+v", step, ga, wa)
	}
}

// TestIncrementalEqualsBuild drives an Incremental through random sequences of workload adds,
// updates (upstreams, labels, service names) and deletes, and now and then a Service or a policy
// change, and compares it after every step with a fresh BuildParsedMesh of the same input:
// exactly equal, whether the step was patched or built.
func TestIncrementalEqualsBuild(t *testing.T) {
	seeds, steps := 300, 60
	if testing.Short() {
		seeds = 60
	}
	patched, withServices, patchedMoves, total := 0, 0, 0, 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 18))
		p := policy("shop", "p", int32(2+rng.IntN(30)))
		if rng.IntN(3) == 0 {
			p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}
		}
		if rng.IntN(3) == 0 {
			p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "s0", ClientAttempts: 2}, {Service: "leaf1"}}
		}
		items := map[string]*Parsed{}
		sorted := func() []*Parsed {
			ps := make([]*Parsed, 0, len(items))
			for _, x := range items {
				ps = append(ps, x)
			}
			slices.SortFunc(ps, compareParsed)
			return ps
		}
		name := func() (string, string) {
			ns := "shop"
			if rng.IntN(8) == 0 {
				ns = "other"
			}
			return ns, fmt.Sprintf("w%d", rng.IntN(12))
		}
		for range 6 + rng.IntN(6) {
			ns, n := name()
			items[ns+"/"+n] = Parse(randomWorkload(rng, ns, n))
		}
		// Services in most seeds: one fronting tier a under another name, one of a service
		// name selecting by app.kubernetes.io/name, one without a selector, one ExternalName.
		services := NewServiceSet([]Service{
			{Namespace: "shop", Name: "s1", Selector: map[string]string{"tier": "a"}},
			{Namespace: "shop", Name: "s2", Selector: map[string]string{annotations.NameLabel: "s2"}},
			{Namespace: "shop", Name: "leaf1"},
			{Namespace: "shop", Name: "leaf2", ExternalName: true, Selector: map[string]string{"tier": "b"}},
		})
		var svcs *ServiceSet
		if rng.IntN(3) > 0 {
			svcs = services
		}
		inc := NewIncremental(ForRetryPolicy(p), sorted(), svcs, nil)
		checkSame(t, fmt.Sprintf("seed %d: initial", seed), inc.Result(), BuildParsed(ForRetryPolicy(p), sorted(), svcs, nil))
		for step := range steps {
			ns, n := name()
			k := rng.IntN(20)
			if k < 9 && len(items) > 0 {
				// Mostly an existing workload's upstreams: the change the patch is for.
				x := sorted()[rng.IntN(len(items))]
				ns, n = x.Workload.Namespace, x.Workload.Name
			}
			key := ns + "/" + n
			what := ""
			switch {
			case k < 12:
				// An update of the same workload's upstreams alone (the patch's case), or of
				// everything (labels, service name: built anew).
				if x, ok := items[key]; ok && k < 9 {
					w := x.Workload
					ann := randomWorkload(rng, ns, n).Annotations.Map()
					if ann == nil {
						ann = map[string]string{}
					}
					if s, ok := x.Workload.Annotations.Lookup(annotations.Service); ok {
						ann[annotations.Service] = s
					} else {
						delete(ann, annotations.Service)
					}
					w.Annotations = PairsOf(ann)
					items[key], what = Parse(w), "update upstreams of "+key
				} else {
					items[key], what = Parse(randomWorkload(rng, ns, n)), "put "+key
				}
			case k < 15:
				delete(items, key)
				what = "delete " + key
			case k < 16:
				if svcs == nil {
					svcs, what = services.Clone(), "Services"
				} else {
					svcs, what = nil, "no Service"
				}
			case k < 17:
				p = p.DeepCopy()
				p.Spec.MaxAmplification = int32(2 + rng.IntN(30))
				what = "cap"
			default:
				what = "nothing"
			}
			ps := sorted()
			total++
			before := len(inc.Result().Selected)
			if inc.Update(ForRetryPolicy(p), ps, svcs, nil) {
				patched++
				if len(inc.Result().Selected) != before {
					patchedMoves++ // a selected workload added or removed, or (de)selected
				}
				if svcs != nil && len(inc.Result().Notes) > 0 {
					withServices++
				}
			}
			checkSame(t, fmt.Sprintf("seed %d step %d (%s)", seed, step, what), inc.Result(), BuildParsed(ForRetryPolicy(p), ps, svcs, nil))
		}
	}
	// The patch must be what most steps take, or this tests the build against itself; adds and
	// removes are patched only without Services (a third of the seeds).
	if patched*3 < total || withServices*10 < total || patchedMoves*25 < total {
		t.Fatalf("%d of %d steps patched, %d with Services and notes, %d adding or removing a selected workload; want at least a third, a tenth, a 25th",
			patched, total, withServices, patchedMoves)
	}
	t.Logf("%d of %d steps patched, %d with Services and notes, %d adding or removing a selected workload", patched, total, withServices, patchedMoves)
}

// TestIncrementalFallsBack: the cases the patch does not decide are built anew (Update reports
// false), and the result is the build's.
func TestIncrementalFallsBack(t *testing.T) {
	p := policy("shop", "p", 4)
	a := Parse(deploy("shop", "a", "b=2", nil))
	b := Parse(deploy("shop", "b", "c=2", nil))
	ps := []*Parsed{a, b}
	svcB := NewServiceSet([]Service{{Namespace: "shop", Name: "b", Selector: map[string]string{"app": "b"}}})
	tests := []struct {
		name    string
		p       *v1alpha1.RetryPolicy
		ps      []*Parsed
		svcs    *ServiceSet
		patched bool
	}{
		{"upstreams changed", p, []*Parsed{Parse(deploy("shop", "a", "b=3, d", nil)), b}, nil, true},
		{"nothing changed", p, ps, nil, true},
		{"workload added", p, []*Parsed{a, b, Parse(deploy("shop", "c", "", nil))}, nil, true},
		{"workload removed", p, []*Parsed{a}, nil, true},
		{"service name changed", p, []*Parsed{Parse(deploy("shop", "a", "b=2", map[string]string{annotations.NameLabel: "x"})), b}, nil, true},
		{"workload added with Services", p, []*Parsed{a, b, Parse(deploy("shop", "c", "", nil))}, svcB, false},
		{"workload removed with Services", p, []*Parsed{a}, svcB, false},
		{"a Service", p, ps, svcB, false},
		{"spec changed", policy("shop", "p", 5), ps, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var svcs *ServiceSet
			if strings.HasSuffix(tt.name, "with Services") {
				svcs = tt.svcs // built with the Services: only the workloads change
			}
			inc := NewIncremental(ForRetryPolicy(p), ps, svcs, nil)
			if got := inc.Update(ForRetryPolicy(tt.p), tt.ps, tt.svcs, nil); got != tt.patched {
				t.Fatalf("Update patched = %v, want %v", got, tt.patched)
			}
			checkSame(t, tt.name, inc.Result(), BuildParsed(ForRetryPolicy(tt.p), tt.ps, tt.svcs, nil))
		})
	}
}

// TestNormalizeOrderDropsAndMoves: the graph edits' order is the build's (graph.NormalizeOrder
// through a patch): a new upstream-only node where its first edge names it, not last; an
// upstream nothing calls any more gone.
func TestNormalizeOrderDropsAndMoves(t *testing.T) {
	p := policy("shop", "p", 100)
	a := Parse(deploy("shop", "a", "x", nil))
	b := Parse(deploy("shop", "b", "y", nil))
	inc := NewIncremental(ForRetryPolicy(p), []*Parsed{a, b}, nil, nil)
	a2 := Parse(deploy("shop", "a", "z, x", nil))
	if !inc.Update(ForRetryPolicy(p), []*Parsed{a2, b}, nil, nil) {
		t.Fatal("not patched")
	}
	want := []graph.Service{{Name: "a", Selected: true}, {Name: "b", Selected: true}, {Name: "z"}, {Name: "x"}, {Name: "y"}}
	if got := inc.Result().Graph.Services(); !reflect.DeepEqual(got, want) {
		t.Fatalf("services %v, want %v", got, want)
	}
	a3 := Parse(deploy("shop", "a", "", nil))
	inc.Update(ForRetryPolicy(p), []*Parsed{a3, b}, nil, nil)
	want = []graph.Service{{Name: "a", Selected: true}, {Name: "b", Selected: true}, {Name: "y"}}
	if got := inc.Result().Graph.Services(); !reflect.DeepEqual(got, want) || inc.Result().Graph.Has("x") {
		t.Fatalf("services %v, want %v (x gone)", got, want)
	}
}

// TestClusterIncrementalEqualsBuild is TestIncrementalEqualsBuild for a ClusterRetryPolicy over
// namespaces shop and pay (other unselected): nodes "name.ns", upstreams across the selected
// namespaces and into the unselected one, Services of both merged; now and then the scope
// changes (pay leaves or comes back: built anew).
func TestClusterIncrementalEqualsBuild(t *testing.T) {
	seeds, steps := 200, 60
	if testing.Short() {
		seeds = 40
	}
	patched, patchedMoves, total := 0, 0, 0
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 19))
		p := clusterPolicy("c", int32(2+rng.IntN(30)), map[string]string{})
		if rng.IntN(3) == 0 {
			p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}}
		}
		if rng.IntN(3) == 0 {
			p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "s0.shop", ClientAttempts: 2}, {Service: "s1.pay"}}
		}
		full := NewClusterScopeOf("shop", "pay")
		s := full
		items := map[string]*Parsed{}
		sorted := func() []*Parsed {
			ps := make([]*Parsed, 0, len(items))
			for _, x := range items {
				ps = append(ps, x)
			}
			slices.SortFunc(ps, compareParsed)
			return ps
		}
		name := func() (string, string) {
			ns := []string{"shop", "shop", "pay", "other"}[rng.IntN(4)]
			return ns, fmt.Sprintf("w%d", rng.IntN(8))
		}
		for range 6 + rng.IntN(8) {
			ns, n := name()
			items[ns+"/"+n] = Parse(randomWorkload(rng, ns, n))
		}
		services := MergeServiceSets(
			NewServiceSet([]Service{
				{Namespace: "shop", Name: "s1", Selector: map[string]string{"tier": "a"}},
				{Namespace: "shop", Name: "leaf1"},
			}),
			NewServiceSet([]Service{
				{Namespace: "pay", Name: "s0", Selector: map[string]string{annotations.NameLabel: "s0"}},
				{Namespace: "pay", Name: "leaf2", ExternalName: true},
			}))
		var svcs *ServiceSet
		if rng.IntN(3) == 0 {
			svcs = services
		}
		inc := NewIncremental(ForClusterRetryPolicy(p, s), sorted(), svcs, nil)
		checkSame(t, fmt.Sprintf("seed %d: initial", seed), inc.Result(), BuildParsed(ForClusterRetryPolicy(p, s), sorted(), svcs, nil))
		for step := range steps {
			ns, n := name()
			k := rng.IntN(20)
			if k < 9 && len(items) > 0 {
				x := sorted()[rng.IntN(len(items))]
				ns, n = x.Workload.Namespace, x.Workload.Name
			}
			key := ns + "/" + n
			what := ""
			switch {
			case k < 14:
				items[key], what = Parse(randomWorkload(rng, ns, n)), "put "+key
			case k < 17:
				delete(items, key)
				what = "delete " + key
			case k < 18:
				if s == full {
					s, what = NewClusterScopeOf("shop"), "scope shop"
				} else {
					s, what = full, "scope shop, pay"
				}
			case k < 19:
				p = p.DeepCopy()
				p.Spec.MaxAmplification = int32(2 + rng.IntN(30))
				what = "cap"
			default:
				what = "nothing"
			}
			ps := sorted()
			total++
			before := len(inc.Result().Selected)
			if inc.Update(ForClusterRetryPolicy(p, s), ps, svcs, nil) {
				patched++
				if len(inc.Result().Selected) != before {
					patchedMoves++
				}
			}
			checkSame(t, fmt.Sprintf("seed %d step %d (%s)", seed, step, what), inc.Result(), BuildParsed(ForClusterRetryPolicy(p, s), ps, svcs, nil))
		}
	}
	if patched*3 < total || patchedMoves*10 < total {
		t.Fatalf("%d of %d steps patched, %d adding or removing a selected workload; want at least a third, a tenth", patched, total, patchedMoves)
	}
	t.Logf("%d of %d steps patched, %d adding or removing a selected workload", patched, total, patchedMoves)
}
