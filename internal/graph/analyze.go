package graph

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Limits on what Analyze lists, matching the RetryPolicy status.
const (
	MaxChains     = 50
	MaxViolations = 20
)

// ServiceLoad is a number of requests at one service.
type ServiceLoad struct {
	Service  string
	Requests int64
}

// Chain is the worst path from one entrypoint.
type Chain struct {
	Entrypoint     string
	ClientAttempts int64
	// Amplification is ClientAttempts times the worst product of attempts below the entrypoint.
	Amplification int64
	Path          []string
}

// Violation is a path over the cap, with the planner's fix for it.
type Violation struct {
	Path []string
	// Factors are the client attempts at Path[0], then each edge's attempts along Path.
	Factors       []int64
	Amplification int64
	// Message explains the product: "client -x2-> gateway -x3-> order = 6 > cap 4".
	Message string
	// Suggestion is the whole-graph planner's lowered values on this path, in path order:
	// "gateway: order=2; order: payment=1", or why no rewrite fits.
	Suggestion string
}

// Analysis is everything Analyze computes for one graph and cap.
type Analysis struct {
	Cap      int64
	Services int
	Edges    int
	// Amplification is the worst product of client attempts and attempts along any path from an
	// entrypoint; Saturated when a retry cycle makes it unbounded.
	Amplification int64
	// Bounded is false when the graph has a retry cycle (a cycle with an edge of attempts > 1).
	Bounded bool
	// WorstPath is the path of the worst chain.
	WorstPath []string
	// WorstCaseLoad is the busiest service: the most requests one entry request can cause there
	// when everything below fails, fan-out included. Any cycle reachable from an entrypoint makes
	// the load of its services (and all below) saturate: a request can go round it without end.
	WorstCaseLoad ServiceLoad
	// Entrypoints are the effective entrypoints: the explicit ones, else the defaults.
	Entrypoints []Entrypoint
	// Chains has one entry per entrypoint, worst first, ties by name; at most MaxChains.
	Chains []Chain
	// Cycle is a concrete retry cycle, e.g. [a b c a], when !Bounded.
	Cycle []string
	// Violations are the over-cap paths, worst first, at most MaxViolations (see Analyze).
	Violations []Violation
}

// WithinCap reports whether every chain is bounded and within the cap.
func (a *Analysis) WithinCap() bool { return a.Bounded && a.Amplification <= a.Cap }

// Analyze computes amplification, worst paths, chains, worst-case load, retry cycles and
// violations, in O(V+E) plus the cost of listing at most MaxViolations paths.
//
// Violations: for every edge that lies on some over-cap path, the worst path through it (worst
// path into its source, the edge, worst path below its target) is over the cap; these paths,
// deduplicated, worst first (ties by path), at most MaxViolations, are the violations, together
// with every over-cap chain (which covers an entrypoint with too many client attempts and no
// edges). So a simple chain gives one violation, a diamond one per branch, and every edge that
// must change appears in some violation before truncation. When the graph has a retry cycle
// the only violation is the cycle, since every number below it is unbounded.
func Analyze(g *Graph, cap int64) *Analysis {
	c := newCore(g, g.eAtt)
	c.forward(true)
	c.backward()
	a := &Analysis{Cap: cap, Services: c.n, Edges: len(g.eFrom), Bounded: !c.anyRetry}

	for _, en := range c.ents {
		a.Entrypoints = append(a.Entrypoints, Entrypoint{Service: g.names[en.node], ClientAttempts: en.k})
	}
	// Chains: rank every entrypoint, build paths only for those listed.
	type ranked struct {
		en  entry
		amp int64
	}
	rs := make([]ranked, len(c.ents))
	for i, en := range c.ents {
		rs[i] = ranked{en, mul(en.k, c.d[en.node])}
	}
	slices.SortFunc(rs, func(x, y ranked) int {
		if x.amp != y.amp {
			if x.amp > y.amp {
				return -1
			}
			return 1
		}
		return strings.Compare(g.names[x.en.node], g.names[y.en.node])
	})
	for i, r := range rs {
		if i == MaxChains {
			break
		}
		sn, _ := c.suffix(r.en.node)
		a.Chains = append(a.Chains, Chain{Entrypoint: g.names[r.en.node], ClientAttempts: r.en.k, Amplification: r.amp, Path: c.names(sn)})
	}
	if len(a.Chains) > 0 {
		a.Amplification = a.Chains[0].Amplification
		a.WorstPath = a.Chains[0].Path
	}
	if c.load != nil {
		for v, l := range c.load {
			if l > a.WorstCaseLoad.Requests {
				a.WorstCaseLoad = ServiceLoad{Service: g.names[v], Requests: l}
			}
		}
	}
	if !a.Bounded {
		a.Amplification = Saturated
		cyc := c.retryCycle(c.retryComp)
		a.Cycle = c.names(cyc)
		factors := []int64{1}
		var fix []string
		for i := 0; i+1 < len(cyc); i++ {
			e := c.edgeBetween(cyc[i], cyc[i+1])
			factors = append(factors, c.att[e])
			if c.att[e] > 1 {
				fix = append(fix, g.names[cyc[i]]+": "+g.names[cyc[i+1]]+"=1")
			}
		}
		a.Violations = []Violation{{
			Path: a.Cycle, Factors: factors, Amplification: Saturated,
			Message:    "retry cycle " + renderPath(a.Cycle, factors[1:]) + ": amplification unbounded > cap " + strconv.FormatInt(cap, 10),
			Suggestion: strings.Join(fix, "; "),
		}}
		return a
	}
	if a.Amplification > cap {
		a.Violations = c.violations(cap, a.Chains)
	}
	return a
}

