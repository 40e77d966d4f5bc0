package graph

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// rc is the retrycap layer of a policy: tries, per-try timeout, backoff 100ms..2s.
func rc(tries int64, perTry time.Duration) TimeLayer {
	return TimeLayer{Name: "retrycap", Tries: tries, PerTry: perTry, BackoffBase: 100 * ms, BackoffMax: 2 * time.Second}
}

// istio is an Istio sidecar layer with Envoy's default backoff (25ms base, 10x max).
func istio(tries int64, perTry, timeout time.Duration) TimeLayer {
	return TimeLayer{Name: "Istio VirtualService shop/payment", Tries: tries, PerTry: perTry, Timeout: timeout, BackoffBase: 25 * ms, BackoffMax: 250 * ms}
}

// delayed is l holding each request for d first (Istio's fault.delay).
func delayed(l TimeLayer, d time.Duration) TimeLayer {
	l.Delay = d
	return l
}

type hopDecl struct {
	from, to string
	hop      Hop
}

type timeCase struct {
	name       string
	edges      []e
	eps        []ep
	hops       []hopDecl
	entryHops  map[string]Hop
	max        time.Duration
	worst      string // FormatTime of Worst
	worstPath  string
	unbounded  string
	chains     []string // "entry:time:path:times"
	inversions []string // messages
	fixes      []string
	violations []string
	total      int
}

