package h2

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// A relayed stream and its attempts, as state machines driven by frames
// (the client's reader, the upstreams' readers) and timers (per try,
// backoff, re-send, grpc-timeout), all under the client connection's mu.
// The policy is callState's (decide.go), the stdlib path's own.

var errReplayOverflow = errors.New("retrycap-proxy: request body larger than --max-replay-bytes: cannot re-send")

// rstream is one client stream. A stream that ended is kept for the
// connection's next one (cconn.free, reuse): cc and first.s never change,
// and gen counts its uses, so that what may outlive one use (an upstream
// reader that looked its attempt up, a timer, the pool's queue) can tell
// it is not its own any more; everything else is in useState, reset
// whole.
type rstream struct {
	cc  *cconn
	gen uint32 // under cc.mu
	// endRec is the access-log line of the answer passed on, waiting for
	// the stream's end (callState.endRec); kept across uses.
	endRec accesslog.Record
	useState
	// Its first attempt (most calls have one); its state is reset by
	// reuse and next.
	first ratt
}

// useState is a stream's state for one use.
type useState struct {
	id     uint32
	cs     *callState
	own    *ownAnswer // answered without an attempt
	pool   *rpool
	fields []hpack.HeaderField // the request's regular fields
	// nfields: the request's fields (its trailers' too) counted in
	// cc.heldFields while the stream is open.
	nfields int
	// nanswer: the fields of its attempts' answers (and trailers)
	// counted in cc.heldAnswer while the stream is open.
	nanswer int
	// acts counts the frames of the call from its client and its
	// upstream (under mu, no clock read per frame); the connection's
	// keepalive sweep compares it with actsSeen and, when it has not
	// moved since activeAt, ends the stream after --stream-idle-timeout
	// (idleOut). activeAt 0: not swept yet.
	acts, actsSeen uint32
	activeAt       time.Duration
	// interimOut: the header list bytes of the upstreams' 1xx answers
	// passed on to the client (--pass-interim-answers), bounded by
	// forward.MaxInterimRelayed per call as on the HTTP/1.1 path.
	interimOut int

	// The request body as the client sent it: kept whole for replay while
	// it fits --max-replay-bytes (gRPC A6), else from the current
	// attempt's offset (base) on.
	body        []byte
	base        int64
	overflow    bool
	reqEnd      bool
	declLen     int64 // the request's content-length, -1 without one (checked against the body)
	reqTrailers []hpack.HeaderField
	recvWin     inflow // the client's on the stream
	uncredited  int64  // received (padding too), not credited back
	fwd         int64  // body bytes passed on to an attempt (credited)

	// The answer toward the client. sendRel is the stream's send window
	// less the client's SETTINGS_INITIAL_WINDOW_SIZE (sendAvail): a
	// change of the setting moves every stream's window at once, in
	// O(1), however many streams the client opened.
	sendRel     int64
	outq        []byte
	outEnd      bool
	outTrailers []hpack.HeaderField
	// outTrailed: the end goes out as a trailers block even when
	// outTrailers is empty (the upstream sent an empty one: grpc-go's
	// client reads UNKNOWN from it, INTERNAL from an end on DATA).
	outTrailed  bool
	connBlocked bool
	// winBlocked: waiting for its own window, at cc.winBlocked[winIdx].
	winBlocked  bool
	winIdx      int
	headersSent bool
	respDone    bool
	// cutBy is who ended the answer before its end went out ("" while
	// none did: markCut), for the access log and the cut metric.
	cutBy string

	n       int
	probe   bool
	att     *ratt // the attempt the request body goes to
	last    *ratt // a failed attempt kept until the next is allowed (a breaker refusing it passes it on)
	relayed *ratt // the attempt whose answer is passed on
	reason  policy.Reason
	timer   *time.Timer // backoff
	dlTimer *time.Timer // grpc-timeout
	done    bool

	// Allocated with the stream: its policy state, its header list as
	// the policy reads it (in fieldBuf when it fits: the decoded block is
	// the connection's, reused).
	call     callState
	hdr      fieldHeaders
	fieldBuf [8]hpack.HeaderField
}

// ratt is one attempt (one upstream stream; a re-send after GOAWAY or
// REFUSED_STREAM is the same attempt on a new one). s never changes (a
// stream's first attempt is reused with it); the rest is attemptState.
type ratt struct {
	s *rstream
	attemptState
}

// attemptState is an attempt's state.
type attemptState struct {
	n     int
	extra []hpack.HeaderField // the fields this attempt sets (attemptHeaders), in extraBuf
	// The attempt's own arrays for its pseudo-headers and extra fields.
	pseudoBuf [4]hpack.HeaderField
	extraBuf  [6]hpack.HeaderField
	uc        *upconn
	id        uint32
	state     attState // the request's lifecycle on its upstream stream (attstate.go)
	sent      int64
	sendWin   outflow // the upstream's stream window
	blocked   bool    // in uc.blocked; under uc.mu
	// The per-try timeout: a in its client connection's list of attempts
	// under way, in start order (cconn.tries), due at due (since cc.born).
	tprev, tnext *ratt
	inTries      bool
	// tryLater: its per-try timeout starts when the client's request
	// ends (startTry), not when it starts; until then it times out only
	// an upstream that took none of the body it was offered for a
	// period (perTryTimeout), armSent the body sent at the last look.
	tryLater bool
	armSent  int64
	due      time.Duration
	t0       time.Time
	resends  int
	// refused: the upstream provably never processed it (unprocessed), and
	// the body it would go again with overflowed the replay buffer: its
	// client is told so (refuse), not answered 502.
	refused bool

	timedOut   bool
	cut        bool // its timeout is the caller's time left, not the per-try timeout
	gotHeaders bool
	// answered: the upstream sent a header block (a 1xx, a final head,
	// one the relay refused as malformed) or DATA on the stream, or broke
	// the protocol there: it processed the request. Not re-sent as never
	// processed (REFUSED_STREAM, GOAWAY below it), and a gRPC call's
	// failure after it is not retried (judge: gRPC A6 commits a call at
	// its response headers).
	answered bool
	info     int64 // the header list size of the 1xx answers so far
	hdrs     []hpack.HeaderField
	trailers []hpack.HeaderField
	// hdrs' and trailers' arrays while they fit (an upstream's decoded
	// block is its connection's, reused).
	hdrBuf    [4]hpack.HeaderField
	trailBuf  [3]hpack.HeaderField
	hasTrails bool
	q         []byte // answer bytes received, not yet passed on
	upEnded   bool
	// The answer's flow control toward the upstream (flow.go): upAvail
	// is the window the upstream may still send into, held what it sent
	// that was not passed on to the client yet; both are charged to the
	// client connection's budget (cconn.upHeld).
	upAvail int64
	held    int64
	starved bool // in cc.starved: waiting for budget to top its window up
	grown   bool // its answer flowed: its window may grow past relayFirstGrant
	judged  bool
	closed  bool
	res     outcome
	err     error // failed after it was judged (held, or relayed)
	bodyIn  int64 // the answer's DATA bytes read from the upstream (padding not counted)
	// respLen is the answer's content-length, checked against its DATA
	// (-1: none, or noBody); noBody: an answer without content whatever
	// it declares (to HEAD, 204, 304: RFC 9110 9.3.2, 15.3.5, 15.4.5).
	respLen int64
	noBody  bool
}

