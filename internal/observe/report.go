package observe

import (
	"cmp"
	"encoding/hex"
	"hash/fnv"
	"io"
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

// KeyReport is one key's story: the write-up's columns (attempts, chain links, services, first
// attempt, span, failures) and the observed amplification.
type KeyReport struct {
	Key      string `json:"key"`
	Kind     string `json:"kind"` // idempotency-key, trace-id, request-id or storm-op
	Attempts int    `json:"attempts"`
	// ChainLinks is the number of distinct trace ids among the key's attempts (the write-up's
	// count(DISTINCT trace_id)): how many times the user's side started the chain over (a user
	// retrying the same Idempotency-Key five times: 5). 0 when no line carried a trace id.
	ChainLinks int `json:"chain_links"`
	Failures   int `json:"failures"`
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
	// FromStore is set when the answer came from a log store's query (observe --postgres):
	// the store does not compute depths, so Deepest and Amplification are those of the last
	// service the key reached.
	FromStore bool `json:"from_store,omitempty"`
}

// kindCode orders the key kinds by precedence.
type kindCode uint8

const (
	kindIdem kindCode = iota
	kindTrace
	kindRequest
	kindStorm
	kindNone
)

var kindNames = [...]string{"idempotency-key", "trace-id", "request-id", "storm-op", ""}

// The aggregates. Memory is per key, never per attempt: a key costs its map entry and name,
// one keyAgg, and per service it reached one svcAgg, per call edge 8 bytes, per distinct trace
// id 16 bytes (docs/observe.md has the figures). Service and method names are interned once
// for the whole run.
type keyAgg struct {
	first, end int64 // Unix ns
	svcs       []svcAgg
	edges      []uint64 // caller<<32 | target, service ids
	traces     [][16]byte
	methods    uint64 // bit i: method id i (ids >= 64 are folded into bit 63)
	kind       kindCode
}

type svcAgg struct {
	id                       uint32
	in, out, inFail, outFail uint32
	first                    int64
}

// Grouper folds attempts into per-key aggregates.
type Grouper struct {
	index   map[string]uint32
	keys    []string
	aggs    []keyAgg
	names   map[string]uint32
	svcName []string
	methods map[string]uint32
	mName   []string
	keyless int
	stats   Stats
}

// NewGrouper returns an empty grouper.
func NewGrouper() *Grouper {
	return &Grouper{index: map[string]uint32{}, names: map[string]uint32{}, methods: map[string]uint32{}}
}

func (g *Grouper) intern(b []byte) uint32 {
	if id, ok := g.names[string(b)]; ok {
		return id
	}
	s := string(b)
	id := uint32(len(g.svcName))
	g.svcName = append(g.svcName, s)
	g.names[s] = id
	return id
}

func (g *Grouper) method(b []byte) uint64 {
	if len(b) == 0 {
		return 0
	}
	id, ok := g.methods[string(b)]
	if !ok {
		id = uint32(len(g.mName))
		s := string(b)
		g.mName = append(g.mName, s)
		g.methods[s] = id
	}
	return 1 << min(id, 63)
}

// Consume parses r (any of the formats and line shapes) and folds its attempts: the hot
// path, no allocation per line once its key and names were seen.
func (g *Grouper) Consume(r io.Reader, src Source, maxLine int) (Stats, error) {
	p := &parser{src: src}
	st, err := scanLines(r, src, maxLine, p, g.fold)
	g.stats.Add(st)
	return st, err
}

// Add folds one attempt.
func (g *Grouper) Add(a Attempt) {
	r := rec{
		dir: a.Direction, start: a.Time.UnixNano(), dur: int64(a.Duration), caller: []byte(a.Caller), target: []byte(a.Target),
		method: []byte(a.Method), status: a.Status, grpc: a.GRPCStatus, traceID: []byte(a.TraceID), idem: []byte(a.IdemKey),
		rid: []byte(a.RequestID), stormOp: []byte(a.StormOp),
	}
	g.fold(&r)
}

func (g *Grouper) fold(r *rec) {
	k, kind := r.key()
	if kind == kindNone {
		g.keyless++
		return
	}
	idx, ok := g.index[string(k)]
	if !ok {
		s := string(k)
		idx = uint32(len(g.aggs))
		g.index[s] = idx
		g.keys = append(g.keys, s)
		g.aggs = append(g.aggs, keyAgg{kind: kind, first: r.start, end: r.start + r.dur})
	}
	a := &g.aggs[idx]
	a.kind = min(a.kind, kind)
	if r.start < a.first {
		a.first = r.start
	}
	if e := r.start + r.dur; e > a.end {
		a.end = e
	}
	a.methods |= g.method(r.method)
	t := g.intern(r.target)
	var s *svcAgg
	for i := range a.svcs {
		if a.svcs[i].id == t {
			s = &a.svcs[i]
			break
		}
	}
	if s == nil {
		a.svcs = append(a.svcs, svcAgg{id: t, first: r.start})
		s = &a.svcs[len(a.svcs)-1]
	}
	if r.start < s.first {
		s.first = r.start
	}
	fail := r.failed()
	if r.dir == Inbound {
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
	if len(r.caller) > 0 && string(r.caller) != string(r.target) {
		e := uint64(g.intern(r.caller))<<32 | uint64(t)
		if !slices.Contains(a.edges, e) {
			a.edges = append(a.edges, e)
		}
	}
	if len(r.traceID) > 0 {
		id := traceKey(r.traceID)
		if !slices.Contains(a.traces, id) {
			a.traces = append(a.traces, id)
		}
	}
}

// traceKey is a trace id in 16 bytes: the id itself when it is W3C's 32 hex digits, else an
// FNV-128a hash of it (a collision between two ids of one key is as likely as 2^-128).
func traceKey(b []byte) [16]byte {
	var k [16]byte
	if len(b) == 32 {
		if _, err := hex.Decode(k[:], b); err == nil {
			return k
		}
	}
	h := fnv.New128a()
	h.Write(b)
	h.Sum(k[:0])
	return k
}

// AddStats adds a parse's counts to the report's.
func (g *Grouper) AddStats(s Stats) { g.stats.Add(s) }

// Stats is what was read so far.
func (g *Grouper) Stats() Stats { return g.stats }

// attempts is a key's attempts without building its report: at a service with inbound lines
// only those count (the caller's outbound line of the same attempt is not counted twice).
func (a *keyAgg) attempts() int {
	n := 0
	for _, s := range a.svcs {
		if s.in > 0 {
			n += int(s.in)
		} else {
			n += int(s.out)
		}
	}
	return n
}

// maxAtService bounds the key's amplification (the attempts at one of its services).
func (a *keyAgg) maxAtService() int {
	m := 0
	for _, s := range a.svcs {
		n := s.out
		if s.in > 0 {
			n = s.in
		}
		m = max(m, int(n))
	}
	return m
}

// Report groups what was added: keys over threshold attempts, worst first, at most limit of
// them (0: all).
func (g *Grouper) Report(threshold, limit int) *Report {
	r := &Report{Stats: g.stats, Keyless: g.keyless, Keys: len(g.aggs), Threshold: threshold, Over: []KeyReport{}}
	var over []uint32
	for i := range g.aggs {
		a := &g.aggs[i]
		att := a.attempts()
		k := g.keys[i]
		if att > r.PeakAttempts || (att == r.PeakAttempts && k < r.PeakKey) {
			r.PeakAttempts, r.PeakKey = att, k
		}
		if span := time.Duration(a.end - a.first); span > r.LongestSpan || (span == r.LongestSpan && (r.LongestSpanKey == "" || k < r.LongestSpanKey)) {
			r.LongestSpan, r.LongestSpanKey = span, k
		}
		if att > threshold {
			over = append(over, uint32(i))
		}
		// The amplification needs the depths: only computed where it can beat the peak.
		if len(a.svcs) > 0 && a.maxAtService() >= r.PeakAmplification {
			kr := g.summarize(uint32(i))
			if kr.Amplification > r.PeakAmplification || (kr.Amplification == r.PeakAmplification && kr.Deepest < r.PeakAmplificationAt) {
				r.PeakAmplification, r.PeakAmplificationAt = kr.Amplification, kr.Deepest
			}
		}
	}
	all := make([]KeyReport, 0, len(over))
	for _, i := range over {
		all = append(all, g.summarize(i))
	}
	SortKeys(all)
	r.OverCount = len(all)
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	r.Over = append(r.Over, all...)
	return r
}

// SortKeys orders keys worst first: most attempts, then the highest amplification, then the
// earliest, then by name.
func SortKeys(all []KeyReport) {
	slices.SortFunc(all, func(a, b KeyReport) int {
		return cmp.Or(cmp.Compare(b.Attempts, a.Attempts), cmp.Compare(b.Amplification, a.Amplification),
			a.First.Compare(b.First), cmp.Compare(a.Key, b.Key))
	})
}

// Key returns one key's report, false if no attempt had it.
func (g *Grouper) Key(k string) (KeyReport, bool) {
	i, ok := g.index[k]
	if !ok {
		return KeyReport{}, false
	}
	return g.summarize(i), true
}

// summarize tells one key's story from its aggregate.
func (g *Grouper) summarize(i uint32) KeyReport {
	a := &g.aggs[i]
	kr := KeyReport{Key: g.keys[i], Kind: kindNames[a.kind], ChainLinks: len(a.traces),
		First: time.Unix(0, a.first).UTC(), Span: time.Duration(a.end - a.first)}
	for id := range g.mName {
		if a.methods&(1<<min(id, 63)) != 0 {
			if kr.Methods != "" {
				kr.Methods += ","
			}
			kr.Methods += g.mName[id]
		}
	}
	if kr.Methods != "" {
		ms := splitComma(kr.Methods)
		slices.Sort(ms)
		kr.Methods = joinComma(ms)
	}
	names := make([]string, len(a.svcs))
	first := map[string]int64{}
	for j, s := range a.svcs {
		names[j] = g.svcName[s.id]
		first[names[j]] = s.first
	}
	edges := map[string][]string{}
	callers := map[string]bool{}
	for _, e := range a.edges {
		c, t := g.svcName[e>>32], g.svcName[uint32(e)]
		edges[c] = append(edges[c], t)
		callers[c] = true
	}
	depth := depths(names, edges, callers)
	for j, s := range a.svcs {
		att, fails := int(s.out), int(s.outFail)
		if s.in > 0 {
			att, fails = int(s.in), int(s.inFail)
		}
		kr.Attempts += att
		kr.Failures += fails
		kr.Services = append(kr.Services, ServiceAttempts{Service: names[j], Attempts: att, Failures: fails, Depth: depth[names[j]]})
	}
	// Shallowest first; without edges, the depth is the order in which the services were
	// first reached.
	slices.SortStableFunc(kr.Services, func(x, y ServiceAttempts) int {
		return cmp.Or(cmp.Compare(x.Depth, y.Depth), cmp.Compare(first[x.Service], first[y.Service]), cmp.Compare(x.Service, y.Service))
	})
	if len(edges) == 0 {
		for j := range kr.Services {
			kr.Services[j].Depth = j + 1
		}
	}
	for c := range callers {
		if _, ok := first[c]; !ok {
			kr.Callers = append(kr.Callers, c)
		}
	}
	slices.Sort(kr.Callers)
	deepest := -1
	for _, s := range kr.Services {
		if deepest < 0 || s.Depth > deepest || (s.Depth == deepest && s.Attempts > kr.Amplification) {
			kr.Deepest, kr.Amplification, deepest = s.Service, s.Attempts, s.Depth
		}
	}
	return kr
}

func splitComma(s string) []string {
	var out []string
	for s != "" {
		i := 0
		for i < len(s) && s[i] != ',' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}

func joinComma(ms []string) string {
	out := ""
	for i, m := range ms {
		if i > 0 {
			out += ","
		}
		out += m
	}
	return out
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
	for c := range callers {
		if !called[c] {
			d[c] = 0
		}
	}
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