func TestAnalyzeTime(t *testing.T) {
	tests := []timeCase{
		{
			// order -> payment: 3 x min(200ms, unknown) + 100ms + 200ms = 900ms.
			// gateway -> order: 3 x min(1s, 900ms) + 300ms = 3s; two client tries: 6s.
			name:  "three tiers, retrycap backoff, client attempts",
			edges: []e{{"gateway", "order", 3, 1}, {"order", "payment", 3, 1}},
			eps:   []ep{{"gateway", 2}},
			hops: []hopDecl{
				{"gateway", "order", Hop{rc(3, time.Second)}},
				{"order", "payment", Hop{rc(3, 200*ms)}},
			},
			max:        5 * time.Second,
			worst:      "6s",
			worstPath:  "gateway>order>payment",
			chains:     []string{"gateway:6s:gateway>order>payment:3s,900ms,unbounded"},
			violations: []string{"client -x2-> gateway 3s -> order 900ms -> payment ? = 6s > maxTimeToAnswer 5s"},
		},
		{
			// payment -> db: 1 x 500ms = 500ms.
			// order -> payment, Istio inside: 3 x 500ms + 25ms + 50ms = 1.575s; the app over it:
			// 2 x min(1s, 1.575s) + 100ms = 2.1s (an inversion: 1s < 1.575s).
			// gateway -> order: 2 x min(3s, 2.1s) + 100ms = 4.3s; the Gateway route's request
			// timeout cuts it to 4s.
			name:  "mesh layers nest in wire order",
			edges: []e{{"gateway", "order", 2, 1}, {"order", "payment", 6, 1}, {"payment", "db", 1, 1}},
			eps:   []ep{{"gateway", 1}},
			hops: []hopDecl{
				{"gateway", "order", Hop{rc(2, 3*time.Second)}},
				{"order", "payment", Hop{rc(2, time.Second), istio(3, 0, 0)}},
				{"payment", "db", Hop{rc(1, 500*ms)}},
			},
			entryHops: map[string]Hop{"gateway": {{Name: "HTTPRoute shop/web", Tries: 1, Timeout: 4 * time.Second}}},
			max:       4 * time.Second,
			worst:     "4s", worstPath: "gateway>order>payment>db",
			chains: []string{"gateway:4s:gateway>order>payment>db:4.3s,2.1s,500ms,unbounded"},
			inversions: []string{"order -> payment: retrycap per-try timeout 1s < Istio VirtualService shop/payment's worst time on payment 1.575s: " +
				"order retries while payment still works on the abandoned try"},
			fixes: []string{"retrycap per-try timeout for payment >= 1.575s, or Istio VirtualService shop/payment finishing within 1s " +
				"(its tries x per-try timeout + backoff, or its timeout)"},
			total: 1,
		},
		{
			// order-v1 is the workload's own-name node beside the Service order that fronts it:
			// nobody calls it, and its hop is order's. Before, its inversion was listed a second
			// time (bookinfo: "productpage-v1 -> reviews" and "productpage -> reviews").
			name:  "a hop no chain takes offers no inversion",
			edges: []e{{"gateway", "order", 3, 1}, {"order", "payment", 9, 1}, {"order-v1", "payment", 9, 1}, {"payment", "db", 1, 1}},
			eps:   []ep{{"gateway", 2}},
			hops: []hopDecl{
				{"gateway", "order", Hop{rc(3, time.Second)}},
				{"order", "payment", Hop{rc(3, 200*ms), istio(3, 0, 0)}},
				{"order-v1", "payment", Hop{rc(3, 200*ms), istio(3, 0, 0)}},
				{"payment", "db", Hop{rc(1, 500*ms)}},
			},
			worst: "6s", worstPath: "gateway>order>payment>db",
			chains: []string{"gateway:6s:gateway>order>payment>db:3s,900ms,500ms,unbounded"},
			inversions: []string{"order -> payment: retrycap per-try timeout 200ms < Istio VirtualService shop/payment's worst time on payment 1.575s: " +
				"order retries while payment still works on the abandoned try"},
			fixes: []string{"retrycap per-try timeout for payment >= 1.575s, or Istio VirtualService shop/payment finishing within 200ms " +
				"(its tries x per-try timeout + backoff, or its timeout)"},
			total: 1,
		},
		{
			name:  "worked example in docs/concepts.md",
			edges: []e{{"gateway", "order", 3, 1}, {"order", "payment", 9, 1}, {"payment", "db", 1, 1}},
			eps:   []ep{{"gateway", 2}},
			hops: []hopDecl{
				{"gateway", "order", Hop{rc(3, time.Second)}},
				{"order", "payment", Hop{rc(3, 200*ms), istio(3, 0, 0)}},
				{"payment", "db", Hop{rc(1, 500*ms)}},
			},
			max:   5 * time.Second,
			worst: "6s", worstPath: "gateway>order>payment>db",
			chains:     []string{"gateway:6s:gateway>order>payment>db:3s,900ms,500ms,unbounded"},
			violations: []string{"client -x2-> gateway 3s -> order 900ms -> payment 500ms -> db ? = 6s > maxTimeToAnswer 5s"},
			inversions: []string{"order -> payment: retrycap per-try timeout 200ms < Istio VirtualService shop/payment's worst time on payment 1.575s: " +
				"order retries while payment still works on the abandoned try"},
			fixes: []string{"retrycap per-try timeout for payment >= 1.575s, or Istio VirtualService shop/payment finishing within 200ms " +
				"(its tries x per-try timeout + backoff, or its timeout)"},
			total: 1,
		},
		{
			// b -> c: 2 x 2s = 2s x 2 = 4s (no backoff); a -> b: 3 x min(1s, 4s) = 3s.
			name:  "inversion across a hop",
			edges: []e{{"a", "b", 3, 1}, {"b", "c", 2, 1}},
			hops: []hopDecl{
				{"a", "b", Hop{{Name: "retrycap", Tries: 3, PerTry: time.Second}}},
				{"b", "c", Hop{{Name: "retrycap", Tries: 2, PerTry: 2 * time.Second}}},
			},
			worst: "3s", worstPath: "a>b>c",
			chains:     []string{"a:3s:a>b>c:3s,4s,unbounded"},
			inversions: []string{"a -> b: retrycap per-try timeout 1s < b's worst time 4s: a retries while b still works on the abandoned try"},
			fixes:      []string{"retrycap per-try timeout for b >= 4s, or a timeout of at most 1s on b's own calls"},
			total:      1,
		},
		{
			// Nothing bounds a -> b -> c: unbounded, and said why. b's caller x has a per-try
			// timeout, so x's time is bounded, and it is an inversion with an unbounded callee.
			name:  "unbounded, and an inversion over it",
			edges: []e{{"a", "b", 3, 1}, {"b", "c", 1, 1}, {"x", "b", 2, 1}},
			eps:   []ep{{"a", 1}, {"x", 1}},
			hops: []hopDecl{
				{"x", "b", Hop{{Name: "retrycap", Tries: 2, PerTry: time.Second, BackoffBase: 100 * ms}}},
			},
			max:   time.Minute,
			worst: "unbounded", worstPath: "a>b>c",
			unbounded: "no timeout on a -> b -> c, and c's own time is unknown",
			chains:    []string{"a:unbounded:a>b>c:unbounded,unbounded,unbounded", "x:2.1s:x>b>c:2.1s,unbounded,unbounded"},
			violations: []string{"a unbounded -> b unbounded -> c ? = unbounded > maxTimeToAnswer 1m0s " +
				"(no timeout on a -> b -> c, and c's own time is unknown)"},
			inversions: []string{"x -> b: retrycap per-try timeout 1s < b's worst time unbounded: x retries while b still works on the abandoned try"},
			fixes:      []string{"bound b's worst time: a timeout of at most 1s on b's own calls"},
			total:      1,
		},
		{
			// A leaf's unknown time is no inversion; an overall timeout bounds an unbounded try.
			name:  "route timeout bounds a leaf",
			edges: []e{{"a", "ext", 4, 1}},
			hops:  []hopDecl{{"a", "ext", Hop{istio(4, 0, 1500*ms)}}},
			worst: "1.5s", worstPath: "a>ext",
			chains: []string{"a:1.5s:a>ext:1.5s,unbounded"},
		},
		{
			// A cycle is not a call loop (#28): a chain visits a service once, so on a -> b the
			// chain ends at b (its call to a would return): b's time there is unknown, and
			// a -> b is 2 x 1s = 2s. No inversion: b's time on the chain is a leaf's.
			name:  "a cycle bounded by one timeout",
			edges: []e{{"a", "b", 2, 1}, {"b", "a", 1, 1}},
			eps:   []ep{{"a", 1}},
			hops:  []hopDecl{{"a", "b", Hop{{Name: "retrycap", Tries: 2, PerTry: time.Second}}}},
			worst: "2s", worstPath: "a>b",
			chains: []string{"a:2s:a>b:2s,unbounded"},
		},
		{
			name:  "a cycle without a timeout",
			edges: []e{{"a", "b", 1, 1}, {"b", "a", 1, 1}},
			eps:   []ep{{"a", 1}},
			worst: "unbounded", worstPath: "a>b",
			unbounded: "no timeout on a -> b, and b's own time is unknown",
			chains:    []string{"a:unbounded:a>b:unbounded,unbounded"},
		},
		{
			// gateway -> a -> b -> db, and b -> a for another endpoint. From a: a -> b -> db
			// (b -> a returns): b 1 x 300ms = 300ms, a 3 x 300ms + 300ms = 1.2s; gateway
			// 1 x min(2s, 1.2s) = 1.2s. The fixpoint round the loop (before #28) gave a and b
			// 3.3s and the gateway its per-try timeout, 2s.
			name:  "a cycle: the chain does not go round",
			edges: []e{{"gateway", "a", 1, 1}, {"a", "b", 3, 1}, {"b", "a", 1, 1}, {"b", "db", 1, 1}},
			eps:   []ep{{"gateway", 1}},
			hops: []hopDecl{
				{"gateway", "a", Hop{rc(1, 2*time.Second)}},
				{"a", "b", Hop{rc(3, time.Second)}},
				{"b", "a", Hop{rc(1, 5*time.Second)}},
				{"b", "db", Hop{rc(1, 300*ms)}},
			},
			worst: "1.2s", worstPath: "gateway>a>b>db",
			chains: []string{"gateway:1.2s:gateway>a>b>db:1.2s,1.2s,300ms,unbounded"},
		},
		{
			// Two workloads share the service "order" and declare order -> payment differently:
			// the worse hop counts (3 x 300ms + 100ms + 200ms = 1.2s beats 2 x 500ms + 100ms).
			name:  "the worst of two declarations",
			edges: []e{{"order", "payment", 3, 1}},
			hops: []hopDecl{
				{"order", "payment", Hop{rc(2, 500*ms)}},
				{"order", "payment", Hop{rc(3, 300*ms)}},
			},
			worst: "1.2s", worstPath: "order>payment",
			chains: []string{"order:1.2s:order>payment:1.2s,unbounded"},
		},
		{
			// 100 tries of 499995h (the policy's largest attempts and per-try timeout) pass
			// Forever: saturated, never wrapped to a small time, and said to be an overflow,
			// not a missing timeout. a -> b -> c: the overflow is b's, a's try bounded by b's.
			name:  "tries x per-try timeout past the longest duration",
			edges: []e{{"a", "b", 100, 1}, {"b", "c", 100, 1}},
			eps:   []ep{{"a", 1}},
			hops: []hopDecl{
				{"a", "b", Hop{{Name: "retrycap", Tries: 100, PerTry: 499995 * time.Hour}}},
				{"b", "c", Hop{{Name: "retrycap", Tries: 1 << 31, PerTry: 499995 * time.Hour, BackoffBase: time.Hour}}},
			},
			max:   time.Hour,
			worst: "unbounded", worstPath: "a>b>c",
			unbounded: "the tries, per-try timeouts and backoff on a -> b -> c add up past 2562047h47m16.854775807s, the longest time counted",
			chains:    []string{"a:unbounded:a>b>c:unbounded,unbounded,unbounded"},
			violations: []string{"a unbounded -> b unbounded -> c ? = unbounded > maxTimeToAnswer 1h0m0s (the tries, per-try timeouts and backoff " +
				"on a -> b -> c add up past 2562047h47m16.854775807s, the longest time counted)"},
			inversions: []string{"a -> b: retrycap per-try timeout 499995h0m0s < b's worst time unbounded: a retries while b still works on the abandoned try"},
			fixes:      []string{"bound b's worst time: a timeout of at most 499995h0m0s on b's own calls"},
			total:      1,
		},
		{
			// A hop without a timeout over a bounded one: b's 1h is finite, a's 2^40 tries of it
			// pass Forever. Still an overflow: every try is bounded below a.
			name:  "untimed tries of a bounded callee past the longest duration",
			edges: []e{{"a", "b", 1 << 40, 1}, {"b", "c", 1, 1}},
			eps:   []ep{{"a", 1}},
			hops: []hopDecl{
				{"a", "b", Hop{{Name: "retrycap", Tries: 1 << 40}}},
				{"b", "c", Hop{{Name: "retrycap", Tries: 1, PerTry: time.Hour}}},
			},
			worst: "unbounded", worstPath: "a>b>c",
			unbounded: "the tries, per-try timeouts and backoff on a -> b -> c add up past 2562047h47m16.854775807s, the longest time counted",
			chains:    []string{"a:unbounded:a>b>c:unbounded,1h0m0s,unbounded"},
		},
		{
			// The client's own attempts over a bounded entry: 2^40 x 1h.
			name:  "client attempts past the longest duration",
			edges: []e{{"a", "b", 1, 1}},
			eps:   []ep{{"a", 1 << 40}},
			hops:  []hopDecl{{"a", "b", Hop{{Name: "retrycap", Tries: 1, PerTry: time.Hour}}}},
			worst: "unbounded", worstPath: "a>b",
			unbounded: "the tries, per-try timeouts and backoff on a -> b add up past 2562047h47m16.854775807s, the longest time counted",
			chains:    []string{"a:unbounded:a>b:1h0m0s,unbounded"},
		},
		{
			// A route's per-try timeout at the entry bounds a leaf entrypoint's unknown time;
			// 2^40 route tries of 1h pass Forever.
			name:      "entry route tries past the longest duration",
			edges:     []e{{"a", "b", 1, 1}},
			eps:       []ep{{"b", 1}},
			entryHops: map[string]Hop{"b": {{Name: "HTTPRoute shop/web", Tries: 1 << 40, PerTry: time.Hour}}},
			worst:     "unbounded", worstPath: "b",
			unbounded: "the tries, per-try timeouts and backoff on b add up past 2562047h47m16.854775807s, the longest time counted",
			chains:    []string{"b:unbounded:b:unbounded"},
		},
		{
			// Linkerd drops its retry timeout on the last try: 2 x min(300ms, 1s) + the last
			// try, bounded by the response timeout 2s alone: 1s; + 25ms + 50ms = 1.675s. Read as
			// three tries of 300ms it was 975ms.
			name:  "Linkerd: the retry timeout does not bound the last try",
			edges: []e{{"web", "api", 3, 1}, {"api", "db", 1, 1}},
			hops: []hopDecl{
				{"web", "api", Hop{{Name: "Linkerd Service shop/api", Tries: 3, PerTry: 300 * ms, LastTry: 2 * time.Second, BackoffBase: 25 * ms, BackoffMax: 250 * ms}}},
				{"api", "db", Hop{rc(1, time.Second)}},
			},
			worst: "1.675s", worstPath: "web>api>db",
			chains:     []string{"web:1.675s:web>api>db:1.675s,1s,unbounded"},
			inversions: []string{"web -> api: Linkerd Service shop/api per-try timeout 300ms < api's worst time 1s: web retries while api still works on the abandoned try"},
			fixes:      []string{"Linkerd Service shop/api per-try timeout for api >= 1s, or a timeout of at most 300ms on api's own calls"},
			total:      1,
		},
		{
			// Nothing bounds the last try to a leaf: unbounded (read as three tries of 300ms,
			// 975ms), unless the route's request timeout (on the other entry's hop) does.
			name:  "Linkerd: a last try to a leaf with no response timeout is unbounded",
			edges: []e{{"web", "db", 3, 1}, {"admin", "db", 3, 1}},
			hops: []hopDecl{
				{"web", "db", Hop{{Name: "Linkerd Service shop/db", Tries: 3, PerTry: 300 * ms, LastTry: Forever, BackoffBase: 25 * ms, BackoffMax: 250 * ms}}},
				{"admin", "db", Hop{{Name: "Linkerd Service shop/db", Tries: 3, PerTry: 300 * ms, LastTry: Forever, Timeout: 5 * time.Second, BackoffBase: 25 * ms, BackoffMax: 250 * ms}}},
			},
			worst: "unbounded", worstPath: "web>db",
			unbounded: "no timeout on web -> db, and db's own time is unknown",
			chains:    []string{"web:unbounded:web>db:unbounded,unbounded", "admin:5s:admin>db:5s,unbounded"},
		},
		{
			// Istio's fault.delay (7s) is held once per request the sidecar receives, before its
			// tries and outside its route timeout: api -> db 1 x 400ms; the sidecar min(1s,
			// 3 x 400ms + 25ms + 50ms) + 7s = 8s, over web's per-try 5s (an inversion); web
			// 2 x 5s + 100ms = 10.1s (2.1s without the delay). Over a leaf with no timeout the
			// delay leaves the time unknown: admin's per-try 2s bounds it, no inversion.
			name:  "Istio fault delay: once before the tries, outside the timeouts",
			edges: []e{{"web", "api", 6, 1}, {"api", "db", 1, 1}, {"admin", "db", 3, 1}},
			eps:   []ep{{"web", 1}, {"admin", 1}},
			hops: []hopDecl{
				{"web", "api", Hop{rc(2, 5*time.Second), delayed(istio(3, 0, time.Second), 7*time.Second)}},
				{"api", "db", Hop{rc(1, 400*ms)}},
				{"admin", "db", Hop{rc(1, 2*time.Second), delayed(istio(3, 0, 0), 7*time.Second)}},
			},
			worst: "10.1s", worstPath: "web>api>db",
			chains:     []string{"web:10.1s:web>api>db:10.1s,400ms,unbounded", "admin:2s:admin>db:2s,unbounded"},
			inversions: []string{"web -> api: retrycap per-try timeout 5s < Istio VirtualService shop/payment's worst time on api 8s: web retries while api still works on the abandoned try"},
			fixes:      []string{"retrycap per-try timeout for api >= 8s, or Istio VirtualService shop/payment finishing within 5s (its fault delay 7s + its tries x per-try timeout + backoff, or + its timeout)"},
			total:      1,
		},
		{
			// Fan-out: 4 calls to payment are timed as one.
			name:  "fan-out timed as one call",
			edges: []e{{"order", "payment", 2, 4}, {"order", "stock", 1, 1}},
			hops: []hopDecl{
				{"order", "payment", Hop{{Name: "retrycap", Tries: 2, PerTry: 300 * ms}}},
				{"order", "stock", Hop{{Name: "retrycap", Tries: 1, PerTry: 700 * ms}}},
			},
			worst: "700ms", worstPath: "order>stock",
			chains: []string{"order:700ms:order>stock:700ms,unbounded"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Every caller is a selected service, as a workload that declares its upstreams is.
			var callers []string
			for _, x := range tc.edges {
				callers = append(callers, x.from)
			}
			g := build(callers, tc.edges, tc.eps)
			for i, h := range tc.hops {
				if i > 0 && tc.hops[i-1].from == h.from && tc.hops[i-1].to == h.to {
					g.AddHop(h.from, h.to, h.hop)
				} else if !g.SetHop(h.from, h.to, h.hop) {
					t.Fatalf("no edge %s -> %s", h.from, h.to)
				}
			}
			for n, h := range tc.entryHops {
				g.SetEntryHop(n, h)
			}
			ta := AnalyzeTime(g, tc.max)
			// The same hops kept apart from the graph give the same analysis.
			tt := NewTiming(g)
			for i, h := range tc.hops {
				if i > 0 && tc.hops[i-1].from == h.from && tc.hops[i-1].to == h.to {
					tt.AddHop(h.from, h.to, h.hop)
				} else {
					tt.SetHop(h.from, h.to, h.hop)
				}
			}
			for n, h := range tc.entryHops {
				tt.AddEntryHop(n, 0, h)
			}
			if tw := AnalyzeTimeWith(g, tt, tc.max); !reflect.DeepEqual(tw, ta) {
				t.Errorf("AnalyzeTimeWith differs:\n%+v\n%+v", tw, ta)
			}
			if got := FormatTime(ta.Worst); got != tc.worst {
				t.Errorf("worst %s, want %s", got, tc.worst)
			}
			if got := strings.Join(ta.WorstPath, ">"); got != tc.worstPath {
				t.Errorf("worst path %s, want %s", got, tc.worstPath)
			}
			if ta.WorstUnbounded != tc.unbounded {
				t.Errorf("unbounded %q, want %q", ta.WorstUnbounded, tc.unbounded)
			}
			var chains []string
			for _, c := range ta.Chains {
				var ts []string
				for _, d := range c.Times {
					ts = append(ts, FormatTime(d))
				}
				chains = append(chains, c.Entrypoint+":"+FormatTime(c.Time)+":"+strings.Join(c.Path, ">")+":"+strings.Join(ts, ","))
			}
			if !reflect.DeepEqual(chains, tc.chains) {
				t.Errorf("chains\n got %q\nwant %q", chains, tc.chains)
			}
			var msgs, fixes, vs []string
			for _, inv := range ta.Inversions {
				msgs = append(msgs, inv.Message)
				fixes = append(fixes, inv.Fix)
			}
			for _, v := range ta.Violations {
				vs = append(vs, v.Message)
			}
			if !reflect.DeepEqual(msgs, tc.inversions) {
				t.Errorf("inversions\n got %q\nwant %q", msgs, tc.inversions)
			}
			if !reflect.DeepEqual(fixes, tc.fixes) {
				t.Errorf("fixes\n got %q\nwant %q", fixes, tc.fixes)
			}
			if !reflect.DeepEqual(vs, tc.violations) {
				t.Errorf("violations\n got %q\nwant %q", vs, tc.violations)
			}
			if ta.InversionsTotal != tc.total {
				t.Errorf("inversions total %d, want %d", ta.InversionsTotal, tc.total)
			}
			if ta.OverMax() != (len(tc.violations) > 0) {
				t.Errorf("OverMax %v", ta.OverMax())
			}
		})
	}
}

