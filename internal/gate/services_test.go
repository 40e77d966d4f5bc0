package gate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/inject"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// TestRelevantWithServicesMatchesWholeNamespace is TestRelevantMatchesWholeNamespace with
// Services: the index links workloads under the Services that select them, so the relevant
// subset, the index's parsed workloads and the prepared graph decide as the whole namespace does.
func TestRelevantWithServicesMatchesWholeNamespace(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	modes := []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit}
	decisions, viaServices := 0, 0
	for round := 0; round < 300; round++ {
		ws := workloadtest.RandomWorkloads(r, 5+r.IntN(25), round%2 == 0)
		svcs := workloadtest.WithRandomServices(r, ws)
		x := index.New()
		// Services before and after the workloads: the index relinks either way.
		half := len(svcs) / 2
		for _, s := range svcs[:half] {
			x.PutService(s)
		}
		for _, w := range ws {
			x.Put(w)
		}
		for _, s := range svcs[half:] {
			x.PutService(s)
		}
		set := workload.NewServiceSet(svcs)
		var ps []*v1alpha1.RetryPolicy
		for k := 1 + r.IntN(2); k > 0; k-- {
			p := workloadtest.Policy(fmt.Sprintf("p%d", k), int32(1+r.IntN(12)), modes[r.IntN(3)], nil)
			p.Spec.Entrypoints = nil
			if r.IntN(3) == 0 {
				p.Spec.Entrypoints = []v1alpha1.Entrypoint{{Service: fmt.Sprintf("svc%d", r.IntN(4)), ClientAttempts: int32(1 + r.IntN(3))}}
			}
			ps = append(ps, p)
		}
		for i := 0; i < 5; i++ {
			base := ws[r.IntN(len(ws))]
			incoming := workloadtest.RandomWorkloads(r, 1, round%2 == 0)[0]
			incoming.Labels = incoming.Labels.With("app", fmt.Sprintf("g%d", r.IntN(6)))
			old := updateOrCreate(r, &incoming, base, i)
			nodes, _ := set.Nodes(workload.Parse(incoming))
			if len(nodes) != 1 || nodes[0] != incoming.ServiceName() {
				viaServices++
			}
			full := Decide(Input{Policies: ps, Source: withServices{workloads(ws), svcs}, Incoming: incoming, Old: old})
			var sub []workload.Workload
			for _, p := range x.RelevantParsed("shop", x.Nodes(incoming), index.UpstreamServices(incoming)) {
				sub = append(sub, p.Workload)
			}
			got := Decide(Input{Policies: ps, Source: withServices{workloads(sub), svcs}, Incoming: incoming, Old: old})
			wantSameDecision(t, round, fmt.Sprintf("over %d of %d workloads", len(sub), len(ws)), got, full)
			viaIndex := Decide(Input{Policies: ps, Incoming: incoming, Old: old, Source: x.ForMode(incoming, index.BaseNever)})
			wantSameDecision(t, round, "over the index", viaIndex, full)
			viaBase := Decide(Input{Policies: ps, Incoming: incoming, Old: old, Source: x.ForMode(incoming, index.BaseAlways)})
			wantSameDecision(t, round, "against the prepared graph", viaBase, full)
			if !full.Allowed || full.Rewrite != nil || len(full.Warnings) > 0 {
				decisions++
			}
		}
	}
	if decisions < 100 || viaServices < 300 {
		t.Fatalf("only %d of 1500 random requests were refused, rewritten or warned, %d reached through a Service: the test says little", decisions, viaServices)
	}
	t.Logf("%d decisions, %d requests reached through a Service", decisions, viaServices)
}

