package observe

import (
	"cmp"
	"slices"
	"time"
)

// ServiceAttempts is how many attempts a key made at one service.
type ServiceAttempts struct {
	Service  string `json:"service"`
	Attempts int    `json:"attempts"`
	Failures int    `json:"failures"`
	Depth    int    `json:"depth"`
}

// KeyReport is one key's story.
type KeyReport struct {
	Key      string `json:"key"`
	Kind     string `json:"kind"` // idempotency-key, trace-id, request-id or storm-op
	Attempts int    `json:"attempts"`
	Failures int    `json:"failures"`
	// Services are the services the attempts went to, shallowest first.
	Services []ServiceAttempts `json:"services"`
	// Callers are the services that made attempts and received none in this key (the
	// entries: the user's side of the chain).
	Callers []string      `json:"callers,omitempty"`
	First   time.Time     `json:"first"`
	Span    time.Duration `json:"span_ns"`
	// Deepest is the deepest service the key reached; Amplification the attempts at it: how
	// many times the user request was multiplied by the time it got there.
	Deepest       string `json:"deepest"`
	Amplification int    `json:"amplification"`
	Methods       string `json:"method"`
}

// Report is what the attempts of a set of logs say.
type Report struct {
	Stats Stats `json:"stats"`
	// Keyless are the attempts with no key (not grouped).
	Keyless int `json:"keyless"`
	Keys    int `json:"keys"`
	// Threshold: Over are the keys with more attempts than it, worst first (most attempts,
	// then the highest amplification, then the earliest); OverCount how many there are (Over
	// may be cut to a limit).
	Threshold int         `json:"threshold"`
	OverCount int         `json:"over_count"`
	Over      []KeyReport `json:"over"`
	// Peak is the most attempts of one key, PeakKey which; PeakAmplification the highest
	// amplification of one key, at PeakAmplificationAt.
	PeakAttempts        int           `json:"peak_attempts"`
	PeakKey             string        `json:"peak_key"`
	PeakAmplification   int           `json:"peak_amplification"`
	PeakAmplificationAt string        `json:"peak_amplification_at"`
	LongestSpan         time.Duration `json:"longest_span_ns"`
	LongestSpanKey      string        `json:"longest_span_key"`
}

// Grouper collects attempts per key.
type Grouper struct {
	keys    map[string]*group
	order   []string
	keyless int
	stats   Stats
}

type group struct {
	kind     string
	attempts []Attempt
}

// NewGrouper returns an empty grouper.
func NewGrouper() *Grouper { return &Grouper{keys: map[string]*group{}} }

// Add takes one attempt.
func (g *Grouper) Add(a Attempt) {
	k, kind := a.Key()
	if k == "" {
		g.keyless++
		return
	}
	gr := g.keys[k]
	if gr == nil {
		gr = &group{kind: kind}
		g.keys[k] = gr
		g.order = append(g.order, k)
	}
	gr.attempts = append(gr.attempts, a)
}

// AddStats adds a parse's counts to the report's.
func (g *Grouper) AddStats(s Stats) { g.stats.Add(s) }

// Report groups what was added: keys over threshold attempts, worst first, at most limit of
// them (0: all).
func (g *Grouper) Report(threshold, limit int) *Report {
	r := &Report{Stats: g.stats, Keyless: g.keyless, Keys: len(g.keys), Threshold: threshold, Over: []KeyReport{}}
	var all []KeyReport
	for _, k := range g.order {
		kr := summarize(k, g.keys[k])
		if kr.Attempts > r.PeakAttempts || (kr.Attempts == r.PeakAttempts && kr.Key < r.PeakKey) {
			r.PeakAttempts, r.PeakKey = kr.Attempts, kr.Key
		}
		if kr.Amplification > r.PeakAmplification {
			r.PeakAmplification, r.PeakAmplificationAt = kr.Amplification, kr.Deepest
		}
		if kr.Span > r.LongestSpan || (kr.Span == r.LongestSpan && r.LongestSpanKey == "") {
			r.LongestSpan, r.LongestSpanKey = kr.Span, kr.Key
		}
		if kr.Attempts > threshold {
			all = append(all, kr)
		}
	}
	slices.SortFunc(all, func(a, b KeyReport) int {
		return cmp.Or(cmp.Compare(b.Attempts, a.Attempts), cmp.Compare(b.Amplification, a.Amplification),
			a.First.Compare(b.First), cmp.Compare(a.Key, b.Key))
	})
	r.OverCount = len(all)
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	r.Over = append(r.Over, all...)
	return r
}

