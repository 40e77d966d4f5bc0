package graph

import (
	"reflect"
	"strings"
	"testing"
)

type e struct {
	from, to        string
	attempts, calls int64
}

type ep struct {
	name string
	k    int64
}

func build(services []string, edges []e, eps []ep) *Graph {
	g := New()
	for _, s := range services {
		g.AddService(s)
	}
	for _, x := range edges {
		g.AddEdge(x.from, x.to, x.attempts, x.calls)
	}
	for _, x := range eps {
		g.SetEntrypoint(x.name, x.k)
	}
	return g
}

func TestAnalyze(t *testing.T) {
	tests := []struct {
		name      string
		services  []string
		edges     []e
		eps       []ep
		cap       int64
		amp       int64
		bounded   bool
		worst     string
		load      ServiceLoad
		chains    []string // "entry:amp:path"
		cycle     string
		vmessages []string
		vsuggest  []string
		entries   []string
	}{
		{
			name:     "incident18",
			services: []string{"gateway", "catalog", "db"},
			edges:    []e{{"gateway", "catalog", 3, 1}, {"catalog", "db", 3, 1}},
			eps:      []ep{{"gateway", 2}},
			cap:      3, amp: 18, bounded: true, worst: "gateway>catalog>db",
			load:      ServiceLoad{Service: "db", Requests: 18},
			chains:    []string{"gateway:18:gateway>catalog>db"},
			vmessages: []string{"client -x2-> gateway -x3-> catalog -x3-> db = 18 > cap 3"},
			vsuggest:  []string{"gateway: catalog=1; catalog: db=1"},
			entries:   []string{"gateway:2"},
		},
		{
			name:     "storm27 default entrypoint",
			services: []string{"frontend", "checkout", "billing", "payment"},
			edges:    []e{{"frontend", "checkout", 3, 1}, {"checkout", "billing", 3, 1}, {"billing", "payment", 3, 1}},
			cap:      4, amp: 27, bounded: true, worst: "frontend>checkout>billing>payment",
			load:      ServiceLoad{Service: "payment", Requests: 27},
			chains:    []string{"frontend:27:frontend>checkout>billing>payment"},
			vmessages: []string{"client -x1-> frontend -x3-> checkout -x3-> billing -x3-> payment = 27 > cap 4"},
			vsuggest:  []string{"checkout: billing=1; billing: payment=1"},
			entries:   []string{"frontend:1"},
		},
		{
			name:     "design status example",
			services: []string{"gateway", "order", "payment", "db"},
			edges:    []e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}},
			eps:      []ep{{"gateway", 2}},
			cap:      4, amp: 54, bounded: true, worst: "gateway>order>payment>db",
			load:      ServiceLoad{Service: "db", Requests: 54},
			chains:    []string{"gateway:54:gateway>order>payment>db"},
			vmessages: []string{"client -x2-> gateway -x3-> order -x3-> payment -x3-> db = 54 > cap 4"},
			vsuggest:  []string{"gateway: order=2; order: payment=1; payment: db=1"},
			entries:   []string{"gateway:2"},
		},
		{
			name:     "within cap",
			services: []string{"a", "b"},
			edges:    []e{{"a", "b", 2, 1}},
			cap:      4, amp: 2, bounded: true, worst: "a>b", load: ServiceLoad{Service: "b", Requests: 2},
			chains: []string{"a:2:a>b"}, entries: []string{"a:1"},
		},
		{
			name:     "diamond: fan-in sums load, one violation per branch",
			services: []string{"gw", "a", "b", "db"},
			edges:    []e{{"gw", "a", 3, 1}, {"gw", "b", 3, 1}, {"a", "db", 3, 1}, {"b", "db", 3, 1}},
			cap:      4, amp: 9, bounded: true, worst: "gw>a>db",
			load:   ServiceLoad{Service: "db", Requests: 18},
			chains: []string{"gw:9:gw>a>db"},
			vmessages: []string{
				"client -x1-> gw -x3-> a -x3-> db = 9 > cap 4",
				"client -x1-> gw -x3-> b -x3-> db = 9 > cap 4",
			},
			vsuggest: []string{"a: db=1", "b: db=1"},
			entries:  []string{"gw:1"},
		},
		{
			name:     "fan-out calls multiply load, not amplification",
			services: []string{"gw", "search"},
			edges:    []e{{"gw", "search", 2, 5}, {"search", "index", 1, 10}},
			cap:      4, amp: 2, bounded: true, worst: "gw>search>index",
			load:   ServiceLoad{Service: "index", Requests: 100},
			chains: []string{"gw:2:gw>search>index"}, entries: []string{"gw:1"},
		},
		{
			name: "unselected caller does not hide an entrypoint; external leaves",
			// "batch" is only an upstream name here (not selected), so it never is an entrypoint.
			services: []string{"api", "worker"},
			edges:    []e{{"api", "api.stripe.com", 3, 1}, {"api", "worker.jobs", 2, 1}, {"worker", "db", 2, 1}},
			cap:      2, amp: 3, bounded: true, worst: "api>api.stripe.com",
			load: ServiceLoad{Service: "api.stripe.com", Requests: 3},
			chains: []string{
				"api:3:api>api.stripe.com",
				"worker:2:worker>db",
			},
			vmessages: []string{"client -x1-> api -x3-> api.stripe.com = 3 > cap 2"},
			vsuggest:  []string{"api: api.stripe.com=2"},
			entries:   []string{"api:1", "worker:1"},
		},
		{
			name:     "entrypoints given: only they count",
			services: []string{"a", "b", "c"},
			edges:    []e{{"a", "b", 2, 1}, {"c", "b", 5, 1}},
			eps:      []ep{{"a", 2}},
			cap:      4, amp: 4, bounded: true, worst: "a>b", load: ServiceLoad{Service: "b", Requests: 4},
			chains: []string{"a:4:a>b"}, entries: []string{"a:2"},
		},
		{
			name:     "client attempts alone over the cap",
			services: []string{"solo"},
			eps:      []ep{{"solo", 5}},
			cap:      4, amp: 5, bounded: true, worst: "solo", load: ServiceLoad{Service: "solo", Requests: 5},
			chains:    []string{"solo:5:solo"},
			vmessages: []string{"client -x5-> solo = 5 > cap 4"},
			vsuggest:  []string{"no rewrite fits: client attempts 5 at entrypoint solo exceed cap 4"},
			entries:   []string{"solo:5"},
		},
		{
			// The fix text is per chain: api's client attempts alone are over the cap, so no
			// rewrite fits its chain, whose fix names what the plan (and -o patch) lowers on it
			// first; web's chain is fixed by the plan (order's edge to db at 1, which api's chain
			// through order forces anyway). Before: both chains read "no rewrite fits: client
			// attempts 5 at entrypoint api exceed cap 4", then api's read only that.
			name:     "one entrypoint alone over the cap, another fixable",
			services: []string{"web", "api", "order", "db"},
			edges:    []e{{"web", "order", 3, 1}, {"order", "db", 2, 1}, {"api", "order", 2, 1}},
			eps:      []ep{{"web", 1}, {"api", 5}},
			cap:      4, amp: 20, bounded: true, worst: "api>order>db", load: ServiceLoad{Service: "db", Requests: 20},
			chains:    []string{"api:20:api>order>db", "web:6:web>order>db"},
			vmessages: []string{"client -x5-> api -x2-> order -x2-> db = 20 > cap 4", "client -x1-> web -x3-> order -x2-> db = 6 > cap 4"},
			vsuggest:  []string{"api: order=1; order: db=1; no rewrite fits: client attempts 5 at entrypoint api exceed cap 4", "order: db=1"},
			entries:   []string{"web:1", "api:5"},
		},
		{
			// The same on a graph with a cycle (chains that visit a service once): x's chain
			// cannot fit, gw's can.
			name:     "one entrypoint alone over the cap, with a cycle",
			services: []string{"gw", "a", "b", "c", "x"},
			edges:    []e{{"gw", "a", 3, 1}, {"a", "b", 1, 1}, {"b", "c", 2, 1}, {"c", "a", 1, 1}, {"x", "c", 1, 1}},
			eps:      []ep{{"gw", 1}, {"x", 5}},
			cap:      4, amp: 6, bounded: true, worst: "gw>a>b>c",
			load:      ServiceLoad{Service: "c", Requests: 6},
			chains:    []string{"gw:6:gw>a>b>c", "x:5:x>c>a>b"},
			vmessages: []string{"client -x1-> gw -x3-> a -x1-> b -x2-> c = 6 > cap 4", "client -x5-> x -x1-> c -x1-> a -x1-> b = 5 > cap 4"},
			vsuggest:  []string{"b: c=1", "no rewrite fits: client attempts 5 at entrypoint x exceed cap 4"},
			entries:   []string{"gw:1", "x:5"},
		},
		{
			// A cycle is not a call loop: the worst chain visits each service once,
			// gw>a>b>c (b's retry counts once), and the loads are over those chains.
			name:     "retry cycle",
			services: []string{"gw", "a", "b", "c"},
			edges:    []e{{"gw", "a", 1, 1}, {"a", "b", 1, 1}, {"b", "c", 2, 1}, {"c", "a", 1, 1}},
			cap:      4, amp: 2, bounded: true, worst: "gw>a>b>c",
			load:    ServiceLoad{Service: "c", Requests: 2},
			chains:  []string{"gw:2:gw>a>b>c"},
			entries: []string{"gw:1"},
		},
		{
			name:     "self retry",
			services: []string{"a"},
			edges:    []e{{"a", "a", 3, 1}},
			cap:      4, amp: Saturated, bounded: false, worst: "a",
			load:      ServiceLoad{Service: "a", Requests: Saturated},
			chains:    []string{"a:" + itoa(Saturated) + ":a"},
			cycle:     "a>a",
			vmessages: []string{"retry cycle a -x3-> a: amplification unbounded > cap 4"},
			vsuggest:  []string{"a: a=1"},
			entries:   []string{"a:1"},
		},
		{
			name: "cycle without retries is bounded, and so is its load",
			// gw -3-> a <-> b (attempts 1) -2-> db: amplification 6 through the cycle; the load
			// is over chains that visit a service once: 6 at db.
			services: []string{"gw", "a", "b", "db"},
			edges:    []e{{"gw", "a", 3, 1}, {"a", "b", 1, 1}, {"b", "a", 1, 1}, {"b", "db", 2, 1}},
			cap:      4, amp: 6, bounded: true, worst: "gw>a>b>db",
			load:      ServiceLoad{Service: "db", Requests: 6},
			chains:    []string{"gw:6:gw>a>b>db"},
			vmessages: []string{"client -x1-> gw -x3-> a -x1-> b -x2-> db = 6 > cap 4"},
			vsuggest:  []string{"b: db=1"},
			entries:   []string{"gw:1"},
		},
		{
			name:     "closed loop without retries gets a default entrypoint",
			services: []string{"x", "y"},
			edges:    []e{{"x", "y", 1, 1}, {"y", "x", 1, 1}, {"y", "ext", 3, 1}},
			cap:      4, amp: 3, bounded: true, worst: "x>y>ext",
			load:   ServiceLoad{Service: "ext", Requests: 3},
			chains: []string{"x:3:x>y>ext"}, entries: []string{"x:1"},
		},
		{
			name:     "saturation at 2^63-1",
			services: []string{"s0"},
			edges:    chainEdges(12, 100),
			cap:      1000, amp: Saturated, bounded: true,
			load: ServiceLoad{Service: "s5", Requests: Saturated},
		},
		{
			name:     "same edge declared twice keeps the larger values",
			services: []string{"a"},
			edges:    []e{{"a", "b", 2, 7}, {"a", "b", 3, 1}},
			cap:      4, amp: 3, bounded: true, worst: "a>b", load: ServiceLoad{Service: "b", Requests: 21},
			chains: []string{"a:3:a>b"}, entries: []string{"a:1"},
		},
		{
			name: "empty graph",
			cap:  4, amp: 0, bounded: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build(tt.services, tt.edges, tt.eps)
			a := Analyze(g, tt.cap)
			if a.Amplification != tt.amp || a.Bounded != tt.bounded {
				t.Fatalf("amplification %d bounded %v, want %d %v", a.Amplification, a.Bounded, tt.amp, tt.bounded)
			}
			if tt.worst != "" && strings.Join(a.WorstPath, ">") != tt.worst {
				t.Errorf("worst path %v, want %s", a.WorstPath, tt.worst)
			}
			if got := a.WorstCaseLoad; got.Service != tt.load.Service || got.Requests != tt.load.Requests {
				t.Errorf("worst-case load %+v, want %+v", a.WorstCaseLoad, tt.load)
			}
			if tt.chains != nil {
				var got []string
				for _, c := range a.Chains {
					got = append(got, c.Entrypoint+":"+itoa(c.Amplification)+":"+strings.Join(c.Path, ">"))
				}
				if !reflect.DeepEqual(got, tt.chains) {
					t.Errorf("chains %q, want %q", got, tt.chains)
				}
			}
			if tt.entries != nil {
				var got []string
				for _, x := range a.Entrypoints {
					got = append(got, x.Service+":"+itoa(x.ClientAttempts))
				}
				if !reflect.DeepEqual(got, tt.entries) {
					t.Errorf("entrypoints %q, want %q", got, tt.entries)
				}
			}
			if got := strings.Join(a.Cycle, ">"); got != tt.cycle {
				t.Errorf("cycle %q, want %q", got, tt.cycle)
			}
			if tt.name == "saturation at 2^63-1" {
				return
			}
			var msgs, sugg []string
			for _, v := range a.Violations {
				msgs = append(msgs, v.Message)
				sugg = append(sugg, v.Suggestion)
				if v.Amplification != Product(v.Factors) && a.Bounded {
					t.Errorf("violation %q: amplification %d != product of factors %v", v.Message, v.Amplification, v.Factors)
				}
			}
			if !reflect.DeepEqual(msgs, tt.vmessages) {
				t.Errorf("violations %q, want %q", msgs, tt.vmessages)
			}
			if !reflect.DeepEqual(sugg, tt.vsuggest) {
				t.Errorf("suggestions %q, want %q", sugg, tt.vsuggest)
			}
			if a.WithinCap() != (tt.vmessages == nil) {
				t.Errorf("WithinCap %v with violations %q", a.WithinCap(), msgs)
			}
		})
	}
}

