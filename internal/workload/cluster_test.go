package workload

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

func clusterPolicy(name string, cap int32, nsSel map[string]string, eps ...v1alpha1.Entrypoint) *v1alpha1.ClusterRetryPolicy {
	p := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: nsSel}
	p.Spec.RetryPolicySpec = v1alpha1.RetryPolicySpec{MaxAmplification: cap, Entrypoints: eps, Retry: v1alpha1.RetrySettings{DefaultAttempts: 1}}
	return p
}

// teams are the incident's three namespaces, one team each, labelled into the checkout chain,
// and a fourth namespace outside it.
var teams = map[string]map[string]string{
	"shop":     {"chain": "checkout"},
	"orders":   {"chain": "checkout"},
	"payments": {"chain": "checkout"},
	"bank":     {"team": "bank"},
}

func scope(t *testing.T, p *v1alpha1.ClusterRetryPolicy, nsLabels map[string]map[string]string) *ClusterScope {
	t.Helper()
	s, err := NewClusterScope(p, nsLabels)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// chain is web (shop) -> order (orders) -> payment (payments), 3 attempts per hop and from the
// client: 27.
func chain() []Workload {
	return []Workload{
		deploy("shop", "web", "order.orders=3", lbl("app", "web")),
		deploy("orders", "order", "payment.payments.svc.cluster.local=3", lbl("app", "order")),
		deploy("payments", "payment", "", lbl("app", "payment")),
	}
}

var web3 = v1alpha1.Entrypoint{Service: "web.shop", ClientAttempts: 3}

func TestBuildCluster(t *testing.T) {
	checkout := map[string]string{"chain": "checkout"}
	tests := []struct {
		name     string
		p        *v1alpha1.ClusterRetryPolicy
		nsLabels map[string]map[string]string
		ws       []Workload
		svcs     []Service
		selected []string // Workload.String of the selected, in order
		edges    []string // "from>to xattempts"
		amp      int64
		path     []string
		message  string // the first violation's
		sugg     string
		warnings []string
		notes    []string
	}{{
		name: "three namespaces, one chain", p: clusterPolicy("checkout", 4, checkout, web3), nsLabels: teams, ws: chain(),
		selected: []string{"Deployment orders/order", "Deployment payments/payment", "Deployment shop/web"},
		edges:    []string{"order.orders>payment.payments x3", "web.shop>order.orders x3"},
		amp:      27, path: []string{"web.shop", "order.orders", "payment.payments"},
		message: "client -x3-> web.shop -x3-> order.orders -x3-> payment.payments = 27 > cap 4",
		sugg:    "web.shop: order.orders=1; order.orders: payment.payments=1",
	}, {
		// Default entrypoints: the selected nodes nobody calls (web.shop), client attempts 1.
		name: "default entrypoints", p: clusterPolicy("checkout", 4, checkout), nsLabels: teams, ws: chain(),
		selected: []string{"Deployment orders/order", "Deployment payments/payment", "Deployment shop/web"},
		edges:    []string{"order.orders>payment.payments x3", "web.shop>order.orders x3"},
		amp:      9, path: []string{"web.shop", "order.orders", "payment.payments"},
		message: "client -x1-> web.shop -x3-> order.orders -x3-> payment.payments = 9 > cap 4",
		sugg:    "order.orders: payment.payments=1",
	}, {
		// payments is not selected: payment.payments is a leaf, its own edges are not counted.
		name: "an unselected namespace is a leaf", p: clusterPolicy("checkout", 4, checkout, web3),
		nsLabels: map[string]map[string]string{"shop": checkout, "orders": checkout, "payments": {}},
		ws:       append(chain(), deploy("payments", "ledger", "db=3", nil)),
		selected: []string{"Deployment orders/order", "Deployment shop/web"},
		edges:    []string{"order.orders>payment.payments x3", "web.shop>order.orders x3"},
		amp:      27, path: []string{"web.shop", "order.orders", "payment.payments"},
		message: "client -x3-> web.shop -x3-> order.orders -x3-> payment.payments = 27 > cap 4",
		sugg:    "web.shop: order.orders=1; order.orders: payment.payments=1",
	}, {
		// A namespace without a Namespace object in the input is not selected either.
		name: "an unknown namespace is not selected", p: clusterPolicy("checkout", 4, checkout, web3),
		nsLabels: map[string]map[string]string{"shop": checkout},
		ws:       chain(),
		selected: []string{"Deployment shop/web"},
		edges:    []string{"web.shop>order.orders x3"},
		amp:      9, path: []string{"web.shop", "order.orders"},
		message: "client -x3-> web.shop -x3-> order.orders = 9 > cap 4",
		sugg:    "web.shop: order.orders=1",
	}, {
		// The same service name in two namespaces is two nodes; a bare upstream is the caller's
		// namespace's.
		name: "bare names are the caller's namespace", p: clusterPolicy("checkout", 100, checkout), nsLabels: teams,
		ws: []Workload{
			deploy("shop", "web", "order=2, order.orders=3", nil),
			deploy("shop", "order", "db=5", nil),
			deploy("orders", "order", "db.orders.svc=7", nil),
		},
		selected: []string{"Deployment orders/order", "Deployment shop/order", "Deployment shop/web"},
		edges:    []string{"order.orders>db.orders x7", "order.shop>db.shop x5", "web.shop>order.shop x2", "web.shop>order.orders x3"},
		amp:      21, path: []string{"web.shop", "order.orders", "db.orders"},
	}, {
		// orders calls Service payment-api of payments, which selects Deployment payment (whose
		// own service name is payment): the edges of payment are the Service's node's.
		name: "Service-named upstreams across namespaces", p: clusterPolicy("checkout", 4, checkout, web3), nsLabels: teams,
		ws: []Workload{
			deploy("shop", "web", "order-api.orders=3", lbl("app", "web")),
			deploy("orders", "order", "payment-api.payments=3", lbl("app", "order")),
			deploy("payments", "payment", "stripe.bank=2", lbl("app", "payment")),
		},
		svcs: []Service{
			svc("orders", "order-api", lbl("app", "order")),
			svc("payments", "payment-api", lbl("app", "payment")),
			// Not selected: a Service of bank does not make stripe.bank anything but a leaf.
			svc("bank", "stripe", nil),
		},
		selected: []string{"Deployment orders/order", "Deployment payments/payment", "Deployment shop/web"},
		edges:    []string{"order.orders>payment-api.payments x3", "order-api.orders>payment-api.payments x3", "payment.payments>stripe.bank x2", "payment-api.payments>stripe.bank x2", "web.shop>order-api.orders x3"},
		amp:      54, path: []string{"web.shop", "order-api.orders", "payment-api.payments", "stripe.bank"},
		message: "client -x3-> web.shop -x3-> order-api.orders -x3-> payment-api.payments -x2-> stripe.bank = 54 > cap 4",
		sugg:    "web.shop: order-api.orders=1; Deployment orders/order: payment-api.payments=1; Deployment payments/payment: stripe.bank=1",
		// Once per Service, in the order of the callers (by namespace).
		notes: []string{
			`upstream "payment-api.payments" is Service payments/payment-api, which selects Deployment payments/payment: resolved to their edges`,
			`upstream "order-api.orders" is Service orders/order-api, which selects Deployment orders/order: resolved to their edges`,
		},
	}, {
		// The pod-template selector applies inside the selected namespaces.
		name: "pod-template selector inside namespaces",
		p: func() *v1alpha1.ClusterRetryPolicy {
			p := clusterPolicy("checkout", 4, checkout, web3)
			p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "checkout"}}
			return p
		}(),
		nsLabels: teams,
		ws: []Workload{
			deploy("shop", "web", "order.orders=3", lbl("tier", "checkout")),
			deploy("orders", "order", "payment.payments=3", lbl("tier", "checkout")),
			deploy("payments", "payment", "fraud=3", lbl("tier", "other")),
			deploy("bank", "vault", "x=9", lbl("tier", "checkout")),
		},
		selected: []string{"Deployment orders/order", "Deployment shop/web"},
		edges:    []string{"order.orders>payment.payments x3", "web.shop>order.orders x3"},
		amp:      27, path: []string{"web.shop", "order.orders", "payment.payments"},
		message: "client -x3-> web.shop -x3-> order.orders -x3-> payment.payments = 27 > cap 4",
		sugg:    "web.shop: order.orders=1; order.orders: payment.payments=1",
	}, {
		// Entrypoints may be written with .svc; one that no selected workload provides is warned
		// about, as in a RetryPolicy.
		name: "entrypoint forms", p: clusterPolicy("checkout", 100, checkout, v1alpha1.Entrypoint{Service: "web.shop.svc", ClientAttempts: 2}, v1alpha1.Entrypoint{Service: "web.bank"}),
		nsLabels: teams, ws: chain(),
		selected: []string{"Deployment orders/order", "Deployment payments/payment", "Deployment shop/web"},
		edges:    []string{"order.orders>payment.payments x3", "web.shop>order.orders x3"},
		amp:      18, path: []string{"web.shop", "order.orders", "payment.payments"},
		warnings: []string{`entrypoint "web.bank" is not the service of any selected workload`},
	}, {
		name: "an empty namespaceSelector selects every namespace", p: clusterPolicy("all", 4, nil, web3), nsLabels: teams,
		ws:       append(chain(), deploy("bank", "vault", "", nil)),
		selected: []string{"Deployment bank/vault", "Deployment orders/order", "Deployment payments/payment", "Deployment shop/web"},
		edges:    []string{"order.orders>payment.payments x3", "web.shop>order.orders x3"},
		amp:      27, path: []string{"web.shop", "order.orders", "payment.payments"},
		message: "client -x3-> web.shop -x3-> order.orders -x3-> payment.payments = 27 > cap 4",
		sugg:    "web.shop: order.orders=1; order.orders: payment.payments=1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := scope(t, tt.p, tt.nsLabels)
			r, a := Analyze(ForClusterRetryPolicy(tt.p, s), tt.ws, nil, tt.svcs...)
			if len(r.Errors) > 0 {
				t.Fatalf("errors %v", r.Errors)
			}
			if r.Policy.Object() != tt.p || r.PolicyName() != "ClusterRetryPolicy "+tt.p.Name {
				t.Fatalf("policy %v %q", r.Policy.Object(), r.PolicyName())
			}
			var sel []string
			for _, w := range r.Selected {
				sel = append(sel, w.String())
			}
			if !reflect.DeepEqual(sel, tt.selected) {
				t.Errorf("selected %q, want %q", sel, tt.selected)
			}
			var edges []string
			for _, e := range r.Graph.Edges() {
				edges = append(edges, e.From+">"+e.To+" x"+strconv.FormatInt(e.Attempts, 10))
			}
			if !reflect.DeepEqual(edges, tt.edges) {
				t.Errorf("edges %q, want %q", edges, tt.edges)
			}
			if a.Amplification != tt.amp || !reflect.DeepEqual(a.WorstPath, tt.path) {
				t.Errorf("amplification %d path %q, want %d %q", a.Amplification, a.WorstPath, tt.amp, tt.path)
			}
			var msg, sugg string
			if len(a.Violations) > 0 {
				msg, sugg = a.Violations[0].Message, a.Violations[0].Suggestion
			}
			if msg != tt.message || sugg != tt.sugg {
				t.Errorf("violation %q / %q, want %q / %q", msg, sugg, tt.message, tt.sugg)
			}
			if !reflect.DeepEqual(r.Warnings, tt.warnings) {
				t.Errorf("warnings %q, want %q", r.Warnings, tt.warnings)
			}
			if !reflect.DeepEqual(r.Notes, tt.notes) {
				t.Errorf("notes %q, want %q", r.Notes, tt.notes)
			}
		})
	}
}

