package index

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
	"github.com/retrycap/retrycap/internal/workload"
)

// The index's own invariants under churn: what a long-lived index holds equals what a fresh one
// fed the same objects holds. (The gate's tests compare its verdicts over the index with
// verdicts over the whole namespace.)

// TestIndexChurnMatchesFreshIndex puts, updates and removes random workloads, then checks the
// index against one built from the surviving workloads alone: the same relevant sets, the
// workloads kept sorted, and no services left over from names that are gone.
func TestIndexChurnMatchesFreshIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 50; round++ {
		x := New()
		live := map[string]workload.Workload{}
		for step := 0; step < 200; step++ {
			w := randomNamespace(r, 1)[0]
			w.Name = fmt.Sprintf("w%d", r.IntN(30))
			if r.IntN(4) == 0 {
				x.Remove(w)
				delete(live, w.Key())
				continue
			}
			x.Put(w)
			live[w.Key()] = w
		}
		fresh := New()
		for _, w := range live {
			fresh.Put(w)
		}
		if len(live) == 0 {
			if x.Len("shop") != 0 {
				t.Fatalf("round %d: %d workloads left after removing all", round, x.Len("shop"))
			}
			continue
		}
		n, f := x.byNS["shop"], fresh.byNS["shop"]
		if !slices.IsSortedFunc(n.sorted, func(a, b sortedEntry) int { return workload.Compare(a.p.Workload, b.p.Workload) }) || len(n.sorted) != len(live) {
			t.Fatalf("round %d: %d sorted entries for %d workloads, or out of order", round, len(n.sorted), len(live))
		}
		for _, e := range n.sorted {
			if len(e.nodes) != 1 || n.services[e.nodes[0]].name != e.p.ServiceName() {
				t.Fatalf("round %d: %s filed under nodes %v", round, e.p.Workload, e.nodes)
			}
		}
		if len(n.ids) != len(f.ids) {
			t.Fatalf("round %d: %d services after churn, %d in a fresh index", round, len(n.ids), len(f.ids))
		}
		keys := func(ps []*workload.Parsed) []string {
			var k []string
			for _, p := range ps {
				k = append(k, p.Key())
			}
			return k
		}
		for name := range f.ids {
			got, want := keys(x.RelevantParsed("shop", []string{name}, nil)), keys(fresh.RelevantParsed("shop", []string{name}, nil))
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: relevant to %s after churn %v, fresh %v", round, name, got, want)
			}
		}
	}
}

// TestIndexServiceChurnMatchesFreshIndex adds, changes and removes Services around a fixed set
// of workloads, then checks the index against one built from the surviving Services alone.
func TestIndexServiceChurnMatchesFreshIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for round := 0; round < 100; round++ {
		ws := randomWorkloads(r, 5+r.IntN(20), false)
		withRandomServices(r, ws) // the groups' labels and Service callers
		x := New()
		for _, w := range ws {
			x.Put(w)
		}
		live := map[string]workload.Service{}
		for step := 0; step < 20; step++ {
			s := withRandomServices(r, nil)
			if len(s) == 0 {
				continue
			}
			if old, ok := live[s[0].Name]; ok && r.IntN(2) == 0 {
				x.RemoveService(old)
				delete(live, s[0].Name)
				continue
			}
			x.PutService(s[0])
			live[s[0].Name] = s[0]
		}
		fresh := New()
		var list []workload.Service
		for _, s := range live {
			fresh.PutService(s)
			list = append(list, s)
		}
		for _, w := range ws {
			fresh.Put(w)
		}
		n, f := x.byNS["shop"], fresh.byNS["shop"]
		if len(n.ids) != len(f.ids) {
			t.Fatalf("round %d: %d nodes after churn, %d in a fresh index", round, len(n.ids), len(f.ids))
		}
		set := workload.NewServiceSet(list)
		for _, e := range n.sorted {
			want, _ := set.Nodes(e.p)
			var got []string
			for _, id := range e.nodes {
				got = append(got, n.services[id].name)
			}
			if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
				t.Fatalf("round %d: %s under %q, want %q", round, e.p.Workload, got, want)
			}
		}
		for name := range f.ids {
			a := x.RelevantParsed("shop", []string{name}, nil)
			b := fresh.RelevantParsed("shop", []string{name}, nil)
			if len(a) != len(b) {
				t.Fatalf("round %d: %d relevant to %s after churn, %d fresh", round, len(a), name, len(b))
			}
		}
		// Removing every Service and workload leaves nothing behind.
		for _, s := range live {
			x.RemoveService(s)
		}
		for _, w := range ws {
			x.Remove(w)
		}
		if _, ok := x.byNS["shop"]; ok {
			t.Fatalf("round %d: the namespace outlived its workloads and Services", round)
		}
	}
}