func TestDesignViolationExact(t *testing.T) {
	g := build([]string{"gateway", "order", "payment", "db"},
		[]e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}},
		[]ep{{"gateway", 2}})
	a := Analyze(g, 4)
	want := []Violation{{
		Path:          []string{"gateway", "order", "payment", "db"},
		Factors:       []int64{2, 3, 3, 3},
		Amplification: 54,
		Message:       "client -x2-> gateway -x3-> order -x3-> payment -x3-> db = 54 > cap 4",
		Suggestion:    "gateway: order=2; order: payment=1; payment: db=1",
	}}
	if !reflect.DeepEqual(a.Violations, want) {
		t.Fatalf("violations %+v\nwant %+v", a.Violations, want)
	}
	if a.Services != 4 || a.Edges != 3 {
		t.Fatalf("services %d edges %d", a.Services, a.Edges)
	}
}

func TestSaturation(t *testing.T) {
	g := build([]string{"s0"}, chainEdges(12, 100), []ep{{"s0", 100}})
	a := Analyze(g, 1000)
	if a.Amplification != Saturated || a.WorstCaseLoad.Requests != Saturated || !a.Bounded {
		t.Fatalf("amplification %d load %d bounded %v", a.Amplification, a.WorstCaseLoad.Requests, a.Bounded)
	}
	// 100^9 = 1e18 fits, 100^10 does not.
	g = build([]string{"s0"}, chainEdges(9, 100), nil)
	if a = Analyze(g, 1); a.Amplification != 1e18 {
		t.Fatalf("100^9 = %d", a.Amplification)
	}
	if Mul(Saturated, 2) != Saturated || Mul(1<<32, 1<<31) != Saturated || Mul(1<<31, 1<<31) != 1<<62 || add(Saturated, 1) != Saturated {
		t.Fatal("saturating arithmetic wraps")
	}
	if !strings.Contains(a.Violations[0].Message, "= 1000000000000000000 > cap 1") {
		t.Fatalf("message %q", a.Violations[0].Message)
	}
}

