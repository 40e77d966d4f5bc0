package mesh

import (
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

// TestHopsEveryRoute: a call's worst time is the worst over the routes of the object a request
// may take, not the time of the route that counts the most tries. Which route takes a request
// depends on its path and headers (a VirtualService's http[].match, a Gateway API rule's
// matches), which the model does not know. Istio builds one Envoy route per http[] entry, each
// with its own timeout and retry policy (istio/istio 86c9f01fd735 pilot/pkg/networking/core/
// route/route.go:615 setTimeout(action, in.Timeout, node) and :707 action.RetryPolicy =
// retry.ConvertPolicy(policy, ...), per HTTPRoute in applyHTTPRouteDestination; :680-684 a route
// without retries takes MeshConfig's defaultHttpRetryPolicy, nil: the 2-retry default of
// route/retry/retry.go:36-37,107-112); a Gateway API rule becomes one such http[] entry
// (pilot/pkg/config/kube/gateway/conversion.go:186-228). The chain: a -> b -> c, b's own call
// to the leaf c bounded at 3s per try, so b's worst time is 3s; a calls b once, with no per-try
// timeout of its own, through the mesh layer under test.
func TestHopsEveryRoute(t *testing.T) {
	const s3 = 3 * time.Second
	own := graph.TimeLayer{Name: "a", Tries: 1}
	cases := []struct {
		name   string
		docs   string
		entry  bool
		hops   int
		before time.Duration // the counted route's time alone (what Hop, the only hop before, gives)
		worst  time.Duration
	}{
		{
			// Route 0 counts (4 tries) within its 1s; route 1 (every other path) makes 2 tries
			// with no timeout: 2 x 3s + 25ms, Envoy's first backoff.
			name: "VirtualService: a route of fewer tries and no timeout",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "b", "  hosts: [b]\n  http:\n  - match: [{uri: {prefix: /fast}}]\n    retries: {attempts: 3}\n    timeout: 1s\n  - retries: {attempts: 1}"),
			hops: 2, before: time.Second, worst: 2*s3 + 25*ms,
		},
		{
			// Both routes take Istio's default (3 tries); the first counted before, with its 2s
			// timeout; the second has none: 3 x 3s + 25ms + 50ms.
			name: "VirtualService: two routes of Istio's default, one with a timeout",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "b", "  hosts: [b]\n  http:\n  - match: [{headers: {end-user: {exact: jason}}}]\n    timeout: 2s\n  - route: [{destination: {host: b}}]"),
			hops: 2, before: 2 * time.Second, worst: 3*s3 + 75*ms,
		},
		{
			// A GAMMA route: rule 0's retry (4 tries) within its request timeout 1s; rule 1 has
			// no retry: Istio's default 3 tries, no timeout.
			name: "GAMMA route: a rule without retry beside one with a timeout",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "b", "",
				"  parentRefs: [{group: \"\", kind: Service, name: b}]\n  rules:\n  - matches: [{path: {value: /fast}}]\n    retry: {attempts: 3}\n    timeouts: {request: 1s}\n  - backendRefs: [{name: b}]"),
			hops: 2, before: time.Second, worst: 3*s3 + 75*ms,
		},
		{
			// Every route alike: one hop, as before.
			name: "VirtualService of one route: one hop",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "b", "  hosts: [b]\n  http:\n  - retries: {attempts: 3}\n    timeout: 1s"),
			hops: 1, before: time.Second, worst: time.Second,
		},
		{
			// A Gateway-parented route: rule 0 (to b) retries 4 tries within 1s; rule 1 (to b
			// too) has no retry and no timeout: 1 try of 3s. The outside client makes 1 try.
			name: "Gateway route: a rule of 1 try and no timeout", entry: true,
			docs: routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "web", "",
				"  parentRefs: [{name: gw}]\n  rules:\n  - matches: [{path: {value: /fast}}]\n    backendRefs: [{name: b}]\n    retry: {attempts: 3}\n    timeouts: {request: 1s}\n  - backendRefs: [{name: b}]"),
			hops: 2, before: time.Second, worst: s3,
		},
	}
	leaf := graph.Hop{{Name: "b", Tries: 1, PerTry: s3}}
	analyse := func(entry bool, hops []graph.Hop) time.Duration {
		g := graph.New()
		tm := graph.NewTiming(g)
		g.AddEdge("b", "c", 1, 1)
		if entry {
			g.SetEntrypoint("b", 1)
			for _, h := range hops {
				tm.AddEntryHop("b", 1, h)
			}
		} else {
			g.AddEdge("a", "b", 1, 1)
			g.SetEntrypoint("a", 1)
			for _, h := range hops {
				tm.AddHop("a", "b", h)
			}
		}
		tm.SetHop("b", "c", leaf)
		return graph.AnalyzeTimeWith(g, tm, 0).Worst
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			var hops []graph.Hop
			var one graph.Hop
			if tc.entry {
				ref := ServiceRef{"bookinfo", "b"}
				e := s.Entry(ref)
				hops = s.EntryHops(e, s.EntryLayers(ref))
				one = hops[0]
			} else {
				e := s.Edge(caller("bookinfo"), "b")
				hops = s.Hops(own, e)
				one = s.Hop(own, e)
			}
			if len(hops) != tc.hops {
				t.Fatalf("%d hops, want %d: %+v", len(hops), tc.hops, hops)
			}
			if got := analyse(tc.entry, []graph.Hop{one}); got != tc.before {
				t.Errorf("the counted route alone: %v, want %v", got, tc.before)
			}
			if got := analyse(tc.entry, hops); got != tc.worst {
				t.Errorf("worst time %v, want %v (hops %+v)", got, tc.worst, hops)
			}
		})
	}
}

