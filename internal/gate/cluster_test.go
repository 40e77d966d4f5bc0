package gate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

// The incident's three teams as three namespaces: web (shop) -x3-> order (orders) -x3-> payment
// (payments) -x3-> the payment provider, 3 x 3 x 3 = 27.
var chainLabels = map[string]map[string]string{
	"shop":     {"chain": "checkout"},
	"orders":   {"chain": "checkout"},
	"payments": {"chain": "checkout"},
	"other":    {},
}

func teamDeployment(ns, name, upstreams string) workload.Workload {
	w := workloadtest.Deployment(name, upstreams)
	w.Namespace = ns
	return w
}

func chainWorkloads() []workload.Workload {
	return []workload.Workload{
		teamDeployment("shop", "web", "order.orders=3"),
		teamDeployment("orders", "order", "payment.payments=3"),
		teamDeployment("payments", "payment", ""),
	}
}

func clusterPolicy(name string, cap int32, mode v1alpha1.Enforcement) *v1alpha1.ClusterRetryPolicy {
	p := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"chain": "checkout"}}
	p.Spec.MaxAmplification = cap
	p.Spec.Enforcement = mode
	p.Spec.Retry.DefaultAttempts = 1
	return p
}

// clusterWorkloads is a Source and ClusterSource over fixed workloads of several namespaces and
// their labels, never prepared.
type clusterWorkloads struct {
	ws     []workload.Workload
	labels map[string]map[string]string
	svcs   []workload.Service
}

func (c clusterWorkloads) Scope(p *v1alpha1.ClusterRetryPolicy) (*workload.ClusterScope, error) {
	return workload.NewClusterScope(p, c.labels)
}

// Workloads are those of p's namespaces.
func (c clusterWorkloads) Workloads(p *workload.Policy) []*workload.Parsed {
	var ps []*workload.Parsed
	for _, w := range c.ws {
		if p.Scope().Has(w.Namespace) {
			ps = append(ps, workload.Parse(w))
		}
	}
	return ps
}

func (clusterWorkloads) Prepared(*workload.Policy) *workload.Base { return nil }

