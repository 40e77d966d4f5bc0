package workload

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

// Levers names what else can bring a chain over the cap within it when the judged object's own
// value cannot (a workload at 1 attempt, a route at its fewest tries): each factor above 1 on
// path (factors: the client attempts at path[0], then each edge's), as the field that sets it,
// then the policy's cap: "RetryPolicy shop/checkout spec.entrypoints[0].clientAttempts: 2,
// Deployment shop/gateway retrycap.dev/upstreams order=5, VirtualService shop/order
// spec.http[0].retries.attempts (3 tries), or RetryPolicy shop/checkout spec.maxAmplification: 4".
// "Lower the callers' attempts" named none of them, and was wrong where the callers were at 1
// and the tries were a mesh route's. skip says what is the judged object's own; own are edges r
// does not record (the incoming workload's, IncomingEdges), read in place of r's.
func (r *Result) Levers(path []string, factors []int64, skip LeverSkip, own ...MeshEdge) string {
	return leversOr(boundLevers(r.leverList(path, factors, skip, own)), fmt.Sprintf("%s spec.maxAmplification: %d", r.Policy.Ref(), r.Cap))
}

// TimeLevers is Levers for a chain over the policy's maxTimeToAnswer (path and factors as
// Levers takes them; need the chain's time, unbounded: none): wait, the route the chain waits
// on as the caller names it, then the application attempts above 1 on the chain (each
// multiplies the wait), then the policy's maximum: "lower the response timeout of HTTPRoute
// shop/pay (2 tries, response timeout 11s), Deployment shop/gateway retrycap.dev/upstreams
// pay=3, or raise RetryPolicy shop/checkout spec.maxTimeToAnswer: 27.075s". A mesh route's
// tries elsewhere on the chain are not named: the time model waits on the route of the longest
// bound, which the tries of another route of the hop do not lengthen (advice19).
func (r *Result) TimeLevers(path []string, factors []int64, skip LeverSkip, wait string, need time.Duration) string {
	skip.AppOnly = true
	out := boundLevers(r.leverList(path, factors, skip, nil))
	if wait != "" {
		out = append([]string{wait}, out...)
	}
	limit := fmt.Sprintf("%s spec.maxTimeToAnswer: %s", r.Policy.Ref(), need)
	if need <= 0 || need == math.MaxInt64 {
		limit = fmt.Sprintf("%s spec.maxTimeToAnswer", r.Policy.Ref())
	}
	return leversOr(out, limit)
}

func leversOr(out []string, limit string) string {
	if len(out) == 0 {
		return "raise " + limit
	}
	return "lower " + strings.Join(out, ", ") + ", or raise " + limit
}

// MaxLevers is how many levers a message names: those of the most tries, in the chain's order,
// then how many more there are ("and 30 more of at most 2 tries each"). A 40-hop chain named 38
// fields: its Audit warning (5,247 bytes) was over what the API server keeps of a request's
// warnings (k8s.io/apiserver pkg/endpoints/filters/warning.go: past 4,096 runes in all, each is
// cut to 256), so the gate's budget cut it mid-lever, the policy's maximum and the mode with it
// (adv20).
const MaxLevers = 8

// lever is one field Levers names, with the tries it multiplies the chain by.
type lever struct {
	text  string
	tries int64
}

// boundLevers is ls's texts, at most MaxLevers of them (the most tries first chosen, ties in the
// chain's order, shown in the chain's order) and a last item saying how many more there are.
func boundLevers(ls []lever) []string {
	out := make([]string, 0, min(len(ls), MaxLevers+1))
	if len(ls) <= MaxLevers {
		for _, l := range ls {
			out = append(out, l.text)
		}
		return out
	}
	idx := make([]int, len(ls))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(ls[b].tries, ls[a].tries) })
	keep := make([]bool, len(ls))
	for _, i := range idx[:MaxLevers] {
		keep[i] = true
	}
	most := int64(0)
	for i, l := range ls {
		if keep[i] {
			out = append(out, l.text)
		} else {
			most = max(most, l.tries)
		}
	}
	return append(out, fmt.Sprintf("and %d more of at most %d tries each", len(ls)-MaxLevers, most))
}

