package h2

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// The frame relay's upstream side: per address a small pool of h2c
// connections (prior knowledge), each with one reader goroutine that
// hands frames to the attempts (rstream.go) they belong to.

// upIdleTimeout closes an upstream connection without a stream that long.
const upIdleTimeout = 90 * time.Second

// errConnLost is an upstream connection that ended under a stream.
var errConnLost = errors.New("retrycap-proxy: upstream connection lost")

// upStream is an attempt and its stream id on an upconn, as the
// connection's map held them when a frame or an event concerned them (the
// attempt checks it is still that stream: ratt.on).
type upStream struct {
	a  *ratt
	id uint32
}

// upconn is one h2c connection to an upstream.
type upconn struct {
	pool *rpool
	nc   net.Conn
	cw   *batchConn
	br   *bufio.Reader
	fr   *http2.Framer
	hr   *hreader // the reader goroutine's (and dialUp's)

	// wmu serialises writes (and stream ids: a new stream's HEADERS go
	// out in id order); never taken with mu held.
	wmu    sync.Mutex
	out    *frameOut
	nextID uint32

	mu          sync.Mutex
	streams     map[uint32]*ratt
	active      uint32  // reserved streams, sent or about to be
	maxStreams  uint32  // the upstream's SETTINGS_MAX_CONCURRENT_STREAMS
	sendWin     outflow // the upstream's connection window
	recvWin     inflow  // the relay's, credited on receipt (flow.go)
	peerInitWin int64
	blocked     []*ratt
	goAway      bool
	lastID      uint32 // GOAWAY's last-stream-id
	closed      bool
	// finSeen: a poll saw the upstream's close before the reader read
	// it (peerGone): no new stream goes on the connection.
	finSeen bool
	// The idle close: one timer per connection (idle), re-armed when it
	// fires, not per stream; idleSince is when active last fell to 0.
	idle      *time.Timer
	idleSince time.Time
	// werr is the write error that failed the connection (batchConn.onFail).
	werr atomic.Pointer[error]
	// bad is the stream whose header block broke the connection, and
	// badErr its bad answer (readLoop; read by lost, on the same
	// goroutine).
	bad    upStream
	badErr error
	// begun is the stream whose header block the connection was lost in
	// (cut by --http-request-timeout, or the connection's end): the
	// upstream began its answer, so the call ran there (readLoop; read
	// by lost).
	begun upStream
}

// dialUp opens an h2c connection with prior knowledge and reads the
// upstream's SETTINGS (the first frame it must send) before any stream
// goes on it, so its MAX_CONCURRENT_STREAMS is known; bounded by the
// per-try timeout.
func (h *Handler) dialUp(p *rpool) (*upconn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.PerTryTimeout)
	defer cancel()
	nc, err := h.cfg.Dial(ctx, "tcp", p.addr)
	if err != nil {
		return nil, &dialError{err}
	}
	uc := &upconn{pool: p, nc: nc, cw: newBatchConn(h, nc), br: bufio.NewReaderSize(upReader(nc), 16<<10), nextID: 1, streams: map[uint32]*ratt{},
		maxStreams: 100, sendWin: outflow{initialWindow}, recvWin: newInflow(relayConnWindow), peerInitWin: initialWindow}
	uc.cw.onFail = func(err error) {
		// The reader ends the connection (lost) with the write's error.
		uc.werr.Store(&err)
		_ = nc.SetReadDeadline(time.Now())
	}
	uc.cw.onDrain = uc.onDrain
	uc.fr = http2.NewFramer(uc.cw, uc.br)
	uc.fr.SetMaxReadFrameSize(relayMaxFrame)
	uc.fr.SetReuseFrames()
	uc.hr = newHReader(uc.fr, relayMaxHeaderList)
	uc.out = newFrameOut(uc.fr)
	fail := func(err error) (*upconn, error) {
		_ = uc.cw.Close()
		return nil, &dialError{err}
	}
	if _, err := io.WriteString(uc.cw, ClientPreface); err != nil {
		return fail(err)
	}
	_ = uc.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		// 0: each stream's window is granted from its client's budget
		// (flow.go) by a WINDOW_UPDATE after its HEADERS.
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: relayMaxHeaderList},
	)
	_ = uc.fr.WriteWindowUpdate(0, relayConnWindow-initialWindow)
	if err := uc.cw.Flush(); err != nil {
		return fail(err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetReadDeadline(dl)
	}
	f, err := uc.fr.ReadFrame()
	_ = nc.SetReadDeadline(time.Time{})
	if err != nil {
		return fail(fmt.Errorf("h2c handshake: %w", err))
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fail(fmt.Errorf("h2c handshake: first frame %v, not SETTINGS", f.Header().Type))
	}
	if err := uc.settings(sf); err != nil {
		return fail(fmt.Errorf("h2c handshake: %w", err))
	}
	return uc, nil
}