func newStream(cc *cconn, f *hblock) *rstream {
	authority := f.pseudo("authority")
	if authority == "" {
		authority = hostField(f.regular())
	}
	hostPort := cc.target
	if hostPort == "" {
		hostPort = authority
	}
	s := cc.reuse()
	body, outq := s.body[:0], s.outq[:0]
	s.useState = useState{id: f.streamID, body: body, outq: outq,
		recvWin: newInflow(relayStreamWindow), reqEnd: f.endStream}
	regular := append(s.fieldBuf[:0], f.regular()...)
	s.fields, s.hdr = regular, fieldHeaders(regular)
	hdr := &s.hdr // a pointer into s: no allocation for the interface
	cl := int64(-1)
	if v := fieldValue(regular, "content-length"); v != "" {
		// Valid and the same in every field (badRequestFields).
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			cl = n
		}
	}
	s.declLen = cl
	if f.endStream {
		cl = 0
	}
	s.cs = &s.call
	s.own = cc.h.initCall(s.cs, hostPort, f.pseudo("method"), authority, f.pseudo("path"), hdr, cl, grpcContentType(fieldValue(regular, "content-type")))
	s.cs.endRec = &s.endRec
	return s
}

// maxFree is the most ended streams a connection keeps for reuse (as
// many as a client like grpc-go's default keeps in flight reuse all), and
// maxKeptBuf the largest body or answer buffer a kept stream keeps: a
// connection holds at most 16 x (~2.3 KB + 3 KiB) for reuse.
const (
	maxFree    = 16
	maxKeptBuf = 1 << 10
)

// reuse is an ended stream of the connection (its first attempt reset),
// or a new one; its useState is the caller's to reset; mu held.
func (cc *cconn) reuse() *rstream {
	if n := len(cc.free); n > 0 {
		s := cc.free[n-1]
		cc.free[n-1] = nil
		cc.free = cc.free[:n-1]
		s.gen++
		s.first.attemptState = attemptState{q: s.first.q[:0]}
		return s
	}
	s := &rstream{cc: cc}
	s.first.s = s
	return s
}

// recycle keeps an ended stream for the connection's next (close calls
// it last: nothing but a check of gen, or of an attempt's upstream
// stream, may touch it after); mu held.
func (cc *cconn) recycle(s *rstream) {
	if len(cc.free) >= maxFree || cc.closed {
		return
	}
	for _, b := range []*[]byte{&s.body, &s.outq, &s.first.q} {
		if cap(*b) > maxKeptBuf {
			*b = nil
		}
	}
	// Its header lists are the next use's anew (newStream): not kept
	// alive meanwhile (a request's may be 17,000 fields, an answer's
	// too).
	s.fields, s.hdr, s.reqTrailers, s.outTrailers = nil, nil, nil, nil
	s.first.hdrs, s.first.trailers = nil, nil
	cc.free = append(cc.free, s)
}

// start runs the call; mu held (as for every method below).
func (s *rstream) start() {
	if s.own != nil {
		s.answer(s.own)
		return
	}
	if !s.reqEnd && strings.EqualFold(fieldValue(s.fields, "expect"), "100-continue") {
		// The relay's own 100 Continue, as the HTTP/1.1 path answers it
		// (the body is read and replayed by the relay, not held back for
		// the upstream's word; the upstream's 1xx are dropped): a client
		// waiting for it would wait its own timeout (curl 1 s) first.
		_ = s.cc.out.headers(s.id, false, continue100, nil, nil, false)
	}
	s.pool = s.cc.h.relayPool(s.cs.addr)
	if s.cs.grpc && s.cs.dl.Set() {
		// A gRPC answer is a stream the deadline ends too (a plain answer
		// is not cut once it began, as on the HTTP/1.1 path); the
		// attempts themselves are bounded by their per-try timeout,
		// min(per-try, time left) (trackTry).
		gen := s.gen
		s.dlTimer = time.AfterFunc(s.cs.dl.Left(s.cs.h.cfg.Now()), func() { s.onDeadline(gen) })
	}
	s.next()
}

// continue100 is the relay's own 100 Continue (start).
var continue100 = []hpack.HeaderField{{Name: ":status", Value: "100"}}

// next starts the next attempt, if the breaker and the deadline let it.
func (s *rstream) next() {
	cs := s.cs
	n := s.n + 1
	now := cs.h.cfg.Now()
	if cs.dl.Gone(now) {
		// A retry whose backoff ran into the deadline (Decide left it
		// room; a stalled machine did not): checked before the breaker,
		// as the HTTP/1.1 path does (forward.Exchange.NextAttempt).
		s.outOfTime(n - 1)
		return
	}
	ok, probe := cs.allow(now)
	if !ok {
		if s.last == nil {
			s.answer(cs.ownAnswer(policy.ReasonBreaker, "circuit breaker open", 0))
			return
		}
		// The last failure is the answer, as for HTTP/1.1.
		l := s.last
		s.last = nil
		s.finish(l, policy.ReasonBreaker, n-1)
		return
	}
	if s.last != nil {
		s.last.release()
		s.last = nil
	}
	s.n, s.probe = n, probe
	cs.attemptStart = now
	var a *ratt
	if n == 1 {
		a = &s.first
		q := a.q[:0] // its buffer, kept from an earlier use
		a.attemptState = attemptState{n: n, t0: time.Now(), q: q}
	} else {
		a = &ratt{s: s, attemptState: attemptState{n: n, t0: time.Now()}}
	}
	s.att = a
	a.extra = cs.attemptHeaders(n, now, a.extraBuf[:0])
	if n > 1 && s.overflow {
		a.res = outcome{err: errReplayOverflow, cond: policy.CondReset}
		s.decide(a)
		return
	}
	timeout, cut := cs.tryTimeout(now)
	a.cut = cut
	// While the client is still sending (a client stream, a bidi call,
	// an upload) the upstream's time to answer has not begun: the
	// per-try timeout counts from the request's end (startTry), as Envoy
	// starts its per_try_timeout (create_per_try_timeout_on_request_complete_).
	// Until then its timer only watches the upstream take the body
	// (perTryTimeout). The caller's deadline bounds the attempt from now
	// all the same (cut).
	a.tryLater, a.armSent = !s.reqEnd && !cut, 0
	s.cc.trackTry(a, timeout)
	s.dispatch(a)
}

// dispatch puts a on a connection of the upstream's pool, or in its queue.
func (s *rstream) dispatch(a *ratt) {
	for {
		uc := s.pool.acquire(a)
		if uc == nil {
			return // waiting for a dial; retryAcquire goes on
		}
		end := s.reqEnd && s.base == 0 && len(s.body) == 0 && s.reqTrailers == nil
		ok, err := uc.open(a, s.pseudo(a), s.fields, a.extra, end)
		if !ok {
			continue // the connection closed under us: the pool has dropped it
		}
		if errors.Is(err, errNoRoom) {
			s.pool.waitRoom(a, uc, blockBound(listSize(s.pseudo(a), s.fields, a.extra), 0))
			return
		}
		var le *upListError
		if errors.As(err, &le) {
			s.overUpstreamList(a, le)
			return
		}
		if err != nil {
			a.fail(err)
			return
		}
		if end {
			a.to(attSent)
		} else {
			a.to(attOpen)
		}
		a.grantUp()
		a.pushBody()
		return
	}
}

// pseudo are the request's pseudo-header fields for attempt a (in its
// own array: no allocation per attempt).
func (s *rstream) pseudo(a *ratt) []hpack.HeaderField {
	authority := s.cs.authority
	if authority == "" {
		authority = s.cs.addr
	}
	a.pseudoBuf = [4]hpack.HeaderField{
		{Name: ":method", Value: s.cs.method},
		{Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: authority},
		{Name: ":path", Value: s.cs.path},
	}
	return a.pseudoBuf[:]
}

// retryAcquire is the pool's answer to a queued attempt: a connection may
// have room now, or the dial failed (err).
func (a *ratt) retryAcquire(gen uint32, err error) {
	cc := a.s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if a.s.gen != gen || a.state != attQueued {
		return
	}
	a.to(attNew)
	if a.s.att != a || a.judged || a.closed || a.s.done {
		return
	}
	if err != nil {
		a.fail(err)
		return
	}
	a.s.dispatch(a)
}

