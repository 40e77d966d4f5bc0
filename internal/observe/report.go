package observe

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"io"
	"slices"
	"strings"
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

// The aggregates. Memory is per key, never per attempt, and holds no pointer the garbage
// collector would have to follow: a key costs one slot of a map from its 64-bit hash (12
// bytes), its bytes in a key arena, one keyAgg (48 bytes), and per service it reached one svcNode (32
// bytes), per call edge one edgeNode (12), per distinct trace id one traceNode (20), all in
// chunked slabs that grow without copying (docs/observe.md has the measured figures). Service
// and method names are interned once for the whole run.
type keyAgg struct {
	first, end int64 // Unix ns
	methods    uint64
	// ref is where the key's bytes are in the arena and what kind of key it is: arena chunk
	// << 32 | kind << 24 | offset. An offset is below arenaChunk (2^20: a key longer than
	// that gets a chunk of its own, at offset 0), so the kind fits above it and the aggregate
	// stays 48 bytes, not 56 with a separate byte and its padding (100,000 keys: 0.8 MB).
	ref    uint64
	keyLen uint32
	svc    uint32 // head of the key's service list (node index + 1; 0: none)
	trace  uint32
	edge   uint32
}

const (
	kindShift = 24
	kindMask  = 0xff << kindShift
)

func (a *keyAgg) kind() kindCode { return kindCode((a.ref & kindMask) >> kindShift) }

func (a *keyAgg) setKind(k kindCode) { a.ref = a.ref&^kindMask | uint64(k)<<kindShift }

// keyOff is the key's place in the arena (chunk << 32 | offset).
func (a *keyAgg) keyOff() uint64 { return a.ref &^ kindMask }

type svcNode struct {
	first                    int64
	id, next                 uint32
	in, out, inFail, outFail uint32
}

type traceNode struct {
	id   [16]byte
	next uint32
}

type edgeNode struct {
	from, to, next uint32
}

const chunkBits = 14

// slab is a growable array in fixed chunks: appending never copies, an element's address is
// stable.
type slab[T any] struct {
	chunks [][]T
	n      uint32
}

func (s *slab[T]) add(v T) uint32 {
	c := s.n >> chunkBits
	if int(c) == len(s.chunks) {
		s.chunks = append(s.chunks, make([]T, 0, 1<<chunkBits))
	}
	s.chunks[c] = append(s.chunks[c], v)
	s.n++
	return s.n - 1
}

func (s *slab[T]) at(i uint32) *T { return &s.chunks[i>>chunkBits][i&(1<<chunkBits-1)] }

const arenaChunk = 1 << 20

// arena holds the keys' bytes.
type arena struct{ chunks [][]byte }

func (a *arena) add(b []byte) uint64 {
	n := len(a.chunks)
	if n == 0 || len(a.chunks[n-1])+len(b) > cap(a.chunks[n-1]) {
		a.chunks = append(a.chunks, make([]byte, 0, max(arenaChunk, len(b))))
		n++
	}
	off := len(a.chunks[n-1])
	a.chunks[n-1] = append(a.chunks[n-1], b...)
	return uint64(n-1)<<32 | uint64(off)
}

func (a *arena) get(off uint64, n uint32) []byte {
	c, o := off>>32, uint32(off)
	return a.chunks[c][o : o+n]
}

// Grouper folds attempts into per-key aggregates.
type Grouper struct {
	seed    maphash.Seed
	index   map[uint64]uint32
	collide map[string]uint32 // keys whose hash an earlier key already had
	keys    arena
	aggs    slab[keyAgg]
	svcs    slab[svcNode]
	traces  slab[traceNode]
	edges   slab[edgeNode]
	names   map[string]uint32
	svcName []string
	methods map[string]uint32
	mName   []string
	keyless int
	stats   Stats
	scratch shapeBuf
	// bigTraces are the trace ids of the keys with more than traceWalk of them, as a set.
	bigTraces map[uint32]map[[16]byte]struct{}
	// bigSvcs and bigEdges are the same for the keys with more than traceWalk services (the
	// name's id to its node + 1) or call edges.
	bigSvcs  map[uint32]map[uint32]uint32
	bigEdges map[uint32]map[[2]uint32]struct{}
	// moreMethods are the methods past the 63rd of each key that had one: key << 32 | method.
	moreMethods map[uint64]struct{}
	maxKeys     int
	full        *LimitError // the bound the run met: nothing is folded after it
	// traceSteps counts the list nodes compared by addTrace, service and addEdge (the tests
	// bound the work per line).
	traceSteps int
}