// reserve takes a stream slot if the connection has one.
func (uc *upconn) reserve() bool {
	uc.mu.Lock()
	defer uc.mu.Unlock()
	if uc.goAway || uc.closed || uc.finSeen || uc.active >= uc.maxStreams {
		return false
	}
	uc.active++
	return true
}

// peerGone reports whether the upstream has closed the connection, its
// reader not having read the close yet, and if so takes no new stream on
// it: a request that may not reach the upstream twice then goes on
// another connection, rather than be written on this one and failed by
// the close it raced (502, though the upstream never had it). An
// upstream that sends GOAWAY before it closes needs none of this.
func (uc *upconn) peerGone() bool {
	if !peerClosed(uc.nc) {
		return false
	}
	uc.mu.Lock()
	uc.finSeen = true
	uc.mu.Unlock()
	return true
}

// settings applies the upstream's SETTINGS and acknowledges them.
func (uc *upconn) settings(sf *http2.SettingsFrame) error {
	var grown []upStream
	var delta, iwsFrom int64
	more, iwsSeen := false, false
	err := sf.ForeachSetting(func(s http2.Setting) error {
		if err := validSetting(s); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			uc.mu.Lock()
			more = s.Val > uc.maxStreams
			uc.maxStreams = s.Val
			uc.mu.Unlock()
		case http2.SettingInitialWindowSize:
			// The value may come more than once (RFC 9113 6.5: in order,
			// the last counts): the streams move once, by the change
			// from the value before the frame to the last.
			uc.mu.Lock()
			if !iwsSeen {
				iwsSeen, iwsFrom = true, uc.peerInitWin
				for id, a := range uc.streams {
					grown = append(grown, upStream{a, id})
				}
			}
			uc.peerInitWin = int64(s.Val)
			delta = uc.peerInitWin - iwsFrom
			uc.mu.Unlock()
		case http2.SettingMaxFrameSize:
			uc.wmu.Lock()
			uc.out.maxFrame = min(s.Val, relayMaxFrame)
			uc.wmu.Unlock()
		case http2.SettingHeaderTableSize:
			uc.wmu.Lock()
			uc.out.enc.SetMaxDynamicTableSizeLimit(s.Val)
			uc.wmu.Unlock()
		case http2.SettingMaxHeaderListSize:
			uc.wmu.Lock()
			uc.out.maxList = s.Val
			uc.wmu.Unlock()
		}
		return nil
	})
	if err != nil {
		return err
	}
	uc.wmu.Lock()
	_ = uc.fr.WriteSettingsAck()
	uc.wmu.Unlock()
	for _, g := range grown {
		g.a.windowUpdate(uc, g.id, delta)
	}
	if more {
		uc.pool.kick()
	}
	return nil
}

func (uc *upconn) lookup(id uint32) *ratt {
	uc.mu.Lock()
	a := uc.streams[id]
	uc.mu.Unlock()
	return a
}