// pushBody sends the request body the attempt has not sent yet, as far as
// the upstream's windows allow, then the end of the request.
func (a *ratt) pushBody() {
	s := a.s
	if s.att != a || a.state != attOpen || a.closed {
		return
	}
	uc := a.uc
	for {
		avail := s.base + int64(len(s.body)) - a.sent
		if avail > 0 {
			want := min(avail, a.sendWin.available(), 16384)
			if want <= 0 {
				return // the stream window: a WINDOW_UPDATE goes on
			}
			k := uc.takeWindow(a, want)
			if k == 0 {
				return
			}
			off := a.sent - s.base
			chunk := s.body[off : off+k]
			a.sent += k
			a.sendWin.take(k)
			last := a.sent == s.base+int64(len(s.body)) && s.reqEnd && s.reqTrailers == nil
			id := a.id
			uc.write(func(fr *http2.Framer) { _ = fr.WriteData(id, last, chunk) })
			if a.sent > s.fwd {
				s.credit(a.sent - s.fwd)
				s.fwd = a.sent
			}
			if s.overflow {
				// Nothing before this attempt's offset will be sent again.
				s.body = s.body[a.sent-s.base:]
				s.base = a.sent
			}
			if last {
				a.to(attSent)
				return
			}
			continue
		}
		if s.reqEnd {
			id := a.id
			if s.reqTrailers != nil {
				tr := s.reqTrailers
				uc.wmu.Lock()
				if n := listSize(tr); uc.out.maxList != 0 && n > uc.out.maxList {
					// As open refuses such headers (x/net's Transport:
					// errRequestHeaderListSize for either).
					le := &upListError{what: "trailers", size: n, max: uc.out.maxList}
					uc.wmu.Unlock()
					s.overUpstreamList(a, le)
					return
				}
				a.to(attSent)
				_ = uc.out.headers(id, true, nil, tr, nil, false)
				uc.wmu.Unlock()
			} else {
				a.to(attSent)
				uc.write(func(fr *http2.Framer) { _ = fr.WriteData(id, true, nil) })
			}
		}
		return
	}
}

// received is how many body bytes the client sent so far.
func (s *rstream) received() int64 { return s.base + int64(len(s.body)) }

// onRequestData takes DATA from the client.
func (s *rstream) onRequestData(data []byte, end bool) {
	s.acts++
	s.uncredited += int64(len(data))
	s.body = append(s.body, data...)
	if !s.overflow && s.base+int64(len(s.body)) > int64(s.cc.h.cfg.MaxReplayBytes) {
		s.overflow = true
	}
	if end {
		s.reqEnd = true
		s.startTry()
	}
	if s.att != nil {
		s.att.pushBody()
	}
}

// startTry starts the per-try timeout of the attempt under way that
// waited for the request's end (next), unless it got its headers or
// ended meanwhile.
func (s *rstream) startTry() {
	a := s.att
	if a == nil || !a.tryLater {
		return
	}
	a.tryLater = false
	if a.closed || a.judged || a.gotHeaders || !a.inTries {
		return
	}
	now := s.cs.h.cfg.Now()
	if now-s.cs.attemptStart < int64(time.Millisecond) {
		// A request whole within a millisecond of its attempt's start (a
		// unary call's HEADERS and DATA): the timer armed at the start
		// stands, no list move per call.
		return
	}
	s.cc.untrackTry(a)
	timeout, cut := s.cs.tryTimeout(now)
	a.cut = cut
	s.cc.trackTry(a, timeout)
}

// onRequestTrailers takes the request's trailers (the connection's
// decoded block: copied).
func (s *rstream) onRequestTrailers(fields []hpack.HeaderField) {
	s.acts++
	s.reqTrailers = append(make([]hpack.HeaderField, 0, len(fields)), fields...)
	s.reqEnd = true
	s.startTry()
	if s.att != nil {
		s.att.pushBody()
	}
}

// credit gives the client back n bytes of window (stream and
// connection), once they were passed on.
func (s *rstream) credit(n int64) {
	s.uncredited -= n
	s.cc.creditConn(n)
	if s.reqEnd || s.done {
		return
	}
	if k := s.recvWin.add(n); k > 0 {
		_ = s.cc.out.fr.WriteWindowUpdate(s.id, k)
	}
}

// perTryTimeout ends an attempt without its response headers; the
// connection's mu held (onTries).
func (a *ratt) perTryTimeout() {
	s := a.s
	if a.closed || a.judged || a.gotHeaders || s.done {
		return
	}
	if a.tryLater && (a.sent != a.armSent || a.sent >= s.received()) {
		// The request is still coming and the upstream is not holding
		// it up: it took body since the last look, or all there is (the
		// relay waits for the client, whose pauses are not the
		// upstream's time). Another period; an upstream that stops
		// reading while the client has more to send is timed out.
		a.armSent = a.sent
		timeout, cut := s.cs.tryTimeout(s.cs.h.cfg.Now())
		a.cut, a.tryLater = cut, !cut
		s.cc.trackTry(a, timeout)
		return
	}
	a.timedOut = true
	a.fail(context.DeadlineExceeded)
}

// fail ends an attempt in a transport failure.
func (a *ratt) fail(err error) {
	s := a.s
	if a.judged {
		a.err = err
		a.release()
		if s.relayed == a {
			s.broken(err)
		}
		return
	}
	if s.att != a || s.done {
		a.release()
		return
	}
	a.res = outcome{err: err, cond: classify(err, a.timedOut), cut: a.timedOut && a.cut, answered: a.answered, interim: a.res.interim}
	a.release()
	s.decide(a)
}

// release frees the attempt's upstream stream (reset unless both sides
// ended) and gives back the window its unread bytes held.
func (a *ratt) release() {
	if a.closed {
		return
	}
	a.closed = true
	a.s.cc.untrackTry(a)
	a.returnBudget()
	if a.state == attQueued && a.s.pool != nil {
		a.s.pool.forget(a)
	}
	if a.uc != nil && a.state >= attOpen {
		a.uc.close(a, !a.upEnded || a.state != attSent, http2.ErrCodeCancel)
	}
}

// windowUpdate is the upstream's WINDOW_UPDATE for the stream (delta), or
// for the connection (delta 0, the attempt was blocked on it).
func (a *ratt) windowUpdate(uc *upconn, id uint32, delta int64) {
	cc := a.s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, id) {
		return
	}
	if !a.sendWin.add(delta) {
		a.broke(false, "the stream's send window over 2^31-1")
		return
	}
	a.pushBody()
}

func fieldValue(fs []hpack.HeaderField, name string) string {
	for i := range fs {
		if fs[i].Name == name {
			return fs[i].Value
		}
	}
	return ""
}

func fieldValues(fs []hpack.HeaderField, name string) []string {
	var out []string
	for i := range fs {
		if fs[i].Name == name {
			out = append(out, fs[i].Value)
		}
	}
	return out
}

// passInterim passes the upstream's 1xx answer (code, its block f) on to
// the client as a HEADERS frame without END_STREAM before the final one
// (RFC 9113 8.1), with --pass-interim-answers, as the HTTP/1.1 path does
// (forward.Exchange.Interim): every 1xx but 100 (the relay answers
// Expect: 100-continue itself and sends the whole body), to plain HTTP/2
// calls only (a gRPC call has no use for hints, and a client library
// reading its answer's headers as gRPC's need not expect any), without
// connection-specific fields and content-length, while the call's passed
// 1xx stay within forward.MaxInterimRelayed (the others dropped, as all
// were before). The attempt is then not retried (res.interim: judge), as
// Envoy's router stops retrying once it passed a 1xx: the client has seen
// this attempt's answer begin.
func (a *ratt) passInterim(code int, f *hblock) {
	s := a.s
	cc := s.cc
	if code == 100 || s.cs.grpc || s.att != a || s.headersSent || s.respDone {
		return
	}
	fields, _ := cleanAnswer(append(a.hdrBuf[:0], f.regular()...))
	fields = dropField(fields, "content-length")
	pseudo := [1]hpack.HeaderField{{Name: ":status", Value: strconv.Itoa(code)}}
	size := listSize(pseudo[:], fields)
	if s.interimOut+int(size) > forward.MaxInterimRelayed || cc.out.maxList != 0 && size > cc.out.maxList {
		return
	}
	s.interimOut += int(size)
	a.res.interim = true
	_ = cc.out.headers(s.id, false, pseudo[:], fields, nil, false)
}