// Services are those of p's namespaces.
func (c clusterWorkloads) Services(p *workload.Policy) *workload.ServiceSet {
	var in []workload.Service
	for _, v := range c.svcs {
		if p.Scope().Has(v.Namespace) {
			in = append(in, v)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return workload.NewServiceSet(in)
}

// namespaced is a RetryPolicy of namespace ns with default entrypoints.
func namespaced(ns, name string, cap int32, mode v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
	p := workloadtest.Policy(name, cap, mode, nil)
	p.Namespace = ns
	p.Spec.Entrypoints = nil
	return p
}

func TestDecideClusterPolicies(t *testing.T) {
	src := clusterWorkloads{ws: chainWorkloads(), labels: chainLabels}
	over := teamDeployment("payments", "payment", "psp.example.com=3")
	const chain27 = "web.shop -x3-> order.orders -x3-> payment.payments -x3-> psp.example.com = 27"
	tests := []struct {
		name string
		in   Input
		want Decision
	}{
		{
			name: "reject: the chain across three namespaces, exact message",
			in: Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)},
				Source: src, Incoming: over},
			want: Decision{Message: "ClusterRetryPolicy checkout-chain: " + chain27 + " > cap 10; payment.payments may keep psp.example.com=1"},
		},
		{
			name: "the namespaced policy of payments sees payment alone: within its cap",
			in: Input{Policies: []*v1alpha1.RetryPolicy{namespaced("payments", "pay", 4, v1alpha1.EnforcementReject)},
				Source: src, Incoming: over},
			want: Decision{Allowed: true},
		},
		{
			name: "a namespace outside the selector is not judged by the cluster policy",
			in: Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)},
				Source: src, Incoming: teamDeployment("other", "batch", "psp.example.com=9")},
			want: Decision{Allowed: true},
		},
		{
			name: "cluster stricter than namespaced: the cluster message first, the namespaced after",
			in: Input{Policies: []*v1alpha1.RetryPolicy{namespaced("payments", "pay", 2, v1alpha1.EnforcementReject)},
				ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 1, v1alpha1.EnforcementReject)},
				Source:          src, Incoming: over},
			want: Decision{Message: "ClusterRetryPolicy checkout-chain: " + chain27 + " > cap 1; no rewrite fits: even with payment.payments: psp.example.com=1, web.shop -x3-> order.orders -x3-> payment.payments -x1-> psp.example.com = 9 > cap 1: lower Deployment shop/web retrycap.dev/upstreams order.orders=3, Deployment orders/order retrycap.dev/upstreams payment.payments=3, or raise ClusterRetryPolicy checkout-chain spec.maxAmplification: 1; also over the cap of RetryPolicy payments/pay (cap 2)"},
		},
		{
			name: "namespaced stricter than cluster: the namespaced message first",
			in: Input{Policies: []*v1alpha1.RetryPolicy{namespaced("payments", "pay", 2, v1alpha1.EnforcementReject)},
				ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject), clusterPolicy("wide", 20, v1alpha1.EnforcementReject)},
				Source:          src, Incoming: over},
			want: Decision{Message: "RetryPolicy payments/pay: payment -x3-> psp.example.com = 3 > cap 2; payment may keep psp.example.com=2; also over the cap of ClusterRetryPolicy checkout-chain (cap 10), wide (cap 20)"},
		},
		{
			name: "equal caps: the namespaced policy first",
			in: Input{Policies: []*v1alpha1.RetryPolicy{namespaced("payments", "pay", 2, v1alpha1.EnforcementReject), namespaced("payments", "zed", 2, v1alpha1.EnforcementReject)},
				ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("a-chain", 2, v1alpha1.EnforcementReject)},
				Source:          src, Incoming: over},
			want: Decision{Message: "RetryPolicy payments/pay: payment -x3-> psp.example.com = 3 > cap 2; payment may keep psp.example.com=2; also over the cap of RetryPolicy payments/zed (cap 2), ClusterRetryPolicy a-chain (cap 2)"},
		},
		{
			name: "rewrite: the minimum over both kinds",
			in: Input{Policies: []*v1alpha1.RetryPolicy{namespaced("payments", "pay", 2, v1alpha1.EnforcementRewrite)},
				ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 9, v1alpha1.EnforcementRewrite)},
				Source:          src, Incoming: over},
			want: Decision{Allowed: true,
				Rewrite:  &Rewrite{Upstreams: "psp.example.com=1", RewrittenFrom: "psp.example.com=3"},
				Warnings: []string{"RetryPolicy payments/pay and ClusterRetryPolicy checkout-chain rewrote retrycap.dev/upstreams of Deployment payments/payment: psp.example.com=3 -> psp.example.com=1 (payment -x3-> psp.example.com = 3 > cap 2; " + chain27 + " > cap 9)"}},
		},
		{
			name: "rewrite by the cluster policy alone; an upstream of the workload's own namespace",
			in: Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 9, v1alpha1.EnforcementRewrite)},
				Source:   clusterWorkloads{ws: append(chainWorkloads(), teamDeployment("payments", "ledger", "")), labels: chainLabels},
				Incoming: teamDeployment("payments", "payment", "ledger=3, ledger.payments.svc=2")},
			want: Decision{Allowed: true,
				Rewrite: &Rewrite{Upstreams: "ledger=1, ledger.payments.svc=1", RewrittenFrom: "ledger=3, ledger.payments.svc=2"},
				Warnings: []string{"ClusterRetryPolicy checkout-chain rewrote retrycap.dev/upstreams of Deployment payments/payment: ledger=3, ledger.payments.svc=2 -> ledger=1, ledger.payments.svc=1 (web.shop -x3-> order.orders -x3-> payment.payments -x3-> ledger.payments = 27 > cap 9)",
					// small20: one service under a bare name and its name.ns.svc spelling.
					`Deployment payments/payment: annotation retrycap.dev/upstreams: token "ledger.payments.svc=2" at column 11: upstream "ledger.payments.svc" is service ledger of namespace payments, listed already as "ledger" (a name in the workload's namespace) at column 1: the graph counts one upstream with the larger attempts and calls; write it once`}},
		},
		{
			name: "audit: a warning naming the cluster policy",
			in: Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementAudit)},
				Source: src, Incoming: over},
			want: Decision{Allowed: true, Warnings: []string{"ClusterRetryPolicy checkout-chain: " + chain27 + " > cap 10; payment.payments may keep psp.example.com=1 (admitted: enforcement is Audit)"}},
		},
		{
			name: "an update that raises nothing passes the cluster policy",
			in: Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)},
				Source: src, Incoming: over, Old: &over},
			want: Decision{Allowed: true},
		},
		{
			name: "a malformed annotation is denied under a cluster policy",
			in: Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementAudit)},
				Source: src, Incoming: teamDeployment("payments", "payment", "psp.example.com=x")},
			want: Decision{Message: `Deployment payments/payment: annotation retrycap.dev/upstreams: token "psp.example.com=x" at column 1: attempts must be an integer 1..100`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide()\n got  %#v\n want %#v", got, tt.want)
			}
		})
	}
}