// readLoop is the connection's reader goroutine.
func (uc *upconn) readLoop() {
	var err error
	for {
		if uc.br.Buffered() == 0 {
			uc.hr.trim() // about to wait: no large decoding buffer kept meanwhile
		}
		var f http2.Frame
		var blk *hblock
		f, err = uc.fr.ReadFrame()
		hf, isHeaders := f.(*http2.HeadersFrame)
		var hid uint32 // the block's stream (hf is the Framer's, reused)
		if isHeaders && err == nil {
			hid = hf.StreamID
			blk, err = uc.readBlock(hf)
		}
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				// A malformed answer on one stream (a refused field, a
				// frame RFC 9113 forbids there): a bad answer, as
				// forward.BadAnswer counts one (a reset for retries and
				// the breaker, "bad-answer" in its words and log line),
				// its stream reset.
				if a := uc.lookup(se.StreamID); a != nil {
					a.upstreamReset(uc, se.StreamID, se.Code, forward.BadAnswerError(answerWords(err, uc.fr)))
				}
				uc.write(func(fr *http2.Framer) { _ = fr.WriteRSTStream(se.StreamID, se.Code) })
				continue
			}
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				uc.write(func(fr *http2.Framer) { _ = fr.WriteGoAway(0, http2.ErrCode(ce), []byte("retrycap-proxy: bad frame")) })
				if isHeaders {
					// One stream's header block broke the connection
					// (HPACK's state is lost with it, RFC 9113 4.3): that
					// stream's answer is a bad answer; the others lose
					// their connection (lost).
					uc.bad = upStream{uc.lookup(hid), hid}
					uc.badErr = forward.BadAnswerError(answerWords(err, uc.fr))
				}
			} else if isHeaders {
				// The block began and did not end (its time bound, a
				// read error): its stream was answered, though not
				// whole (grpcmal18's rule: a call whose upstream began
				// answering is not sent again).
				uc.begun = upStream{uc.lookup(hid), hid}
			}
			break
		}
		if blk != nil {
			if a := uc.lookup(blk.streamID); a != nil {
				a.onHeaders(uc, blk)
			}
		} else if !uc.frame(f) {
			break
		}
		if uc.br.Buffered() == 0 {
			uc.pool.h.flushDirty() // before the reader sleeps
		}
	}
	if werr := uc.werr.Load(); werr != nil {
		err = *werr // not the deadline that stopped the reader
	}
	uc.lost(err)
	uc.pool.h.flushDirty()
}