func TestBackoffTotal(t *testing.T) {
	for _, tc := range []struct {
		l    TimeLayer
		want time.Duration
	}{
		{TimeLayer{Tries: 1, BackoffBase: 100 * ms}, 0},
		{TimeLayer{Tries: 3, BackoffBase: 100 * ms, BackoffMax: 2 * time.Second}, 300 * ms},
		// 100 + 200 + 400 + 800 + 5 x 1000 ms.
		{TimeLayer{Tries: 10, BackoffBase: 100 * ms, BackoffMax: time.Second}, 6500 * ms},
		// No cap: 25 + 50 + 100 ms.
		{TimeLayer{Tries: 4, BackoffBase: 25 * ms}, 175 * ms},
		{TimeLayer{Tries: 3}, 0},
		{TimeLayer{Tries: 1 << 62, BackoffBase: time.Second, BackoffMax: time.Hour}, Forever},
		{TimeLayer{Tries: 100, BackoffBase: time.Hour}, Forever},
	} {
		if got := tc.l.BackoffTotal(); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.l, got, tc.want)
		}
	}
}

// TestGraphEditsKeepHops: inserting and removing edges and renumbering nodes keeps each hop on
// its edge and each entry hop on its entrypoint.
func TestGraphEditsKeepHops(t *testing.T) {
	g := build([]string{"a"}, []e{{"a", "b", 2, 1}}, []ep{{"a", 1}})
	g.SetHop("a", "b", Hop{{Name: "retrycap", Tries: 2, PerTry: time.Second}})
	g.SetEntryHop("a", Hop{{Name: "route", Tries: 1, Timeout: 1500 * ms}})
	if err := g.InsertEdge(0, "z", "a", 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := g.SelectAt(0, "z"); err != nil {
		t.Fatal(err)
	}
	if got := FormatTime(AnalyzeTime(g, 0).Worst); got != "1.5s" {
		t.Fatalf("after insert and renumber: %s", got)
	}
	g.RemoveEdge("z", "a")
	g.SetHop("a", "b", Hop{{Name: "retrycap", Tries: 2, PerTry: 500 * ms}})
	if got := FormatTime(AnalyzeTime(g, 0).Worst); got != "1s" {
		t.Fatalf("after remove and replace: %s", got)
	}
}

// pathTime is the time of one path from the node below up: the composition of its hops' layer
// functions, the leaf's time unknown. The per-node maximum of AnalyzeTime must equal the
// maximum of this over every path, since every layer's function is non-decreasing.
func pathTime(g *Graph, path []string, k int64) int64 {
	x := int64(Forever)
	for i := len(path) - 2; i >= 0; i-- {
		ed, _ := g.Edge(path[i], path[i+1])
		eid, _ := g.EdgeIndex(path[i], path[i+1])
		r := g.time.hopOf(int32(eid))
		if r < 0 {
			x = mul(ed.Attempts, x)
			continue
		}
		worst := int64(-1)
		for ; r >= 0; r = g.time.hops[r].next {
			y := x
			h := g.time.hops[r].hop
			for j := len(h) - 1; j >= 0; j-- {
				l := h[j]
				try := y
				if l.PerTry > 0 && int64(l.PerTry) < try {
					try = int64(l.PerTry)
				}
				if l.LastTry > 0 && l.Tries > 1 {
					// Every try but the last within PerTry, the last within LastTry.
					y = add(add(mul(l.Tries-1, try), min(int64(max(l.LastTry, l.PerTry)), y)), int64(l.BackoffTotal()))
				} else {
					y = add(mul(max(l.Tries, 1), try), int64(l.BackoffTotal()))
				}
				if l.Timeout > 0 && int64(l.Timeout) < y {
					y = int64(l.Timeout)
				}
				y = add(y, int64(l.Delay)) // held before the tries, outside the timeouts
			}
			worst = max(worst, y)
		}
		x = worst
	}
	return mul(k, x)
}

func randomLayer(r *rand.Rand) TimeLayer {
	pick := func(p int) time.Duration {
		if r.IntN(100) < p {
			return time.Duration(1+r.IntN(50)) * 10 * ms
		}
		return 0
	}
	l := TimeLayer{Name: "l", Tries: 1 + r.Int64N(4), PerTry: pick(70), Timeout: pick(20), BackoffBase: pick(50), BackoffMax: pick(50)}
	if l.PerTry > 0 && r.IntN(5) == 0 {
		// Linkerd's: the last try bounded apart, or not at all.
		l.LastTry = Forever
		if r.IntN(2) == 0 {
			l.LastTry = l.PerTry + pick(100)
		}
	}
	if r.IntN(6) == 0 {
		l.Delay = pick(100) // Istio's fault.delay
	}
	return l
}

// TestAnalyzeTimeProperty checks, on random DAGs with random layers (some edges with none, some
// with two declarations), that each chain's time is the worst over every path from its
// entrypoint, that the chain's path takes that time, and that raising any layer's tries or
// per-try timeout never lowers the worst time.
func TestAnalyzeTimeProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(29, 1))
	for iter := range 300 {
		g := randomDAG(r, 2+r.IntN(8), 3)
		for _, ed := range g.Edges() {
			if r.IntN(5) == 0 {
				continue
			}
			n := 1 + r.IntN(3)
			h := make(Hop, n)
			for i := range h {
				h[i] = randomLayer(r)
			}
			g.SetHop(ed.From, ed.To, h)
			if r.IntN(4) == 0 {
				g.AddHop(ed.From, ed.To, Hop{randomLayer(r)})
			}
		}
		ta := AnalyzeTime(g, 0)
		var ents []Entrypoint
		c := newCore(g, nil)
		for _, en := range c.ents {
			ents = append(ents, Entrypoint{Service: g.names[en.node], ClientAttempts: en.k})
		}
		c.release()
		want := map[string]int64{}
		for _, en := range ents {
			var walk func(path []string)
			walk = func(path []string) {
				v := path[len(path)-1]
				out := g.OutEdges(v)
				if len(out) == 0 {
					want[en.Service] = max(want[en.Service], pathTime(g, path, en.ClientAttempts))
					return
				}
				for _, ed := range out {
					walk(append(append([]string(nil), path...), ed.To))
				}
			}
			want[en.Service] = -1
			walk([]string{en.Service})
		}
		if len(ta.Chains) != min(len(ents), MaxChains) {
			t.Fatalf("iter %d: %d chains for %d entrypoints", iter, len(ta.Chains), len(ents))
		}
		for _, ch := range ta.Chains {
			if int64(ch.Time) != want[ch.Entrypoint] {
				t.Fatalf("iter %d: %s: %v, brute force %v", iter, ch.Entrypoint, ch.Time, time.Duration(want[ch.Entrypoint]))
			}
			if got := pathTime(g, ch.Path, ch.ClientAttempts); got != int64(ch.Time) {
				t.Fatalf("iter %d: %s: path %v takes %v, chain says %v", iter, ch.Entrypoint, ch.Path, time.Duration(got), ch.Time)
			}
		}
		// Monotone: raise one layer of one hop, set again through the API (the compiled
		// layers and the hops' classes follow it).
		var timed []Edge
		for _, ed := range g.Edges() {
			if e, ok := g.edgeIdx[uint64(uint32(g.ids[ed.From]))<<32|uint64(uint32(g.ids[ed.To]))]; ok && g.time.hopOf(e) >= 0 {
				timed = append(timed, ed)
			}
		}
		if len(timed) == 0 {
			continue
		}
		ed := timed[r.IntN(len(timed))]
		e := g.edgeIdx[uint64(uint32(g.ids[ed.From]))<<32|uint64(uint32(g.ids[ed.To]))]
		var decl []Hop // declaration order: the records are linked newest first
		for ri := g.time.hopOf(e); ri >= 0; ri = g.time.hops[ri].next {
			decl = append([]Hop{slices.Clone(g.time.hops[ri].hop)}, decl...)
		}
		hi := r.IntN(len(decl))
		if len(decl[hi]) == 0 {
			continue
		}
		li := r.IntN(len(decl[hi]))
		decl[hi][li].Tries++
		if decl[hi][li].PerTry > 0 {
			decl[hi][li].PerTry += 10 * ms
		}
		for i, h := range decl {
			if i == 0 {
				g.SetHop(ed.From, ed.To, h)
			} else {
				g.AddHop(ed.From, ed.To, h)
			}
		}
		tb := AnalyzeTime(g, 0)
		for i := range ta.Chains {
			for j := range tb.Chains {
				if ta.Chains[i].Entrypoint == tb.Chains[j].Entrypoint && tb.Chains[j].Time < ta.Chains[i].Time {
					t.Fatalf("iter %d: raising a layer lowered %s from %v to %v", iter, ta.Chains[i].Entrypoint, ta.Chains[i].Time, tb.Chains[j].Time)
				}
			}
		}
	}
}