// TestEnvelope: beyond maxHops combinations an edge's layers with alternatives are each taken as
// their envelope, which no alternative outlasts whatever it waits on.
func TestEnvelope(t *testing.T) {
	a := graph.TimeLayer{Name: "x", Tries: 4, PerTry: time.Second, Timeout: 2 * time.Second, BackoffBase: 25 * ms, BackoffMax: 250 * ms}
	b := graph.TimeLayer{Name: "x", Tries: 2, BackoffBase: 100 * ms, BackoffMax: 200 * ms, Delay: time.Second}
	c := graph.TimeLayer{Name: "x", Tries: 3, PerTry: 300 * ms, LastTry: graph.Forever}
	if got, want := envelope([]graph.TimeLayer{a, b}), (graph.TimeLayer{Name: "x", Tries: 4, BackoffBase: 100 * ms, BackoffMax: 250 * ms, Delay: time.Second}); got != want {
		t.Errorf("envelope(a, b) = %+v, want %+v", got, want)
	}
	if got, want := envelope([]graph.TimeLayer{a, c}), (graph.TimeLayer{Name: "x", Tries: 4, PerTry: time.Second, LastTry: graph.Forever, BackoffBase: 25 * ms, BackoffMax: 250 * ms}); got != want {
		t.Errorf("envelope(a, c) = %+v, want %+v", got, want)
	}
	// A layer waiting with no cap (BackoffMax 0 beside a base) makes the envelope uncapped.
	d := graph.TimeLayer{Name: "x", Tries: 2, PerTry: 2 * time.Second, BackoffBase: 10 * ms}
	if got, want := envelope([]graph.TimeLayer{a, d}), (graph.TimeLayer{Name: "x", Tries: 4, PerTry: 2 * time.Second, BackoffBase: 25 * ms}); got != want {
		t.Errorf("envelope(a, d) = %+v, want %+v", got, want)
	}
}

// TestHopsCapped: a VirtualService of 70 routes, each with its own timeout, is one hop of their
// envelope (70 choices, more than maxHops): the most tries (3) within the longest timeout
// (70s), whose time bounds every route's.
func TestHopsCapped(t *testing.T) {
	body := "  hosts: [b]\n  http:\n"
	for i := 1; i <= 70; i++ {
		body += "  - retries: {attempts: 2}\n    timeout: " + time.Duration(i*int(time.Second)).String() + "\n"
	}
	s := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "b", body))
	hops := s.Hops(graph.TimeLayer{Name: "a", Tries: 1}, s.Edge(caller("bookinfo"), "b"))
	if len(hops) != 1 {
		t.Fatalf("%d hops, want 1", len(hops))
	}
	want := graph.TimeLayer{Name: "Istio VirtualService bookinfo/b", Tries: 3, Timeout: 70 * time.Second, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}
	if got := hops[0][1]; got != want {
		t.Errorf("layer %+v, want %+v", got, want)
	}
}