// readBlock decodes the header block hf starts. One that does not end in
// its first frame must end within RequestTimeout of it, as a client's
// frames must (cconn's clientReader): while its CONTINUATIONs come, the
// reader serves no other stream, so an upstream trickling empty ones
// (hreader.read's bound on frames catches only a fast flood) held every
// stream of the connection, a retry sent on it too, for as long as it
// liked.
func (uc *upconn) readBlock(hf *http2.HeadersFrame) (*hblock, error) {
	if hf.HeadersEnded() {
		return uc.hr.read(hf)
	}
	_ = uc.nc.SetReadDeadline(time.Now().Add(uc.pool.h.cfg.RequestTimeout))
	blk, err := uc.hr.read(hf)
	_ = uc.nc.SetReadDeadline(time.Time{})
	if uc.werr.Load() != nil {
		// A failed write stopped the reader with a deadline (cw.onFail),
		// which the line above may have lifted: stop it again.
		_ = uc.nc.SetReadDeadline(time.Now())
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && uc.werr.Load() == nil {
		uc.write(func(fr *http2.Framer) {
			_ = fr.WriteGoAway(0, http2.ErrCodeProtocol, []byte("retrycap-proxy: header block not whole within --http-request-timeout"))
		})
		return nil, fmt.Errorf("retrycap-proxy: the upstream's header block not whole within %v: %w", uc.pool.h.cfg.RequestTimeout, errUpBlockTimeout)
	}
	return blk, err
}

// errUpBlockTimeout is an upstream header block that did not end in time
// (readBlock).
var errUpBlockTimeout = errors.New("header block timeout")

// writeWindowUpdate writes a WINDOW_UPDATE (without a closure: one per
// stream and call).
func (uc *upconn) writeWindowUpdate(id, n uint32) {
	uc.wmu.Lock()
	_ = uc.fr.WriteWindowUpdate(id, n)
	uc.wmu.Unlock()
}

func (uc *upconn) write(fn func(fr *http2.Framer)) {
	uc.wmu.Lock()
	fn(uc.fr)
	uc.wmu.Unlock()
}

func (uc *upconn) frame(f http2.Frame) bool {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			if err := uc.settings(f); err != nil {
				uc.write(func(fr *http2.Framer) {
					_ = fr.WriteGoAway(0, http2.ErrCodeProtocol, []byte("bad SETTINGS: "+err.Error()))
				})
				return false
			}
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data
			uc.write(func(fr *http2.Framer) { _ = fr.WritePing(true, data) })
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			uc.mu.Lock()
			over := !uc.sendWin.add(int64(f.Increment))
			uc.mu.Unlock()
			if over {
				uc.write(func(fr *http2.Framer) {
					_ = fr.WriteGoAway(0, http2.ErrCodeFlowControl, []byte("connection window over 2^31-1"))
				})
				return false
			}
			uc.unblock()
			return true
		}
		if a := uc.lookup(f.StreamID); a != nil {
			a.windowUpdate(uc, f.StreamID, int64(f.Increment))
		}
	case *http2.DataFrame:
		n := int64(f.Length)
		uc.mu.Lock()
		over := !uc.recvWin.take(n)
		uc.mu.Unlock()
		if over {
			uc.write(func(fr *http2.Framer) {
				_ = fr.WriteGoAway(0, http2.ErrCodeFlowControl, []byte("DATA beyond the connection window"))
			})
			return false
		}
		// The connection window is credited on receipt: what the relay
		// holds is bounded per client by the stream windows it grants
		// (flow.go), so a client that takes nothing never holds the
		// window every other client of this connection needs.
		uc.credit(n)
		if a := uc.lookup(f.StreamID); a != nil {
			a.onData(uc, f)
		}
	case *http2.RSTStreamFrame:
		if a := uc.lookup(f.StreamID); a != nil {
			a.upstreamReset(uc, f.StreamID, f.ErrCode, http2.StreamError{StreamID: f.StreamID, Code: f.ErrCode})
		}
	case *http2.GoAwayFrame:
		uc.mu.Lock()
		uc.goAway, uc.lastID = true, f.LastStreamID
		var unprocessed []upStream
		for id, a := range uc.streams {
			if id > f.LastStreamID {
				unprocessed = append(unprocessed, upStream{a, id})
			}
		}
		empty := len(uc.streams) == len(unprocessed)
		uc.mu.Unlock()
		uc.pool.remove(uc)
		for _, u := range unprocessed {
			u.a.unprocessed(uc, u.id, errors.New("retrycap-proxy: upstream sent GOAWAY below the stream"))
		}
		if empty {
			return false
		}
	case *http2.PushPromiseFrame:
		uc.write(func(fr *http2.Framer) {
			_ = fr.WriteGoAway(0, http2.ErrCodeProtocol, []byte("PUSH_PROMISE with push disabled"))
		})
		return false
	}
	return true
}

// lost ends the connection: the streams on it fail (or, those above a
// GOAWAY's last-stream-id, were never processed and go elsewhere).
func (uc *upconn) lost(err error) {
	uc.pool.remove(uc)
	uc.mu.Lock()
	uc.closed = true
	if uc.idle != nil {
		uc.idle.Stop()
	}
	streams := uc.streams
	uc.streams = map[uint32]*ratt{}
	goAway, last := uc.goAway, uc.lastID
	uc.mu.Unlock()
	_ = uc.cw.Close()
	if err == nil || errors.Is(err, io.EOF) {
		err = errConnLost
	} else {
		err = fmt.Errorf("%w: %w", errConnLost, err)
	}
	for id, a := range streams {
		switch {
		case goAway && id > last:
			a.unprocessed(uc, id, err)
		case a == uc.bad.a && id == uc.bad.id:
			a.connLost(uc, id, uc.badErr)
		case a == uc.begun.a && id == uc.begun.id:
			a.connLostAnswered(uc, id, err)
		default:
			a.connLost(uc, id, err)
		}
	}
	uc.pool.kick() // attempts that waited for room on it go elsewhere
}

// upListError is a request's header list (or trailers) larger than the
// upstream's SETTINGS_MAX_HEADER_LIST_SIZE: the request, not the
// upstream, is at fault, and it would be so on every connection and
// attempt (rstream.overUpstreamList).
type upListError struct {
	what      string // "header list" or "trailers"
	size, max uint32
}