// onHeaders is the upstream's header block: the answer's headers, or its
// trailers (the block is uc's reader's, reused: what is kept is copied).
func (a *ratt) onHeaders(uc *upconn, f *hblock) {
	s := a.s
	cc := s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, f.streamID) {
		return
	}
	s.acts++
	a.answered = true
	if !a.gotHeaders {
		code, why := responseStatus(f.pseudo("status"), f.truncated, f.endStream)
		if why != "" {
			// As x/net's Transport (handleResponse) refuses it: a failed
			// attempt, never passed on (a ":status: 0", a truncated list).
			a.upEnded = f.endStream
			a.fail(forward.BadAnswerError(why))
			return
		}
		if code < 200 {
			// Informational: not passed on (as the Transport does), and
			// bounded as it bounds them: their header lists in all at
			// the MAX_HEADER_LIST_SIZE advertised. Without it, an upstream
			// sending one indexed 1xx block after another (a few bytes
			// each on the wire, kilobytes decoded) kept the attempt and
			// the relay's reader busy until the per-try timeout.
			for i := range f.fields {
				a.info += int64(f.fields[i].Size())
			}
			if a.info > relayMaxHeaderList {
				a.fail(forward.BadAnswerError("1xx informational answers larger than the advertised " +
					strconv.Itoa(relayMaxHeaderList) + " bytes in all"))
				return
			}
			if cc.h.cfg.PassInterim {
				a.passInterim(code, f)
			}
			return
		}
		if !a.holdAnswer(len(f.fields), f.endStream) {
			return
		}
		a.gotHeaders = true
		a.s.cc.untrackTry(a)
		s.cs.m.latency.Observe(time.Since(a.t0).Seconds())
		a.hdrs, a.respLen = cleanAnswer(append(a.hdrBuf[:0], f.regular()...))
		if s.cs.grpc && a.respLen >= 0 && grpcTyped(a.hdrs) {
			// grpc-go's client ignores content-length on a gRPC answer
			// (its messages frame themselves): not passed on, nor held
			// against the body. Checked, a trailers-only grpc-status 0
			// with content-length 5 was a bad answer (retried: three
			// executions) that grpc-go reads OK.
			a.hdrs, a.respLen = dropField(a.hdrs, "content-length"), -1
		}
		if a.noBody = s.cs.method == "HEAD" || code == 204 || code == 304; a.noBody {
			a.respLen = -1
		}
		a.upEnded = f.endStream
		r := &a.res
		r.status = code
		r.exhausted = fieldValue(a.hdrs, "retrycap-exhausted") != ""
		if a.judged {
			return
		}
		if f.endStream && a.respLen > 0 {
			// x/net's Transport: a body it must report missing.
			a.fail(forward.BadAnswerError("content-length " + strconv.FormatInt(a.respLen, 10) + " without a body"))
			return
		}
		if !s.cs.grpc {
			r.retryAfter = fieldValue(a.hdrs, "retry-after")
			a.upDone()
			s.decide(a)
			return
		}
		r.pushback = fieldValues(a.hdrs, "grpc-retry-pushback-ms")
		c, known := grpcRead(a.hdrs, code, true, a.upEnded)
		if !known {
			// Headers that do not end the stream are not its status, as
			// grpc-go's client reads them (operateHeaders: grpc-status
			// only with END_STREAM; a gRPC content-type and :status does
			// not matter): held back until a message or the trailers.
			// Judged by a grpc-status here, the call was retried while
			// its upstream went on to complete it, or ended with the
			// message after it dropped.
			if !s.reqEnd {
				// Unless the client is still sending: it may be waiting
				// for them (grpc-go's ClientStream.Header) before it
				// sends what the upstream waits for (a server's
				// SendHeader, then Recv). Held, the call hung until its
				// deadline; passed on, it is committed as by a message
				// (gRPC A6: committed at the response headers).
				a.res.committed = true
				s.decide(a)
			}
			return
		}
		// The whole answer as the client reads it: trailers-only, or not
		// gRPC's answer (no gRPC content-type: its HTTP status is its
		// code, open or not; passed on as headers ending the stream).
		// Before, a trailers-only 503 under gRPC's content-type without
		// grpc-status was retried as UNAVAILABLE (grpc-go reads UNKNOWN),
		// a missing grpc-status counted INTERNAL (UNKNOWN), and a 200 or
		// 503 not gRPC's was read by its grpc-status (14 retried where
		// grpc-go reads UNKNOWN or UNAVAILABLE from the HTTP status).
		r.code, r.eof = c, true
		if a.upEnded && s.upstreamDeadline(c) {
			a.upDone()
			a.deadlineCut()
			return
		}
		a.upDone()
		s.decide(a)
		return
	}
	// Trailers.
	if !f.endStream {
		a.broke(false, "trailers without END_STREAM")
		return
	}
	if f.npseudo > 0 {
		a.broke(true, "a pseudo-header in its trailers")
		return
	}
	if a.respLen >= 0 && a.bodyIn != a.respLen {
		a.upEnded = true
		a.fail(a.badLength(a.bodyIn))
		return
	}
	if !a.holdAnswer(len(f.fields), true) {
		return
	}
	a.trailers, _ = cleanAnswer(append(a.trailBuf[:0], f.regular()...))
	a.hasTrails, a.upEnded = true, true
	a.upDone()
	if !a.judged {
		r := &a.res
		r.eof, r.inTrails = true, true
		r.exhausted = r.exhausted || fieldValue(a.trailers, "retrycap-exhausted") != ""
		if len(r.pushback) == 0 {
			r.pushback = fieldValues(a.trailers, "grpc-retry-pushback-ms")
		}
		r.code, _ = grpcRead(a.trailers, 0, false, true)
		if s.upstreamDeadline(r.code) {
			a.deadlineCut()
			return
		}
		s.decide(a)
		return
	}
	if s.relayed == a {
		if c, _ := grpcRead(a.trailers, 0, false, true); s.upstreamDeadline(c) {
			// The end is the deadline's, as if the proxy's timer had come
			// first (after the messages before it).
			s.broken(context.DeadlineExceeded)
			return
		}
		s.relayEnd(a)
	}
}

// upstreamDeadline reports whether an upstream's gRPC status code is the
// call's own deadline passing: DEADLINE_EXCEEDED arriving when the call's
// deadline is gone (less than a millisecond left, policy.Deadline.Gone).
// The upstream was forwarded the time left (grpc-timeout, rounded down),
// so a server that honours it ends the call at the same moment as the
// proxy's timer, and which of the two reaches the relay first is a race a
// loaded machine decides. The answer must not depend on it: it is the
// proxy's deadline answer either way (code 4 as well, with the proxy's
// message and retrycap-exhausted: deadline, telling the client the chain's
// time ran out, not that one upstream was slow). A DEADLINE_EXCEEDED with
// time left is the upstream's own (an inner deadline of its own): passed
// on as it came.
func (s *rstream) upstreamDeadline(code int) bool {
	return s.cs.grpc && code == codeDeadline && s.cs.dl.Gone(s.cs.h.cfg.Now())
}

// deadlineCut ends an attempt not judged yet as the proxy's deadline
// timer does (onDeadline): a cut by the deadline, not retried, answered
// DEADLINE_EXCEEDED, retrycap-exhausted: deadline.
func (a *ratt) deadlineCut() {
	a.timedOut, a.cut = true, true
	a.fail(context.DeadlineExceeded)
}