// TestCallHopsLinkerd: under Linkerd every HTTPRoute attached to the Service is a route a request
// may take, each with its own retry and timeout annotations (linkerd/linkerd2 b24cd4059841
// policy-controller/k8s/index/src/outbound/index/http.rs:22-31 convert_route reads each route's
// own parse_timeouts and parse_http_retry). The /fast route counts (4 tries) within its request timeout 1s; the other
// route makes 2 tries with no timeout: 2 x 3s + 25ms (Linkerd's first backoff at most). Before,
// 1s. The chain and b's 3s as in TestHopsEveryRoute.
func TestCallHopsLinkerd(t *testing.T) {
	route := func(name, ann, rule string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", name, ann,
			"  parentRefs: [{group: \"\", kind: Service, name: b}]\n  rules:\n  - "+rule)
	}
	docs := nsLinkerd + "\n---\n" + svc("emojivoto", "b", "owner: x") + "\n---\n" +
		route("b-fast", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"3\"\n    timeout.linkerd.io/request: 1s", "matches: [{path: {value: /fast}}]") + "\n---\n" +
		route("b-rest", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"1\"", "backendRefs: [{name: b}]")
	s := set(t, Options{}, docs)
	c := caller("emojivoto")
	e := s.Edge(c, "b")
	own := graph.TimeLayer{Name: "a", Tries: 1}
	if got := len(s.Hops(own, e)); got != 1 {
		t.Errorf("Hops: %d hops, want 1 (Linkerd's alternatives need the caller: CallHops)", got)
	}
	hops := s.CallHops(own, c, "b", e)
	if len(hops) != 2 {
		t.Fatalf("%d hops, want 2: %+v", len(hops), hops)
	}
	worst := func(hs []graph.Hop) time.Duration {
		g := graph.New()
		tm := graph.NewTiming(g)
		g.AddEdge("a", "b", 1, 1)
		g.AddEdge("b", "c", 1, 1)
		g.SetEntrypoint("a", 1)
		for _, h := range hs {
			tm.AddHop("a", "b", h)
		}
		tm.SetHop("b", "c", graph.Hop{{Name: "b", Tries: 1, PerTry: 3 * time.Second}})
		return graph.AnalyzeTimeWith(g, tm, 0).Worst
	}
	if got, want := worst(hops[:1]), time.Second; got != want {
		t.Errorf("the counted route alone: %v, want %v", got, want)
	}
	if got, want := worst(hops), 6*time.Second+25*ms; got != want {
		t.Errorf("worst time %v, want %v", got, want)
	}
}

// TestCallHopsLinkerdInherited: Linkerd takes a rule's retry and its timeouts apart, each from
// the route, else from the Service (linkerd/linkerd2 b24cd4059841 policy-controller/grpc/src/
// outbound/http.rs:248-253; its test policy-test/tests/outbound_api_http.rs:1022-1085
// parent_retries_and_timeouts: "Retry config inherited from the service", "Parent timeout config
// overridden by route timeout config"). The Service retries 3 tries within a request timeout of
// 1s; its HTTPRoute sets no retry (the Service's counts) but a response timeout of 30s, which
// replaces the Service's timeouts: 3 tries of up to 3s (b's time) + 25ms + 50ms = 9.075s. Before,
// the layer took the Service's timeouts with its retry: 1s.
func TestCallHopsLinkerdInherited(t *testing.T) {
	docs := nsLinkerd + "\n---\n" + svc("emojivoto", "b", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"2\"\n    timeout.linkerd.io/request: 1s") + "\n---\n" +
		routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "b-route", "timeout.linkerd.io/response: 30s",
			"  parentRefs: [{group: \"\", kind: Service, name: b}]\n  rules:\n  - backendRefs: [{name: b}]")
	s := set(t, Options{}, docs)
	c := caller("emojivoto")
	e := s.Edge(c, "b")
	if len(e.Layers) != 1 || e.Layers[0].Object != "Service emojivoto/b" || e.Layers[0].Tries != 3 {
		t.Fatalf("layers %+v, want the Service's 3 tries", e.Layers)
	}
	own := graph.TimeLayer{Name: "a", Tries: 1}
	worst := func(hs []graph.Hop) time.Duration {
		g := graph.New()
		tm := graph.NewTiming(g)
		g.AddEdge("a", "b", 1, 1)
		g.AddEdge("b", "c", 1, 1)
		g.SetEntrypoint("a", 1)
		for _, h := range hs {
			tm.AddHop("a", "b", h)
		}
		tm.SetHop("b", "c", graph.Hop{{Name: "b", Tries: 1, PerTry: 3 * time.Second}})
		return graph.AnalyzeTimeWith(g, tm, 0).Worst
	}
	if got, want := worst([]graph.Hop{s.Hop(own, e)}), time.Second; got != want {
		t.Errorf("the Service's timeouts alone: %v, want %v", got, want)
	}
	if got, want := worst(s.CallHops(own, c, "b", e)), 9*time.Second+75*ms; got != want {
		t.Errorf("worst time %v, want %v", got, want)
	}
}