// Key returns one key's report, false if no attempt had it.
func (g *Grouper) Key(k string) (KeyReport, bool) {
	gr := g.keys[k]
	if gr == nil {
		return KeyReport{}, false
	}
	return summarize(k, gr), true
}

// summarize tells one key's story. An attempt seen by two Envoy sidecars (the caller's
// outbound line and the callee's inbound one) is counted once: at a service with inbound
// lines, only those count.
func summarize(k string, gr *group) KeyReport {
	kr := KeyReport{Key: k, Kind: gr.kind}
	type svc struct {
		in, out, inFail, outFail int
		first                    time.Time
	}
	svcs := map[string]*svc{}
	var names []string
	edges := map[string][]string{}
	callers := map[string]bool{}
	var end time.Time
	methods := map[string]bool{}
	for i := range gr.attempts {
		a := &gr.attempts[i]
		s := svcs[a.Target]
		if s == nil {
			s = &svc{first: a.Time}
			svcs[a.Target] = s
			names = append(names, a.Target)
		}
		if a.Time.Before(s.first) {
			s.first = a.Time
		}
		fail := a.Failed()
		if a.Direction == Inbound {
			s.in++
			if fail {
				s.inFail++
			}
		} else {
			s.out++
			if fail {
				s.outFail++
			}
		}
		if a.Caller != "" && a.Caller != a.Target {
			if !slices.Contains(edges[a.Caller], a.Target) {
				edges[a.Caller] = append(edges[a.Caller], a.Target)
			}
			callers[a.Caller] = true
		}
		if kr.First.IsZero() || a.Time.Before(kr.First) {
			kr.First = a.Time
		}
		if e := a.End(); e.After(end) {
			end = e
		}
		if a.Method != "" {
			methods[a.Method] = true
		}
	}
	kr.Span = end.Sub(kr.First)
	ms := make([]string, 0, len(methods))
	for m := range methods {
		ms = append(ms, m)
	}
	slices.Sort(ms)
	for i, m := range ms {
		if i > 0 {
			kr.Methods += ","
		}
		kr.Methods += m
	}
	depth := depths(names, edges, callers)
	for _, n := range names {
		s := svcs[n]
		att, fails := s.out, s.outFail
		if s.in > 0 {
			att, fails = s.in, s.inFail
		}
		kr.Attempts += att
		kr.Failures += fails
		kr.Services = append(kr.Services, ServiceAttempts{Service: n, Attempts: att, Failures: fails, Depth: depth[n]})
	}
	// Shallowest first; without edges, the depth is the order in which the services were
	// first reached.
	slices.SortStableFunc(kr.Services, func(a, b ServiceAttempts) int {
		return cmp.Or(cmp.Compare(a.Depth, b.Depth), svcs[a.Service].first.Compare(svcs[b.Service].first))
	})
	if len(edges) == 0 {
		for i := range kr.Services {
			kr.Services[i].Depth = i + 1
		}
	}
	for c := range callers {
		if svcs[c] == nil {
			kr.Callers = append(kr.Callers, c)
		}
	}
	slices.Sort(kr.Callers)
	// The deepest: the greatest depth; among equals the most attempts.
	for _, s := range kr.Services {
		if kr.Deepest == "" || s.Depth > depth[kr.Deepest] || (s.Depth == depth[kr.Deepest] && s.Attempts > kr.Amplification) {
			kr.Deepest, kr.Amplification = s.Service, s.Attempts
			depth[kr.Deepest] = s.Depth
		}
	}
	return kr
}

// depths is each target's depth below the roots of the call edges (a caller no one calls
// is at depth 0): the longest path, bounded by the number of services so that a cycle ends.
func depths(names []string, edges map[string][]string, callers map[string]bool) map[string]int {
	d := map[string]int{}
	if len(edges) == 0 {
		return d
	}
	called := map[string]bool{}
	for _, ts := range edges {
		for _, t := range ts {
			called[t] = true
		}
	}
	for _, n := range names {
		d[n] = 1 // a target no known caller calls: one below an unknown root
	}
	var roots []string
	for c := range callers {
		if !called[c] {
			roots = append(roots, c)
			d[c] = 0
		}
	}
	slices.Sort(roots)
	limit := len(names) + len(callers)
	for range limit {
		changed := false
		for c, ts := range edges {
			for _, t := range ts {
				if d[c]+1 > d[t] && d[c]+1 <= limit {
					d[t] = d[c] + 1
					changed = true
				}
			}
		}
		if !changed {
			break
		}
	}
	return d
}