// responseStatus reads an answer's :status, or says why the answer's head
// is malformed: its header list went past the MAX_HEADER_LIST_SIZE the
// relay advertised (the Framer truncated it), no :status, one that is not
// three digits or outside 100-599 (RFC 9110 15), a 1xx ending the stream (x/net's Transport:
// the same cases). st is the :status value, truncated whether the list
// went past the limit, ended whether the block ends the stream.
func responseStatus(st string, truncated, ended bool) (int, string) {
	if truncated {
		return 0, "header list larger than the advertised " + strconv.Itoa(relayMaxHeaderList) + " bytes"
	}
	if st == "" {
		return 0, "missing :status"
	}
	code := 0
	for i := 0; i < len(st); i++ {
		if st[i] < '0' || st[i] > '9' {
			code = -1
			break
		}
		code = code*10 + int(st[i]-'0')
	}
	if len(st) != 3 || code < 0 {
		return 0, "malformed :status " + strconv.Quote(st)
	}
	if code < 100 || code > 599 {
		// RFC 9110 15: no status; the HTTP/1.1 path's bad answer too
		// (forward.ErrBadStatus). Before, 600 to 999 were passed on.
		return 0, ":status outside 100-599: " + strconv.Quote(st)
	}
	if code < 200 && ended {
		return 0, "1xx informational answer with END_STREAM"
	}
	return code, ""
}

// holdAnswer counts n answer fields (headers or trailers; ended: the
// block ended the upstream's stream) against the client connection's
// maxHeldFields, as the requests' fields are (cc.heldFields); mu held.
// Past it, the answer is a bad answer (a 502 for a keyless POST, never
// re-sent; a retry for what may be repeated), its upstream stream reset.
// HPACK makes a field one byte on the wire: an upstream answering
// 17,000 fields a call (under the 1 MiB list limit) had the relay hold
// 680 KB a stream, for as many streams as the clients kept open.
func (a *ratt) holdAnswer(n int, ended bool) bool {
	s := a.s
	cc := s.cc
	if cc.heldAnswer+n > maxHeldFields {
		a.upEnded = a.upEnded || ended
		a.fail(forward.BadAnswerError("an answer of " + strconv.Itoa(n) + " header fields past the " +
			strconv.Itoa(maxHeldFields) + " the client connection's streams may hold"))
		return false
	}
	cc.heldAnswer += n
	s.nanswer += n
	return true
}

// upDone frees the upstream stream once the answer ended (the request's
// rest, if any, is not wanted any more).
func (a *ratt) upDone() {
	if a.upEnded {
		a.release()
	}
}

// onData is the upstream's DATA for the attempt.
func (a *ratt) onData(uc *upconn, f *http2.DataFrame) {
	s := a.s
	cc := s.cc
	data := f.Data()
	n := int64(f.Length)
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, f.StreamID) {
		return // the connection window was credited on receipt
	}
	s.acts++
	a.answered = true
	if a.upAvail -= n; a.upAvail < 0 {
		a.upAvail = 0
		a.broke(f.StreamEnded(), "DATA beyond the stream's flow-control window")
		return
	}
	a.held += n
	if pad := n - int64(len(data)); pad > 0 {
		a.creditUp(pad)
	}
	if !a.gotHeaders {
		a.broke(f.StreamEnded(), "DATA before its HEADERS")
		return
	}
	if a.respLen >= 0 {
		// More than its content-length, or less at its end: malformed
		// (RFC 9113 8.1.1), not passed on (x/net's Transport fails the
		// body: "server replied with more than declared Content-Length").
		if got := a.bodyIn + int64(len(data)); got > a.respLen || f.StreamEnded() && got != a.respLen {
			a.upEnded = a.upEnded || f.StreamEnded()
			a.fail(a.badLength(got))
			return
		}
	} else if a.noBody && len(data) > 0 {
		// x/net's Transport: a stream error on a HEAD answer's DATA.
		// Passed on, an HTTP/1.1 hop after the client would read the
		// bytes as the next answer (none is framed by its length).
		a.upEnded = a.upEnded || f.StreamEnded()
		a.fail(forward.BadAnswerError("content in an answer that has none (" + s.cs.method + ", " + strconv.Itoa(a.res.status) + ")"))
		return
	}
	a.bodyIn += int64(len(data))
	end := f.StreamEnded()
	switch {
	case !a.judged: // gRPC, held back
		if len(data) > 0 {
			a.q = append(a.q, data...)
			a.res.committed = true
			if end {
				a.upEnded = true
			}
			s.decide(a)
		} else if end {
			a.upEnded = true
			a.res.eof, a.res.inTrails, a.res.code = true, true, codeInternal
			a.upDone()
			s.decide(a)
			return
		}
	case s.relayed == a:
		if len(s.outq) == 0 && len(data) > 0 {
			k := s.writeOut(data)
			a.creditUp(k)
			data = data[k:]
		}
		s.outq = append(s.outq, data...)
		if end {
			a.upEnded = true
			s.relayEnd(a)
		}
	default: // kept as the last failure: its body waits
		a.q = append(a.q, data...)
		if end {
			a.upEnded = true
		}
	}
	a.upDone()
}

// badLength is the failure of an answer whose body (got bytes, or more)
// disagrees with its content-length.
func (a *ratt) badLength(got int64) error {
	return forward.BadAnswerError("content-length " + strconv.FormatInt(a.respLen, 10) +
		", body " + strconv.FormatInt(got, 10) + " bytes")
}

// grpcTyped reports whether an answer's fields carry a gRPC
// content-type, as grpcRead reads one.
func grpcTyped(fs []hpack.HeaderField) bool {
	for i := range fs {
		if fs[i].Name == "content-type" && grpcContentType(fs[i].Value) {
			return true
		}
	}
	return false
}

// dropField removes the fields named name from fs (the relay's own copy),
// in place.
func dropField(fs []hpack.HeaderField, name string) []hpack.HeaderField {
	out := fs[:0]
	for _, f := range fs {
		if f.Name != name {
			out = append(out, f)
		}
	}
	clear(fs[len(out):])
	return out
}

// cleanAnswer drops from an upstream's answer fields (its own copy)
// what x/net's Transport drops from a response (go.dev/issue/81115, for
// a reverse proxy passing it to an HTTP/1.1 client): connection-specific
// fields (RFC 9113 8.2.2), content-length values that differ or are not
// a number (one kept of identical ones); it returns the fields and the
// content-length (-1: none). Nothing to drop, nothing is copied.
func cleanAnswer(fs []hpack.HeaderField) ([]hpack.HeaderField, int64) {
	var cl string
	ncl, drop, bad := 0, false, false
	for i := range fs {
		if connSpecific(fs[i].Name) {
			drop = true
		} else if fs[i].Name == "content-length" {
			bad = bad || ncl > 0 && fs[i].Value != cl
			cl = fs[i].Value
			ncl++
		}
	}
	n := int64(-1)
	if ncl > 0 && !bad {
		if v, err := strconv.ParseUint(cl, 10, 63); err == nil {
			n = int64(v)
		} else {
			bad = true
		}
	}
	if !drop && !bad && ncl <= 1 {
		return fs, n
	}
	out, kept := fs[:0], false
	for _, f := range fs {
		if connSpecific(f.Name) || f.Name == "content-length" && (bad || kept) {
			continue
		}
		kept = kept || f.Name == "content-length"
		out = append(out, f)
	}
	clear(fs[len(out):])
	return out, n
}

// on reports whether a is under way on upstream stream id of uc: what an
// upstream reader looked up may have ended since, or be a reused
// stream's first attempt on another upstream stream (rstream); mu held.
func (a *ratt) on(uc *upconn, id uint32) bool {
	return !a.closed && a.uc == uc && a.id == id
}