func TestViolationsAtMost20(t *testing.T) {
	g := New()
	g.AddService("gw")
	for i := range 30 {
		g.AddEdge("gw", "s"+itoa(int64(i)), 5, 1)
	}
	a := Analyze(g, 4)
	if len(a.Violations) != MaxViolations {
		t.Fatalf("%d violations", len(a.Violations))
	}
	// Equal amplifications: declaration order, so the 20 listed are s0..s19, of 30.
	if a.Violations[0].Message != "client -x1-> gw -x5-> s0 = 5 > cap 4" || a.Violations[19].Path[1] != "s19" || a.ViolationsTotal != 30 {
		t.Fatalf("first %q last %v of %d", a.Violations[0].Message, a.Violations[19].Path, a.ViolationsTotal)
	}
}

func TestPlanRewrite(t *testing.T) {
	g := build([]string{"gateway", "order", "payment", "db"},
		[]e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}, {"gateway", "cache", 2, 1}},
		[]ep{{"gateway", 2}})
	p, err := PlanRewrite(g, 4)
	if err != nil || !p.Fits {
		t.Fatal(err)
	}
	want := []Change{{"gateway", "order", 3, 2}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}}
	if !reflect.DeepEqual(p.Changes, want) {
		t.Fatalf("changes %+v", p.Changes)
	}
	if v, _ := p.New("gateway", "cache"); v != 2 {
		t.Fatalf("cache %d", v)
	}
	g.SetEntrypoint("gateway", 5)
	p, err = PlanRewrite(g, 4)
	if err == nil || p.Fits || p.Reason != "no rewrite fits: client attempts 5 at entrypoint gateway exceed cap 4" ||
		err.Error() != p.Reason || !reflect.DeepEqual(p.Unfit, []Entrypoint{{"gateway", 5}}) {
		t.Fatalf("err %v plan %+v", err, p)
	}
	// Several entrypoints over the cap: the reason names each, most attempts first; a chain
	// from the one within it fits the plan.
	g.SetEntrypoint("order", 6)
	g.SetEntrypoint("payment", 5)
	g.SetEntrypoint("db", 1)
	p, err = PlanRewrite(g, 4)
	want = []Change{{"gateway", "order", 3, 1}, {"gateway", "cache", 2, 1}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}}
	if err == nil || p.Fits || p.Reason != "no rewrite fits: client attempts 6 at entrypoint order, 5 at entrypoint gateway and 5 at entrypoint payment each exceed cap 4" ||
		!reflect.DeepEqual(p.Unfit, []Entrypoint{{"order", 6}, {"gateway", 5}, {"payment", 5}}) || !reflect.DeepEqual(p.Changes, want) {
		t.Fatalf("err %v plan %+v", err, p)
	}
}