// A Service created after the workloads changes the verdict and makes the prepared graph stale:
// emojivoto's web calls emoji-svc, which is a leaf until Service emoji-svc selects Deployment
// emoji.
func TestServiceChangesTheVerdict(t *testing.T) {
	web := workloadtest.Deployment("web", "emoji-svc=3")
	web.Labels = web.Labels.With("app", "web-svc")
	emoji := workloadtest.Deployment("emoji", "db=2")
	emoji.Labels = emoji.Labels.With("app", "emoji-svc")
	x := index.New()
	x.Put(web)
	x.Put(emoji)
	p := workloadtest.Policy("p", 4, v1alpha1.EnforcementReject, nil)
	p.Spec.Entrypoints = nil
	incoming := workloadtest.Deployment("web", "emoji-svc=3")
	incoming.Labels = incoming.Labels.With("app", "web-svc")
	decide := func(mode index.BaseMode) Decision {
		return Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: incoming, Source: x.ForMode(incoming, mode)})
	}
	if d := decide(index.BaseAlways); !d.Allowed {
		t.Fatalf("before the Service: %+v", d)
	}
	x.PutService(workload.Service{Namespace: "shop", Name: "emoji-svc", Selector: map[string]string{"app": "emoji-svc"}})
	want := "RetryPolicy shop/p: web -x3-> emoji-svc -x2-> db = 6 > cap 4; web may keep emoji-svc=2"
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways} {
		if d := decide(mode); d.Allowed || d.Message != want {
			t.Fatalf("mode %d after the Service: %q, want %q", mode, d.Message, want)
		}
	}
	// A workload reached as a Service of another name: the suggestion names the workload.
	canary := workloadtest.Deployment("web-canary", "emoji-svc=3")
	canary.Labels = canary.Labels.With("app", "web-svc")
	x.PutService(workload.Service{Namespace: "shop", Name: "web-svc", Selector: map[string]string{"app": "web-svc"}})
	d := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: canary, Source: x.ForMode(canary, index.BaseAuto)})
	if want := "RetryPolicy shop/p: web-svc -x3-> emoji-svc -x2-> db = 6 > cap 4; Deployment shop/web-canary may keep emoji-svc=2"; d.Allowed || d.Message != want {
		t.Fatalf("canary: %q, want %q", d.Message, want)
	}
	x.RemoveService(workload.Service{Namespace: "shop", Name: "web-svc"})
	x.PutService(workload.Service{Namespace: "shop", Name: "emoji-svc", ExternalName: true})
	if d := decide(index.BaseAlways); !d.Allowed {
		t.Fatalf("after the Service became ExternalName: %+v", d)
	}
	x.PutService(workload.Service{Namespace: "shop", Name: "emoji-svc", Selector: map[string]string{"app": "emoji-svc"}})
	x.RemoveService(workload.Service{Namespace: "shop", Name: "emoji-svc"})
	if d := decide(index.BaseAlways); !d.Allowed {
		t.Fatalf("after the Service was deleted: %+v", d)
	}
}

// fiveThousandServices is fiveThousand with a Service in front of every workload (selector
// app=svc-i): named like the workload (sameName, the common case: one node per workload), or
// api-i with the callers calling api-(i+1) (two nodes per workload: the Service and its own name).
func fiveThousandServices(sameName bool) ([]workload.Workload, []workload.Service) {
	ws := fiveThousand()
	svcs := make([]workload.Service, len(ws))
	for i := range ws {
		ws[i].Labels = ws[i].Labels.With("app", ws[i].Name)
		name := ws[i].Name
		if !sameName {
			name = fmt.Sprintf("api-%d", i)
			if ups := ws[i].Annotations.Get(annotations.Upstreams); ups != "" {
				ws[i].Annotations = ws[i].Annotations.With(annotations.Upstreams, "api-"+strings.TrimPrefix(ups, "svc-"))
			}
		}
		svcs[i] = workload.Service{Namespace: "shop", Name: name, Selector: map[string]string{"app": ws[i].Name}}
	}
	return ws, svcs
}

