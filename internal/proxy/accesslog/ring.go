package accesslog

import (
	"encoding/binary"
	"sync/atomic"
)

// Ring is the access log of one event loop: a single-producer ring the loop's thread alone
// writes and the Writer's goroutine alone reads, so that no loop shares a line of it with
// another (the shared ring's head is one line every loop compare-and-swaps).
//
// A committed record is packed into whole cache lines: a 48-byte binary header (the numbers
// and the values' lengths), then the values back to back; a short record (the benchmark's:
// method, authority, path, trace id, request id, storm op) takes 3 lines of 64 bytes, against
// the 5 or so a slot of the shared ring spans. The loop fills its own staging Entry, which
// stays in its cache, and Commit copies the packed form into the ring; the writer reads those
// lines once and publishes how far it read once per batch, not per record.
//
// Begin, Commit and a drop never block, never allocate and never take a lock: the loop must
// not wait on its log.
type Ring struct {
	w *Writer

	// The producer's line: its position (lines), the last tail it read and its drops.
	head      atomic.Uint64 // lines published (written by the producer, read by the writer)
	pos       uint64        // the producer's next line (== head outside Begin/Commit)
	tailCache uint64        // the tail as the producer last read it
	nudgedAt  uint64        // the tail when the producer last woke the writer for a full ring
	dropped   atomic.Uint64
	stage     Entry
	_         [64]byte

	// The consumer's line.
	tail atomic.Uint64 // lines the writer is done with (written by the writer)
	_    [56]byte

	buf   []byte // lines*64 bytes, 64-byte aligned
	lines uint64 // a power of two
	mask  uint64
	half  uint64
}

// DefaultRingBytes is a loop's ring when NewRing is given 0: 1 MiB, 16,384 lines, about 5,400
// records of the benchmark's request (3 lines each): at 50k attempts/s per loop, 100 ms of a
// stalled writer, and the ring stays within one core's L2.
const DefaultRingBytes = 1 << 20

const (
	lineSize = 64
	// hdrSize: u16 record length, time and duration (i64), attempt, budget in and out,
	// status (16 bits each), grpc status (i64: an upstream's grpc-status is any uint32,
	// -1 none; 16 bits logged 99999 as none), then the length of each value (u16).
	hdrSize = lensAt + numPacked*2
	// lensAt: where the values' lengths start.
	lensAt = 2 + 8 + 8 + 4*2 + 8
	// skipMark in a record's length field: the rest of the ring up to its end is unused (the
	// next record did not fit there and starts again at line 0).
	skipMark = 0xffff
	// strMax cuts the string fields (upstream, exhausted, error) as fieldMax cuts the others.
	strMax = 255
)

// The values of a packed record, in their order in it: the byte fields, then the strings.
const (
	pUpstream = numFields + iota
	pExhausted
	pError
	numPacked
)

// maxRecordLines is the most a record takes; Begin wants room for two (one more for the skip
// at the ring's end).
var maxRecordLines = (hdrSize + dataSize + 3*strMax + lineSize - 1) / lineSize

// NewRing returns a ring for one event loop, of bytes bytes (rounded up to a power of two of
// lines; 0: DefaultRingBytes), drained by w's goroutine. One goroutine (or one locked thread)
// must be its only producer. Call it before the loop serves.
func (w *Writer) NewRing(bytes int) *Ring {
	if bytes <= 0 {
		bytes = DefaultRingBytes
	}
	n := uint64(1)
	for n*lineSize < uint64(bytes) || n < uint64(4*maxRecordLines) {
		n <<= 1
	}
	// No alignment fix-up: the buffer is a power of two bytes (n 64-byte
	// lines), which Go's allocator places at a multiple of its size class
	// in a page-aligned span (or in a span of its own), so ring lines are
	// cache lines. Were they not, only speed would suffer, never a record.
	r := &Ring{w: w, buf: make([]byte, n*lineSize), lines: n, mask: n - 1, half: n / 2}
	r.stage.ring = r
	w.ringsMu.Lock()
	rings := append(append([]*Ring(nil), w.loadRings()...), r)
	w.rings.Store(&rings)
	w.ringsMu.Unlock()
	return r
}

// Begin returns the loop's record to fill for one attempt, or nil when the ring has no room
// (the line is dropped and counted). Set its fields, then Commit it (or Writer.Commit).
func (r *Ring) Begin() *Entry {
	need := uint64(2 * maxRecordLines)
	if r.lines-(r.pos-r.tailCache) < need {
		r.tailCache = r.tail.Load()
		if r.lines-(r.pos-r.tailCache) < need {
			r.dropped.Add(1)
			return nil
		}
	}
	r.stage.reset()
	return &r.stage
}