type cand struct {
	amp int64
	e   int32
}

// before orders candidates worst first, then by edge id (declaration order).
func (x cand) before(y cand) bool {
	return x.amp > y.amp || (x.amp == y.amp && x.e < y.e)
}

func (c *core) violations(cap int64, chains []Chain) []Violation {
	g := c.g
	// One pass per round over the edges, keeping only the best k: no per-edge allocation.
	edgeAmp := func(e int) (int64, bool) {
		f, t := g.eFrom[e], g.eTo[e]
		if c.h[f] == 0 || (c.cyc != nil && c.comp[f] == c.comp[t]) {
			return 0, false
		}
		amp := mul(mul(c.h[f], c.att[e]), c.d[t])
		return amp, amp > cap
	}
	topK := func(k int) []cand {
		best := make([]cand, 0, k+1)
		for e := range g.eFrom {
			amp, over := edgeAmp(e)
			if !over {
				continue
			}
			x := cand{amp, int32(e)}
			if len(best) == k && !x.before(best[k-1]) {
				continue
			}
			i := len(best)
			best = append(best, x)
			for i > 0 && x.before(best[i-1]) {
				best[i] = best[i-1]
				i--
			}
			best[i] = x
			if len(best) > k {
				best = best[:k]
			}
		}
		return best
	}
	seen := map[string]bool{}
	var vs []Violation
	var ids [][]int32
	addPath := func(path []int32, factors []int64) {
		key := pathKey(path)
		if seen[key] {
			return
		}
		seen[key] = true
		names := c.names(path)
		amp := Product(factors)
		vs = append(vs, Violation{Path: names, Factors: factors, Amplification: amp, Message: Explain(names, factors, cap)})
		ids = append(ids, path)
	}
	// Several edges can share their worst path: take more candidates until MaxViolations
	// distinct paths are found or none are left.
	for k, done := MaxViolations, 0; len(vs) < MaxViolations; k *= 4 {
		best := topK(k)
		for _, x := range best[done:] {
			if len(vs) == MaxViolations {
				break
			}
			addPath(c.throughEdge(x.e))
		}
		if len(best) < k {
			break // every over-cap edge has been seen
		}
		done = len(best)
	}
	for _, ch := range chains {
		if ch.Amplification <= cap {
			break
		}
		node := g.ids[ch.Entrypoint]
		sn, se := c.suffix(node)
		factors := []int64{ch.ClientAttempts}
		for _, e := range se {
			factors = append(factors, c.att[e])
		}
		addPath(sn, factors)
	}
	planned, _, reason := c.planRewrite(max(cap, 1), false)
	for i := range vs {
		if reason != "" {
			vs[i].Suggestion = reason
		} else {
			vs[i].Suggestion = c.suggest(ids[i], planned)
		}
	}
	slices.SortFunc(vs, func(x, y Violation) int {
		if x.Amplification != y.Amplification {
			if x.Amplification > y.Amplification {
				return -1
			}
			return 1
		}
		return slices.Compare(x.Path, y.Path)
	})
	if len(vs) > MaxViolations {
		vs = vs[:MaxViolations]
	}
	return vs
}

// pathKey encodes a path of ids as a map key without formatting numbers.
func pathKey(p []int32) string {
	b := make([]byte, 4*len(p))
	for i, v := range p {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	return string(b)
}

// Explain renders a chain from outside the cluster, the form used in violations:
// "client -x2-> gateway -x3-> order -x3-> payment = 18 > cap 4". factors are the client attempts
// then each edge's attempts (len(path) values).
func Explain(path []string, factors []int64, cap int64) string {
	return explain(path, factors, Product(factors), cap, true)
}

// ExplainPath renders a path that starts at a service, the form used at admission:
// "gateway -x3-> order -x3-> payment = 9 > cap 4". factors are as for Explain; the
// "client -xK->" prefix is written only when K > 1, so the factors shown always multiply to the
// product shown.
func ExplainPath(path []string, factors []int64, cap int64) string {
	return explain(path, factors, Product(factors), cap, len(factors) > 0 && factors[0] > 1)
}

func explain(path []string, factors []int64, amp, cap int64, client bool) string {
	var b strings.Builder
	if client && len(factors) > 0 {
		b.WriteString("client -x")
		b.WriteString(strconv.FormatInt(factors[0], 10))
		b.WriteString("-> ")
	}
	var edges []int64
	if len(factors) > 0 {
		edges = factors[1:]
	}
	b.WriteString(renderPath(path, edges))
	b.WriteString(" = ")
	b.WriteString(FormatAmount(amp))
	if amp > cap {
		b.WriteString(" > cap ")
	} else {
		b.WriteString(" <= cap ")
	}
	b.WriteString(strconv.FormatInt(cap, 10))
	return b.String()
}

// renderPath renders "a -x3-> b -x1-> c" with edges[i] the attempts of path[i]->path[i+1].
func renderPath(path []string, edges []int64) string {
	var b strings.Builder
	for i, s := range path {
		if i > 0 {
			b.WriteString(" -x")
			if i-1 < len(edges) {
				b.WriteString(strconv.FormatInt(edges[i-1], 10))
			} else {
				b.WriteString("?")
			}
			b.WriteString("-> ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// FormatAmount renders a product or a load; the saturated value reads as such.
func FormatAmount(x int64) string {
	if x == Saturated {
		return fmt.Sprintf("%d (saturated)", x)
	}
	return strconv.FormatInt(x, 10)
}