func TestClusterScopeErrors(t *testing.T) {
	bad := clusterPolicy("checkout", 4, nil)
	bad.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "chain", Operator: "Maybe", Values: []string{"x"}}}}
	if _, err := NewClusterScope(bad, teams); err == nil || err.Error() != `ClusterRetryPolicy checkout: spec.namespaceSelector: "Maybe" is not a valid label selector operator` {
		t.Fatalf("bad namespaceSelector: %v", err)
	}
	none := clusterPolicy("checkout", 4, nil)
	none.Spec.NamespaceSelector = nil
	if _, err := NewClusterScope(none, teams); err == nil || err.Error() != "ClusterRetryPolicy checkout: spec.namespaceSelector is required ({} selects every namespace)" {
		t.Fatalf("no namespaceSelector: %v", err)
	}
	p := clusterPolicy("checkout", 4, map[string]string{"chain": "checkout"})
	p.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	s := scope(t, p, teams)
	if got := s.Namespaces(); !reflect.DeepEqual(got, []string{"orders", "payments", "shop"}) || !s.Has("shop") || s.Has("bank") {
		t.Fatalf("namespaces %q", got)
	}
	r := Build(ForClusterRetryPolicy(p, s), chain(), nil)
	if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0].Error(), "ClusterRetryPolicy checkout: spec.selector: ") || len(r.Selected) != 0 {
		t.Fatalf("bad selector: errors %v, selected %v", r.Errors, r.Selected)
	}
}