// BenchmarkGateDecision5kServices is the handler's path (index, prepared graph when it pays)
// in the 5k namespace with a Service in front of every workload.
func BenchmarkGateDecision5kServices(b *testing.B) {
	for _, tt := range []struct {
		name     string
		sameName bool
		incoming workload.Workload
		want     string
	}{
		{"same-name", true, workloadtest.Deployment("svc-2", "svc-3=3"), "RetryPolicy shop/checkout: svc-0 -x2-> svc-1 -x2-> svc-2 -x3-> svc-3 -x2-> svc-4 = 24 > cap 4; " +
			"no rewrite fits: even with svc-2: svc-3=1, svc-0 -x2-> svc-1 -x2-> svc-2 -x1-> svc-3 -x2-> svc-4 = 8 > cap 4"},
		{"api-name", false, workloadtest.Deployment("svc-2", "api-3=3"), "RetryPolicy shop/checkout: api-0 -x2-> api-1 -x2-> api-2 -x3-> api-3 -x2-> api-4 = 24 > cap 4; " +
			"no rewrite fits: even with Deployment shop/svc-2: api-3=1, api-0 -x2-> api-1 -x2-> api-2 -x1-> api-3 -x2-> api-4 = 8 > cap 4"},
	} {
		b.Run(tt.name, func(b *testing.B) {
			ws, svcs := fiveThousandServices(tt.sameName)
			x := index.New()
			for _, s := range svcs {
				x.PutService(s)
			}
			for _, w := range ws {
				x.Put(w)
			}
			p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
			p.Spec.Entrypoints = nil
			incoming := tt.incoming
			incoming.Labels = incoming.Labels.With("app", "svc-2")
			in := Input{Policies: []*v1alpha1.RetryPolicy{p}, Incoming: incoming}
			decide := func() Decision {
				in.Source = x.For(incoming)
				return Decide(in)
			}
			if d := decide(); d.Allowed || d.Message != tt.want {
				b.Fatalf("%q, want %q", d.Message, tt.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				decide()
			}
		})
	}
}

// The injector's question over RelevantWorkloads, with Services: a pod fronted by a Service, or
// called through one, is an entrypoint over its relevant workloads exactly when it is over the
// whole namespace.
func TestRelevantWorkloadsWithServicesDecideEntrypoints(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	checked, entry, fronted := 0, 0, 0
	for round := 0; round < 300; round++ {
		ws := workloadtest.RandomWorkloads(r, 5+r.IntN(25), round%2 == 0)
		svcs := workloadtest.WithRandomServices(r, ws)
		x := index.New()
		for _, w := range ws {
			x.Put(w)
		}
		for _, s := range svcs {
			x.PutService(s)
		}
		p := workloadtest.Policy("p", 4, v1alpha1.EnforcementReject, nil)
		p.Spec.Entrypoints = nil
		for i := 0; i < 5; i++ {
			w := ws[r.IntN(len(ws))]
			full := inject.IsEntrypoint(workload.ForRetryPolicy(p), ws, w, svcs...)
			if got := inject.IsEntrypoint(workload.ForRetryPolicy(p), x.RelevantWorkloads(w), w, x.Services(w.Namespace).List()...); got != full {
				t.Fatalf("round %d: %s is an entrypoint over its relevant workloads: %v, over the namespace: %v", round, w, got, full)
			}
			checked++
			if full {
				entry++
			}
			if nodes := x.Nodes(w); len(nodes) != 1 || nodes[0] != w.ServiceName() {
				fronted++
			}
		}
	}
	if entry == 0 || entry == checked || fronted == 0 {
		t.Fatalf("degenerate rounds: %d entrypoints, %d fronted by a Service, of %d", entry, fronted, checked)
	}
}

// A Service change that changes the graph is told to the index's subscribers (the controller
// reconciles the namespace's policies on it), after it is applied; one that changes nothing the
// graph reads is not.
func TestIndexTellsServiceChanges(t *testing.T) {
	x := index.New()
	var got []index.Change
	x.OnChange(func(c index.Change) {
		if c.Service != nil {
			// Applied before it is told: two puts, then the removal.
			_, has := x.Services(c.Service.Namespace).Get(c.Service.Namespace, c.Service.Name)
			if want := len(got) < 2; has != want {
				t.Errorf("change %d of %s told before it was applied (in the index: %v)", len(got), c.Service, has)
			}
		}
		got = append(got, c)
	})
	s := workload.Service{Namespace: "shop", Name: "orders", Selector: map[string]string{"app": "order"}}
	x.PutService(s)
	x.PutService(s) // the same: no change
	s2 := s
	s2.Selector = map[string]string{"app": "order-v2"}
	x.PutService(s2)
	x.RemoveService(s2)
	x.RemoveService(s2) // gone: no change
	if len(got) != 3 {
		t.Fatalf("told %d changes, want 3: %+v", len(got), got)
	}
	for i, c := range got {
		if c.Service == nil || c.Old != nil || c.New != nil || c.Service.Namespace != "shop" || c.Service.Name != "orders" {
			t.Fatalf("change %d: %+v", i, c)
		}
	}
	if !reflect.DeepEqual(got[1].Service.Selector, s2.Selector) || !reflect.DeepEqual(got[2].Service.Selector, s2.Selector) {
		t.Fatalf("changes told: %+v, %+v", got[1].Service, got[2].Service)
	}
	w := workload.Workload{Kind: "Deployment", Namespace: "shop", Name: "order", Labels: workload.PairsOf(map[string]string{"app": "order"})}
	x.Put(w)
	if len(got) != 4 || got[3].Service != nil || got[3].Old != nil || got[3].New == nil || got[3].New.Name != "order" {
		t.Fatalf("a workload's put told as %+v", got[len(got)-1])
	}
}