func TestDecideClusterPolicyErrors(t *testing.T) {
	p := clusterPolicy("broken", 8, v1alpha1.EnforcementReject)
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "chain", Operator: "Bogus"}}}
	over := teamDeployment("payments", "payment", "psp.example.com=3")
	d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: clusterWorkloads{ws: chainWorkloads(), labels: chainLabels}, Incoming: over})
	if !d.Allowed || len(d.PolicyErrors) != 1 {
		t.Fatalf("Decide with a bad namespaceSelector = %+v, want allowed with one policy error", d)
	}
	want := `ClusterRetryPolicy broken: spec.namespaceSelector: "Bogus" is not a valid label selector operator`
	if got := d.PolicyErrors[0].Error(); got != want {
		t.Errorf("policy error = %q, want %q", got, want)
	}
	// Without a ClusterSource the cluster policies cannot be judged: reported, not applied.
	d = Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)}, Source: workloads(chainWorkloads()), Incoming: over})
	if !d.Allowed || len(d.PolicyErrors) != 1 || d.PolicyErrors[0].Error() != "ClusterRetryPolicy checkout-chain: the gate has no source of namespaces to judge it with" {
		t.Fatalf("Decide without a ClusterSource = %+v", d)
	}
}

// The index's Source judges a cluster policy as the fixed lists do, over the relevant
// workloads of the selected namespaces, with or without the prepared graph; a relabelled
// namespace enters or leaves the scope.
func TestIndexClusterSource(t *testing.T) {
	x := index.New()
	for ns, l := range chainLabels {
		x.PutNamespace(ns, l)
	}
	for _, w := range chainWorkloads() {
		x.Put(w)
	}
	// Noise the walk must not need: another chain in shop, a workload of an unselected namespace
	// calling into the chain.
	x.Put(teamDeployment("shop", "admin", "report=2"))
	x.Put(teamDeployment("shop", "report", ""))
	x.Put(teamDeployment("other", "batch", "order.orders=9"))
	p := clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)
	p.UID, p.Generation = "u1", 1
	over := teamDeployment("payments", "payment", "psp.example.com=3")
	want := "ClusterRetryPolicy checkout-chain: web.shop -x3-> order.orders -x3-> payment.payments -x3-> psp.example.com = 27 > cap 10; payment.payments may keep psp.example.com=1"
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways, index.BaseAuto} {
		d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(over, mode), Incoming: over})
		if d.Message != want {
			t.Errorf("mode %d: message %q, want %q", mode, d.Message, want)
		}
	}
	s, err := x.ClusterScope(p)
	if err != nil {
		t.Fatal(err)
	}
	got := x.RelevantClusterParsed("payments", s.Has, []string{"payment"}, []string{"psp.example.com"})
	var keys []string
	for _, ps := range got {
		keys = append(keys, ps.Key())
	}
	if want := []string{"Deployment/orders/order", "Deployment/payments/payment", "Deployment/shop/web"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("RelevantClusterParsed = %v, want %v", keys, want)
	}

	// other joins the selector: batch's 9 now reaches the chain.
	var changes []index.NamespaceChange
	x.OnChange(func(c index.Change) {
		if c.Namespace != nil {
			changes = append(changes, *c.Namespace)
		}
	})
	x.PutNamespace("other", map[string]string{"chain": "checkout"})
	x.PutNamespace("other", map[string]string{"chain": "checkout"}) // unchanged: no one told
	if want := []index.NamespaceChange{{Name: "other", Old: map[string]string{}, New: map[string]string{"chain": "checkout"}}}; !reflect.DeepEqual(changes, want) {
		t.Errorf("namespace changes = %+v, want %+v", changes, want)
	}
	want = "ClusterRetryPolicy checkout-chain: batch.other -x9-> order.orders -x3-> payment.payments -x3-> psp.example.com = 81 > cap 10; no rewrite fits: even with payment.payments: psp.example.com=1, batch.other -x9-> order.orders -x3-> payment.payments -x1-> psp.example.com = 27 > cap 10: lower Deployment other/batch retrycap.dev/upstreams order.orders=9, Deployment orders/order retrycap.dev/upstreams payment.payments=3, or raise ClusterRetryPolicy checkout-chain spec.maxAmplification: 10"
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways} {
		d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(over, mode), Incoming: over})
		if d.Message != want {
			t.Errorf("after the relabel, mode %d: message %q, want %q", mode, d.Message, want)
		}
	}
	x.RemoveNamespace("other")
	if n := len(changes); n != 2 || !changes[1].Removed {
		t.Errorf("after RemoveNamespace, changes = %+v", changes)
	}
	if l, ok := x.Namespace("shop"); !ok || l["chain"] != "checkout" {
		t.Errorf("Namespace(shop) = %v, %v", l, ok)
	}
}