func TestJudgeAndPlanLocal(t *testing.T) {
	base := []e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}, {"order", "inventory", 3, 1}, {"inventory", "stock", 1, 1}}
	tests := []struct {
		name    string
		edges   []e
		eps     []ep
		service string
		over    bool
		msg     string
	}{
		{
			name: "design admission message", edges: base[:2], service: "order", over: true,
			msg: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1",
		},
		{
			name: "two edges must change", edges: base, service: "order", over: true,
			msg: "RetryPolicy shop/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1, inventory=1",
		},
		{
			name: "client attempts shown when above 1", edges: base[:2], eps: []ep{{"gateway", 2}}, service: "order", over: true,
			msg: "RetryPolicy shop/checkout: client -x2-> gateway -x3-> order -x3-> payment = 18 > cap 4; no rewrite fits: even with order: payment=1, client -x2-> gateway -x3-> order -x1-> payment = 6 > cap 4",
		},
		{
			name: "within cap", edges: []e{{"gateway", "order", 2, 1}, {"order", "payment", 2, 1}}, service: "order", over: false,
			msg: "RetryPolicy shop/checkout: gateway -x2-> order -x2-> payment = 4 <= cap 4",
		},
		{
			// A cycle is not a call loop: the chain gateway>order>payment visits each once.
			name: "retry cycle through the service", edges: []e{{"gateway", "order", 1, 1}, {"order", "payment", 3, 1}, {"payment", "order", 1, 1}}, service: "order", over: false,
			msg: "RetryPolicy shop/checkout: gateway -x1-> order -x3-> payment = 3 <= cap 4",
		},
		{
			name: "retry cycle elsewhere in the loop", edges: []e{{"gateway", "order", 1, 1}, {"order", "payment", 1, 1}, {"payment", "order", 2, 1}}, service: "order", over: false,
			msg: "RetryPolicy shop/checkout: gateway -x1-> order -x1-> payment = 1 <= cap 4",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := build([]string{"gateway", "order", "payment"}, tt.edges, tt.eps)
			j := Judge(g, 4, tt.service)
			if j.Over != tt.over {
				t.Errorf("over %v", j.Over)
			}
			p, _ := PlanLocal(g, 4, tt.service)
			if got := AdmissionMessage("shop/checkout", j, p); got != tt.msg {
				t.Errorf("message\n%s\nwant\n%s", got, tt.msg)
			}
		})
	}
}