// broke: the upstream broke the protocol on the attempt's stream (RFC
// 9113 8.1.1, 5.4.2; why in the relay's words; ended: the offending frame
// ended the stream): a malformed answer, as the HTTP/1.1 path counts one
// (forward.BadAnswerError: a reset for retries and the breaker,
// "bad-answer" on its line and in the answer), not the upstream's own
// reset. Its stream is reset unless both sides ended (release): before,
// an upstream's DATA before HEADERS or trailers without END_STREAM were
// taken for its end, and its stream was left open there.
func (a *ratt) broke(ended bool, why string) {
	a.upEnded = a.upEnded || ended
	a.fail(forward.BadAnswerError(why))
}

// upstreamReset is the upstream's RST_STREAM (or, err a bad answer, a
// stream error its frames caused: readLoop resets the stream).
func (a *ratt) upstreamReset(uc *upconn, id uint32, code http2.ErrCode, err error) {
	cc := a.s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, id) {
		return
	}
	a.upstreamResetLocked(code, err)
}

func (a *ratt) upstreamResetLocked(code http2.ErrCode, err error) {
	if forward.BadAnswer(err) {
		// A frame of the upstream's on the stream broke the protocol
		// (readLoop: mostly a header block it refused); which one, the
		// reader does not say: taken for an answer, as a duplicate is
		// worse than a retry not made.
		a.answered = true
	}
	if code == http2.ErrCodeRefusedStream && !a.answered {
		a.unprocessedLocked(err)
		return
	}
	a.upEnded = true
	if code == http2.ErrCodeCancel && !a.answered && a.s.upstreamDeadline(codeDeadline) {
		// grpc-go's server resets the stream (CANCEL) when the deadline
		// it was forwarded passes: the call's own deadline, racing the
		// proxy's timer as a DEADLINE_EXCEEDED does (upstreamDeadline),
		// answered the same whichever comes first.
		a.deadlineCut()
		return
	}
	a.fail(err)
}

// connLost: the connection under the attempt ended.
func (a *ratt) connLost(uc *upconn, id uint32, err error) {
	cc := a.s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, id) {
		return
	}
	if forward.BadAnswer(err) {
		// Its header block broke the connection (readLoop): an answer.
		a.answered = true
	}
	a.upEnded = true
	a.fail(err)
}

// connLostAnswered: the connection ended within the stream's header
// block (readLoop: uc.begun): the upstream began its answer.
func (a *ratt) connLostAnswered(uc *upconn, id uint32, err error) {
	cc := a.s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, id) {
		return
	}
	a.answered = true
	a.upEnded = true
	a.fail(err)
}

// unprocessed: the upstream never processed the stream (GOAWAY below
// its id, REFUSED_STREAM).
func (a *ratt) unprocessed(uc *upconn, id uint32, err error) {
	cc := a.s.cc
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if !a.on(uc, id) {
		return
	}
	a.unprocessedLocked(err)
}

// unprocessedLocked re-sends the attempt on another connection after a
// small backoff, without counting an attempt, as often as the Transport
// would; a body that overflowed the replay buffer cannot be re-sent.
func (a *ratt) unprocessedLocked(err error) {
	s := a.s
	// An answer begun (its headers came, a 1xx's too: an upstream's
	// application wrote it; a head refused as malformed, DATA) was
	// processed, whatever a GOAWAY after it claims: not re-sent, as after
	// REFUSED_STREAM.
	began := a.answered
	if a.judged || began || s.att != a || s.done || a.resends >= 6 || s.overflow {
		a.refused = s.overflow && !a.judged && !began && s.att == a && !s.done
		a.upEnded = true
		a.fail(err)
		return
	}
	a.returnBudget()
	a.uc.close(a, false, 0)
	a.resends++
	s.cs.m.resent.Inc()
	a.to(attNew)
	a.uc, a.id, a.sent, a.sendWin = nil, 0, 0, outflow{}
	wait := time.Duration(rand.Int64N(int64(min(time.Millisecond<<a.resends, 25*time.Millisecond)) + 1))
	gen := s.gen
	time.AfterFunc(wait, func() {
		cc := s.cc
		defer cc.h.flushDirty()
		cc.mu.Lock()
		defer cc.mu.Unlock()
		if s.gen == gen && s.att == a && !a.judged && !a.closed && !s.done {
			s.dispatch(a)
		}
	})
}

// decide judges an attempt's result and acts on it. An attempt that
// failed after its client left (cconn.clientLeft: its FIN, then its
// socket's reset) is the client's cancellation, as on the HTTP/1.1
// engines (forward.Exchange.ClientGone): not the upstream's failure, not
// retried, logged "cancelled"; before, curl --max-time's close was taken
// for a half-close and the timeout of the attempt it left was retried.
func (s *rstream) decide(a *ratt) {
	a.judged = true
	a.s.cc.untrackTry(a)
	if s.cc.fin && s.cc.clientLeft() {
		a.res.gone = true
	}
	d := s.cs.judge(a.n, s.probe, !s.overflow, &a.res)
	if a.res.cancelled {
		s.clientGone()
		return
	}
	if d.Retry {
		s.att = nil
		if a.res.err != nil || a.upEnded || s.cs.grpc {
			a.release()
		}
		s.last = a
		if d.Wait > 0 {
			var t *time.Timer
			t = time.AfterFunc(d.Wait, func() {
				defer s.cc.h.flushDirty()
				s.cc.mu.Lock()
				defer s.cc.mu.Unlock()
				if s.timer == t && !s.done {
					s.timer = nil
					if s.cc.fin && s.cc.clientLeft() {
						// It left during the backoff: no retry for
						// nobody (the HTTP/1.1 engines' ClientLeft).
						s.clientGone()
						return
					}
					s.next()
				}
			})
			s.timer = t
			return
		}
		s.next()
		return
	}
	s.finish(a, d.Reason, a.n)
}

// finish passes on an attempt's answer, or answers for it.
func (s *rstream) finish(a *ratt, reason policy.Reason, attempts int) {
	if a.res.err != nil {
		a.release()
		s.att = nil
		if a.refused && !s.headersSent {
			s.refuse()
			return
		}
		s.answer(s.cs.giveUp(a.res.err, a.res.cond, reason, attempts, a.res.cut, a.res.answered))
		return
	}
	s.att = a
	s.relay(a, reason)
	a.pushBody()
}

// overUpstreamList ends the call at attempt a, whose request header list
// (or trailers) the upstream's SETTINGS_MAX_HEADER_LIST_SIZE says it will
// not take: x/net's Transport returns errRequestHeaderListSize to its
// caller, grpc-go's client fails such a call INTERNAL itself. The request
// is at fault, not the upstream, and every attempt would end the same:
// not retried, the breaker not charged (a half-open probe's place given
// back, as for a client's own cancellation), nothing taken from the retry
// budget; the client gets 431 (gRPC: INTERNAL) naming both sizes, a stream
// opened for the trailers' request reset upstream (release). Before, it was
// an upstream failure ("reset"): retried, and two such requests of one
// client opened the breaker for every caller of a healthy upstream.
func (s *rstream) overUpstreamList(a *ratt, le *upListError) {
	a.judged = true
	a.release()
	s.att = nil
	cs := s.cs
	if br := cs.up.Breaker; br != nil && cs.known {
		br.Cancel(s.probe)
	}
	msg := "retrycap-proxy: upstream " + cs.up.Name + ": " + le.Error()
	// Its access-log line: attempt 0 when the headers were refused
	// (nothing went upstream, as the body budget's refusal), the attempt
	// when its trailers were (its headers and body had gone).
	n := 0
	if le.what == "trailers" {
		n = a.n
	}
	if cs.grpc {
		cs.logOwn(n, http.StatusOK, codeInternal, "header-list")
		s.answer(cs.grpcText(policy.ReasonNone, msg, codeInternal))
		return
	}
	cs.logOwn(n, http.StatusRequestHeaderFieldsTooLarge, -1, "header-list")
	s.answer(cs.ownText(policy.ReasonNone, msg, http.StatusRequestHeaderFieldsTooLarge))
}