// The first workload of a namespace (the index has no entry for it yet) is still reached by its
// callers in the other selected namespaces.
func TestIndexClusterSourceFirstWorkloadOfANamespace(t *testing.T) {
	x := index.New()
	for ns, l := range chainLabels {
		x.PutNamespace(ns, l)
	}
	x.Put(teamDeployment("shop", "web", "order.orders=3"))
	x.Put(teamDeployment("orders", "order", "payment.payments=3"))
	p := clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)
	over := teamDeployment("payments", "payment", "psp.example.com=3")
	want := "ClusterRetryPolicy checkout-chain: web.shop -x3-> order.orders -x3-> payment.payments -x3-> psp.example.com = 27 > cap 10; payment.payments may keep psp.example.com=1"
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways, index.BaseAuto} {
		if d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(over, mode), Incoming: over}); d.Message != want {
			t.Errorf("mode %d: message %q, want %q", mode, d.Message, want)
		}
	}
	// And a caller's first workload reaches down into the other namespaces.
	x.Put(over)
	x.Remove(teamDeployment("shop", "web", ""))
	web := teamDeployment("shop", "web", "order.orders=3")
	if d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(web, index.BaseNever), Incoming: web}); d.Message != "ClusterRetryPolicy checkout-chain: web.shop -x3-> order.orders -x3-> payment.payments -x3-> psp.example.com = 27 > cap 10; web.shop may keep order.orders=1" {
		t.Errorf("the caller's create: %q", d.Message)
	}
}