func TestPlanLocalUnknownService(t *testing.T) {
	if _, err := PlanLocal(New(), 4, "nope"); err == nil {
		t.Fatal("want error")
	}
	if j := Judge(New(), 4, "nope"); j.Over {
		t.Fatal("unknown service over")
	}
}

func chainEdges(n int, a int64) []e {
	var out []e
	for i := range n {
		out = append(out, e{"s" + itoa(int64(i)), "s" + itoa(int64(i+1)), a, a})
	}
	return out
}

func itoa(x int64) string { return FormatInt(x) }

// PlanRewriteClients plans as if an entrypoint's client attempts were lowered by another fix (a
// gateway route's retries): the plan for client attempts 5 lowered to 2 is the plan of a graph
// declaring 2, and fits.
func TestPlanRewriteClients(t *testing.T) {
	g := build([]string{"gateway", "order", "payment", "db"},
		[]e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}, {"admin", "payment", 2, 1}},
		[]ep{{"gateway", 5}, {"admin", 1}})
	p, err := PlanRewrite(g, 4)
	if err == nil || p.Fits || !reflect.DeepEqual(p.Unfit, []Entrypoint{{"gateway", 5}}) {
		t.Fatalf("err %v plan %+v", err, p)
	}
	p, err = PlanRewriteClients(g, 4, map[string]int64{"gateway": 2})
	want := []Change{{"gateway", "order", 3, 2}, {"order", "payment", 3, 1}, {"payment", "db", 3, 1}}
	if err != nil || !p.Fits || p.Reason != "" || p.Unfit != nil || !reflect.DeepEqual(p.Changes, want) {
		t.Fatalf("err %v plan %+v", err, p)
	}
	// The graph's own entrypoints are unchanged.
	if !reflect.DeepEqual(g.Entrypoints(), []Entrypoint{{"gateway", 5}, {"admin", 1}}) {
		t.Fatalf("entrypoints changed: %v", g.Entrypoints())
	}
	if _, err := PlanRewriteClients(g, 4, map[string]int64{"order": 2}); err == nil || err.Error() != `planning with client attempts 2 at "order": "order" is not an entrypoint of the graph` {
		t.Fatalf("err %v", err)
	}
	if _, err := PlanRewriteClients(g, 4, map[string]int64{"gateway": 0}); err == nil || err.Error() != `planning with client attempts 0 at entrypoint "gateway": client attempts must be at least 1` {
		t.Fatalf("err %v", err)
	}
}