// NewGrouper returns an empty grouper.
func NewGrouper() *Grouper {
	return &Grouper{seed: maphash.MakeSeed(), index: map[uint64]uint32{},
		names: map[string]uint32{}, methods: map[string]uint32{}}
}

// DefaultMaxKeys is the command's bound (--max-keys) on the distinct keys a run holds, the
// distinct trace ids over all keys and the distinct service names: about 1 GiB at the
// measured cost of a key (docs/observe.md). A day of a busy gateway's requests, each a key of
// its own, is the log store's to aggregate (-o sql, --postgres), or a run with a higher
// --max-keys on a machine that has the memory.
const DefaultMaxKeys = 4_000_000

// SetMaxKeys sets the bound on the distinct keys, on the distinct trace ids and on the
// distinct service names (0, a new grouper's: none; the storm lab's runs are bounded by the
// requests it sends).
func (g *Grouper) SetMaxKeys(n int) { g.maxKeys = n }

// Err is the bound the run met (a *LimitError), or nil: once met, nothing more is folded and
// Consume reads nothing, so the aggregates are a prefix of the input, not a report of it.
func (g *Grouper) Err() error {
	if g.full == nil {
		return nil
	}
	return g.full
}

// LimitError is a bound of the grouper's met: the run stops, and says which and where.
type LimitError struct {
	What  string // "distinct keys", "distinct trace ids" or "distinct service names"
	Limit int
	Value []byte // the key or trace id that would have gone over
	Where string // FILE: line N, set by the scan
}

func (e *LimitError) Error() string {
	v := e.Value
	if len(v) > 64 {
		v = v[:64]
	}
	return fmt.Sprintf("%s: %q would be one of more than %s %s, over --max-keys %d (memory is per key: about 1 GiB per 4,000,000); "+
		"aggregate in the log store (-o csv to load it, -o sql or --postgres to query it), read fewer lines, or raise --max-keys where the memory is",
		e.Where, v, Thousands(e.Limit), e.What, e.Limit)
}

// intern is name b's id; false when it would be one more name than the bound (SetMaxKeys):
// service names come from hosts a client chose (the :authority, at worst), so a scanner's
// Host headers are as many names as lines.
func (g *Grouper) intern(b []byte) (uint32, bool) {
	if id, ok := g.names[string(b)]; ok {
		return id, true
	}
	if g.maxKeys > 0 && len(g.svcName) >= g.maxKeys {
		g.full = &LimitError{What: "distinct service names", Limit: g.maxKeys, Value: bytes.Clone(b)}
		return 0, false
	}
	s := string(b)
	id := uint32(len(g.svcName))
	g.svcName = append(g.svcName, s)
	g.names[s] = id
	return id, true
}

// method folds method b into key idx's methods: a bit each for the run's first 63 methods,
// and past them (junk methods, a scanner's) bit 63 and the pair in a set: sharing bit 63, a
// key sent "M70" was shown with every method from the 64th on.
func (g *Grouper) method(idx uint32, a *keyAgg, b []byte) {
	if len(b) == 0 {
		return
	}
	id, ok := g.methods[string(b)]
	if !ok {
		id = uint32(len(g.mName))
		s := string(b)
		g.mName = append(g.mName, s)
		g.methods[s] = id
	}
	if id < 63 {
		a.methods |= 1 << id
		return
	}
	a.methods |= 1 << 63
	if g.moreMethods == nil {
		g.moreMethods = map[uint64]struct{}{}
	}
	g.moreMethods[uint64(idx)<<32|uint64(id)] = struct{}{}
}

// Consume parses r (any of the formats and line shapes) and folds its attempts: the hot
// path, no allocation per line once its key and names were seen.
func (g *Grouper) Consume(r io.Reader, src Source, maxLine int) (Stats, error) {
	if g.full != nil {
		return Stats{}, g.full // the run stopped at its bound: the other streams are not read
	}
	p := &parser{src: src}
	st, err := scanLines(r, src, maxLine, p, g.fold)
	g.stats.Add(st)
	if where, ok := err.(stopAt); ok && g.full != nil {
		g.full.Where = string(where)
		return st, g.full
	}
	return st, err
}