// randomCluster is n workloads over three selected namespaces and one unselected, calling
// services of their own namespace, of the others ("sK.nsJ", sometimes with .svc), and external
// hosts, some cycles.
func randomCluster(r *rand.Rand, n int) []workload.Workload {
	nss := []string{"shop", "orders", "payments", "other"}
	svcs := n/3 + 2
	var ws []workload.Workload
	for i := 0; i < n; i++ {
		ns := nss[r.IntN(len(nss))]
		var ups []string
		used := map[string]bool{}
		for k := r.IntN(3); k > 0; k-- {
			target := fmt.Sprintf("s%d", r.IntN(svcs))
			switch r.IntN(4) {
			case 0:
				target += "." + nss[r.IntN(len(nss))]
			case 1:
				target += "." + nss[r.IntN(len(nss))] + ".svc"
			case 2:
				if r.IntN(3) == 0 {
					target = fmt.Sprintf("ext%d.example.com", r.IntN(3))
				}
			}
			if used[target] {
				continue
			}
			used[target] = true
			ups = append(ups, fmt.Sprintf("%s=%d", target, 1+r.IntN(3)))
		}
		w := teamDeployment(ns, fmt.Sprintf("w%d", i), strings.Join(ups, ", "))
		w.Annotations = w.Annotations.With(annotations.Service, fmt.Sprintf("s%d", r.IntN(svcs)))
		ws = append(ws, w)
	}
	return ws
}

// The cross-namespace walk's claim: a cluster policy decides the same over the relevant
// workloads of its namespaces as over all of them, and against its prepared graph.
func TestRelevantClusterMatchesWholeScope(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	modes := []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit}
	labels := map[string]map[string]string{"shop": chainLabels["shop"], "orders": chainLabels["orders"], "payments": chainLabels["payments"], "other": {}}
	decisions := 0
	for round := 0; round < 200; round++ {
		ws := randomCluster(r, 6+r.IntN(30))
		x := index.New()
		for ns, l := range labels {
			x.PutNamespace(ns, l)
		}
		for _, w := range ws {
			x.Put(w)
		}
		p := clusterPolicy("chain", int32(1+r.IntN(20)), modes[r.IntN(3)])
		p.UID, p.Generation = "u", int64(round)
		full := clusterWorkloads{ws: ws, labels: labels}
		for i := 0; i < 5; i++ {
			base := ws[r.IntN(len(ws))]
			incoming := randomCluster(r, 1)[0]
			incoming.Namespace = base.Namespace
			old := updateOrCreate(r, &incoming, base, i)
			in := Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Incoming: incoming, Old: old}
			in.Source = full
			want := Decide(in)
			in.Source = x.ForMode(incoming, index.BaseNever)
			if got := Decide(in); !reflect.DeepEqual(withoutPaths(got), withoutPaths(want)) {
				t.Fatalf("round %d: %s over the relevant workloads:\n %#v\nover all of them\n %#v", round, incoming, got, want)
			}
			in.Source = x.ForMode(incoming, index.BaseAlways)
			if got := Decide(in); !reflect.DeepEqual(withoutPaths(got), withoutPaths(want)) {
				t.Fatalf("round %d: %s against the prepared graph:\n %#v\nover all of them\n %#v", round, incoming, got, want)
			}
			if !want.Allowed || want.Rewrite != nil || len(want.Warnings) > 0 {
				decisions++
			}
		}
	}
	if decisions < 100 {
		t.Fatalf("only %d of 1000 decisions refused, rewrote or warned: the test does not exercise the gate", decisions)
	}
}