// The ServiceSet a request or a prepared graph holds is not changed by later Service events.
func TestIndexServicesHandedOutStayPut(t *testing.T) {
	x := New()
	x.PutService(workload.Service{Namespace: "shop", Name: "a", Selector: map[string]string{"app": "a"}})
	held := x.Services("shop")
	x.PutService(workload.Service{Namespace: "shop", Name: "b", Selector: map[string]string{"app": "b"}})
	x.RemoveService(workload.Service{Namespace: "shop", Name: "a"})
	if held.Len() != 1 || !held.Has("shop", "a") {
		t.Fatalf("the handed-out set changed: %+v", held.List())
	}
	if now := x.Services("shop"); now.Len() != 1 || !now.Has("shop", "b") {
		t.Fatalf("the index's set: %+v", now.List())
	}
	x.RemoveService(workload.Service{Namespace: "shop", Name: "b"})
	if x.Services("shop") != nil || x.byNS["shop"] != nil {
		t.Fatalf("the namespace outlived its last Service")
	}
}

// randomNamespace is n workloads over fewer services (so some share one), calling random
// services (some outside the namespace, some cycles), some labelled for a selector.
func randomNamespace(r *rand.Rand, n int) []workload.Workload {
	return randomWorkloads(r, n, false)
}

// randomWorkloads is randomNamespace, without cycles when acyclic (a service calls only services
// numbered above its own).
func randomWorkloads(r *rand.Rand, n int, acyclic bool) []workload.Workload {
	svcs := n*2/3 + 1
	var ws []workload.Workload
	for i := 0; i < n; i++ {
		var ups []string
		used := map[int]bool{}
		own := r.IntN(svcs)
		for k := r.IntN(3); k > 0; k-- {
			t := r.IntN(svcs + 2)
			if acyclic && t <= own {
				continue
			}
			if used[t] {
				continue
			}
			used[t] = true
			name := fmt.Sprintf("s%d", t)
			if t >= svcs {
				name = fmt.Sprintf("ext%d.example.com", t)
			}
			ups = append(ups, fmt.Sprintf("%s=%d", name, 1+r.IntN(3)))
		}
		w := deployment(fmt.Sprintf("w%d", i), strings.Join(ups, ", "))
		w.Annotations = w.Annotations.With(annotations.Service, fmt.Sprintf("s%d", own))
		if r.IntN(3) == 0 {
			w.Labels = w.Labels.With("tier", "edge")
		}
		ws = append(ws, w)
	}
	return ws
}

// withRandomServices labels ws into groups (app=g0..g5), makes some call Services by name
// (svc0..svc3), and returns Services over the groups: some named like a workload's service
// name (s0..), some not (svc0..), some without a selector, some ExternalName.
func withRandomServices(r *rand.Rand, ws []workload.Workload) []workload.Service {
	for i := range ws {
		ws[i].Labels = ws[i].Labels.With("app", fmt.Sprintf("g%d", r.IntN(6)))
		if r.IntN(3) == 0 {
			up := fmt.Sprintf("svc%d=%d", r.IntN(4), 1+r.IntN(3))
			if v := ws[i].Annotations.Get(annotations.Upstreams); v != "" && !strings.Contains(v, up[:4]) {
				up = v + ", " + up
			}
			ws[i].Annotations = ws[i].Annotations.With(annotations.Upstreams, up)
		}
	}
	var svcs []workload.Service
	for k := r.IntN(7); k > 0; k-- {
		s := workload.Service{Namespace: "shop", Name: fmt.Sprintf("svc%d", r.IntN(4)), Selector: map[string]string{"app": fmt.Sprintf("g%d", r.IntN(6))}}
		if r.IntN(3) == 0 {
			s.Name = fmt.Sprintf("s%d", r.IntN(8))
		}
		switch r.IntN(6) {
		case 0:
			s.Selector = nil
		case 1:
			s.ExternalName = true
		}
		svcs = append(svcs, s)
	}
	return svcs
}

func testPolicy(name string, cap int32, mode v1alpha1.Enforcement, labels map[string]string) *v1alpha1.RetryPolicy {
	p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name}}
	p.Spec.MaxAmplification = cap
	p.Spec.Enforcement = mode
	p.Spec.Retry.DefaultAttempts = 1
	if labels != nil {
		p.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	}
	p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: "gateway", ClientAttempts: 1}}
	return p
}

func deployment(name, upstreams string) workload.Workload {
	w := workload.Workload{Kind: workload.KindDeployment, Namespace: "shop", Name: name,
		Labels:      workload.PairsOf(map[string]string{"app.kubernetes.io/part-of": "shop"}),
		Annotations: workload.PairsOf(map[string]string{})}
	if upstreams != "" {
		w.Annotations = w.Annotations.With(annotations.Upstreams, upstreams)
	}
	return w
}
