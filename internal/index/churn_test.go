package index

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
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
		ws := workloadtest.RandomWorkloads(r, 5+r.IntN(20), false)
		workloadtest.WithRandomServices(r, ws) // the groups' labels and Service callers
		x := New()
		for _, w := range ws {
			x.Put(w)
		}
		live := map[string]workload.Service{}
		for step := 0; step < 20; step++ {
			s := workloadtest.WithRandomServices(r, nil)
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
	return workloadtest.RandomWorkloads(r, n, false)
}