// TestCallHopsLinkerdGatewayRule: under Linkerd a Gateway API rule's retry (counted, 4 tries: an
// upper bound, as Linkerd reads none) is one route among the Service's; another HTTPRoute of 2
// tries and no timeout waits 2 x 3s + 25ms. Before, only the rule's time counted: its route's
// 1s request timeout.
func TestCallHopsLinkerdGatewayRule(t *testing.T) {
	route := func(name, ann, rule string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", name, ann,
			"  parentRefs: [{group: \"\", kind: Service, name: b}]\n  rules:\n  - "+rule)
	}
	docs := nsLinkerd + "\n---\n" + svc("emojivoto", "b", "owner: x") + "\n---\n" +
		route("b-fast", "timeout.linkerd.io/request: 1s", "matches: [{path: {value: /fast}}]\n    retry: {attempts: 3}") + "\n---\n" +
		route("b-rest", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"1\"", "backendRefs: [{name: b}]")
	s := set(t, Options{}, docs)
	c := caller("emojivoto")
	e := s.Edge(c, "b")
	if len(e.Layers) != 1 || !e.Layers[0].NoRuleTimes || e.Layers[0].Tries != 4 {
		t.Fatalf("layers %+v, want the rule's 4 tries", e.Layers)
	}
	own := graph.TimeLayer{Name: "a", Tries: 1}
	worst := func(hs []graph.Hop) time.Duration {
		g := graph.New()
		tm := graph.NewTiming(g)
		g.AddEdge("a", "b", 1, 1)
		g.AddEdge("b", "c", 1, 1)
		g.SetEntrypoint("a", 1)
		for _, h := range hs {
			tm.AddHop("a", "b", h)
		}
		tm.SetHop("b", "c", graph.Hop{{Name: "b", Tries: 1, PerTry: 3 * time.Second}})
		return graph.AnalyzeTimeWith(g, tm, 0).Worst
	}
	if got, want := worst([]graph.Hop{s.Hop(own, e)}), time.Second; got != want {
		t.Errorf("the rule alone: %v, want %v", got, want)
	}
	if got, want := worst(s.CallHops(own, c, "b", e)), 6*time.Second+25*ms; got != want {
		t.Errorf("worst time %v, want %v", got, want)
	}
}

// TestCallHopsLinkerdTimesReplaceOwn: a route's timing layer (LinkerdRoute.Times) replaces its
// own where another object's timeouts bound its tries. b's HTTPRoute retries (limit 2: 3 tries)
// and sets no timeout, so Linkerd bounds each try by the Service's timeout.linkerd.io/response
// 1s (policy-controller grpc/src/outbound/http.rs:248-253): 3 x 1s + 25ms + 50ms = 3.075s.
// Before, the route's own layer (no timeout: 3 x b's 3s + backoff, 9.075s) was one of the
// hops, the worst. A Service without retry annotations and without routes: its timeouts bound
// Linkerd's 1 try (1s; before, none: 3s).
func TestCallHopsLinkerdTimesReplaceOwn(t *testing.T) {
	worst := func(hs []graph.Hop) time.Duration {
		g := graph.New()
		tm := graph.NewTiming(g)
		g.AddEdge("a", "b", 1, 1)
		g.AddEdge("b", "c", 1, 1)
		g.SetEntrypoint("a", 1)
		for _, h := range hs {
			tm.AddHop("a", "b", h)
		}
		tm.SetHop("b", "c", graph.Hop{{Name: "b", Tries: 1, PerTry: 3 * time.Second}})
		return graph.AnalyzeTimeWith(g, tm, 0).Worst
	}
	own := graph.TimeLayer{Name: "a", Tries: 1}
	c := caller("emojivoto")
	for _, tc := range []struct {
		name          string
		docs          string
		tries         int64
		before, worst time.Duration
	}{
		{
			name: "a route's retry within the Service's timeout",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "b", "timeout.linkerd.io/response: 1s") + "\n---\n" +
				routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "b-route", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"2\"",
					"  parentRefs: [{group: \"\", kind: Service, name: b}]\n  rules:\n  - backendRefs: [{name: b}]"),
			tries: 3, before: 9*time.Second + 75*ms, worst: 3*time.Second + 75*ms,
		},
		{
			name:  "no route, no retry annotation: Linkerd's 1 try within the Service's timeout",
			docs:  nsLinkerd + "\n---\n" + svc("emojivoto", "b", "timeout.linkerd.io/response: 1s"),
			tries: 1, before: 3 * time.Second, worst: time.Second,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			e := s.Edge(c, "b")
			if len(e.Layers) != 1 || e.Layers[0].Tries != tc.tries {
				t.Fatalf("layers %+v, want %d tries", e.Layers, tc.tries)
			}
			if got := worst([]graph.Hop{s.Hop(own, e)}); got != tc.before {
				t.Errorf("the layer's own timeouts: %v, want %v", got, tc.before)
			}
			hops := s.CallHops(own, c, "b", e)
			if len(hops) != 1 {
				t.Errorf("%d hops, want 1 (the timing layer in the counted one's place): %+v", len(hops), hops)
			}
			if got := worst(hops); got != tc.worst {
				t.Errorf("worst time %v, want %v", got, tc.worst)
			}
		})
	}
}
