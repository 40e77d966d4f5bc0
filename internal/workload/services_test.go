package workload

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/graph"
)

func lbl(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func svc(ns, name string, sel map[string]string) Service {
	return Service{Namespace: ns, Name: name, Selector: sel}
}

// bookinfo is Istio's sample as it runs: Services productpage, details, reviews and ratings
// select app=<name>; reviews fronts three versions, two of which call ratings.
func bookinfo() ([]Workload, []Service) {
	ws := []Workload{
		deploy("bookinfo", "productpage-v1", "details=3, reviews=3", lbl("app", "productpage", "version", "v1")),
		deploy("bookinfo", "details-v1", "", lbl("app", "details", "version", "v1")),
		deploy("bookinfo", "reviews-v1", "", lbl("app", "reviews", "version", "v1")),
		deploy("bookinfo", "reviews-v2", "ratings=3", lbl("app", "reviews", "version", "v2")),
		deploy("bookinfo", "reviews-v3", "ratings=2", lbl("app", "reviews", "version", "v3")),
		deploy("bookinfo", "ratings-v1", "", lbl("app", "ratings", "version", "v1")),
	}
	var ss []Service
	for _, n := range []string{"productpage", "details", "reviews", "ratings"} {
		ss = append(ss, svc("bookinfo", n, lbl("app", n)))
	}
	return ws, ss
}

// emojivoto is Buoyant's sample: Service emoji-svc fronts Deployment emoji (label
// app=emoji-svc), and so on; the callers use the Services' names.
func emojivoto() ([]Workload, []Service) {
	ws := []Workload{
		deploy("emojivoto", "vote-bot", "web-svc=3", lbl("app", "vote-bot")),
		deploy("emojivoto", "web", "emoji-svc=3, voting-svc=3", lbl("app", "web-svc")),
		deploy("emojivoto", "emoji", "", lbl("app", "emoji-svc")),
		deploy("emojivoto", "voting", "", lbl("app", "voting-svc")),
	}
	ss := []Service{
		svc("emojivoto", "web-svc", lbl("app", "web-svc")),
		svc("emojivoto", "emoji-svc", lbl("app", "emoji-svc")),
		svc("emojivoto", "voting-svc", lbl("app", "voting-svc")),
	}
	return ws, ss
}

func entrypointNames(a *graph.Analysis) []string {
	var out []string
	for _, e := range a.Entrypoints {
		out = append(out, e.Service)
	}
	return out
}

func TestServicesResolve(t *testing.T) {
	bw, bs := bookinfo()
	ew, es := emojivoto()
	tests := []struct {
		name      string
		p         *v1alpha1.RetryPolicy
		ws        []Workload
		svcs      []Service
		amp       int64
		path      []string
		entries   []string
		sugg      string // the first violation's suggestion
		warnings  []string
		notes     []string
		nodesOf   map[string][]string // by workload name
		declaring int
	}{
		{
			name: "bookinfo without its Services: the callers' names are leaves",
			p:    policy("bookinfo", "p", 4), ws: bw,
			amp: 3, path: []string{"productpage-v1", "details"},
			entries:   []string{"details-v1", "productpage-v1", "ratings-v1", "reviews-v1", "reviews-v2", "reviews-v3"},
			declaring: 3,
		},
		{
			name: "bookinfo: Service reviews fronts three versions",
			p:    policy("bookinfo", "p", 4), ws: bw, svcs: bs,
			amp: 9, path: []string{"productpage", "reviews", "ratings"},
			entries: []string{"productpage"},
			// The merged edge reviews->ratings is v2's 3; v3's 2 is over the planner's 1 too.
			sugg: "Deployment bookinfo/reviews-v2: ratings=1; Deployment bookinfo/reviews-v3: ratings=1",
			notes: []string{
				`upstream "details" is Service bookinfo/details, which selects Deployment bookinfo/details-v1: resolved to their edges`,
				`upstream "reviews" is Service bookinfo/reviews, which selects Deployment bookinfo/reviews-v1, Deployment bookinfo/reviews-v2, Deployment bookinfo/reviews-v3: resolved to their edges`,
				`upstream "ratings" is Service bookinfo/ratings, which selects Deployment bookinfo/ratings-v1: resolved to their edges`,
			},
			nodesOf: map[string][]string{
				"productpage-v1": {"productpage-v1", "productpage"}, "details-v1": {"details-v1", "details"},
				"reviews-v1": {"reviews-v1", "reviews"}, "reviews-v2": {"reviews-v2", "reviews"},
				"reviews-v3": {"reviews-v3", "reviews"}, "ratings-v1": {"ratings-v1", "ratings"},
			},
			declaring: 3,
		},
		{
			name: "emojivoto without its Services",
			p:    policy("emojivoto", "p", 4), ws: ew,
			amp: 3, path: []string{"vote-bot", "web-svc"},
			entries:   []string{"emoji", "vote-bot", "voting", "web"},
			declaring: 2,
		},
		{
			name: "emojivoto: Service emoji-svc selects Deployment emoji",
			p:    policy("emojivoto", "p", 4), ws: ew, svcs: es,
			amp: 9, path: []string{"vote-bot", "web-svc", "emoji-svc"},
			entries: []string{"vote-bot"},
			sugg:    "Deployment emojivoto/web: emoji-svc=1",
			notes: []string{
				`upstream "web-svc" is Service emojivoto/web-svc, which selects Deployment emojivoto/web: resolved to their edges`,
				`upstream "emoji-svc" is Service emojivoto/emoji-svc, which selects Deployment emojivoto/emoji: resolved to their edges`,
				`upstream "voting-svc" is Service emojivoto/voting-svc, which selects Deployment emojivoto/voting: resolved to their edges`,
			},
			declaring: 2,
		},
		{
			name: "a Service named like the workload it selects: one node, no note",
			p:    policy("shop", "p", 4),
			ws: []Workload{
				deploy("shop", "gateway", "order=2", lbl("app", "gateway")),
				deploy("shop", "order", "payment=2", lbl("app", "order")),
			},
			svcs: []Service{svc("shop", "order", lbl("app", "order")), svc("shop", "gateway", lbl("app", "gateway"))},
			amp:  4, path: []string{"gateway", "order", "payment"}, entries: []string{"gateway"},
			nodesOf:   map[string][]string{"gateway": {"gateway"}, "order": {"order"}},
			declaring: 2,
		},
		{
			name: "a Service without a selector and an ExternalName Service are leaves",
			p:    policy("shop", "p", 9),
			ws: []Workload{
				deploy("shop", "gateway", "db=3, stripe=2", lbl("app", "gateway")),
				// Would be db's edges if Service db selected it: it has no selector.
				deploy("shop", "db", "stripe=3", lbl("app", "db")),
			},
			svcs: []Service{
				svc("shop", "db", nil),
				{Namespace: "shop", Name: "stripe", Selector: lbl("app", "db"), ExternalName: true},
			},
			amp: 3, path: []string{"gateway", "db"}, entries: []string{"gateway"},
			warnings: []string{`Service shop/db does not select Deployment shop/db (service name "db"): callers of db reach the Service, not this workload`},
			notes: []string{
				// Deployment db is processed first (sorted by name): its stripe comes first.
				`upstream "stripe" is Service shop/stripe of type ExternalName: a leaf`,
				`upstream "db" is Service shop/db without a selector: a leaf`,
			},
			nodesOf:   map[string][]string{"gateway": {"gateway"}, "db": nil},
			declaring: 2,
		},
		{
			name: "a Service selecting only workloads the policy does not select is a leaf",
			p: func() *v1alpha1.RetryPolicy {
				p := policy("shop", "p", 9)
				p.Spec.Selector = &metav1.LabelSelector{MatchLabels: lbl("team", "a")}
				return p
			}(),
			ws: []Workload{
				deploy("shop", "gateway", "search=3", lbl("team", "a")),
				deploy("shop", "search-v1", "index=3", lbl("app", "search")),
			},
			svcs: []Service{svc("shop", "search", lbl("app", "search"))},
			amp:  3, path: []string{"gateway", "search"}, entries: []string{"gateway"},
			nodesOf:   map[string][]string{"gateway": {"gateway"}},
			declaring: 1,
		},
		{
			name: "spec.entrypoints may name a Service and a fronted workload's own name",
			p: policy("emojivoto", "p", 100, v1alpha1.Entrypoint{Service: "web-svc", ClientAttempts: 2},
				v1alpha1.Entrypoint{Service: "web"}, v1alpha1.Entrypoint{Service: "nope"}),
			ws: ew, svcs: es,
			amp: 6, path: []string{"web-svc", "emoji-svc"}, entries: []string{"web-svc", "web", "nope"},
			warnings: []string{`entrypoint "nope" is not the service of any selected workload`},
			notes: []string{
				`upstream "web-svc" is Service emojivoto/web-svc, which selects Deployment emojivoto/web: resolved to their edges`,
				`upstream "emoji-svc" is Service emojivoto/emoji-svc, which selects Deployment emojivoto/emoji: resolved to their edges`,
				`upstream "voting-svc" is Service emojivoto/voting-svc, which selects Deployment emojivoto/voting: resolved to their edges`,
			},
			declaring: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, a := Analyze(ForRetryPolicy(tt.p), tt.ws, nil, tt.svcs...)
			if a.Amplification != tt.amp || !reflect.DeepEqual(a.WorstPath, tt.path) {
				t.Fatalf("amplification %d path %v, want %d %v", a.Amplification, a.WorstPath, tt.amp, tt.path)
			}
			if got := entrypointNames(a); !reflect.DeepEqual(got, tt.entries) {
				t.Fatalf("entrypoints %q, want %q", got, tt.entries)
			}
			sugg := ""
			if len(a.Violations) > 0 {
				sugg = a.Violations[0].Suggestion
			}
			if sugg != tt.sugg {
				t.Fatalf("suggestion %q, want %q", sugg, tt.sugg)
			}
			if !reflect.DeepEqual(r.Warnings, tt.warnings) {
				t.Fatalf("warnings %q, want %q", r.Warnings, tt.warnings)
			}
			if !reflect.DeepEqual(r.Notes, tt.notes) {
				t.Fatalf("notes %q, want %q", r.Notes, tt.notes)
			}
			if r.Declaring != tt.declaring {
				t.Fatalf("declaring %d, want %d", r.Declaring, tt.declaring)
			}
			for name, want := range tt.nodesOf {
				key := KindDeployment + "/" + tt.p.Namespace + "/" + name
				if got := r.Nodes(key); !reflect.DeepEqual(got, want) {
					t.Fatalf("nodes of %s %q, want %q", name, got, want)
				}
			}
			if len(tt.svcs) == 0 && r.NodesOf != nil {
				t.Fatalf("NodesOf %v without Services", r.NodesOf)
			}
		})
	}
}

