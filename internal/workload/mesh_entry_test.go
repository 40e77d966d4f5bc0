package workload

import (
	"reflect"
	"testing"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

// Without entrypoints in the policy, a Service a Gateway-parented route routes to is a default
// entrypoint, its client attempts the route's tries, whether or not the graph's services call it.
// Entrypoints are listed in node order.
func TestGatewayDefaultEntrypoints(t *testing.T) {
	route := func(ns, backend, retry string) string {
		return "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: " + ns +
			"}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n  - backendRefs: [{name: " + backend + ", port: 80}]" + retry
	}
	// web -x2-> api -x1-> db; api is also reached through the Gateway.
	ws := []Workload{deploy("shop", "web", "api=2", nil), deploy("shop", "api", "db=1", nil), deploy("shop", "db", "", nil)}
	tests := []struct {
		name string
		p    *v1alpha1.RetryPolicy
		docs []string
		want []graph.Entrypoint
		amp  int64
	}{
		{name: "no Set: the services nobody calls", p: policy("shop", "p", 4), want: []graph.Entrypoint{{Service: "web", ClientAttempts: 1}}, amp: 2},
		{name: "a route with retry.attempts 4 to api, which web calls too", p: policy("shop", "p", 4),
			docs: []string{route("shop", "api", "\n    retry: {attempts: 4}")},
			want: []graph.Entrypoint{{Service: "api", ClientAttempts: 5}, {Service: "web", ClientAttempts: 1}}, amp: 5},
		{name: "retry: {} is 2 retries", p: policy("shop", "p", 4),
			docs: []string{route("shop", "api", "\n    retry: {}")},
			want: []graph.Entrypoint{{Service: "api", ClientAttempts: 3}, {Service: "web", ClientAttempts: 1}}, amp: 3},
		{name: "a route without retry: an entrypoint of 1 try", p: policy("shop", "p", 4),
			docs: []string{route("shop", "api", "")},
			want: []graph.Entrypoint{{Service: "api", ClientAttempts: 1}, {Service: "web", ClientAttempts: 1}}, amp: 2},
		{name: "already a default entrypoint: its client attempts multiplied", p: policy("shop", "p", 4),
			docs: []string{route("shop", "web", "\n    retry: {attempts: 2}")},
			want: []graph.Entrypoint{{Service: "web", ClientAttempts: 3}}, amp: 6},
		{name: "a route in another namespace: not this policy's", p: policy("shop", "p", 4),
			docs: []string{route("other", "api", "\n    retry: {attempts: 4}")},
			want: []graph.Entrypoint{{Service: "web", ClientAttempts: 1}}, amp: 2},
		{name: "a backend no selected workload provides", p: policy("shop", "p", 4),
			docs: []string{route("shop", "cart", "\n    retry: {attempts: 4}")},
			want: []graph.Entrypoint{{Service: "web", ClientAttempts: 1}}, amp: 2},
		{name: "the policy lists entrypoints: only those", p: policy("shop", "p", 4, v1alpha1.Entrypoint{Service: "web", ClientAttempts: 1}),
			docs: []string{route("shop", "api", "\n    retry: {attempts: 4}")},
			want: []graph.Entrypoint{{Service: "web", ClientAttempts: 1}}, amp: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := meshSet(t, tt.docs...)
			if tt.docs == nil {
				set = nil
			}
			r := Build(ForRetryPolicy(tt.p), ws, set)
			a := r.Analyze()
			if !reflect.DeepEqual(a.Entrypoints, tt.want) || a.Amplification != tt.amp {
				t.Errorf("entrypoints %+v, amplification %d; want %+v, %d", a.Entrypoints, a.Amplification, tt.want, tt.amp)
			}
			// The prepared graph judges api as the built one does.
			b := NewBase(ForRetryPolicy(tt.p), parseAll(ws), nil, set)
			j, _, ok := b.Judge(Parse(ws[1]))
			if want := graph.Judge(r.Graph, r.Cap, "api"); !ok || j.Amplification != want.Amplification || j.Over != want.Over {
				t.Errorf("Base.Judge(api) = %+v, %v; Judge = %+v", j, ok, want)
			}
		})
	}
}

func parseAll(ws []Workload) []*Parsed {
	ps := make([]*Parsed, len(ws))
	for i, w := range ws {
		ps[i] = Parse(w)
	}
	return ps
}