// Through a Service of another namespace: web calls orders-svc.orders, which fronts order and
// its second version; the version's message names the workload to change, the node its Service.
func TestDecideClusterThroughAService(t *testing.T) {
	order := func(name, ups string) workload.Workload {
		w := teamDeployment("orders", name, ups)
		w.Labels = w.Labels.With("app", "order")
		return w
	}
	ws := []workload.Workload{teamDeployment("shop", "web", "orders-svc.orders=3"), order("order", "payment.payments=1"), teamDeployment("payments", "payment", "psp.example.com=3")}
	svcs := []workload.Service{{Namespace: "orders", Name: "orders-svc", Selector: map[string]string{"app": "order"}}}
	src := clusterWorkloads{ws: ws, labels: chainLabels, svcs: svcs}
	in := Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)}, Source: src, Incoming: order("order-v2", "payment.payments=3")}
	want := "ClusterRetryPolicy checkout-chain: web.shop -x3-> orders-svc.orders -x3-> payment.payments -x3-> psp.example.com = 27 > cap 10; Deployment orders/order-v2 may keep payment.payments=1"
	if d := Decide(in); d.Message != want {
		t.Errorf("message %q\nwant    %q", d.Message, want)
	}
	// The index's walk finds the caller through the Service's node.
	x := index.New()
	for ns, l := range chainLabels {
		x.PutNamespace(ns, l)
	}
	for _, w := range ws {
		x.Put(w)
	}
	for _, v := range svcs {
		x.PutService(v)
	}
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways} {
		in.Source = x.ForMode(in.Incoming, mode)
		if d := Decide(in); d.Message != want {
			t.Errorf("mode %d: message %q\nwant    %q", mode, d.Message, want)
		}
	}
	// Without the Service, orders-svc.orders is a leaf and nothing reaches order-v2 (the
	// Services read for the cluster policy follow the change).
	x.RemoveService(svcs[0])
	in.Source = x.ForMode(in.Incoming, index.BaseNever)
	if d := Decide(in); !d.Allowed {
		t.Errorf("after the Service's removal: %+v", d)
	}
	x.PutService(svcs[0])
	// Rewrite lowers the version's own edge, planned at the Service's node (a Source is for one
	// request: a new one).
	in.Source = x.ForMode(in.Incoming, index.BaseNever)
	in.ClusterPolicies[0].Spec.Enforcement = v1alpha1.EnforcementRewrite
	if d := Decide(in); d.Rewrite == nil || *d.Rewrite != (Rewrite{Upstreams: "payment.payments=1", RewrittenFrom: "payment.payments=3"}) {
		t.Errorf("Rewrite through the Service: %+v", d)
	}
}

// Requests judged by a cluster policy while workloads, Namespace labels and the policy change and
// the prepared graphs are refreshed in the background (run with -race): every request gets one
// of the verdicts of the states it may have read.
func TestClusterDecideConcurrentWithChanges(t *testing.T) {
	x := index.New()
	for ns, l := range chainLabels {
		x.PutNamespace(ns, l)
	}
	for i := 0; i < 300; i++ {
		x.Put(teamDeployment("shop", fmt.Sprintf("web-%d", i), "order.orders=3"))
	}
	x.Put(teamDeployment("orders", "order", "payment.payments=3"))
	p := clusterPolicy("checkout-chain", 10, v1alpha1.EnforcementReject)
	p.UID, p.Generation = "u", 1
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = x.Refresh(ctx) }()

	over := teamDeployment("payments", "payment", "psp.example.com=3")
	allowed := map[string]bool{
		// Every caller of order reaches payment at 27, whichever web is named.
		"27": true,
		// orders relabelled out of the selector: order.orders is a leaf, payment reached by no one.
		"": true,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			x.Put(teamDeployment("shop", fmt.Sprintf("web-%d", i%300), fmt.Sprintf("order.orders=%d", 2+i%2)))
			switch i % 20 {
			case 0:
				x.PutNamespace("orders", map[string]string{})
			case 10:
				x.PutNamespace("orders", chainLabels["orders"])
			}
			q := p.DeepCopy()
			q.Generation = int64(1 + i%3)
			x.ClusterPolicyChanged(q, false)
		}
	}()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(over, index.BaseAuto), Incoming: over})
				key := ""
				if !d.Allowed {
					if !strings.HasSuffix(d.Message, "payment.payments -x3-> psp.example.com = 27 > cap 10; payment.payments may keep psp.example.com=1") {
						t.Errorf("unexpected denial %q", d.Message)
						return
					}
					key = "27"
				}
				if !allowed[key] {
					t.Errorf("unexpected decision %+v", d)
					return
				}
			}
		}()
	}
	wg.Wait()
	<-done
}