// A workload is reachable under every Service that selects it and under its own service name,
// with the same edges: calling either gives the same numbers.
func TestServiceAliases(t *testing.T) {
	bw, bs := bookinfo()
	p := policy("bookinfo", "p", 100)
	for _, callee := range []string{"reviews", "reviews-v2"} {
		ws := append([]Workload{deploy("bookinfo", "canary-client", callee+"=2", lbl("app", "canary-client"))}, bw...)
		_, a := Analyze(ForRetryPolicy(p), ws, nil, bs...)
		var chain graph.Chain
		for _, c := range a.Chains {
			if c.Entrypoint == "canary-client" {
				chain = c
			}
		}
		if chain.Amplification != 6 || !reflect.DeepEqual(chain.Path, []string{"canary-client", callee, "ratings"}) {
			t.Fatalf("calling %s: chain %+v, want 6 through %s to ratings", callee, chain, callee)
		}
	}
}

// Two Services selecting one workload: both are nodes with its edges; a Service's selector
// must match every pair.
func TestServiceSetNodes(t *testing.T) {
	set := NewServiceSet([]Service{
		svc("shop", "order", lbl("app", "order")),
		svc("shop", "order-canary", lbl("app", "order", "track", "canary")),
		svc("shop", "orders", lbl("app", "order")),
		svc("other", "order-x", lbl("app", "order")),
		{Namespace: "shop", Name: "legacy", Selector: lbl("app", "order"), ExternalName: true},
	})
	stable := Parse(deploy("shop", "order-v1", "", lbl("app", "order", "track", "stable")))
	canary := Parse(deploy("shop", "order-v2", "", lbl("app", "order", "track", "canary")))
	if nodes, fronted := set.Nodes(stable); !fronted || !reflect.DeepEqual(nodes, []string{"order-v1", "order", "orders"}) {
		t.Fatalf("stable: %q %v", nodes, fronted)
	}
	if nodes, _ := set.Nodes(canary); !reflect.DeepEqual(nodes, []string{"order-v2", "order", "order-canary", "orders"}) {
		t.Fatalf("canary: %q", nodes)
	}
	if nodes, fronted := (*ServiceSet)(nil).Nodes(stable); fronted || !reflect.DeepEqual(nodes, []string{"order-v1"}) {
		t.Fatalf("no Services: %q %v", nodes, fronted)
	}
	if NewServiceSet(nil) != nil || set.Len() != 5 {
		t.Fatalf("set of %d", set.Len())
	}
}