// Add folds one attempt.
func (g *Grouper) Add(a Attempt) {
	r := rec{
		dir: a.Direction, start: a.Time.UnixNano(), dur: int64(a.Duration), caller: []byte(a.Caller), target: []byte(a.Target),
		method: []byte(a.Method), status: a.Status, grpc: a.GRPCStatus, traceID: []byte(a.TraceID), idem: []byte(a.IdemKey),
		rid: []byte(a.RequestID), stormOp: []byte(a.StormOp), cut: []byte(a.Cut), bodyBytes: a.BodyBytes,
	}
	g.fold(&r) // over the bound: Err says so
}

// hash is the key's slot in the index. 64 bits are enough: the key's bytes are compared on
// every hit, and a key whose hash an earlier key had goes to the collision map (exact, and
// rare: about n^2/2^65 keys, 3e-10 for 100,000), so the hash's width costs lookups, never a
// wrong merge.
func (g *Grouper) hash(k []byte) uint64 { return maphash.Bytes(g.seed, k) }

func (g *Grouper) find(k []byte) (uint32, bool) {
	idx, ok := g.index[g.hash(k)]
	if !ok {
		return 0, false
	}
	if string(g.keyBytes(idx)) == string(k) {
		return idx, true
	}
	idx, ok = g.collide[string(k)]
	return idx, ok
}

// lookup finds or adds key k: by its 64-bit hash, the bytes compared (a second key with the
// same hash goes to the collision map: exact, whatever the hash does).
func (g *Grouper) lookup(k []byte, kind kindCode, start, end int64) (uint32, bool) {
	h := g.hash(k)
	idx, ok := g.index[h]
	if ok {
		a := g.aggs.at(idx)
		if string(g.keys.get(a.keyOff(), a.keyLen)) == string(k) {
			return idx, true
		}
		if i, ok := g.collide[string(k)]; ok {
			return i, true
		}
	}
	if g.maxKeys > 0 && int(g.aggs.n) >= g.maxKeys {
		g.full = &LimitError{What: "distinct keys", Limit: g.maxKeys, Value: k}
		return 0, false
	}
	n := g.aggs.add(keyAgg{first: start, end: end, ref: g.keys.add(k) | uint64(kind)<<kindShift, keyLen: uint32(len(k))})
	if ok {
		if g.collide == nil {
			g.collide = map[string]uint32{}
		}
		g.collide[string(k)] = n
	} else {
		g.index[h] = n
	}
	return n, true
}

// fold folds one attempt into its key's aggregate; false when the attempt would take the
// grouper over its bound (SetMaxKeys): nothing of it is counted, and Err says which bound.
func (g *Grouper) fold(r *rec) bool {
	if g.full != nil {
		return false
	}
	k, kind := r.key()
	if kind == kindNone {
		g.keyless++
		return true
	}
	// The names, the key and the trace id first: over a bound, the run stops before anything
	// of this attempt is counted.
	t, ok := g.intern(r.target)
	if !ok {
		return false
	}
	c := uint32(0)
	hasCaller := len(r.caller) > 0 && string(r.caller) != string(r.target)
	if hasCaller {
		if c, ok = g.intern(r.caller); !ok {
			return false
		}
	}
	idx, ok := g.lookup(k, kind, r.start, r.start+r.dur)
	if !ok {
		return false
	}
	a := g.aggs.at(idx)
	if len(r.traceID) > 0 && !g.addTrace(idx, a, traceKey(r.traceID)) {
		return false
	}
	if kind < a.kind() {
		a.setKind(kind)
	}
	if r.start < a.first {
		a.first = r.start
	}
	if e := r.start + r.dur; e > a.end {
		a.end = e
	}
	g.method(idx, a, r.method)
	s := g.service(idx, a, t, r.start)
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
	if hasCaller {
		g.addEdge(idx, a, c, t)
	}
	return true
}

