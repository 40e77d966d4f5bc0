package gate

import (
	"reflect"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/index"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
	"github.com/retrycap/retrycap/internal/workload/workloadtest"
)

func testMeshSet(t *testing.T, docs ...string) *mesh.Set {
	t.Helper()
	s := mesh.NewSet(mesh.Options{})
	for _, d := range docs {
		if _, err := s.AddManifest([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

const meshedShop = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}"

// The gate counts the mesh layers on every hop of the chain, the incoming workload's included,
// on the graph it builds and on the prepared one alike, and names them in its messages.
func TestDecideMesh(t *testing.T) {
	istio := testMeshSet(t, meshedShop)
	vs := testMeshSet(t, meshedShop,
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: payment, namespace: shop}\nspec:\n  hosts: [payment]\n  http:\n  - route: [{destination: {host: payment}}]\n    retries: {attempts: 0}")
	reject := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	loose := workloadtest.Policy("checkout", 20, v1alpha1.EnforcementReject, nil)
	rewriteP := workloadtest.Policy("checkout", 9, v1alpha1.EnforcementRewrite, nil)
	audit := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementAudit, nil)
	stored := []workload.Workload{workloadtest.Deployment("gateway", "order=1"), workloadtest.Deployment("payment", "")}
	order := workloadtest.Deployment("order", "payment=1")
	injected := workloadtest.Deployment("order", "payment=1")
	injected.Labels = injected.Labels.With("sidecar.istio.io/inject", "true")

	const layers = "gateway -x3-> order: 3 = 1 (Deployment gateway) x 3 (Istio default, no VirtualService binds order); order -x3-> payment: 3 = 1 (Deployment order) x 3 (Istio default, no VirtualService binds payment)"
	tests := []struct {
		name   string
		pol    *v1alpha1.RetryPolicy
		set    *mesh.Set
		ws     []workload.Workload
		in     workload.Workload
		old    *workload.Workload
		want   Decision
		noBase bool
	}{
		{name: "no Set: only the applications' attempts", pol: reject, ws: stored, in: order,
			want: Decision{Allowed: true}},
		{name: "Istio's default on both hops: 9 > 4, even 1 attempt does not fit", pol: reject, set: istio, ws: stored, in: order,
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; " + layers +
				"; even with order: payment=1 the edge is 3 tries (the mesh's layers) where the cap leaves it 1: lower the 3 tries of gateway -> order (Istio default, no VirtualService binds order), the 3 tries of order -> payment (Istio default, no VirtualService binds payment), or raise RetryPolicy shop/checkout spec.maxAmplification: 4"}},
		{name: "a VirtualService with attempts 0 on payment: 3 x 1 fits", pol: reject, set: vs, ws: stored, in: order,
			want: Decision{Allowed: true}},
		{name: "app x mesh: the plan is in the annotation's attempts", pol: loose, set: istio, ws: stored, in: workloadtest.Deployment("order", "payment=3"),
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x3-> order -x9-> payment = 27 > cap 20; gateway -x3-> order: 3 = 1 (Deployment gateway) x 3 (Istio default, no VirtualService binds order); order -x9-> payment: 9 = 3 (Deployment order) x 3 (Istio default, no VirtualService binds payment); order may keep payment=2"}},
		{name: "rewrite: lowered to what fits with the mesh's tries", pol: rewriteP, set: istio, ws: stored, in: workloadtest.Deployment("order", "payment=3"),
			want: Decision{Allowed: true, Rewrite: &Rewrite{Upstreams: "payment=1", RewrittenFrom: "payment=3"},
				Warnings: []string{"RetryPolicy shop/checkout rewrote retrycap.dev/upstreams of Deployment shop/order: payment=3 -> payment=1 (gateway -x3-> order -x9-> payment = 27 > cap 9)"}}},
		{name: "audit: the layers in the warning", pol: audit, set: istio, ws: stored, in: order,
			want: Decision{Allowed: true, Warnings: []string{"RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; " + layers +
				"; even with order: payment=1 the edge is 3 tries (the mesh's layers) where the cap leaves it 1: lower the 3 tries of gateway -> order (Istio default, no VirtualService binds order), the 3 tries of order -> payment (Istio default, no VirtualService binds payment), or raise RetryPolicy shop/checkout spec.maxAmplification: 4 (admitted: enforcement is Audit)"}}},
		{name: "an update that only joins the mesh raises the tries: judged", pol: workloadtest.Policy("checkout", 2, v1alpha1.EnforcementReject, nil),
			set: testMeshSet(t), ws: append(stored, order), in: injected, old: &order,
			want: Decision{Message: "RetryPolicy shop/checkout: gateway -x1-> order -x3-> payment = 3 > cap 2; order -x3-> payment: 3 = 1 (Deployment order) x 3 (Istio default, no VirtualService binds payment); even with order: payment=1 the edge is 3 tries (the mesh's layers) where the cap leaves it 2: lower the 3 tries of order -> payment (Istio default, no VirtualService binds payment), or raise RetryPolicy shop/checkout spec.maxAmplification: 2"}},
		{name: "an update that raises nothing passes under the mesh", pol: reject, set: istio, ws: append(stored, order), in: order, old: &order,
			want: Decision{Allowed: true}},
	}
	for _, tt := range tests {
		for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways} {
			t.Run(tt.name+"/"+map[index.BaseMode]string{index.BaseNever: "built", index.BaseAlways: "prepared"}[mode], func(t *testing.T) {
				x := index.New()
				for _, w := range tt.ws {
					x.Put(w)
				}
				x.SetMesh(tt.set)
				got := Decide(Input{Policies: []*v1alpha1.RetryPolicy{tt.pol}, Source: x.ForMode(tt.in, mode), Incoming: tt.in, Old: tt.old, Mesh: tt.set})
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Decide()\n got  %#v\n want %#v", got, tt.want)
				}
			})
		}
	}
}