// The admission gate's text on a graph where one entrypoint alone is over the cap is per service
// too: web's edges can be fixed (its own value), api's and order's cannot (the chain through them
// from api stays over whatever they set, and the message names it).
func TestAdmissionMessageOneEntrypointOver(t *testing.T) {
	g := build([]string{"web", "api", "order", "db"},
		[]e{{"web", "order", 3, 1}, {"order", "db", 2, 1}, {"api", "order", 2, 1}},
		[]ep{{"web", 1}, {"api", 5}})
	want := map[string]string{
		"web":   "RetryPolicy edge/mixed: web -x3-> order -x2-> db = 6 > cap 4; web may keep order=2",
		"api":   "RetryPolicy edge/mixed: client -x5-> api -x2-> order -x2-> db = 20 > cap 4; no rewrite fits: even with api: order=1, client -x5-> api -x1-> order -x2-> db = 10 > cap 4",
		"order": "RetryPolicy edge/mixed: client -x5-> api -x2-> order -x2-> db = 20 > cap 4; no rewrite fits: even with order: db=1, client -x5-> api -x2-> order -x1-> db = 10 > cap 4",
	}
	for s, msg := range want {
		p, _ := PlanLocal(g, 4, s)
		if got := AdmissionMessage("edge/mixed", Judge(g, 4, s), p); got != msg {
			t.Errorf("%s: %q, want %q", s, got, msg)
		}
	}
}