// service is key idx's node of service t, added when the key had none: a list walked for a
// key's few services, a set past traceWalk of them (one key sent to ever new hosts, as a
// constant x-request-id across a scanner's Host headers, was quadratic: 50,000 lines, 5 s).
func (g *Grouper) service(idx uint32, a *keyAgg, t uint32, start int64) *svcNode {
	n := 0
	for j := a.svc; j != 0 && n < traceWalk; n++ {
		s := g.svcs.at(j - 1)
		g.traceSteps++
		if s.id == t {
			return s
		}
		j = s.next
	}
	var set map[uint32]uint32
	if n == traceWalk {
		var ok bool
		if set, ok = g.bigSvcs[idx]; !ok {
			if g.bigSvcs == nil {
				g.bigSvcs = map[uint32]map[uint32]uint32{}
			}
			set = map[uint32]uint32{}
			for j := a.svc; j != 0; j = g.svcs.at(j - 1).next {
				set[g.svcs.at(j-1).id] = j
			}
			g.bigSvcs[idx] = set
		}
		if j, ok := set[t]; ok {
			return g.svcs.at(j - 1)
		}
	}
	a.svc = g.svcs.add(svcNode{id: t, first: start, next: a.svc}) + 1
	if set != nil {
		set[t] = a.svc
	}
	return g.svcs.at(a.svc - 1)
}

// addEdge adds the call edge c -> t to key idx's, once: a list, a set past traceWalk edges.
func (g *Grouper) addEdge(idx uint32, a *keyAgg, c, t uint32) {
	n := 0
	for i := a.edge; i != 0 && n < traceWalk; n++ {
		e := g.edges.at(i - 1)
		g.traceSteps++
		if e.from == c && e.to == t {
			return
		}
		i = e.next
	}
	if n == traceWalk {
		set, ok := g.bigEdges[idx]
		if !ok {
			if g.bigEdges == nil {
				g.bigEdges = map[uint32]map[[2]uint32]struct{}{}
			}
			set = map[[2]uint32]struct{}{}
			for i := a.edge; i != 0; i = g.edges.at(i - 1).next {
				e := g.edges.at(i - 1)
				set[[2]uint32{e.from, e.to}] = struct{}{}
			}
			g.bigEdges[idx] = set
		}
		if _, ok := set[[2]uint32{c, t}]; ok {
			return
		}
		set[[2]uint32{c, t}] = struct{}{}
	}
	a.edge = g.edges.add(edgeNode{from: c, to: t, next: a.edge}) + 1
}

// traceWalk is how many of a key's trace ids are compared in its list before its set is used.
const traceWalk = 16

// addTrace adds trace id id to key idx's distinct trace ids. A key's few trace ids (one per
// chain the user's side started) are a list, walked; a key with more than traceWalk (a client
// that sends one constant Idempotency-Key with every request, each with a new trace) gets a set
// of its own: walked, such a key made each line cost its key's trace ids so far, quadratic in
// the lines (100,000 lines of one key: 18 s of CPU, a million: half an hour).
func (g *Grouper) addTrace(idx uint32, a *keyAgg, id [16]byte) bool {
	n := 0
	for i := a.trace; i != 0 && n < traceWalk; n++ {
		tn := g.traces.at(i - 1)
		g.traceSteps++
		if tn.id == id {
			return true
		}
		i = tn.next
	}
	if n == traceWalk {
		set, ok := g.bigTraces[idx]
		if !ok {
			if g.bigTraces == nil {
				g.bigTraces = map[uint32]map[[16]byte]struct{}{}
			}
			set = map[[16]byte]struct{}{}
			for i := a.trace; i != 0; i = g.traces.at(i - 1).next {
				set[g.traces.at(i-1).id] = struct{}{}
			}
			g.bigTraces[idx] = set
		}
		if _, ok := set[id]; ok {
			return true
		}
	}
	if g.maxKeys > 0 && int(g.traces.n) >= g.maxKeys {
		g.full = &LimitError{What: "distinct trace ids", Limit: g.maxKeys, Value: []byte(hex.EncodeToString(id[:]))}
		return false
	}
	if n == traceWalk {
		g.bigTraces[idx][id] = struct{}{}
	}
	a.trace = g.traces.add(traceNode{id: id, next: a.trace}) + 1
	return true
}

// traceKey is a trace id in 16 bytes: the id itself when it is W3C's 32 hex digits, else an
// FNV-128a hash of it (two ids of one key taken for one: as likely as 2^-128).
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