// The gate's build judges the incoming workload's own edges under every node it shares with
// its siblings (a Service fronting both), and the prepared graph answers only for a workload
// reached under its own name alone.
func TestServicesJudged(t *testing.T) {
	bw, bs := bookinfo()
	p := policy("bookinfo", "p", 4)
	incoming := deploy("bookinfo", "reviews-v2", "ratings=1", lbl("app", "reviews", "version", "v2"))
	r := BuildJudged(ForRetryPolicy(p), parseAll(bw), Parse(incoming), NewServiceSet(bs), nil)
	if e, _ := r.Graph.Edge("reviews", "ratings"); e.Attempts != 1 {
		t.Fatalf("judged reviews->ratings = %+v, want the incoming 1 (reviews-v3's 2 dropped)", e)
	}
	if e, ok := r.Graph.Edge("reviews-v3", "ratings"); ok {
		t.Fatalf("reviews-v3->ratings = %+v, want dropped (reviews-v3 shares node reviews)", e)
	}
	ps := make([]*Parsed, len(bw))
	for i, w := range bw {
		ps[i] = Parse(w)
	}
	base := NewBase(ForRetryPolicy(p), ps, NewServiceSet(bs), nil)
	if _, _, ok := base.Judge(Parse(incoming)); ok {
		t.Fatalf("the prepared graph answered for a workload reached under two nodes")
	}
	order := []Workload{deploy("shop", "gateway", "order=2", lbl("app", "gateway")), deploy("shop", "order", "payment=2", lbl("app", "order"))}
	ops := []*Parsed{Parse(order[0]), Parse(order[1])}
	set := NewServiceSet([]Service{svc("shop", "order", lbl("app", "order"))})
	in := deploy("shop", "order", "payment=3", lbl("app", "order"))
	j, _, ok := NewBase(ForRetryPolicy(policy("shop", "p", 4)), ops, set, nil).Judge(Parse(in))
	if !ok || !j.Over || j.Amplification != 6 {
		t.Fatalf("Service order fronting Deployment order: %+v %v, want 6 over the cap from the prepared graph", j, ok)
	}
	want := graph.Judge(BuildJudged(ForRetryPolicy(policy("shop", "p", 4)), parseAll(order), Parse(in), NewServiceSet([]Service{svc("shop", "order", lbl("app", "order"))}), nil).Graph, 4, "order")
	if want.Amplification != j.Amplification || want.Explain() != j.Explain() {
		t.Fatalf("prepared %s, built %s", j.Explain(), want.Explain())
	}
}