// Mesh layers apply per caller's namespace: shop is in Istio's mesh (3 tries by default), orders
// is not.
func TestBuildClusterMesh(t *testing.T) {
	set := meshSet(t,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: orders}",
	)
	p := clusterPolicy("checkout", 4, map[string]string{"chain": "checkout"}, web3)
	r, a := Analyze(ForClusterRetryPolicy(p, scope(t, p, teams)), chain(), set)
	got := map[string]int64{}
	for _, e := range r.Graph.Edges() {
		got[e.From+">"+e.To] = e.Attempts
	}
	if want := map[string]int64{"web.shop>order.orders": 9, "order.orders>payment.payments": 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("edges %v, want %v", got, want)
	}
	e := r.MeshEdges[[2]string{"web.shop", "order.orders"}]
	if want := "9 = 3 (Deployment web) x 3 (Istio default, no VirtualService binds orders/order)"; e.Explain() != want {
		t.Fatalf("explain %q, want %q", e.Explain(), want)
	}
	if len(r.MeshEdges) != 1 {
		t.Fatalf("mesh edges %v: orders is not meshed", r.MeshEdges)
	}
	want := "client -x3-> web.shop -x9-> order.orders -x3-> payment.payments = 81 > cap 4; web.shop -x9-> order.orders: 9 = 3 (Deployment web) x 3 (Istio default, no VirtualService binds orders/order)"
	if a.Amplification != 81 || a.Violations[0].Message != want {
		t.Fatalf("amplification %d, message %q; want 81, %q", a.Amplification, a.Violations[0].Message, want)
	}
}