func (e *upListError) Error() string {
	return "request " + e.what + " of " + strconv.FormatUint(uint64(e.size), 10) +
		" bytes, over the upstream's SETTINGS_MAX_HEADER_LIST_SIZE of " + strconv.FormatUint(uint64(e.max), 10)
}

// open registers a's stream under a new id and writes its HEADERS (the
// slot was reserved); false if the connection closed or went away
// (GOAWAY) meanwhile.
func (uc *upconn) open(a *ratt, pseudo, fields, extra []hpack.HeaderField, end bool) (bool, error) {
	uc.wmu.Lock()
	defer uc.wmu.Unlock()
	size := listSize(pseudo, fields, extra)
	if uc.out.maxList != 0 && size > uc.out.maxList {
		uc.unreserveLocked()
		return true, &upListError{what: "header list", size: size, max: uc.out.maxList}
	}
	if !uc.cw.headRoom(blockBound(size, uc.out.maxFrame)) {
		// A slow upstream's socket holds earlier blocks: this one would
		// pass the bound that fails the connection (hardMax), every call
		// on it. It is not encoded (the HPACK table stays the upstream's)
		// and waits for the writer to drain (onDrain kicks the pool).
		uc.unreserveLocked()
		return true, errNoRoom
	}
	id := uc.nextID
	uc.mu.Lock()
	if uc.closed {
		uc.mu.Unlock()
		return false, nil
	}
	if uc.goAway && id <= maxStreamID {
		// A GOAWAY read since the slot was reserved (the upstream's; or
		// the relay's own close): a stream opened now is above its
		// last-stream-id, which the upstream ignores, and would wait
		// for the per-try timeout or the connection's end. The slot is
		// given back, the caller tries another connection.
		uc.active--
		drained := len(uc.streams) == 0
		uc.mu.Unlock()
		if drained {
			_ = uc.cw.Close()
		}
		return false, nil
	}
	if id > maxStreamID {
		// Reserved before the last id went: its slot given back, the
		// connection left (retire), the caller tries another.
		uc.active--
		uc.mu.Unlock()
		uc.retire()
		return false, nil
	}
	uc.nextID += 2
	uc.streams[id] = a
	a.uc, a.id = uc, id
	a.sendWin = outflow{uc.peerInitWin}
	spent := uc.nextID > maxStreamID
	if spent {
		// The last stream id (RFC 9113 5.1.1): no stream more on this
		// connection (x/net's Transport: canTakeNewRequest); it goes
		// once its streams ended (close: drained).
		uc.goAway = true
	}
	uc.mu.Unlock()
	if spent {
		uc.pool.remove(uc)
	}
	_ = uc.out.headers(id, end, pseudo, fields, extra, true)
	return true, nil
}

// errNoRoom: the upstream connection's pending writes leave no room for
// an attempt's header block now; it waits in its pool's queue.
var errNoRoom = errors.New("retrycap-proxy: upstream connection's pending writes leave no room for the header block")

// blockBound is the most bytes a header list of size (as MAX_HEADER_LIST_SIZE
// counts it) takes on the wire in frames of at most maxFrame: HPACK
// encodes a field in at most its name, its value and a few bytes of
// prefix (less than the 32 the list size counts per field), and each
// frame adds its 9-byte header.
func blockBound(size, maxFrame uint32) int {
	if maxFrame == 0 {
		maxFrame = 16384
	}
	return int(size) + 9*(int(size/maxFrame)+1)
}

// maxStreamID is the largest stream id (RFC 9113 5.1.1: 31 bits).
const maxStreamID = 1<<31 - 1

// retire takes a connection whose stream ids are spent out of its pool
// and closes it if no stream is left on it; wmu held.
func (uc *upconn) retire() {
	uc.mu.Lock()
	uc.goAway = true
	empty := len(uc.streams) == 0
	uc.mu.Unlock()
	uc.pool.remove(uc)
	if empty {
		_ = uc.cw.Close()
	}
}