// leverList is Levers' list of fields, in the chain's order.
func (r *Result) leverList(path []string, factors []int64, skip LeverSkip, own []MeshEdge) []lever {
	var out []lever
	add := func(s string, tries int64) {
		for _, o := range out {
			if o.text == s {
				return
			}
		}
		out = append(out, lever{s, tries})
	}
	layers := func(m MeshEdge, from, to string) {
		if [2]string{from, to} == skip.Layers || skip.AppOnly {
			return
		}
		for _, l := range m.Layers {
			switch {
			case l.Tries <= 1 || l.Object != "" && l.Object == skip.Object:
			case l.Object != "" && l.FieldPath != "":
				add(fmt.Sprintf("%s %s (%d tries)", l.Object, l.FieldPath, l.Tries), l.Tries)
			default:
				// A default no object writes: the route to declare is the lever.
				add(fmt.Sprintf("the %d tries of %s -> %s (%s)", l.Tries, from, to, l.Note), l.Tries)
			}
		}
	}
	if len(path) > 0 && len(factors) == len(path) && factors[0] > 1 {
		m, meshed := r.MeshEntry[path[0]]
		app := factors[0]
		if meshed {
			layers(m, "client", path[0])
			app = m.App
		}
		if app > 1 {
			add(r.entryLever(path[0], app), app)
		}
	}
	for k := 1; k < len(path) && k < len(factors); k++ {
		if factors[k] <= 1 {
			continue
		}
		from, to := path[k-1], path[k]
		app := factors[k]
		m, meshed := r.MeshEdges[[2]string{from, to}]
		for _, e := range own {
			if e.From == from && e.To == to {
				m, meshed = e, true
			}
		}
		if meshed {
			layers(m, from, to)
			app = m.App
		}
		if app <= 1 || [2]string{from, to} == skip.App {
			continue
		}
		for _, c := range r.callers(from, to) {
			add(c.text, c.tries)
		}
	}
	return out
}

// LeverSkip is what Levers leaves out as the judged object's own.
type LeverSkip struct {
	// App is the edge whose application attempts are the object's (the workload gate's
	// incoming workload: at 1 already).
	App [2]string
	// Object is the object whose layers are judged (the mesh gate's: its field is at its fewest).
	Object string
	// Layers is the edge whose layers the message names otherwise (the mesh gate's released
	// calls: "keep a route of ... for them").
	Layers [2]string
	// AppOnly leaves out every mesh layer (TimeLevers).
	AppOnly bool
}

// entryLever is the field of the client attempts at entrypoint node: the policy's
// spec.entrypoints[i].clientAttempts.
func (r *Result) entryLever(node string, n int64) string {
	for i, e := range r.Policy.Spec().Entrypoints {
		if en, _ := r.Policy.Entrypoint(e.Service); en == node {
			return fmt.Sprintf("%s spec.entrypoints[%d].clientAttempts: %d", r.Policy.Ref(), i, n)
		}
	}
	return fmt.Sprintf("the client attempts %d at entrypoint %s", n, node)
}

// callers are the selected workloads whose edges leave node from and declare to with more than
// 1 attempt, each as its annotation's entry: "Deployment shop/gateway retrycap.dev/upstreams
// order=5" (the policy's default where the entry writes no count: "order (default 3)").
func (r *Result) callers(from, to string) []lever {
	var out []lever
	def := defaultAttempts(r.Policy.Spec())
	r.eachEntry(from, to, func(x *Parsed, u, written annotations.Upstream) {
		name := written.Name
		if written.Port > 0 {
			name += ":" + strconv.Itoa(int(written.Port))
		}
		switch {
		case u.Attempts > 1:
			out = append(out, lever{fmt.Sprintf("%s %s %s=%d", x.Workload, annotations.Upstreams, name, u.Attempts), int64(u.Attempts)})
		case u.Attempts == 0 && def > 1:
			out = append(out, lever{fmt.Sprintf("%s %s %s (the policy's defaultAttempts %d)", x.Workload, annotations.Upstreams, name, def), def})
		}
	})
	return out
}