func (g *Grouper) keyString(i uint32) string {
	a := g.aggs.at(i)
	return string(g.keys.get(a.keyOff(), a.keyLen))
}

// shapeBuf is the scratch of shape: a key's services with their attempts and depths.
type shapeBuf struct {
	svcs  []shapeSvc
	edges []edgeNode
	at    map[uint32]int
}

type shapeSvc struct {
	id, attempts, failures uint32
	depth                  int
	first                  int64
}

// shape lays out key i's services (at a service with inbound lines only those count: the
// caller's outbound line of the same attempt is not counted twice), shallowest first, and
// returns the index of the deepest (the greatest depth, among equals the most attempts) and
// whether the depths came from call edges. No allocation once the scratch has grown.
func (g *Grouper) shape(i uint32) (deepest int, withEdges bool) {
	a := g.aggs.at(i)
	b := &g.scratch
	b.svcs, b.edges = b.svcs[:0], b.edges[:0]
	for j := a.svc; j != 0; {
		s := g.svcs.at(j - 1)
		att, fails := s.out, s.outFail
		if s.in > 0 {
			att, fails = s.in, s.inFail
		}
		b.svcs = append(b.svcs, shapeSvc{id: s.id, attempts: att, failures: fails, first: s.first})
		j = s.next
	}
	for j := a.edge; j != 0; {
		e := g.edges.at(j - 1)
		b.edges = append(b.edges, *e)
		j = e.next
	}
	if len(b.edges) > 0 {
		g.depths()
	}
	// Shallowest first; without edges, the depth is the order in which the services were
	// first reached (then the name).
	slices.SortFunc(b.svcs, func(x, y shapeSvc) int {
		return cmp.Or(cmp.Compare(x.depth, y.depth), cmp.Compare(x.first, y.first), cmp.Compare(g.svcName[x.id], g.svcName[y.id]))
	})
	if len(b.edges) == 0 {
		for j := range b.svcs {
			b.svcs[j].depth = j + 1
		}
	}
	deepest = -1
	for j, s := range b.svcs {
		if deepest < 0 || s.depth > b.svcs[deepest].depth || (s.depth == b.svcs[deepest].depth && s.attempts > b.svcs[deepest].attempts) {
			deepest = j
		}
	}
	return deepest, len(b.edges) > 0
}

// depths sets each service's depth below the roots of the call edges (a caller no one calls
// is at depth 0, a service no known caller calls at 1): the longest path, bounded by the
// number of services so that a cycle ends.
func (g *Grouper) depths() {
	b := &g.scratch
	// at is each service's place in b.svcs (a key's services are distinct): the lookups were
	// walks, cubic in a key's services.
	if b.at == nil {
		b.at = map[uint32]int{}
	}
	clear(b.at)
	for j := range b.svcs {
		b.at[b.svcs[j].id] = j
	}
	depthOf := func(id uint32) int {
		if j, ok := b.at[id]; ok {
			return b.svcs[j].depth
		}
		return 0 // a caller that received nothing in this key: a root
	}
	// a target no known caller calls: one below an unknown root; a caller no one calls: a root
	for j := range b.svcs {
		b.svcs[j].depth = 1
	}
	for _, e := range b.edges {
		if j, ok := b.at[e.from]; ok {
			b.svcs[j].depth = 0 // a caller ...
		}
	}
	for _, e := range b.edges {
		if j, ok := b.at[e.to]; ok {
			b.svcs[j].depth = 1 // ... that someone calls is no root
		}
	}
	limit := 2*len(b.svcs) + len(b.edges)
	for range limit {
		changed := false
		for _, e := range b.edges {
			g.traceSteps++
			if d := depthOf(e.from) + 1; d > depthOf(e.to) && d <= limit {
				b.svcs[b.at[e.to]].depth = d // e.to is a service of the key: its edge came with its attempt
				changed = true
			}
		}
		if !changed {
			break
		}
	}
}