// BuildClusterJudged puts the incoming version in place of the stored one; siblings of its node
// in its namespace lose their edges, a same-named service in another namespace keeps them. Base
// answers as the build does.
func TestBuildClusterJudged(t *testing.T) {
	p := clusterPolicy("checkout", 4, map[string]string{"chain": "checkout"}, web3)
	s := scope(t, p, teams)
	// order-canary is a second workload of service order in orders; shop has its own order.
	ws := append(chain(), withService(deploy("orders", "order-canary", "payment.payments=5", lbl("app", "order")), "order"), deploy("shop", "order", "payment.payments=9", nil))
	ps := make([]*Parsed, len(ws))
	for i, w := range ws {
		ps[i] = Parse(w)
	}
	slices.SortFunc(ps, compareParsed)
	incoming := Parse(deploy("orders", "order", "payment.payments=1", lbl("app", "order")))
	r := BuildJudged(ForClusterRetryPolicy(p, s), ps, incoming, nil, nil)
	got := map[string]int64{}
	for _, e := range r.Graph.Edges() {
		got[e.From+">"+e.To] = e.Attempts
	}
	if want := map[string]int64{"web.shop>order.orders": 3, "order.orders>payment.payments": 1, "order.shop>payment.payments": 9}; !reflect.DeepEqual(got, want) {
		t.Fatalf("edges %v, want %v", got, want)
	}
	j := graph.Judge(r.Graph, r.Cap, "order.orders")
	if j.Over != true || j.Amplification != 9 || !reflect.DeepEqual(j.Path, []string{"web.shop", "order.orders", "payment.payments"}) {
		t.Fatalf("judgement %+v", j)
	}
	bj, _, ok := NewBase(ForClusterRetryPolicy(p, s), ps, nil, nil).Judge(incoming)
	if !ok || !reflect.DeepEqual(bj, j) {
		t.Fatalf("base judgement %+v (answered %v), want %+v", bj, ok, j)
	}
	// A change that lowers nothing raises nothing; a new upstream does.
	old := deploy("orders", "order", "payment.payments=3", nil)
	if up, err := RaisesRetries(ForClusterRetryPolicy(p, nil), old, deploy("orders", "order", "payment.payments.svc=3", nil)); err != nil || up {
		t.Fatalf("same upstream, other spelling: raises %v, %v", up, err)
	}
	if up, err := RaisesRetries(ForClusterRetryPolicy(p, nil), old, deploy("orders", "order", "payment.payments=3, fraud=1", nil)); err != nil || !up {
		t.Fatalf("new upstream: raises %v, %v", up, err)
	}
}

func withService(w Workload, name string) Workload {
	ann := map[string]string{"retrycap.dev/service": name}
	for k, v := range w.Annotations.All() {
		ann[k] = v
	}
	w.Annotations = PairsOf(ann)
	return w
}

// The builder is the same for both kinds: a RetryPolicy of shop sees payment.payments as a leaf
// and names its nodes as before.
func TestClusterAndNamespacedAgree(t *testing.T) {
	rp := policy("orders", "p", 4, v1alpha1.Entrypoint{Service: "order", ClientAttempts: 3})
	_, a := Analyze(ForRetryPolicy(rp), chain(), nil)
	if a.Amplification != 9 || !reflect.DeepEqual(a.WorstPath, []string{"order", "payment.payments"}) {
		t.Fatalf("RetryPolicy: %d %q", a.Amplification, a.WorstPath)
	}
}