// A prepared graph is rebuilt with the index's new Set, and one built with another Set than
// the request's is not used: the verdict is the request's Set's.
func TestPreparedGraphFollowsTheMesh(t *testing.T) {
	x := index.New()
	for _, w := range []workload.Workload{workloadtest.Deployment("gateway", "order=1"), workloadtest.Deployment("payment", "")} {
		x.Put(w)
	}
	p := workloadtest.Policy("checkout", 4, v1alpha1.EnforcementReject, nil)
	in := workloadtest.Deployment("order", "payment=1")
	before := x.Base("shop", p)
	if before.Mesh() != nil {
		t.Fatalf("base built with a Set before SetMesh")
	}
	istio := testMeshSet(t, meshedShop)
	x.SetMesh(istio)
	if after := x.Base("shop", p); after == before || after.Mesh() != istio {
		t.Fatalf("base not rebuilt with the new Set: %p -> %p, mesh %p", before, after, after.Mesh())
	}
	// The request's Set is newer than the index's: built with the request's.
	x.SetMesh(nil)
	d := Decide(Input{Policies: []*v1alpha1.RetryPolicy{p}, Source: x.ForMode(in, index.BaseAlways), Incoming: in, Mesh: istio})
	if d.Allowed {
		t.Fatalf("judged on a prepared graph without the request's mesh layers: %+v", d)
	}
}

// A ClusterRetryPolicy counts the layers of each caller's namespace, on the graph built for the
// request and on its prepared graph alike.
func TestDecideClusterMesh(t *testing.T) {
	set := testMeshSet(t,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: orders, labels: {istio.io/rev: stable}}")
	x := index.New()
	for ns, l := range chainLabels {
		x.PutNamespace(ns, l)
	}
	x.Put(teamDeployment("shop", "web", "order.orders=1"))
	x.Put(teamDeployment("payments", "payment", ""))
	x.SetMesh(set)
	p := clusterPolicy("checkout-chain", 8, v1alpha1.EnforcementReject)
	p.UID, p.Generation = "u1", 1
	in := teamDeployment("orders", "order", "payment.payments=1")
	want := "ClusterRetryPolicy checkout-chain: web.shop -x3-> order.orders -x3-> payment.payments = 9 > cap 8; " +
		"web.shop -x3-> order.orders: 3 = 1 (Deployment web) x 3 (Istio default, no VirtualService binds orders/order); " +
		"order.orders -x3-> payment.payments: 3 = 1 (Deployment order) x 3 (Istio default, no VirtualService binds payments/payment); " +
		"even with order.orders: payment.payments=1 the edge is 3 tries (the mesh's layers) where the cap leaves it 2: lower the 3 tries of web.shop -> order.orders (Istio default, no VirtualService binds orders/order), the 3 tries of order.orders -> payment.payments (Istio default, no VirtualService binds payments/payment), or raise ClusterRetryPolicy checkout-chain spec.maxAmplification: 8"
	for _, mode := range []index.BaseMode{index.BaseNever, index.BaseAlways} {
		d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(in, mode), Incoming: in, Mesh: set})
		if d.Message != want {
			t.Errorf("mode %d: message\n %q, want\n %q", mode, d.Message, want)
		}
		// Without the Set: 1 x 1.
		if d := Decide(Input{ClusterPolicies: []*v1alpha1.ClusterRetryPolicy{p}, Source: x.ForMode(in, mode), Incoming: in}); !d.Allowed {
			t.Errorf("mode %d, no Set: %+v", mode, d)
		}
	}
}