// Report groups what was added: keys over threshold attempts, worst first, at most limit of
// them (0: all). Only the keys listed are written out; the rest are ranked from their
// aggregates.
func (g *Grouper) Report(threshold, limit int) *Report {
	r := &Report{Stats: g.stats, Keyless: g.keyless, Keys: int(g.aggs.n), Threshold: threshold, Over: []KeyReport{}}
	type rank struct {
		idx           uint32
		attempts, amp uint32
		first         int64
	}
	var over []rank
	var peakKey, spanKey uint32
	for i := uint32(0); i < g.aggs.n; i++ {
		a := g.aggs.at(i)
		deepest, _ := g.shape(i)
		att := uint32(0)
		for _, s := range g.scratch.svcs {
			att += s.attempts
		}
		amp, at := uint32(0), ""
		if deepest >= 0 {
			amp, at = g.scratch.svcs[deepest].attempts, g.svcName[g.scratch.svcs[deepest].id]
		}
		if int(att) > r.PeakAttempts || (int(att) == r.PeakAttempts && g.keyLess(i, peakKey)) || i == 0 {
			r.PeakAttempts, peakKey = int(att), i
		}
		if span := time.Duration(a.end - a.first); span > r.LongestSpan || (span == r.LongestSpan && g.keyLess(i, spanKey)) || i == 0 {
			r.LongestSpan, spanKey = span, i
		}
		if int(amp) > r.PeakAmplification || (int(amp) == r.PeakAmplification && at < r.PeakAmplificationAt) {
			r.PeakAmplification, r.PeakAmplificationAt = int(amp), at
		}
		if int(att) > threshold {
			over = append(over, rank{i, att, amp, a.first})
		}
	}
	if g.aggs.n > 0 {
		r.PeakKey, r.LongestSpanKey = g.keyString(peakKey), g.keyString(spanKey)
	}
	slices.SortFunc(over, func(x, y rank) int {
		return cmp.Or(cmp.Compare(y.attempts, x.attempts), cmp.Compare(y.amp, x.amp), cmp.Compare(x.first, y.first),
			bytes.Compare(g.keyBytes(x.idx), g.keyBytes(y.idx)))
	})
	r.OverCount = len(over)
	if limit > 0 && len(over) > limit {
		over = over[:limit]
	}
	for _, o := range over {
		r.Over = append(r.Over, g.summarize(o.idx))
	}
	return r
}

func (g *Grouper) keyBytes(i uint32) []byte {
	a := g.aggs.at(i)
	return g.keys.get(a.keyOff(), a.keyLen)
}

func (g *Grouper) keyLess(i, j uint32) bool { return bytes.Compare(g.keyBytes(i), g.keyBytes(j)) < 0 }

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
	i, ok := g.find([]byte(k))
	if !ok {
		return KeyReport{}, false
	}
	return g.summarize(i), true
}

// summarize tells one key's story from its aggregate.
func (g *Grouper) summarize(i uint32) KeyReport {
	a := g.aggs.at(i)
	kr := KeyReport{Key: g.keyString(i), Kind: kindNames[a.kind()], First: time.Unix(0, a.first).UTC(), Span: time.Duration(a.end - a.first)}
	for j := a.trace; j != 0; j = g.traces.at(j - 1).next {
		kr.ChainLinks++
	}
	var ms []string
	for id := range g.mName {
		if id < 63 && a.methods&(1<<id) != 0 {
			ms = append(ms, g.mName[id])
		} else if id >= 63 && a.methods&(1<<63) != 0 {
			if _, ok := g.moreMethods[uint64(i)<<32|uint64(id)]; ok {
				ms = append(ms, g.mName[id])
			}
		}
	}
	slices.Sort(ms)
	kr.Methods = strings.Join(ms, ",")
	deepest, withEdges := g.shape(i)
	for _, s := range g.scratch.svcs {
		kr.Attempts += int(s.attempts)
		kr.Failures += int(s.failures)
		kr.Services = append(kr.Services, ServiceAttempts{Service: g.svcName[s.id], Attempts: int(s.attempts), Failures: int(s.failures), Depth: s.depth})
	}
	if deepest >= 0 {
		kr.Deepest, kr.Amplification = kr.Services[deepest].Service, kr.Services[deepest].Attempts
	}
	if withEdges {
		for _, e := range g.scratch.edges {
			c := g.svcName[e.from]
			// depths indexed the key's services (their order since sorted; the set the same)
			if _, received := g.scratch.at[e.from]; !received && !slices.Contains(kr.Callers, c) {
				kr.Callers = append(kr.Callers, c)
			}
		}
		slices.Sort(kr.Callers)
	}
	return kr
}