// Commit packs the record from Begin into the ring and hands it to the writer. The packed
// form has no Cut nor BodyBytes: a line that has them is written when a streamed body ends,
// off the loop, through the shared ring (Writer.CommitRecord).
func (r *Ring) Commit(e *Entry) {
	rec := &e.Record
	size := hdrSize + int(rec.used) + clip(len(rec.Upstream)) + clip(len(rec.Exhausted)) + clip(len(rec.Error))
	k := uint64((size + lineSize - 1) / lineSize)
	at := r.pos & r.mask
	if at+k > r.lines {
		// The record does not fit before the ring's end: mark the rest skipped, start at 0.
		binary.LittleEndian.PutUint16(r.buf[at*lineSize:], skipMark)
		r.pos += r.lines - at
		at = 0
	}
	b := r.buf[at*lineSize : at*lineSize+uint64(size)]
	le := binary.LittleEndian
	le.PutUint16(b[0:], uint16(size))
	le.PutUint64(b[2:], uint64(rec.TimeNanos))
	le.PutUint64(b[10:], uint64(rec.DurationNanos))
	le.PutUint16(b[18:], uint16(rec.Attempt))
	le.PutUint16(b[20:], uint16(rec.BudgetIn))
	le.PutUint16(b[22:], uint16(rec.BudgetOut))
	le.PutUint16(b[24:], uint16(rec.Status))
	le.PutUint64(b[26:], uint64(int64(rec.GRPCStatus)))
	p := hdrSize
	for f := range numFields {
		le.PutUint16(b[lensAt+2*f:], rec.n[f])
		p += copy(b[p:], rec.get(f))
	}
	for i, s := range [3]string{rec.Upstream, rec.Exhausted, rec.Error} {
		s = s[:clip(len(s))]
		le.PutUint16(b[lensAt+2*(numFields+i):], uint16(len(s)))
		p += copy(b[p:], s)
	}
	r.pos += k
	r.head.Store(r.pos) // publishes the record (the writer loads head before reading it)
	r.w.committed(r)
}

func clip(n int) int { return min(n, strMax) }

// committed wakes the writer when the ring is over half full (it polls every pollEvery; this is
// for a burst that would fill the ring before its next poll), at most once per advance of
// the writer; and when the writer sleeps because the proxy was idle. Never per record.
func (w *Writer) committed(r *Ring) {
	if r.pos-r.tailCache > r.half {
		r.tailCache = r.tail.Load()
		if r.pos-r.tailCache > r.half && r.nudgedAt != r.tailCache {
			r.nudgedAt = r.tailCache
			w.nudge()
			return
		}
	}
	if w.sleeping.Load() {
		w.nudge()
	}
}

// Dropped is how many of this loop's lines were dropped because its ring was full.
func (r *Ring) Dropped() uint64 { return r.dropped.Load() }

// ready reports whether the ring holds a record the writer has not read.
func (r *Ring) ready() bool { return r.head.Load() != r.tail.Load() }

// drainRing formats every record the ring holds into the writer's buffer; it returns how
// many. The writer's goroutine only.
func (w *Writer) drainRing(r *Ring) int {
	t, h := r.tail.Load(), r.head.Load()
	n := 0
	for t != h {
		at := t & r.mask
		b := r.buf[at*lineSize:]
		size := binary.LittleEndian.Uint16(b)
		if size == skipMark {
			t += r.lines - at
			continue
		}
		w.unpack(b[:size])
		w.buf = w.appendLine(w.buf, &w.scratch)
		w.lines++
		n++
		t += uint64((int(size) + lineSize - 1) / lineSize)
		if len(w.buf) >= cap(w.buf)-4096 {
			r.tail.Store(t)
			w.flush()
		}
	}
	r.tail.Store(t)
	return n
}

// unpack decodes a packed record into the writer's scratch record (its strings point into
// the scratch's own copy, valid until the next unpack).
func (w *Writer) unpack(b []byte) {
	le := binary.LittleEndian
	s := &w.scratch
	s.TimeNanos = int64(le.Uint64(b[2:]))
	s.DurationNanos = int64(le.Uint64(b[10:]))
	s.Attempt = int(le.Uint16(b[18:]))
	s.BudgetIn = int(int16(le.Uint16(b[20:])))
	s.BudgetOut = int(int16(le.Uint16(b[22:])))
	s.Status = int(le.Uint16(b[24:]))
	s.GRPCStatus = int(int64(le.Uint64(b[26:])))
	s.used = 0
	p := hdrSize
	for f := range numFields {
		n := int(le.Uint16(b[lensAt+2*f:]))
		k := copy(s.data[s.used:], b[p:p+n])
		s.off[f], s.n[f] = s.used, uint16(k)
		s.used += uint16(k)
		p += n
	}
	var strs [3]string
	for i := range strs {
		n := int(le.Uint16(b[lensAt+2*(numFields+i):]))
		strs[i] = w.intern(b[p : p+n])
		p += n
	}
	s.Upstream, s.Exhausted, s.Error = strs[0], strs[1], strs[2]
}

// maxInterned bounds the writer's interned strings. The three string fields
// come from small sets (the --upstreams names, the exhaustion reasons, the
// failure conditions), so the map fills once and unpacking allocates
// nothing; past the bound a string is allocated per line (still correct).
const maxInterned = 256

// intern returns b as a string without allocating when it was seen before.
// Only the writer's goroutine calls it.
func (w *Writer) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := w.interned[string(b)]; ok { // the lookup does not allocate
		return s
	}
	s := string(b)
	if len(w.interned) < maxInterned {
		if w.interned == nil {
			w.interned = make(map[string]string, 16)
		}
		w.interned[s] = s
	}
	return s
}