// refuse ends the client's stream with REFUSED_STREAM: the upstream
// provably never processed the request (REFUSED_STREAM, a GOAWAY below
// it), and the relay cannot send it again, its body being larger than
// the replay buffer. So the client is told what the upstream said (RFC
// 9113 8.7: safe to retry; Go's Transport re-sends such a stream itself
// when it can rewind the body) rather than 502, which says the request
// may have run.
func (s *rstream) refuse() {
	s.cs.m.code("REFUSED_STREAM")
	_ = s.cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeRefusedStream)
	s.respDone = true
	s.close()
}

// relay passes an upstream's answer on: headers (with the policy's
// extras), the body as it streams, the trailers.
func (s *rstream) relay(a *ratt, reason policy.Reason) {
	s.relayed, s.reason = a, reason
	var buf [2]hpack.HeaderField
	extra := s.cs.headerExtras(&a.res, reason, buf[:0])
	if s.cs.grpc && a.res.eof && !a.res.inTrails {
		// Trailers-only (or a non-200 answer): the headers are the answer.
		s.writeHeaders(a.res.status, a.hdrs, extra, true)
		a.release()
		s.endStream()
		return
	}
	endNow := !s.cs.grpc && a.upEnded && len(a.q) == 0 && !a.hasTrails
	s.writeHeaders(a.res.status, a.hdrs, extra, endNow)
	if endNow {
		s.endStream()
		return
	}
	if len(a.q) > 0 {
		k := s.writeOut(a.q)
		a.creditUp(k)
		if len(s.outq) == 0 {
			// The held bytes change hands instead of being copied:
			// copied, a zero-window client's answers were held twice
			// (the attempt's buffer kept for reuse beside the queue),
			// 2 MiB per client where its budget says 1.
			s.outq, a.q = a.q[k:], s.outq[:0]
		} else {
			s.outq = append(s.outq, a.q[k:]...)
			a.q = a.q[:0]
		}
	}
	if a.err != nil {
		s.broken(a.err)
		return
	}
	if a.upEnded {
		s.relayEnd(a)
	}
}

// relayEnd passes on the end of the upstream's answer, after its body.
func (s *rstream) relayEnd(a *ratt) {
	var buf [1]hpack.HeaderField
	extra := s.cs.trailerExtras(&a.res, s.reason, a.trailers, a.hasTrails, buf[:0])
	if len(extra) > 0 {
		tr := make([]hpack.HeaderField, 0, len(a.trailers)+len(extra))
		for _, f := range a.trailers {
			if f.Name != extra[0].Name {
				tr = append(tr, f)
			}
		}
		s.outTrailers = append(tr, extra...)
	} else {
		s.outTrailers = a.trailers
	}
	s.outEnd, s.outTrailed = true, a.hasTrails
	s.flushOut()
}

// broken ends an answer the upstream broke after it began: gRPC gets
// trailers saying so, anything else a reset.
func (s *rstream) broken(err error) {
	if s.respDone {
		return
	}
	if s.cs.grpc {
		if s.cs.dl.Gone(s.cs.h.cfg.Now()) {
			// The time was gone when it broke: the deadline ended it (a
			// grpc-go server resets the stream at the deadline it was
			// forwarded, a moment after the proxy's own timer, which a
			// loaded machine may run late), not an upstream failure.
			err = context.DeadlineExceeded
		}
		// Trailers the proxy writes for an answer it did not get whole:
		// cut, though the client's stream ends in order (the upstream's
		// own trailers, whatever their grpc-status, end it whole).
		s.markCut(cutOf(err))
		s.outTrailers = s.cs.brokenTrailers(err)
		s.outEnd = true
		s.flushOut()
		return
	}
	s.markCut(cutOf(err))
	_ = s.cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeInternal)
	s.respDone = true
	s.close()
}

// cutOf is who cut an answer the relay ended with err: the call's
// deadline is the proxy's (its timer, or an upstream's DEADLINE_EXCEEDED
// when the time is gone: the same end whichever came first,
// upstreamDeadline), anything else the upstream's (its RST_STREAM, its
// connection lost or gone away, an answer breaking the protocol).
func cutOf(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return accesslog.CutProxy
	}
	return accesslog.CutUpstream
}

// markCut records who ended the answer before its end went out; the
// first to do so counts.
func (s *rstream) markCut(by string) {
	if s.cutBy == "" && !s.respDone {
		s.cutBy = by
	}
}

// answer writes one of the proxy's own answers.
func (s *rstream) answer(o *ownAnswer) {
	s.att = nil
	s.writeHeaders(o.status, nil, o.fields, o.body == "")
	if o.body == "" {
		s.endStream()
		return
	}
	s.outq = append(s.outq, o.body...)
	s.outEnd = true
	s.flushOut()
}

// writeHeaders writes the answer's headers: :status, the upstream's
// fields but those extra replaces, extra.
func (s *rstream) writeHeaders(status int, fields, extra []hpack.HeaderField, end bool) {
	if s.respDone {
		return
	}
	cc := s.cc
	pseudo := [1]hpack.HeaderField{{Name: ":status", Value: statusText(status)}}
	if cc.out.maxList != 0 && listSize(pseudo[:], fields, extra) > cc.out.maxList {
		// Larger than the client accepts: it could not read the answer.
		s.markCut(accesslog.CutProxy)
		_ = cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeInternal)
		s.respDone = true
		s.close()
		return
	}
	_ = cc.out.headers(s.id, end, pseudo[:], fields, extra, false)
	s.headersSent = true
	if end {
		s.respDone = true
	}
}

// statusText is status in decimal; the usual one without an allocation
// (strconv's small-number cache ends at 99).
func statusText(status int) string {
	if status == 200 {
		return "200"
	}
	return strconv.Itoa(status)
}

// sendAvail is what the stream's own window lets the relay send now
// (RFC 9113 6.9.2: negative after the client lowered
// SETTINGS_INITIAL_WINDOW_SIZE below what was in flight).
func (s *rstream) sendAvail() int64 { return s.sendRel + s.cc.peerInitWin }

// writeOut writes as much of data as the client's windows allow.
func (s *rstream) writeOut(data []byte) int64 {
	cc := s.cc
	var w int64
	if s.respDone {
		return 0
	}
	for w < int64(len(data)) {
		// Bounded by the windows and by what may be pending on the
		// client's socket (room: a client that does not read holds
		// answers here, where the upstream's credit waits for them).
		room := int64(cc.cw.room())
		own := s.sendAvail()
		k := min(int64(len(data))-w, own, cc.sendWin.available(), int64(cc.out.maxFrame), room)
		if k <= 0 {
			if (cc.sendWin.available() <= 0 || room <= 0) && !s.connBlocked {
				s.connBlocked = true
				cc.blocked = append(cc.blocked, s)
			}
			if own <= 0 {
				cc.addWinBlocked(s)
			}
			break
		}
		_ = cc.out.fr.WriteData(s.id, false, data[w:w+k])
		s.sendRel -= k
		cc.sendWin.take(k)
		w += k
	}
	return w
}