// Put and Remove change a set in place; a Clone taken before is not changed by them, nor is the
// set it was taken from by changes to the clone.
func TestServiceSetCloneIsolates(t *testing.T) {
	w := Parse(deploy("shop", "order-v1", "", lbl("app", "order")))
	s := &ServiceSet{}
	s.Put(svc("shop", "order", lbl("app", "order")))
	s.Put(svc("shop", "orders", lbl("app", "order")))
	before := s.Clone()
	s.Remove("shop", "orders")
	s.Put(svc("shop", "order", lbl("app", "other")))
	s.Put(svc("shop", "order-api", lbl("app", "order")))
	if got, _ := before.Nodes(w); !reflect.DeepEqual(got, []string{"order-v1", "order", "orders"}) {
		t.Fatalf("the clone changed: %q", got)
	}
	if got, _ := s.Nodes(w); !reflect.DeepEqual(got, []string{"order-v1", "order-api"}) {
		t.Fatalf("after the changes: %q", got)
	}
	if got := s.List(); len(got) != 2 || got[0].Name != "order" || got[1].Name != "order-api" {
		t.Fatalf("List %+v", got)
	}
	s.Remove("shop", "order")
	s.Remove("shop", "order-api")
	s.Remove("shop", "nope")
	if s.Len() != 0 || before.Len() != 2 {
		t.Fatalf("lengths %d and %d", s.Len(), before.Len())
	}
}