// eachEntry calls fn for each annotation entry of a kept workload that is node from and calls
// node to (not an SDK's own upstream), with the entry as parsed (u) and as the annotation writes
// it (written: "www.googleapis.com:80", not the node's normalised name; Parse keeps the order of
// ParseUpstreams), in r.kept's order: what callers and TimeoutLevers both walk.
func (r *Result) eachEntry(from, to string, fn func(x *Parsed, u, written annotations.Upstream)) {
	for _, x := range r.kept {
		at := false
		for _, n := range r.Nodes(x.key) {
			at = at || n == from
		}
		if !at {
			continue
		}
		written, err := annotations.ParseUpstreams(x.Workload.Annotations.Get(annotations.Upstreams))
		if err != nil || len(written) != len(x.upstreams) {
			written = x.upstreams
		}
		for i, u := range x.upstreams {
			if r.Policy.UpstreamNode(u.Name, x.Workload.Namespace) != to || x.SDKUpstream(i) {
				continue
			}
			fn(x, u, written[i])
		}
	}
}

// TimeoutLevers are the application per-try timeouts that bound ch's time: on each edge of ch,
// each selected caller's timeout shorter than the callee's worst time (what the hop waits on
// per try, the callee's own time being longer or unknown), in the unit of what sets it: "the
// per-try timeout of Deployment shop/order retrycap.dev/upstreams payment=3/2s" where the
// annotation writes it, else "RetryPolicy shop/checkout spec.retry.perTryTimeout: 2s" (once). At
// most MaxLevers, then how many more. A timeout at or above the callee's time does not bound
// the chain, and a mesh route's timeouts are the mesh gate's (advice19).
func (r *Result) TimeoutLevers(ch graph.TimeChain) []string {
	var out []string
	seen := map[string]bool{}
	spec := r.Policy.Spec()
	for k := 1; k < len(ch.Path) && k < len(ch.Times); k++ {
		r.eachEntry(ch.Path[k-1], ch.Path[k], func(x *Parsed, u, written annotations.Upstream) {
			l := OwnLayer(spec, x.Workload, u)
			if l.PerTry <= 0 || l.PerTry >= ch.Times[k] {
				return
			}
			var s string
			if written.PerTryTimeout > 0 {
				s = fmt.Sprintf("the per-try timeout of %s %s %s", x.Workload, annotations.Upstreams, writtenToken(written))
			} else {
				s = fmt.Sprintf("%s spec.retry.perTryTimeout: %s", r.Policy.Ref(), graph.FormatTime(l.PerTry))
			}
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		})
	}
	if len(out) > MaxLevers {
		out = append(out[:MaxLevers:MaxLevers], fmt.Sprintf("and %d more per-try timeouts", len(out)-MaxLevers))
	}
	return out
}

// writtenToken is u as an annotation writes it: "payment:8080=3/2s*2", the parts u sets.
func writtenToken(u annotations.Upstream) string {
	s := u.Name
	if u.Port > 0 {
		s += ":" + strconv.Itoa(int(u.Port))
	}
	if u.Attempts > 0 {
		s += "=" + strconv.Itoa(int(u.Attempts))
	}
	if u.PerTryTimeout > 0 {
		s += "/" + annotations.FormatTimeout(u.PerTryTimeout)
	}
	if u.Calls > 0 {
		s += "*" + strconv.Itoa(int(u.Calls))
	}
	return s
}