// flushOut writes what the windows held back, then the end when due.
func (s *rstream) flushOut() {
	if s.respDone {
		return
	}
	if len(s.outq) > 0 {
		k := s.writeOut(s.outq)
		if s.relayed != nil {
			s.relayed.creditUp(k)
		}
		if k == int64(len(s.outq)) {
			s.outq = s.outq[:0]
		} else {
			s.outq = s.outq[k:]
		}
	}
	if len(s.outq) == 0 && s.outEnd {
		if m := s.cc.out.maxList; m != 0 && listSize(s.outTrailers) > m {
			// Larger than the client accepts, as headers are
			// (writeHeaders): reset as grpc-go's server resets it.
			s.markCut(accesslog.CutProxy)
			_ = s.cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeInternal)
			s.respDone = true
			s.close()
			return
		}
		if len(s.outTrailers) > 0 || s.outTrailed {
			_ = s.cc.out.headers(s.id, true, nil, s.outTrailers, nil, false)
		} else {
			_ = s.cc.out.fr.WriteData(s.id, true, nil)
		}
		s.respDone = true
		s.endStream()
	}
}

// endStream: the answer went out whole. A request still under way is
// told to stop (RST_STREAM NO_ERROR, RFC 9113 8.1).
func (s *rstream) endStream() {
	if !s.reqEnd {
		_ = s.cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeNo)
	}
	s.respDone = true
	s.close()
}

// clientReset: the client reset the stream (or the connection is gone):
// the attempts end, nothing more is written. An answer under way is cut
// by the client, or by whoever ended its connection (cconn.endedBy).
func (s *rstream) clientReset() {
	s.markCut(s.cc.endedBy())
	if a := s.att; a != nil && !a.judged && !s.done {
		// An attempt under way is judged as the stdlib engine judges it
		// (judgeGone): a reset failure, no retry decision.
		a.judged = true
		a.s.cc.untrackTry(a)
		a.res = outcome{err: context.Canceled, cond: policy.CondReset}
		s.cs.judgeGone(a.n, s.probe, &a.res)
	}
	s.respDone = true
	s.close()
}

// clientGone ends a stream whose client left (cconn.clientLeft) where
// the relay would otherwise go on for it (a failed attempt judged, a
// backoff's end): nothing more is started or written, and the
// connection, dead, ends (stopReader), its other streams with it as the
// client's cancellations (teardown).
func (s *rstream) clientGone() {
	s.cc.stopReader()
	s.markCut(accesslog.CutClient)
	s.respDone = true
	s.close()
}

// close forgets the stream.
func (s *rstream) close() {
	if s.done {
		return
	}
	s.done = true
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.dlTimer != nil {
		s.dlTimer.Stop()
	}
	for _, a := range [...]*ratt{s.att, s.last, s.relayed} {
		if a != nil {
			a.release()
		}
	}
	if s.cs.relaying {
		var body int64
		if s.relayed != nil {
			body = s.relayed.bodyIn
		}
		s.cs.endRelayed(s.cutBy, body)
	}
	s.cc.delWinBlocked(s)
	if s.connBlocked {
		// Freed now, not when the window opens (a client that resets
		// streams waiting for it and never opens it would keep them).
		s.connBlocked = false
		bl := s.cc.blocked
		for i, b := range bl {
			if b == s {
				copy(bl[i:], bl[i+1:])
				bl[len(bl)-1] = nil
				s.cc.blocked = bl[:len(bl)-1]
				break
			}
		}
	}
	s.outq, s.body = s.outq[:0], s.body[:0] // kept for the next use (recycle)
	if s.uncredited > 0 {
		s.cc.creditConn(s.uncredited)
		s.uncredited = 0
	}
	if a := s.relayed; a != nil && a.held > 0 {
		// What it sent that the client never took.
		s.cc.upHeld -= a.held
		a.held = 0
		s.cc.feedStarved()
	}
	s.cc.removeStream(s)
	s.cc.recycle(s)
}

// idleOut ends a stream on which no frame of the call came from its
// client or its upstream for d (--stream-idle-timeout, keepalive's
// sweep), as Envoy's stream_idle_timeout does; mu held. Before the
// answer began: the attempt under way released (its upstream stream
// reset CANCEL), not judged (neither side's failure: no breaker
// failure, a half-open probe's place given back, not retried), the
// client answered 408 (Envoy's) or, gRPC, DEADLINE_EXCEEDED (a time
// bound of the proxy's ran out; Envoy's 408 reads UNKNOWN there). After:
// the answer cut by the proxy, gRPC with DEADLINE_EXCEEDED trailers,
// plain HTTP/2 with RST_STREAM INTERNAL_ERROR as the relay's other cuts.
// An answer that ended whole and waits for its client to read is the
// write timeout's, and a retry's backoff the proxy's own wait: neither
// is ended here. Counted in retrycap_proxy_h2_stream_idle_timeouts_total
// and logged ("error":"stream-idle").
func (s *rstream) idleOut(d time.Duration) {
	if s.done || s.respDone || s.timer != nil || s.relayed != nil && s.outEnd {
		return
	}
	cs := s.cs
	cs.m.idle.Inc()
	msg := "retrycap-proxy: upstream " + cs.up.Name + ": stream idle for " + d.String() + " (--stream-idle-timeout): nothing sent or received"
	if a := s.relayed; a != nil || s.headersSent {
		if a != nil {
			a.release()
		}
		s.markCut(accesslog.CutProxy)
		if cs.grpc {
			cs.m.code(codeLabel(codeDeadline))
			s.outTrailers = []hpack.HeaderField{
				{Name: "grpc-status", Value: strconv.Itoa(codeDeadline)},
				{Name: "grpc-message", Value: encodeMessage(msg)},
			}
			s.outEnd = true
			s.flushOut()
			return
		}
		_ = s.cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeInternal)
		s.respDone = true
		s.close()
		return
	}
	n := 0
	if a := s.att; a != nil {
		n = a.n
		a.judged = true
		a.release()
		s.att = nil
		if br := cs.up.Breaker; br != nil && cs.known {
			br.Cancel(s.probe)
		}
	}
	if cs.grpc {
		cs.logOwn(n, http.StatusOK, codeDeadline, "stream-idle")
		s.answer(cs.grpcText(policy.ReasonNone, msg, codeDeadline))
		return
	}
	cs.logOwn(n, http.StatusRequestTimeout, -1, "stream-idle")
	s.answer(cs.ownText(policy.ReasonNone, msg, http.StatusRequestTimeout))
}

// onDeadline is a gRPC call's deadline passing (the call of use gen).
func (s *rstream) onDeadline(gen uint32) {
	cc := s.cc
	defer cc.h.flushDirty()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if s.done || s.gen != gen {
		return
	}
	switch {
	case s.relayed != nil && s.outEnd:
		// The answer ended whole before the deadline (its end, counted,
		// waits behind messages the client has not read): nothing is cut.
	case s.relayed != nil:
		s.relayed.release()
		s.broken(context.DeadlineExceeded)
	case s.att != nil && !s.att.judged:
		s.att.timedOut, s.att.cut = true, true
		s.att.fail(context.DeadlineExceeded)
	case s.timer != nil:
		s.timer.Stop()
		s.timer = nil
		s.outOfTime(s.n)
	}
}

// outOfTime ends a call whose deadline passed before its next attempt,
// after attempts: in the backoff (a gRPC call's deadline timer, onDeadline)
// or when the next was due (next). As the HTTP/1.1 path gives up then
// (forward.Exchange.giveUp with reason deadline), the last failure is the
// answer: its upstream's answer marked exhausted deadline, or the one the
// proxy makes of a failure without one (504, or DEADLINE_EXCEEDED:
// "upstream NAME (ADDR): N attempt(s), last failed with ...; not retried:
// deadline"). Before, the relay's own answer read "deadline exceeded: N
// attempt(s); no time left for the next" (or "; the deadline passed in
// the backoff"), whatever the last attempt had been.
func (s *rstream) outOfTime(attempts int) {
	cs := s.cs
	cs.m.denied[policy.ReasonDeadline].Inc()
	l := s.last
	s.last = nil
	if l == nil {
		// No attempt yet (the time ran out between the call's arrival
		// and its first attempt): nothing forwarded.
		s.answer(cs.noTimeLeft())
		return
	}
	s.finish(l, policy.ReasonDeadline, attempts)
}