// unreserveLocked gives back a slot reserved for a stream that was never
// opened; wmu held.
func (uc *upconn) unreserveLocked() {
	uc.mu.Lock()
	uc.active--
	uc.armIdleLocked()
	uc.mu.Unlock()
}

// close forgets stream a (reset with code unless ok) and frees its slot.
func (uc *upconn) close(a *ratt, rst bool, code http2.ErrCode) {
	uc.mu.Lock()
	if uc.streams[a.id] == a {
		delete(uc.streams, a.id)
	} else {
		rst = false // the connection is gone or the stream was never there
	}
	uc.active--
	full := uc.active+1 == uc.maxStreams
	if a.blocked {
		for i, b := range uc.blocked {
			if b == a {
				uc.blocked = append(uc.blocked[:i:i], uc.blocked[i+1:]...)
				break
			}
		}
		a.blocked = false
	}
	drained := uc.goAway && len(uc.streams) == 0
	uc.armIdleLocked()
	uc.mu.Unlock()
	if rst {
		id := a.id
		uc.write(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, code) })
	}
	if drained {
		_ = uc.cw.Close()
	}
	if full {
		uc.pool.kick()
	}
}

// armIdleLocked notes when the connection fell idle (its timer,
// onIdle, closes it upIdleTimeout after); mu held.
func (uc *upconn) armIdleLocked() {
	if uc.active == 0 && !uc.closed {
		uc.idleSince = time.Now()
	}
}

// onIdle closes the connection if it had no stream for upIdleTimeout,
// else waits for the next time it could have.
func (uc *upconn) onIdle() {
	uc.mu.Lock()
	if uc.closed {
		uc.mu.Unlock()
		return
	}
	wait := upIdleTimeout
	if uc.active == 0 {
		wait -= time.Since(uc.idleSince)
	}
	if wait > 0 {
		uc.idle.Reset(wait)
		uc.mu.Unlock()
		return
	}
	uc.goAway = true // reserve takes no stream on it any more
	uc.mu.Unlock()
	uc.pool.remove(uc)
	uc.write(func(fr *http2.Framer) { _ = fr.WriteGoAway(0, http2.ErrCodeNo, []byte("idle")) })
	_ = uc.cw.Close()
}

// takeWindow takes up to want bytes of connection window for a (whose
// stream window is the caller's, under its client connection's mu);
// with none left a waits in blocked for the next WINDOW_UPDATE.
func (uc *upconn) takeWindow(a *ratt, want int64) int64 {
	uc.mu.Lock()
	defer uc.mu.Unlock()
	n := min(want, uc.sendWin.available(), int64(uc.cw.room()))
	if n <= 0 {
		if !a.blocked {
			a.blocked = true
			uc.blocked = append(uc.blocked, a)
		}
		return 0
	}
	uc.sendWin.take(n)
	return n
}

// unblock resumes the attempts that waited for the connection window or
// for room on the socket.
func (uc *upconn) unblock() {
	uc.mu.Lock()
	b := uc.blocked
	uc.blocked = nil
	ids := make([]uint32, len(b))
	for i, a := range b {
		a.blocked = false
		ids[i] = a.id
	}
	uc.mu.Unlock()
	for i, a := range b {
		a.windowUpdate(uc, ids[i], 0)
	}
}

// onDrain is the writer's: room again on the socket.
func (uc *upconn) onDrain() {
	uc.unblock()
	uc.pool.kick() // attempts waiting for room for their header block
	uc.pool.h.flushDirty()
}

// credit gives the upstream back n bytes of connection window, in
// WINDOW_UPDATEs of at least a quarter of it.
func (uc *upconn) credit(n int64) {
	uc.mu.Lock()
	k := uc.recvWin.add(n)
	uc.mu.Unlock()
	if k > 0 {
		uc.write(func(fr *http2.Framer) { _ = fr.WriteWindowUpdate(0, k) })
	}
}

// upReader is what an upstream connection's frames are read from: its
// socket directly when nc is one (sockReader), else nc.
func upReader(nc net.Conn) io.Reader {
	if r := newSockReader(nc); r != nil {
		return r
	}
	return nc
}
