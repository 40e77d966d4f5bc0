package workload

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

func meshSet(t *testing.T, docs ...string) *mesh.Set {
	t.Helper()
	s := mesh.NewSet(mesh.Options{})
	for _, d := range docs {
		if _, err := s.AddManifest([]byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// A nil Set is Build; a Set multiplies the app's attempts by the mesh's tries, and a Gateway
// route multiplies an entrypoint's client attempts.
func TestBuildMesh(t *testing.T) {
	p := policy("shop", "p", 4, v1alpha1.Entrypoint{Service: "gw", ClientAttempts: 2})
	ws := []Workload{deploy("shop", "gw", "order=2", nil), deploy("shop", "order", "db=1", nil)}
	plain := Build(ForRetryPolicy(p), ws, nil)
	if got := Build(ForRetryPolicy(p), ws, nil); !reflect.DeepEqual(got.Graph.Edges(), plain.Graph.Edges()) || got.MeshEdges != nil || got.MeshEntry != nil {
		t.Fatalf("nil set: %+v, want Build's %+v", got.Graph.Edges(), plain.Graph.Edges())
	}
	set := meshSet(t,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}",
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: db, namespace: shop}\nspec:\n  hosts: [db]\n  http:\n  - route: [{destination: {host: db}}]\n    retries: {attempts: 1}",
		"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: shop}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n  - backendRefs: [{name: gw, port: 80}]\n    retry: {attempts: 2}",
	)
	r := Build(ForRetryPolicy(p), ws, set)
	got := map[string]int64{}
	for _, e := range r.Graph.Edges() {
		got[e.From+">"+e.To] = e.Attempts
	}
	// gw -> order: 2 x 3 (Istio default); order -> db: 1 x 2 (the VirtualService).
	if want := map[string]int64{"gw>order": 6, "order>db": 2}; !reflect.DeepEqual(got, want) {
		t.Fatalf("edges %v, want %v", got, want)
	}
	if e := r.MeshEdges[[2]string{"gw", "order"}]; e.Explain() != "6 = 2 (Deployment gw) x 3 (Istio default, no VirtualService binds order)" {
		t.Fatalf("explain %q", e.Explain())
	}
	// Client attempts 2 x 3 tries of the Gateway route.
	if eps := r.Graph.Entrypoints(); len(eps) != 1 || eps[0].ClientAttempts != 6 {
		t.Fatalf("entrypoints %+v, want gw x6", eps)
	}
	_, a := Analyze(ForRetryPolicy(p), ws, set)
	if a.Amplification != 72 || len(a.Violations) == 0 {
		t.Fatalf("amplification %d, violations %d; want 72 (6 x 6 x 2)", a.Amplification, len(a.Violations))
	}
}

// The fix of a chain from an entrypoint whose client attempts a gateway route multiplies is the
// combined plan's (PlanFix, what analyze -o patch writes): the route's field, the clients' own
// attempts kept; then every edge of the chain the plan lowers for the client attempts the route
// leaves; when those alone stay over the cap, "no rewrite fits" follows. A chain from another
// entrypoint has its own fix (fixtext), from the same plan.
func TestEntrypointRouteFix(t *testing.T) {
	route := func(attempts int) string {
		return "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: shop}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n  - backendRefs: [{name: gw, port: 80}]\n    retry: {attempts: " + strconv.Itoa(attempts) + "}"
	}
	// Under Istio's ingress a rule without retry gets Istio's 2 retries: 2 tries is its fewest.
	istio := "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: eg, namespace: shop}\nspec: {gatewayClassName: istio, listeners: [{name: http, port: 80, protocol: HTTP}]}"
	ws := []Workload{deploy("shop", "gw", "order=2", nil), deploy("shop", "admin", "order=3", nil), deploy("shop", "order", "db=2", nil)}
	tests := []struct {
		name    string
		cap     int32
		clients int32
		objects []string
		want    []string // each violation's message, then its fix
	}{
		// The route to 1 try leaves gw's chain at 1 x 2 x 2 = 4; order: db=1 is on it too, for
		// admin's chain (and the patch writes it): before, the fix named the route alone.
		{"the route lowered is enough", 2, 1, []string{route(2)}, []string{
			"client -x3-> gw -x2-> order -x2-> db = 12 > cap 2; client -x3-> gw: 3 = 1 (client attempts) x 3 (HTTPRoute shop/web spec.rules[0].retry.attempts: 2)",
			"HTTPRoute shop/web spec.rules[0].retry: {attempts: 2} -> removed (1 try); order: db=1",
			"client -x1-> admin -x3-> order -x2-> db = 6 > cap 2",
			"admin: order=2; order: db=1",
		}},
		{"the clients' own attempts stay over", 4, 5, []string{route(2)}, []string{
			"client -x15-> gw -x2-> order -x2-> db = 60 > cap 4; client -x15-> gw: 15 = 5 (client attempts) x 3 (HTTPRoute shop/web spec.rules[0].retry.attempts: 2)",
			"HTTPRoute shop/web spec.rules[0].retry: {attempts: 2} -> removed (1 try); gw: order=1; order: db=1; no rewrite fits: client attempts 5 at entrypoint gw exceed cap 4",
			"client -x1-> admin -x3-> order -x2-> db = 6 > cap 4",
			"order: db=1",
		}},
		// The chain asks the route for 1 try (3 / 4); it gives 2 at the fewest, and the edges
		// below go to 1 for that. Before (floorstatus): "client -> gw: ... cannot give 1 try ...
		// lower the callers' attempts", while the patch lowered all three.
		// Two rules to gw: the entrypoint takes the larger (3 tries); lowered alone, the other's
		// 2 would take its place and leave 2 x 2 x 1 = 4. Both go.
		{"every route to the entrypoint", 2, 1, []string{route(2) + "\n  - backendRefs: [{name: gw, port: 80}]\n    retry: {attempts: 1}"}, []string{
			"client -x3-> gw -x2-> order -x2-> db = 12 > cap 2; client -x3-> gw: 3 = 1 (client attempts) x 3 (HTTPRoute shop/web spec.rules[0].retry.attempts: 2)",
			"HTTPRoute shop/web spec.rules[0].retry: {attempts: 2} -> removed (1 try); HTTPRoute shop/web spec.rules[1].retry: {attempts: 1} -> removed (1 try); order: db=1",
			"client -x1-> admin -x3-> order -x2-> db = 6 > cap 2",
			"admin: order=2; order: db=1",
		}},
		{"the route at its floor, the edges below too", 3, 1, []string{istio, route(3)}, []string{
			"client -x4-> gw -x2-> order -x2-> db = 16 > cap 3; client -x4-> gw: 4 = 1 (client attempts) x 4 (HTTPRoute shop/web spec.rules[0].retry.attempts: 3)",
			"HTTPRoute shop/web spec.rules[0].retry.attempts: 3 -> 1; gw: order=1; order: db=1",
			"client -x1-> admin -x3-> order -x2-> db = 6 > cap 3",
			"order: db=1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := policy("shop", "p", tt.cap, v1alpha1.Entrypoint{Service: "gw", ClientAttempts: tt.clients}, v1alpha1.Entrypoint{Service: "admin", ClientAttempts: 1})
			_, a := Analyze(ForRetryPolicy(p), ws, meshSet(t, tt.objects...))
			var got []string
			for _, v := range a.Violations {
				got = append(got, v.Message, v.Suggestion)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
