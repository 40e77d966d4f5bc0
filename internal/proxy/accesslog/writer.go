package accesslog

import (
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Marker is the value of every line's "log" field, by which observe tells the access log from
// the proxy's other output on the same stream.
const Marker = "retrycap-access"

// DefaultSlots is the ring's size when New is given 0: at under 1 KiB a slot, about
// 3.5 MiB; at 50k attempts/s it absorbs 80 ms of a stalled writer.
const DefaultSlots = 4096

// Entry is one ring slot: the Record the data path fills between Begin and Commit, and its
// Vyukov sequence number (pos: free for the producer at pos; pos+1: committed, for the
// consumer).
type Entry struct {
	seq atomic.Uint64
	Record
	ring *Ring    // the event loop's ring this is the staging record of; nil: a shared slot
	_    [32]byte // keeps neighbouring slots' sequence numbers on different cache lines
}

// Writer is the access log of one proxy: bounded rings of preallocated records filled by the
// data path and drained by one background goroutine into out. One ring is shared by every
// producer (Begin: the goroutine engine, the h2 paths); each event loop has its own (NewRing).
type Writer struct {
	service string
	out     io.Writer
	slots   []Entry
	mask    uint64
	head    atomic.Uint64 // next position to reserve (producers)
	_       [56]byte
	tail    uint64 // next position to read (the consumer only)
	_       [56]byte
	// sleeping is read by every commit and written only when the writer goes to sleep or
	// wakes: on a line of its own it stays in the producers' caches.
	sleeping atomic.Bool
	_        [60]byte

	rings   atomic.Pointer[[]*Ring] // the event loops' (NewRing)
	ringsMu sync.Mutex              // NewRing's

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once

	dropped atomic.Uint64
	written atomic.Uint64
	errors  atomic.Uint64

	buf   []byte // the consumer's
	lines uint64 // lines in buf
	// The consumer's clock prefix: the line time's "2006-01-02T15:04:05." for the Unix second
	// sec, formatted once per second rather than once per line.
	sec    int64
	prefix []byte
	// scratch is a loop ring's record unpacked for formatting.
	scratch Record
	// interned holds the scratch's strings (see intern).
	interned map[string]string
}

// New returns a writer of service's attempts to out with a ring of slots entries (rounded up
// to a power of two; 0: DefaultSlots) and starts its background goroutine; Close stops it.
func New(service string, out io.Writer, slots int) *Writer {
	if slots <= 0 {
		slots = DefaultSlots
	}
	n := 1
	for n < slots {
		n <<= 1
	}
	w := &Writer{
		service: service, out: out, slots: make([]Entry, n), mask: uint64(n - 1),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		buf: make([]byte, 0, 64<<10),
	}
	for i := range w.slots {
		w.slots[i].seq.Store(uint64(i))
	}
	go w.run()
	return w
}

// Begin reserves a slot for one attempt's record, or returns nil when the ring is full (the
// line is dropped and counted). The caller sets the record's fields, then calls Commit with
// the entry. Begin and Commit never block and never allocate.
func (w *Writer) Begin() *Entry {
	for {
		pos := w.head.Load()
		s := &w.slots[pos&w.mask]
		seq := s.seq.Load()
		switch {
		case seq == pos:
			if w.head.CompareAndSwap(pos, pos+1) {
				s.reset()
				return s
			}
		case seq < pos:
			w.dropped.Add(1)
			return nil
		}
		// seq > pos: another producer took pos; retry with the new head.
	}
}

// BeginOn is r.Begin, or Begin when r is nil (a caller with no ring of its own).
func (w *Writer) BeginOn(r *Ring) *Entry {
	if r != nil {
		return r.Begin()
	}
	return w.Begin()
}

// Commit hands an entry from Begin (or from a Ring's Begin) to the background writer.
func (w *Writer) Commit(e *Entry) {
	if e.ring != nil {
		e.ring.Commit(e)
		return
	}
	e.seq.Store(e.seq.Load() + 1)
	if w.sleeping.Load() {
		w.nudge()
	}
}

// CommitRecord writes a record filled outside the rings (the line of an attempt whose answer
// body streams, written when the body ends) through the shared ring: a copy into a slot of it,
// then Commit. False when the ring is full (the line is dropped and counted, as by Begin).
func (w *Writer) CommitRecord(r *Record) bool {
	e := w.Begin()
	if e == nil {
		return false
	}
	e.Record = *r
	w.Commit(e)
	return true
}

// nudge wakes the background writer (a token it takes at its next wait if it is not waiting).
func (w *Writer) nudge() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Dropped is how many lines were dropped because a ring was full (the shared one or a loop's).
func (w *Writer) Dropped() uint64 {
	n := w.dropped.Load()
	for _, r := range w.loadRings() {
		n += r.Dropped()
	}
	return n
}

func (w *Writer) loadRings() []*Ring {
	if p := w.rings.Load(); p != nil {
		return *p
	}
	return nil
}

// Written is how many lines were written.
func (w *Writer) Written() uint64 { return w.written.Load() }

// WriteErrors is how many writes to out failed (their lines are lost).
func (w *Writer) WriteErrors() uint64 { return w.errors.Load() }

// Close writes what is committed and stops the background goroutine.
func (w *Writer) Close() error {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	return nil
}

// The background writer's pace: while lines come it wakes every pollEvery and drains what the
// rings hold (the data path then never touches a channel: 4096 shared slots per 5 ms is 800k
// lines/s before one is dropped), writing its buffer when it is nearly full, when a poll finds
// nothing new, or flushEvery after the last write. Only after idlePolls polls in a row found
// nothing (100 ms without a line) does it sleep until a commit wakes it: a proxy at a few
// requests a second wakes it once per pause, not once per line, and an idle proxy does not poll.
// A loop's ring over half full wakes it early (Ring.Commit), once per advance of the writer.
const (
	pollEvery  = 5 * time.Millisecond
	flushEvery = 200 * time.Millisecond
	idlePolls  = 20
)

func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	last := time.Now()
	idle := 0
	for {
		n := w.drain()
		switch {
		case n == 0 && idle < idlePolls:
			idle++
			if len(w.buf) > 0 {
				w.flush()
				last = time.Now()
			}
		case n == 0:
			idle = 0
			w.flush()
			last = time.Now()
			// Sleep until a producer wakes us: announce it, then look once more (a commit
			// before the announcement is seen here; one after it sees the flag and wakes us).
			w.sleeping.Store(true)
			if !w.ready() {
				select {
				case <-w.wake:
				case <-w.stop:
					w.sleeping.Store(false)
					w.drain()
					w.flush()
					return
				}
			}
			w.sleeping.Store(false)
			continue
		case time.Since(last) >= flushEvery:
			idle = 0
			w.flush()
			last = time.Now()
		default:
			idle = 0
		}
		select {
		case <-t.C:
		case <-w.wake:
		case <-w.stop:
			w.drain()
			w.flush()
			return
		}
	}
}

// drain formats every committed record, writing the buffer whenever it is nearly full; it
// returns how many it took. The shared ring's committed records are counted before the
// loops' rings are read and formatted after them: a connection handed from a loop to the
// goroutine engine has its loop lines (committed before the hand-off) written before its
// later ones, so a connection's lines stay in order.
func (w *Writer) drain() int {
	k := w.sharedReady()
	n := 0
	for _, r := range w.loadRings() {
		n += w.drainRing(r)
	}
	for range k {
		w.drainOne()
		n++
		if len(w.buf) >= cap(w.buf)-2048 {
			w.flush()
		}
	}
	return n
}

// sharedReady is how many records the shared ring holds committed, in order, from its tail.
func (w *Writer) sharedReady() int {
	k := 0
	for t := w.tail; k < len(w.slots); t++ {
		if w.slots[t&w.mask].seq.Load() != t+1 {
			break
		}
		k++
	}
	return k
}

func (w *Writer) ready() bool {
	s := &w.slots[w.tail&w.mask]
	if s.seq.Load() == w.tail+1 {
		return true
	}
	for _, r := range w.loadRings() {
		if r.ready() {
			return true
		}
	}
	return false
}

// drainOne formats the next committed record into buf and frees its slot.
func (w *Writer) drainOne() bool {
	s := &w.slots[w.tail&w.mask]
	if s.seq.Load() != w.tail+1 {
		return false
	}
	w.buf = w.appendLine(w.buf, &s.Record)
	w.lines++
	s.seq.Store(w.tail + w.mask + 1)
	w.tail++
	return true
}

func (w *Writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	if _, err := w.out.Write(w.buf); err != nil {
		w.errors.Add(1)
	} else {
		w.written.Add(w.lines)
	}
	w.buf, w.lines = w.buf[:0], 0
}

// AppendLine appends r as one JSON line:
//
//	{"log":"retrycap-access","time":"2026-12-01T10:00:00.000123Z","service":"order",
//	 "upstream":"payment","method":"POST","authority":"payment","path":"/charge","attempt":2,
//	 "budget_in":4,"budget_out":1,"status":503,"grpc_status":14,"duration_us":1520,
//	 "exhausted":"attempts","error":"connect-failure","trace_id":"4bf9...","idempotency_key":"k",
//	 "request_id":"r","storm_op":"17"}
//
// budget_in/out are left out without a chain budget, grpc_status without one, the strings
// when empty; cut and body_bytes (after error) only for a streamed body cut short.
func AppendLine(b []byte, service string, r *Record) []byte {
	b = append(b, `{"log":"`+Marker+`","time":"`...)
	b = appendTime(b, r.TimeNanos)
	return appendFields(b, service, r)
}

// appendLine is AppendLine with the writer's clock prefix: the date and the time of day are
// formatted when the second changes, the microseconds per line.
func (w *Writer) appendLine(b []byte, r *Record) []byte {
	b = append(b, `{"log":"`+Marker+`","time":"`...)
	sec, ns := r.TimeNanos/1e9, r.TimeNanos%1e9
	if ns < 0 {
		sec, ns = sec-1, ns+1e9
	}
	if sec != w.sec || len(w.prefix) == 0 {
		w.prefix = appendTime(w.prefix[:0], sec*1e9)
		w.prefix = w.prefix[:len(w.prefix)-len("000000Z")]
		w.sec = sec
	}
	b = append(b, w.prefix...)
	b = appendMicros(b, int(ns/1000))
	return appendFields(b, w.service, r)
}

// appendFields is a line after its time (from the time's closing quote). Each field's key is
// appended as one constant with its punctuation (`,"upstream":"`): the writer formats every
// line, and fewer, longer appends are most of what makes it cheaper.
func appendFields(b []byte, service string, r *Record) []byte {
	b = append(b, '"')
	b = appendStr(b, `,"service":"`, service)
	b = appendStr(b, `,"upstream":"`, r.Upstream)
	b = appendStr(b, `,"method":"`, r.get(fMethod))
	b = appendStr(b, `,"authority":"`, r.get(fAuthority))
	b = appendStr(b, `,"path":"`, r.get(fPath))
	b = appendInt(b, `,"attempt":`, int64(r.Attempt))
	if r.BudgetIn >= 0 {
		b = appendInt(b, `,"budget_in":`, int64(r.BudgetIn))
		b = appendInt(b, `,"budget_out":`, int64(r.BudgetOut))
	}
	b = appendInt(b, `,"status":`, int64(r.Status))
	if r.GRPCStatus >= 0 {
		b = appendInt(b, `,"grpc_status":`, int64(r.GRPCStatus))
	}
	b = appendInt(b, `,"duration_us":`, r.DurationNanos/1000)
	b = appendStr(b, `,"exhausted":"`, r.Exhausted)
	b = appendStr(b, `,"error":"`, r.Error)
	if r.Cut != "" {
		b = appendStr(b, `,"cut":"`, r.Cut)
		b = appendInt(b, `,"body_bytes":`, r.BodyBytes)
	}
	b = appendStr(b, `,"trace_id":"`, r.get(fTrace))
	b = appendStr(b, `,"idempotency_key":"`, r.get(fKey))
	b = appendStr(b, `,"request_id":"`, r.get(fRequestID))
	b = appendStr(b, `,"storm_op":"`, r.get(fStormOp))
	return append(b, "}\n"...)
}

// appendInt appends a number after its key (`,"attempt":`).
func appendInt(b []byte, key string, v int64) []byte {
	b = append(b, key...)
	return strconv.AppendInt(b, v, 10)
}

// appendStr appends a string value after its key (`,"path":"`), escaped, closing its quote;
// nothing when it is empty.
func appendStr[T string | []byte](b []byte, key string, v T) []byte {
	if len(v) == 0 {
		return b
	}
	b = append(b, key...)
	if plain(v) {
		b = append(b, v...)
	} else {
		for i := 0; i < len(v); i++ {
			b = appendEscaped(b, v[i])
		}
	}
	return append(b, '"')
}

// plain reports whether a value needs no escaping in a JSON string.
func plain[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendTime writes Unix nanoseconds as 2006-01-02T15:04:05.000000Z (UTC, microseconds).
func appendTime(b []byte, nanos int64) []byte {
	t := time.Unix(0, nanos).UTC()
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	b = append4(b, y)
	b = append(b, '-')
	b = append2(b, int(mo))
	b = append(b, '-')
	b = append2(b, d)
	b = append(b, 'T')
	b = append2(b, h)
	b = append(b, ':')
	b = append2(b, mi)
	b = append(b, ':')
	b = append2(b, sec)
	b = append(b, '.')
	return appendMicros(b, t.Nanosecond()/1000)
}

// appendMicros ends a time with its microseconds: "000123Z".
func appendMicros(b []byte, us int) []byte {
	b = append2(b, us/10000)
	b = append2(b, us/100%100)
	b = append2(b, us%100)
	return append(b, 'Z')
}

func append2(b []byte, n int) []byte { return append(b, byte('0'+n/10%10), byte('0'+n%10)) }

func append4(b []byte, n int) []byte { return append2(append2(b, n/100), n%100) }

const hexDigits = "0123456789abcdef"

// appendEscaped writes one byte of a JSON string: quotes, backslashes and control bytes
// escaped, bytes >= 0x80 as \u00XX (a header value is bytes, not necessarily UTF-8; observe
// reads them back as those bytes' Latin-1 letters).
func appendEscaped(b []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(b, '\\', c)
	case c < 0x20 || c >= 0x7f:
		return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
	}
	return append(b, c)
}