// TestEntryHopClientTries: a builder that multiplies a gateway route's tries into the client
// attempts (2 x 3 = 6 in the graph) gives the client's own 2 with the route's hop; the route's 3
// tries are then timed once, not twice.
func TestEntryHopClientTries(t *testing.T) {
	g := build([]string{"web"}, []e{{"web", "db", 1, 1}}, []ep{{"web", 6}})
	tt := NewTiming(g)
	tt.SetHop("web", "db", Hop{rc(1, 500*ms)})
	route := Hop{{Name: "HTTPRoute shop/web", Tries: 3, PerTry: time.Second, BackoffBase: 25 * ms, BackoffMax: 250 * ms}}
	if !tt.AddEntryHop("web", 2, route) || tt.AddEntryHop("nope", 2, route) {
		t.Fatal("AddEntryHop: a node of the graph, and not another")
	}
	// 2 x (3 x min(1s, 500ms) + 25ms + 50ms) = 3.15s.
	if got := FormatTime(AnalyzeTimeWith(g, tt, 0).Worst); got != "3.15s" {
		t.Fatalf("worst %s, want 3.15s", got)
	}
	if g.Has("nope") {
		t.Fatal("AddEntryHop added a node")
	}
}

// TestAnalyzeTimeRecycledBuffers: the per-node results come from a pool; a node that was a leaf
// in the graph analysed before must not stay one (it would hide an inversion over it).
func TestAnalyzeTimeRecycledBuffers(t *testing.T) {
	g1 := build([]string{"a"}, []e{{"a", "b", 1, 1}}, nil)
	g2 := build([]string{"a"}, []e{{"a", "b", 3, 1}, {"b", "c", 2, 1}}, nil)
	g2.SetHop("a", "b", Hop{{Name: "retrycap", Tries: 3, PerTry: time.Second}})
	g2.SetHop("b", "c", Hop{{Name: "retrycap", Tries: 2, PerTry: 2 * time.Second}})
	for range 20 {
		AnalyzeTime(g1, 0)
		if ta := AnalyzeTime(g2, 0); ta.InversionsTotal != 1 {
			t.Fatalf("inversions %d, want 1 (a -> b: 1s < 4s)", ta.InversionsTotal)
		}
	}
}
