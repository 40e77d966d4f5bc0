package h2

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// The frame relay's client side: one connection's reader goroutine and
// its streams (rstream.go) as state machines in a map.

// Flow-control windows the relay advertises, to clients and to upstreams
// alike: what one peer may send before the relay passed it on. They bound
// what the relay buffers per stream and per connection.
const (
	relayStreamWindow = 256 << 10
	relayConnWindow   = 1 << 20
	// relayMaxHeaderList is the MAX_HEADER_LIST_SIZE advertised (the
	// HTTP/1.1 path reads heads up to 64 KiB; net/http's default is 1 MB).
	relayMaxHeaderList = 1 << 20
	initialWindow      = 65535
	maxWindow          = 1<<31 - 1
	// relayMaxFrame is the largest frame the relay reads (the protocol's
	// default SETTINGS_MAX_FRAME_SIZE: it advertises none, so a larger
	// frame is a FRAME_SIZE_ERROR, RFC 9113 4.2) and writes (a peer
	// announcing 16 MiB frames does not grow the relay's buffers).
	relayMaxFrame = 16384
	// Rapid reset (CVE-2023-44487): more than resetLimit streams reset by
	// the client within resetWindow, and more than half the streams it
	// opened in it, end the connection with GOAWAY ENHANCE_YOUR_CALM, so
	// an upstream sees at most that many started-then-abandoned streams
	// per connection and window; a busy client cancelling a few percent of
	// its calls is not one (x/net's server: more than 4 x
	// MAX_CONCURRENT_STREAMS handlers waiting to start).
	resetLimit  = 200
	resetWindow = time.Second
	// maxHeldFields bounds the request header fields (regular ones and
	// trailers) one connection's open streams hold: HPACK makes a field
	// one byte on the wire (a static or dynamic table index) and an
	// hpack.HeaderField of 40 bytes here, so 1,000 streams of 17,000
	// fields each (under the 1 MiB list limit) held about 670 MiB for
	// 17 MB sent (TestSmallFieldBombBounded). 65,536 fields are about
	// 2.5 MiB; 1,000 streams of 65 fields fit. A stream past it is
	// refused (REFUSED_STREAM: never processed, the client may retry),
	// trailers past it reset it (ENHANCE_YOUR_CALM). x/net's server has
	// no such bound. The upstreams' answers to the connection's streams
	// are held to the same count (holdAnswer).
	maxHeldFields = 1 << 16
	// winChangeWindow: a client changing SETTINGS_INITIAL_WINDOW_SIZE
	// more than winChangeLimit times within it is ended with GOAWAY
	// ENHANCE_YOUR_CALM (reason "settings-flood"). A change is O(1)
	// (stream windows are kept relative to the setting: rstream.sendRel)
	// but a raise resumes every stream waiting for its own window, up to
	// MAX_CONCURRENT_STREAMS of them per 15-byte frame; real clients
	// change it a handful of times per connection (grpc-go's BDP
	// estimator: doublings from 64 KiB to 16 MiB, about 8).
	winChangeWindow = time.Second
)

// winChangeLimit is the changes of SETTINGS_INITIAL_WINDOW_SIZE a client
// may make within winChangeWindow (a variable for the benchmark that
// measures a change's cost without the limit: BenchmarkSettingsFlood).
var winChangeLimit = 100

// frameOut encodes frames for one connection: a Framer whose writes are
// batched by a coalesceConn (one write(2) per wake-up of its writer
// goroutine) and the connection's HPACK encoder. Its user serialises it.
type frameOut struct {
	fr       *http2.Framer
	enc      *hpack.Encoder
	hbuf     bytes.Buffer
	maxFrame uint32 // the peer's SETTINGS_MAX_FRAME_SIZE
	maxList  uint32 // the peer's SETTINGS_MAX_HEADER_LIST_SIZE (0: unlimited)
}

func newFrameOut(fr *http2.Framer) *frameOut {
	o := &frameOut{fr: fr, maxFrame: relayMaxFrame}
	o.enc = hpack.NewEncoder(&o.hbuf)
	return o
}

// headers writes one header block, pseudo, then fields but those extra
// replaces (and Host, with skipHost), then extra, as HEADERS and
// CONTINUATION frames.
func (o *frameOut) headers(id uint32, end bool, pseudo, fields, extra []hpack.HeaderField, skipHost bool) error {
	o.hbuf.Reset()
	for i := range pseudo {
		_ = o.enc.WriteField(pseudo[i])
	}
fields:
	for i := range fields {
		if skipHost && fields[i].Name == "host" {
			continue
		}
		for j := range extra {
			if extra[j].Name == fields[i].Name {
				continue fields
			}
		}
		_ = o.enc.WriteField(fields[i])
	}
	for i := range extra {
		_ = o.enc.WriteField(extra[i])
	}
	blk := o.hbuf.Bytes()
	firstFrame := true
	for firstFrame || len(blk) > 0 {
		n := min(len(blk), int(o.maxFrame))
		frag := blk[:n]
		blk = blk[n:]
		var err error
		if firstFrame {
			err = o.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndStream: end, EndHeaders: len(blk) == 0})
		} else {
			err = o.fr.WriteContinuation(id, len(blk) == 0, frag)
		}
		if err != nil {
			return err
		}
		firstFrame = false
	}
	return nil
}

// listSize is a header list's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
func listSize(lists ...[]hpack.HeaderField) uint32 {
	var n uint32
	for _, l := range lists {
		for i := range l {
			n += l[i].Size()
		}
	}
	return n
}

// cconn is one client connection served by the relay. Everything on it,
// its streams' state and every frame written to it, is under mu: the
// reader goroutine, the upstream readers delivering answers and the
// timers all take it.
type cconn struct {
	h      *Handler
	nc     net.Conn
	cw     *batchConn
	rd     clientReader
	br     *bufio.Reader
	hr     *hreader // the reader goroutine's, or the event loop's
	target string
	// lr is the connection's read state when an event loop reads it
	// (cloop.go); verdict is how the loop hands it back to ServeConn's
	// goroutine at its end (loopEnd, loopHalfOpen).
	lr      loopRead
	verdict chan int

	mu      sync.Mutex
	out     *frameOut
	streams map[uint32]*rstream
	// heldFields: the request header fields (and trailers) its open
	// streams hold, at most maxHeldFields (onHeaders).
	heldFields int
	// heldAnswer: the upstreams' answer header fields (and trailers) its
	// open streams' attempts took, at most maxHeldFields (holdAnswer).
	heldAnswer  int
	maxSeen     uint32  // highest client stream id seen
	sendWin     outflow // the connection's window toward the client
	recvWin     inflow  // the client's on the connection
	peerInitWin int64   // the client's SETTINGS_INITIAL_WINDOW_SIZE
	// maxRel is at least every open stream's sendRel, and >= 0 (a new
	// stream's): a raise of SETTINGS_INITIAL_WINDOW_SIZE that keeps
	// maxRel+peerInitWin within 2^31-1 overflows no stream's window,
	// with no pass over them (maxRelNow recomputes it when it does not).
	maxRel  int64
	blocked []*rstream // waiting for the connection's window or socket
	// winBlocked: the streams waiting for their own window (a raise of
	// SETTINGS_INITIAL_WINDOW_SIZE resumes them, and only them);
	// winSpare is its other buffer (flushWinBlocked).
	winBlocked, winSpare []*rstream
	// SETTINGS_INITIAL_WINDOW_SIZE changes (countWinChange) and
	// malformed requests (logMalformed) in the current window.
	winChanges, malformed perWindow
	free                  []*rstream // ended streams kept for reuse (recycle)
	goingAway             bool
	// clientGoAway: the client sent GOAWAY (its FIN after is a close,
	// not a half-close: waitAnswers).
	clientGoAway bool
	// fin: the client sent a bare FIN with calls under way (waitAnswers):
	// it half-closed, or closed whole; clientLeft tells which.
	fin    bool
	closed bool
	done   chan struct{}
	// endBy is who ends the connection when the relay does (cutProxy:
	// its drain deadline, a write timeout or a client not reading, an
	// unanswered keepalive PING, a frame not whole in time); 0: the
	// client (its close or reset, a failed write, a protocol error). The
	// answers it cuts are put down to it (endedBy). The first set wins.
	endBy atomic.Uint32
	// What upstreams may still send, or sent and the client has not
	// taken, for this connection's streams (flow.go), and the attempts
	// waiting for it to top their windows up.
	upHeld  int64
	starved []*ratt
	// stop tells the reader to end the connection (stopReader).
	stop atomic.Bool
	// wake: the reader, waiting for the answers of a client that
	// half-closed (waitAnswers), is told that the last stream ended or
	// that the connection is to end (stopReader).
	wake chan struct{}
	// Streams the client opened and reset in the current resetWindow
	// (rapid reset).
	opened, resets int
	resetsFrom     time.Duration

	// Keepalive and idle close, on one timer per connection (keepalive):
	// times are since born (monotonic). lastRead is when the reader last
	// drained the socket (stored by the reader without mu).
	born      time.Time
	lastRead  atomic.Int64
	idleSince time.Duration // when the last stream ended (0 at first)
	ka        *time.Timer
	kaAt      time.Duration // when ka fires
	pingSent  bool
	pingData  [8]byte
	pingDue   time.Duration

	// The per-try timeouts of the attempts under way, one timer for all:
	// every attempt has the same timeout, so the list in start order is
	// in deadline order too; the timer is due at the head's deadline
	// (or earlier: an attempt that ended is unlinked, the timer not
	// touched; it re-arms for the new head when it fires).
	tryHead, tryTail *ratt
	tries            *time.Timer
	triesArmed       bool
	triesAt          time.Duration // when tries is due (since born), if armed
}

// serveRelay serves one client connection with the frame relay until it
// ends; c starts with the client preface.
func (h *Handler) serveRelay(c net.Conn, target string) {
	cc := &cconn{
		h: h, nc: c, cw: newBatchConn(h, c), target: target,
		streams: map[uint32]*rstream{}, sendWin: outflow{initialWindow}, recvWin: newInflow(relayConnWindow),
		peerInitWin: initialWindow, done: make(chan struct{}), born: time.Now(), wake: make(chan struct{}, 1),
		verdict: make(chan int, 1),
	}
	cc.rd = clientReader{cc: cc, mid: true, since: cc.born} // the preface and SETTINGS: from the start
	cc.cw.onFail = func(err error) {
		if errors.Is(err, errStuck) || errors.Is(err, os.ErrDeadlineExceeded) {
			cc.endByProxy()
			h.m.closed.WithLabelValues("not-reading").Inc()
			h.cfg.Logger.Printf("h2 relay: client connection: not reading its answers: %v", err)
		}
		cc.stopReader()
	}
	cc.cw.onDrain = cc.onDrain
	if !h.relayAdd(cc) {
		_ = c.Close()
		return
	}
	defer h.relayDel(cc)
	held, sock, ok := takeHeld(c)
	if ok && h.deal(cc, sock, held) {
		cc.serveLoop()
		return
	}
	cc.rd.held, cc.rd.sock, cc.rd.via = held, sock, readWrapped
	if ok {
		cc.rd.via = readHeld
	}
	cc.br = bufio.NewReaderSize(&cc.rd, 16<<10)
	cc.serve()
}

// serveLoop serves a connection an event loop reads (deal): it waits for
// the loop's verdict, and does what could wait (the answers of a client
// that half-closed, the close) here, not on the loop.
func (cc *cconn) serveLoop() {
	defer close(cc.done)
	defer cc.h.flushDirty()
	defer cc.teardown()
	if <-cc.verdict == loopHalfOpen {
		cc.waitAnswers()
	}
}

func (cc *cconn) serve() {
	defer close(cc.done)
	defer cc.h.flushDirty()
	defer cc.teardown()
	var preface [len(ClientPreface)]byte
	if _, err := io.ReadFull(cc.br, preface[:]); err != nil || string(preface[:]) != ClientPreface {
		if errors.Is(err, errReadTimeout) {
			cc.h.m.closed.WithLabelValues("timeout").Inc()
		}
		return
	}
	fr := http2.NewFramer(cc.cw, cc.br)
	cc.greet(fr)
	firstFrame := true
	for {
		if !firstFrame {
			// A frame under way (its first bytes are buffered) must
			// arrive whole within RequestTimeout; between frames no
			// deadline (keepalive and the idle close watch them).
			cc.rd.mid = cc.br.Buffered() > 0
			if cc.rd.mid {
				cc.rd.since = time.Now()
			}
		}
		// ReadFrame in its two steps: the header is kept for an error
		// the payload's parse reports (fh.Type below).
		if cc.br.Buffered() == 0 {
			// About to wait for the client: no large decoding buffer
			// kept meanwhile (blocks back to back reuse it).
			cc.hr.trim()
		}
		fh, err := fr.ReadFrameHeader()
		var f http2.Frame
		if err == nil {
			f, err = fr.ReadFrameForHeader(fh)
		}
		var blk *hblock
		if hf, ok := f.(*http2.HeadersFrame); ok && err == nil {
			blk, err = cc.hr.read(hf) // its CONTINUATIONs read here
		}
		if err != nil && errors.Is(err, io.EOF) && !firstFrame && !cc.clientGoAway {
			// A FIN at a frame boundary, no GOAWAY before it: a
			// half-close, not an abort (a client closing its connection
			// says so with a GOAWAY first, as grpc-go's does: RFC 9113
			// 6.8 wants one before the close).
			cc.waitAnswers()
			return
		}
		if err != nil {
			if cc.readErr(fh, err) {
				continue
			}
			return
		}
		if firstFrame {
			firstFrame = false
			if !cc.firstFrame(f) {
				return
			}
		}
		if !cc.handle(f, blk) {
			return
		}
		if cc.br.Buffered() == 0 {
			// Once per read(2), not per frame: what keepalive reads.
			cc.lastRead.Store(int64(time.Since(cc.born)))
			cc.h.flushDirty() // before the reader sleeps
		}
	}
}

// greet starts the connection once the client's preface came: the
// relay's SETTINGS and connection window, keepalive; fr reads the
// client's frames (from its socket, or from an event loop's buffer) and
// writes the relay's.
func (cc *cconn) greet(fr *http2.Framer) {
	fr.SetMaxReadFrameSize(relayMaxFrame)
	fr.SetReuseFrames()
	cc.hr = newHReader(fr, relayMaxHeaderList)
	cc.mu.Lock()
	cc.out = newFrameOut(fr)
	_ = fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: cc.h.cfg.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: relayStreamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: relayMaxHeaderList},
	)
	_ = fr.WriteWindowUpdate(0, relayConnWindow-initialWindow)
	cc.lastRead.Store(int64(time.Since(cc.born)))
	cc.ka = time.AfterFunc(time.Hour, cc.keepalive)
	cc.armKeepalive(time.Since(cc.born))
	cc.mu.Unlock()
}

// readErr handles an error reading a frame (fh its header, or the
// HEADERS' of the block it was in) other than a FIN at a frame boundary:
// true when the connection goes on (a stream error: the stream is
// reset), false when it ends (a GOAWAY written where one is due).
func (cc *cconn) readErr(fh http2.FrameHeader, err error) bool {
	fr := cc.hr.fr
	var se http2.StreamError
	var ce http2.ConnectionError
	switch {
	case errors.As(err, &se) && fh.Type == http2.FrameHeaders && se.StreamID%2 == 0:
		// A malformed HEADERS on an even stream id: no stream it
		// could reset (client streams are odd, RFC 9113 5.1.1),
		// a connection error as a well-formed one is (onHeaders),
		// and as x/net's server ends it.
		cc.goAway(http2.ErrCodeProtocol, "HEADERS on even stream id "+strconv.FormatUint(uint64(se.StreamID), 10))
	case errors.As(err, &se):
		cc.mu.Lock()
		// A HEADERS whose frame or header block did not decode
		// (padding longer than the frame, an invalid field, a
		// pseudo-header after a regular one) opens no stream and
		// uses no id, as x/net's server counts it (its Framer
		// fails the frame before processHeaders sees the id): a
		// later frame on that id is on an idle stream, a
		// connection error in both. A block that decodes but
		// makes a malformed request (onHeaders) does use its id,
		// in both.
		if s := cc.streams[se.StreamID]; s != nil {
			if !cc.streamError(s, se.Code) {
				cc.mu.Unlock()
				return false
			}
		} else {
			_ = cc.out.fr.WriteRSTStream(se.StreamID, se.Code)
		}
		cc.mu.Unlock()
		return true
	case errors.As(err, &ce):
		cc.goAway(http2.ErrCode(ce), blockDetail(err, fr, "frame error"))
	case errors.Is(err, http2.ErrFrameTooLarge):
		cc.h.m.closed.WithLabelValues("frame-size").Inc()
		cc.goAway(http2.ErrCodeFrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE")
	case errors.Is(err, errReadTimeout):
		cc.endByProxy()
		cc.h.m.closed.WithLabelValues("timeout").Inc()
		cc.h.cfg.Logger.Printf("h2 relay: client connection: %v", err)
		cc.goAway(http2.ErrCodeNo, err.Error())
	}
	return false
}

// firstFrame checks the client's first frame after its preface: SETTINGS
// (RFC 9113 3.4); false ends the connection.
func (cc *cconn) firstFrame(f http2.Frame) bool {
	if sf, ok := f.(*http2.SettingsFrame); !ok || sf.IsAck() {
		cc.goAway(http2.ErrCodeProtocol, "the client preface is not followed by SETTINGS")
		return false
	}
	return true
}

// handle handles one frame, or the header block it ended (blk); false
// ends the connection.
func (cc *cconn) handle(f http2.Frame, blk *hblock) bool {
	if blk != nil {
		cc.mu.Lock()
		ok := cc.onHeaders(blk)
		cc.mu.Unlock()
		return ok
	}
	return cc.frame(f)
}

// waitAnswers serves a client that shut down its write side (a FIN at a
// frame boundary) as HAProxy does (x/net's server closes at once): the
// streams whose request had ended get their answers, then the
// connection ends; a stream whose request had not ended never will and
// is reset as the client's cancellation. Keepalive bounds the wait (the
// client cannot answer a PING: closed after PingInterval+PingTimeout),
// as a write failure does (stopReader).
//
// A FIN is also what a client that closed its socket whole sends (no
// GOAWAY first: a crashed or careless one), and then nobody reads the
// answers: its calls' upstream work would run on until an answer failed
// to write or keepalive gave up (75 s by default, and an answer that
// never comes writes nothing). So the wait probes the client with a PING
// at once and every finProbe after: a closed socket answers the first
// with RST, which wakes the reader (watchReset) and the connection ends,
// every call on it cancelled upstream, within the RST's round trip (the
// next probe's failing write, about finProbe later, where the socket
// cannot be watched); until then decide and a backoff's end ask
// clientLeft themselves. A client that only shut its write side gets a
// PING it cannot acknowledge (nothing waits for the acknowledgement),
// and is served on, retries included.
func (cc *cconn) waitAnswers() {
	cc.mu.Lock()
	cc.fin = true
	for _, s := range cc.streams {
		if !s.reqEnd {
			s.clientReset()
			_ = cc.out.fr.WriteRSTStream(s.id, http2.ErrCodeCancel)
		}
	}
	n := len(cc.streams)
	cc.mu.Unlock()
	cc.h.flushDirty()
	if n == 0 {
		return
	}
	probe := func() {
		cc.mu.Lock()
		if !cc.closed {
			_ = cc.out.fr.WritePing(false, finProbeData)
		}
		cc.mu.Unlock()
		cc.h.flushDirty()
	}
	probe()
	// The probe's RST wakes the reader at once (watchReset), not at the
	// next probe's failing write.
	watchReset(cc.nc, cc.wakeReader)
	tick := time.NewTicker(cc.h.finEvery)
	defer tick.Stop()
	for n > 0 && !cc.stop.Load() {
		select {
		case <-cc.wake:
		case <-tick.C:
			probe()
		}
		cc.mu.Lock()
		n = len(cc.streams)
		left := n > 0 && cc.clientLeft()
		cc.mu.Unlock()
		if left {
			// Its socket reset: nobody reads the answers; every call
			// under way is its cancellation (teardown).
			return
		}
	}
}

// finProbe is how often a client that sent a FIN with calls under way is
// probed (waitAnswers, Handler.finEvery); finProbeData is the probes'
// PING payload.
const finProbe = time.Second

// clientLeft reports whether the client is known to have gone after its
// FIN: the connection is ending, or its socket was reset (sockReset: the
// first probe's PING drew the RST of a socket closed whole, as curl
// --max-time closes it). A client that only shut its write side still
// reads: it has not left, and its calls go on, retries included. Asked
// where the relay would start work for the client (decide, the end of a
// backoff: rstream.clientGone), not per frame; mu held.
func (cc *cconn) clientLeft() bool {
	return cc.fin && (cc.stop.Load() || cc.closed || sockReset(cc.nc))
}

var finProbeData = [8]byte{'r', 'c', '-', 'f', 'i', 'n', '?', '?'}

// wakeReader tells a reader in waitAnswers to look again.
func (cc *cconn) wakeReader() {
	select {
	case cc.wake <- struct{}{}:
	default:
	}
}

// goAway ends the connection with a GOAWAY naming the error.
func (cc *cconn) goAway(code http2.ErrCode, debug string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.out != nil {
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, code, []byte(debug))
	}
}

// maxSettings is the most entries a client's SETTINGS frame may hold
// (x/net's server: the same bound).
const maxSettings = 100

// frame handles one frame from the client; false ends the connection.
func (cc *cconn) frame(f http2.Frame) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if id := f.Header().StreamID; id != 0 && cc.goingAway && id > cc.maxSeen {
		// After a GOAWAY (the client's, or the relay's shutdown) a frame
		// for a stream above the last one seen is discarded, as x/net's
		// server discards them in its graceful shutdown (processFrame:
		// "Discard frames for streams initiated after the identified
		// last stream sent in a GOAWAY"), not taken for a frame on an
		// idle stream; DATA still counts against the connection's window,
		// and is given back.
		if d, ok := f.(*http2.DataFrame); ok {
			n := int64(d.Length)
			if !cc.recvWin.take(n) {
				_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeFlowControl, []byte("DATA beyond the connection window"))
				return false
			}
			cc.creditConn(n)
		}
		return true
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return true
		}
		if f.NumSettings() > maxSettings || f.HasDuplicates() {
			// As x/net's server hangs up on them (not in the RFC): a 16 KiB
			// SETTINGS holds 2,730 entries, and every INITIAL_WINDOW_SIZE
			// one moves every stream's window and may flush them all (a
			// pass over the connection's streams per entry, from bytes the
			// client sends for free). No client sends a setting twice.
			_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("bad SETTINGS: more than 100 entries, or one setting twice"))
			return false
		}
		err := f.ForeachSetting(func(s http2.Setting) error {
			if err := validSetting(s); err != nil {
				return err
			}
			switch s.ID {
			case http2.SettingInitialWindowSize:
				v := int64(s.Val)
				if v == cc.peerInitWin {
					return nil
				}
				if !cc.countWinChange() {
					return errWinFlood
				}
				if v > cc.peerInitWin && v+cc.maxRel > maxWindow {
					// RFC 9113 6.9.2: a raise that takes a stream's window
					// past 2^31-1 is a connection FLOW_CONTROL_ERROR. The
					// bound says it may: the streams tell (at most
					// winChangeLimit passes per window).
					if cc.maxRel = cc.maxRelNow(); v+cc.maxRel > maxWindow {
						return http2.ConnectionError(http2.ErrCodeFlowControl)
					}
				}
				raise := v > cc.peerInitWin
				cc.peerInitWin = v // every stream's window moves with it (sendAvail)
				if raise {
					// Those waiting for their own window resume; those
					// waiting for the connection's (or its socket) wait on.
					cc.flushWinBlocked()
				}
			case http2.SettingMaxFrameSize:
				cc.out.maxFrame = min(s.Val, relayMaxFrame)
			case http2.SettingHeaderTableSize:
				cc.out.enc.SetMaxDynamicTableSizeLimit(s.Val)
			case http2.SettingMaxHeaderListSize:
				cc.out.maxList = s.Val
			}
			return nil
		})
		if errors.Is(err, errWinFlood) {
			cc.h.m.closed.WithLabelValues("settings-flood").Inc()
			cc.h.cfg.Logger.Printf("h2 relay: client connection: %v: GOAWAY ENHANCE_YOUR_CALM", err)
			_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeEnhanceYourCalm, []byte(err.Error()))
			return false
		}
		if err != nil {
			code := http2.ErrCodeProtocol
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				code = http2.ErrCode(ce)
			}
			_ = cc.out.fr.WriteGoAway(cc.maxSeen, code, []byte("bad SETTINGS: "+err.Error()))
			return false
		}
		_ = cc.out.fr.WriteSettingsAck()
	case *http2.PingFrame:
		if !f.IsAck() {
			_ = cc.out.fr.WritePing(true, f.Data)
		} else if cc.pingSent && f.Data == cc.pingData {
			cc.pingSent = false // the keepalive timer re-arms when it fires
		}
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			if !cc.sendWin.add(int64(f.Increment)) {
				_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeFlowControl, []byte("connection window over 2^31-1"))
				return false
			}
			cc.flushAll()
			return true
		}
		st, s := cc.state(f.StreamID)
		if st == stateIdle {
			_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("WINDOW_UPDATE on an idle stream"))
			return false
		}
		if s != nil {
			s.sendRel += int64(f.Increment)
			if s.sendAvail() > maxWindow {
				return cc.streamError(s, http2.ErrCodeFlowControl)
			}
			cc.maxRel = max(cc.maxRel, s.sendRel)
			cc.delWinBlocked(s)
			s.flushOut()
		}
	case *http2.DataFrame:
		return cc.onData(f)
	case *http2.RSTStreamFrame:
		st, s := cc.state(f.StreamID)
		if st == stateIdle {
			_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("RST_STREAM on an idle stream"))
			return false
		}
		if s != nil {
			s.clientReset()
			if !cc.countReset() {
				_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeEnhanceYourCalm, []byte("too many streams reset (rapid reset)"))
				return false
			}
		}
	case *http2.GoAwayFrame:
		cc.goingAway, cc.clientGoAway = true, true
	case *http2.PushPromiseFrame:
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("PUSH_PROMISE from a client"))
		return false
	case *http2.PriorityFrame:
		// Ignored (RFC 9113 5.3.2: priority signals are advisory).
	}
	return true
}

// streamState is a client stream's state as RFC 9113 section 5.1 names
// them, for what a frame may do to it; a client only opens streams (push
// is not used), so reserved states do not occur.
type streamState uint8

const (
	stateIdle             streamState = iota // not opened yet (an id above every one seen, or even)
	stateOpen                                // the request under way
	stateHalfClosedRemote                    // the request ended, the answer goes on
	stateClosed                              // ended (or refused, or reset)
)

// state is stream id's state, and the stream while it is open or half
// closed; mu held.
func (cc *cconn) state(id uint32) (streamState, *rstream) {
	if s := cc.streams[id]; s != nil {
		if s.reqEnd {
			return stateHalfClosedRemote, s
		}
		return stateOpen, s
	}
	if id%2 == 0 || id > cc.maxSeen {
		return stateIdle, nil
	}
	return stateClosed, nil
}

// connSpecific reports the fields RFC 9113 8.2.2 forbids
// (connection-specific); a switch, not a map: every field of every
// request is asked, and a string switch hashes nothing.
func connSpecific(name string) bool {
	switch name {
	case "connection", "proxy-connection", "keep-alive", "transfer-encoding", "upgrade":
		return true
	}
	return false
}

// badRequestFields reports why a request's header list is malformed, ""
// when it is not, with x/net's server's checks (newWriterAndRequest,
// httpcommon.NewServerRequest), each a stream PROTOCOL_ERROR there and
// here (RFC 9113 8.1.1: an intermediary must not forward a malformed
// request): the pseudo-headers a request needs, :scheme http or https,
// no :protocol (extended CONNECT is not offered), a CONNECT with only
// :authority, :method a token and :path without a space (stricter than
// x/net: request-line injection behind the upstream), :path in origin
// form ("/...", or "*") that parses as a request URI, at most one Host
// and none other than :authority, no userinfo and no byte a host cannot
// have in the authority; no
// connection-specific fields, TE only "trailers" (x/net answers those
// 400); content-length a number, the same in every field, 0 on a request
// that ends with its headers (x/net takes a bad one for 0 and ignores it
// without a body; passed on, a hop behind the upstream framing the
// request by it would read the next request as its body). Lower case and
// pseudo-headers first are hreader's checks.
func badRequestFields(f *hblock) string {
	method, path, scheme, authority := f.pseudo("method"), f.pseudo("path"), f.pseudo("scheme"), f.pseudo("authority")
	switch {
	case f.pseudo("status") != "":
		return ":status in a request"
	case f.pseudo("protocol") != "":
		return ":protocol without extended CONNECT"
	case method == "CONNECT":
		if path != "" || scheme != "" || authority == "" {
			return "CONNECT with :path or :scheme, or without :authority"
		}
	case method == "" || path == "" || scheme == "":
		return "request without :method, :scheme or :path"
	case !httpguts.ValidHeaderFieldName(method): // a token
		// RFC 9110 9.1: a method is a token. x/net's server takes any
		// value; passed on, a hop behind the upstream that writes
		// HTTP/1.1 would write "GET /admin HTTP/1.1 /x HTTP/1.1" from a
		// :method "GET /admin HTTP/1.1" (request-line injection), and Go's
		// own client refuses to send such a method.
		return ":method " + strconv.Quote(method) + " not a token"
	case scheme != "http" && scheme != "https":
		return ":scheme " + strconv.Quote(scheme) + " not http or https"
	default:
		if why := badPath(path); why != "" {
			return why
		}
	}
	hosts := 0
	var host, cl string
	for _, hf := range f.regular() {
		switch {
		case connSpecific(hf.Name):
			return "connection-specific field " + hf.Name
		case hf.Name == "te" && hf.Value != "trailers":
			return `te other than "trailers"`
		case hf.Name == "host":
			hosts++
			host = hf.Value
		case hf.Name == "content-length":
			if cl != "" && hf.Value != cl {
				return "content-length values differ"
			}
			cl = hf.Value
		}
	}
	if hosts > 1 {
		return "more than one host field"
	}
	if authority == "" {
		authority = host
	} else if hosts == 1 && host != authority {
		return "host field differs from :authority"
	}
	if strings.IndexByte(authority, '@') >= 0 && scheme != "" {
		return "userinfo in the authority"
	}
	if !httpguts.ValidHostHeader(authority) {
		return "invalid authority"
	}
	if cl != "" {
		n, err := strconv.ParseUint(cl, 10, 63)
		if err != nil {
			return "content-length not a number"
		}
		if n > 0 && f.endStream {
			return "content-length " + cl + " on a request without a body"
		}
	}
	return ""
}

// badPath reports why a :path is not a request URI as x/net's server
// reads it (url.ParseRequestURI, without its allocation): "*", or "/"
// then no control byte, and, before the query, "%" only as an escape;
// and, stricter than x/net, no space and no "#".
func badPath(p string) string {
	if p == "*" {
		return ""
	}
	if p[0] != '/' {
		return ":path not in origin form"
	}
	query := false
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c < ' ' || c == 0x7f:
			return ":path with a control byte"
		case c == ' ':
			// RFC 9110 4.1: no space in a request-target; one, passed
			// on to a hop that writes HTTP/1.1, ends the request-target
			// there (request-line injection, as for :method).
			return ":path with a space"
		case c == '#':
			// RFC 9113 8.3.1: :path is the absolute-path and query of
			// the target, which hold no "#" (a fragment is never sent,
			// RFC 9110 7.1); passed on, an upstream that cuts it runs
			// another request ("/users/1#/../2" as "/users/1"). The
			// HTTP/1.1 side answers 400 (branch h1red18).
			return ":path with a fragment"
		case c == '?':
			query = true
		case c == '%' && !query:
			if i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
				return ":path with a bad percent-escape"
			}
		}
	}
	return ""
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// badTrailers reports why a request's trailer fields are malformed:
// connection-specific (RFC 9113 8.2.2) or one a trailer section must not
// carry (RFC 9110 6.5.1: framing, routing, authentication, ...), as
// x/net's server refuses declared trailers (httpguts.ValidTrailerHeader);
// it drops undeclared ones, which an intermediary would forward.
func badTrailers(fields []hpack.HeaderField) string {
	for _, hf := range fields {
		if connSpecific(hf.Name) || !httpguts.ValidTrailerHeader(hf.Name) {
			return "field " + hf.Name + " in trailers"
		}
	}
	return ""
}

// validSetting is x/net's Setting.Valid (RFC 9113 6.5.2) and the check
// x/net's Server adds to it: RFC 9218 2.1 makes a
// SETTINGS_NO_RFC7540_PRIORITIES other than 0 or 1 a connection
// PROTOCOL_ERROR (it was ignored, from a client and from an upstream).
func validSetting(s http2.Setting) error {
	if s.ID == http2.SettingNoRFC7540Priorities && s.Val > 1 {
		return fmt.Errorf("SETTINGS_NO_RFC7540_PRIORITIES %d, not 0 or 1 (RFC 9218 2.1): %w", s.Val, http2.ConnectionError(http2.ErrCodeProtocol))
	}
	return s.Valid()
}

// onHeaders handles a header block from the client; mu held.
func (cc *cconn) onHeaders(f *hblock) bool {
	id := f.streamID
	if cc.goingAway && id > cc.maxSeen && id%2 == 0 {
		// Discarded after a GOAWAY, as frame discards the others (an odd
		// id is refused below: the client may retry it elsewhere).
		return true
	}
	if id%2 == 0 {
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("client stream id "+strconv.FormatUint(uint64(id), 10)+" is even"))
		return false
	}
	switch st, s := cc.state(id); st {
	case stateHalfClosedRemote:
		// The request ended: nothing more but WINDOW_UPDATE, PRIORITY
		// or RST_STREAM (RFC 9113 5.1).
		return cc.streamError(s, http2.ErrCodeStreamClosed)
	case stateOpen:
		// Trailers of the request.
		if !f.endStream || f.npseudo > 0 {
			return cc.streamError(s, http2.ErrCodeProtocol)
		}
		why := badTrailers(f.regular())
		if got := s.received(); why == "" && s.declLen >= 0 && got != s.declLen {
			why = "content-length " + strconv.FormatInt(s.declLen, 10) + ", body " + strconv.FormatInt(got, 10) + " bytes"
		}
		if why != "" {
			cc.logMalformed(id, why)
			return cc.streamError(s, http2.ErrCodeProtocol)
		}
		if n := len(f.fields); cc.heldFields+n > maxHeldFields {
			cc.logMalformed(id, "trailers of "+strconv.Itoa(n)+" fields past the connection's "+strconv.Itoa(maxHeldFields)+" held")
			return cc.streamError(s, http2.ErrCodeEnhanceYourCalm)
		}
		s.nfields += len(f.fields)
		cc.heldFields += len(f.fields)
		s.onRequestTrailers(f.regular())
		return true
	case stateClosed:
		// A new stream's id must be above every earlier one (5.1.1).
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("stream id "+strconv.FormatUint(uint64(id), 10)+" not above the last one"))
		return false
	}
	cc.maxSeen = id
	if cc.goingAway || cc.h.closing.Load() || uint32(len(cc.streams)) >= cc.h.cfg.MaxConcurrentStreams ||
		cc.heldFields+len(f.fields) > maxHeldFields {
		_ = cc.out.fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
		return true
	}
	if f.truncated {
		_ = cc.out.headers(id, true, []hpack.HeaderField{{Name: ":status", Value: "431"}}, nil, nil, false)
		return true
	}
	if why := badRequestFields(f); why != "" {
		cc.logMalformed(id, why)
		_ = cc.out.fr.WriteRSTStream(id, http2.ErrCodeProtocol)
		return true
	}
	if f.pseudo("method") == "CONNECT" {
		_ = cc.out.headers(id, true, []hpack.HeaderField{{Name: ":status", Value: "405"}}, nil, nil, false)
		return true
	}
	cc.rollResetWindow()
	cc.opened++
	s := newStream(cc, f)
	s.nfields = len(f.fields)
	cc.heldFields += s.nfields
	cc.streams[id] = s
	if t := cc.h.cfg.StreamIdleTimeout; t > 0 && cc.kaAt > time.Duration(cc.lastRead.Load())+t/4 {
		// The keepalive timer is the streams' idle sweep too: due
		// within a quarter of the timeout (never with the defaults: a
		// ping check is due sooner).
		now := time.Since(cc.born)
		cc.kaAt = now + t/4
		cc.ka.Reset(t / 4)
	}
	s.start()
	return true
}

func (cc *cconn) onData(f *http2.DataFrame) bool {
	n := int64(f.Length) // padding included: it counts against the windows
	if !cc.recvWin.take(n) {
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeFlowControl, []byte("DATA beyond the connection window"))
		return false
	}
	s := cc.streams[f.StreamID]
	if s == nil {
		if st, _ := cc.state(f.StreamID); st == stateIdle {
			// Above the highest id seen, or even (a client's streams are
			// odd: an even id is idle whatever the highest is).
			_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeProtocol, []byte("DATA on an idle stream"))
			return false
		}
		cc.creditConn(n)
		_ = cc.out.fr.WriteRSTStream(f.StreamID, http2.ErrCodeStreamClosed)
		return true
	}
	if s.reqEnd {
		cc.creditConn(n)
		return cc.streamError(s, http2.ErrCodeStreamClosed)
	}
	data := f.Data()
	if s.declLen >= 0 {
		// The body against its content-length (RFC 9113 8.1.1), before
		// the stream's window as x/net's server checks it: more than
		// declared, or less at its end, is malformed; the part already
		// passed on never ends upstream (its stream is reset).
		if got := s.received() + int64(len(data)); got > s.declLen || f.StreamEnded() && got != s.declLen {
			cc.creditConn(n)
			cc.logMalformed(s.id, "content-length "+strconv.FormatInt(s.declLen, 10)+", body "+strconv.FormatInt(got, 10)+" bytes or more")
			return cc.streamError(s, http2.ErrCodeProtocol)
		}
	}
	if !s.recvWin.take(n) {
		cc.creditConn(n)
		return cc.streamError(s, http2.ErrCodeFlowControl)
	}
	if pad := n - int64(len(data)); pad > 0 {
		// Given back at once, as x/net's server does; owed first, as the
		// data is (credit takes what it gives back off what is owed).
		s.uncredited += pad
		s.credit(pad)
	}
	s.onRequestData(data, f.StreamEnded())
	return true
}

// streamError resets stream s for a frame of the client's that RFC 9113
// makes a stream error (the client broke its own stream): counted as a
// reset of the client's, as its RST_STREAM would be, so that a client
// cannot start calls upstream and have the relay cancel them past the
// rapid-reset limit (CVE-2023-44487 by stream errors); false when the
// connection passed it (GOAWAY written); mu held.
func (cc *cconn) streamError(s *rstream, code http2.ErrCode) bool {
	s.clientReset()
	if !cc.countReset() {
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeEnhanceYourCalm, []byte("too many streams reset (rapid reset)"))
		return false
	}
	_ = cc.out.fr.WriteRSTStream(s.id, code)
	return true
}

// logLimit is the most malformed-request lines one client connection
// logs within logWindow: a malformed HEADERS is ~20 bytes and resets one
// stream without counting toward the rapid-reset limit (nothing started
// upstream), and a line per frame was a write(2) and ~80 bytes of log per
// 20 bytes a client sends (TestMalformedLogLimited).
const (
	logLimit  = 10
	logWindow = time.Second
)

// logMalformed logs a malformed request on stream id, at most logLimit
// lines per logWindow (Config.Now's clock) and connection; the first line
// of a window says how many the last one left out. mu held.
func (cc *cconn) logMalformed(id uint32, why string) {
	n, ended := cc.malformed.add(cc.h.cfg.Now(), logWindow)
	cc.logNotLogged(ended)
	if n <= logLimit {
		cc.h.cfg.Logger.Printf("h2 relay: stream %d: malformed request: %s", id, why)
	}
}

// logNotLogged says how many malformed requests a window that counted
// ended left out of the log.
func (cc *cconn) logNotLogged(ended int) {
	if ended > logLimit {
		cc.h.cfg.Logger.Printf("h2 relay: client connection: %d more malformed requests not logged", ended-logLimit)
	}
}

// perWindow counts events in fixed windows of Config.Now's clock (unix
// ns): a window starts at the first event after the last one ended, or
// when the clock was set back.
type perWindow struct {
	n    int
	from int64
}

// add counts an event at now; n is the current window's count with it,
// ended the count of the window it ended (0 when it ended none).
func (w *perWindow) add(now int64, d time.Duration) (n, ended int) {
	if now-w.from >= int64(d) || now < w.from {
		ended, w.n, w.from = w.n, 0, now
	}
	w.n++
	return w.n, ended
}

// countReset counts a stream the client reset; false when the connection
// passed the rapid-reset limit; mu held.
func (cc *cconn) countReset() bool {
	cc.rollResetWindow()
	cc.resets++
	if cc.resets > resetLimit && 2*cc.resets > cc.opened {
		cc.h.m.closed.WithLabelValues("rapid-reset").Inc()
		cc.h.cfg.Logger.Printf("h2 relay: client connection: more than %d streams reset within %s: GOAWAY ENHANCE_YOUR_CALM", resetLimit, resetWindow)
		return false
	}
	return true
}

// rollResetWindow starts a new rapid-reset window when the last one
// passed; mu held.
func (cc *cconn) rollResetWindow() {
	if now := time.Since(cc.born); now-cc.resetsFrom >= resetWindow {
		cc.opened, cc.resets, cc.resetsFrom = 0, 0, now
	}
}

// onDrain resumes the answers that waited for the client's socket
// (batchConn.room); the writer goroutine calls it.
func (cc *cconn) onDrain() {
	cc.mu.Lock()
	if !cc.closed {
		cc.flushAll()
	}
	cc.mu.Unlock()
	cc.h.flushDirty()
}

// errReadTimeout is a client too slow with its preface, SETTINGS or a frame.
var errReadTimeout = errors.New("preface, SETTINGS or a frame not received whole within --http-request-timeout")

// clientReader is the client connection's reads under the Framer's
// buffered reader; it keeps the read deadline: the preface and the first
// SETTINGS within RequestTimeout of the connection's start, a frame
// under way (mid) within RequestTimeout of its first byte, none between
// frames; and ends the reads once stopReader was called.
//
// It reads the client's socket directly (sockReader) once what the
// connection's wrappers hold above it is taken (takeHeld): a CONNECT
// tunnel comes through fasthttp's hijacked connection, whose buffered
// reader may hold the first frames.
type clientReader struct {
	cc    *cconn
	mid   bool
	since time.Time
	dl    time.Time // the deadline set
	via   readVia
	held  []byte      // the wrappers' bytes, read first (via readHeld)
	sock  *sockReader // the socket under the wrappers (via readSocket)
}

// readVia is where a client connection's next bytes come from.
type readVia uint8

const (
	readUntried readVia = iota // the first read: takeHeld decides
	readHeld                   // held first, then the socket
	readSocket                 // the socket, directly
	readWrapped                // through the wrappers (no socket under them, or they would not give up their bytes)
)

// maxHeld bounds what takeHeld takes from the wrappers: more than any of
// them buffers (fasthttp's reader 8 KiB, a loop's hand-off its head).
const maxHeld = 64 << 10

// takeHeld reads from c, with a read deadline already past, what its
// wrappers hold above the socket: each returns its buffered bytes without
// reading the socket, and the socket, past its deadline, gives nothing,
// so every byte read is one the wrappers held. ok is false when the
// socket cannot be read directly (none under c, or the wrappers did not
// end with the deadline's error); the bytes read go first either way.
func takeHeld(c net.Conn) (held []byte, sock *sockReader, ok bool) {
	under := socketOf(c)
	if under == nil {
		return nil, nil, false
	}
	if err := c.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return nil, nil, false
	}
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var buf [4 << 10]byte
	for len(held) <= maxHeld {
		n, err := c.Read(buf[:])
		held = append(held, buf[:n]...)
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				return held, nil, false
			}
			sock = newSockReader(under)
			return held, sock, sock != nil
		}
		if n == 0 {
			return held, nil, false
		}
	}
	return held, nil, false
}

func (r *clientReader) Read(p []byte) (int, error) {
	cc := r.cc
	if cc.stop.Load() {
		return 0, net.ErrClosed
	}
	if r.via == readUntried {
		var ok bool
		r.held, r.sock, ok = takeHeld(cc.nc)
		r.via = readWrapped
		if ok {
			r.via = readHeld
		}
	}
	if len(r.held) > 0 {
		n := copy(p, r.held)
		r.held = r.held[n:]
		if !r.mid {
			r.mid, r.since = true, time.Now()
		}
		return n, nil
	}
	if r.via == readHeld {
		r.via, r.held = readSocket, nil
	}
	var want time.Time
	if r.mid {
		want = r.since.Add(cc.h.cfg.RequestTimeout)
	}
	if !want.Equal(r.dl) {
		r.dl = want
		_ = cc.nc.SetReadDeadline(want)
		if cc.stop.Load() { // stopReader's deadline may have been overwritten
			return 0, net.ErrClosed
		}
	}
	var n int
	var err error
	if r.via == readSocket {
		n, err = r.sock.Read(p)
	} else {
		n, err = cc.nc.Read(p)
	}
	if n > 0 && !r.mid {
		r.mid, r.since = true, time.Now()
	}
	if err != nil && r.mid && errors.Is(err, os.ErrDeadlineExceeded) && !cc.stop.Load() {
		err = errReadTimeout
	}
	return n, err
}

// creditConn gives the client back n bytes of connection window, in
// WINDOW_UPDATEs of at least a quarter of it; mu held.
func (cc *cconn) creditConn(n int64) {
	if k := cc.recvWin.add(n); k > 0 {
		_ = cc.out.fr.WriteWindowUpdate(0, k)
	}
}

// flushAll writes what the streams held back for the connection window
// or the client's socket, in turn, while there is window and room: a
// WINDOW_UPDATE of 1 byte on stream 0 serves one stream, not a pass over
// all of them (which it was: a client with 1,000 streams waiting paid
// 13 bytes per 1,000 writeOut calls). The streams not reached keep their
// place ahead of those served; mu held.
func (cc *cconn) flushAll() {
	b := cc.blocked
	cc.blocked = nil
	i := 0
	for ; i < len(b) && cc.sendWin.available() > 0 && cc.cw.room() > 0; i++ {
		s := b[i]
		b[i] = nil
		if !s.connBlocked {
			continue // closed meanwhile (close took it off)
		}
		s.connBlocked = false
		s.flushOut()
	}
	if i == len(b) {
		return
	}
	// Those not reached, then those that blocked again; one closed while
	// others were served lost its flag (close) and is dropped here.
	n := 0
	for _, s := range b[i:] {
		if s.connBlocked {
			b[n] = s
			n++
		}
	}
	clear(b[n:])
	cc.blocked = append(b[:n], cc.blocked...)
}

// addWinBlocked puts s among the streams waiting for their own window; mu held.
func (cc *cconn) addWinBlocked(s *rstream) {
	if s.winBlocked {
		return
	}
	s.winBlocked, s.winIdx = true, len(cc.winBlocked)
	cc.winBlocked = append(cc.winBlocked, s)
}

// delWinBlocked takes s off them, in O(1); mu held.
func (cc *cconn) delWinBlocked(s *rstream) {
	if !s.winBlocked {
		return
	}
	s.winBlocked = false
	last := len(cc.winBlocked) - 1
	if m := cc.winBlocked[last]; m != s {
		cc.winBlocked[s.winIdx], m.winIdx = m, s.winIdx
	}
	cc.winBlocked[last] = nil
	cc.winBlocked = cc.winBlocked[:last]
}

// flushWinBlocked resumes the streams that waited for their own window
// (SETTINGS_INITIAL_WINDOW_SIZE was raised); one whose window is still
// not positive, or that now waits for the connection's, goes back to
// its list. mu held.
func (cc *cconn) flushWinBlocked() {
	b := cc.winBlocked
	if len(b) == 0 {
		return
	}
	cc.winBlocked = cc.winSpare[:0]
	for _, s := range b {
		s.winBlocked = false // first for all: close, from a flushOut, must not look in b
	}
	for _, s := range b {
		if !s.done {
			s.flushOut()
		}
	}
	clear(b)
	cc.winSpare = b[:0]
}

// maxRelNow is the largest sendRel of the open streams, or 0; mu held.
func (cc *cconn) maxRelNow() int64 {
	var m int64
	for _, s := range cc.streams {
		m = max(m, s.sendRel)
	}
	return m
}

// errWinFlood ends a client changing SETTINGS_INITIAL_WINDOW_SIZE past
// winChangeLimit within winChangeWindow (its words are the GOAWAY's).
var errWinFlood = errors.New("too many SETTINGS_INITIAL_WINDOW_SIZE changes")

// countWinChange counts a change of the client's
// SETTINGS_INITIAL_WINDOW_SIZE; false past winChangeLimit within
// winChangeWindow of Config.Now's clock (a clock set back starts a new
// window); mu held.
func (cc *cconn) countWinChange() bool {
	n, _ := cc.winChanges.add(cc.h.cfg.Now(), winChangeWindow)
	return n <= winChangeLimit
}

// removeStream forgets a finished stream; mu held.
func (cc *cconn) removeStream(s *rstream) {
	if cc.streams[s.id] != s {
		return
	}
	delete(cc.streams, s.id)
	cc.heldFields -= s.nfields
	cc.heldAnswer -= s.nanswer
	s.nfields, s.nanswer = 0, 0
	if len(cc.streams) == 0 {
		cc.wakeReader() // a half-closed client's last answer
		if cc.goingAway && cc.h.closing.Load() {
			// Shutdown: the last stream ended, so does the connection.
			cc.stopReader()
			return
		}
		cc.idleSince = time.Since(cc.born)
		if at := cc.idleSince + cc.h.cfg.IdleTimeout; at < cc.kaAt {
			cc.ka.Reset(at - cc.idleSince)
			cc.kaAt = at
		}
	}
}

// keepalive is the connection's one timer, as net/http's server behaves:
// a PING to a client nothing was read from for PingInterval, the
// connection closed when it goes unanswered PingTimeout, GOAWAY and close
// after IdleTimeout without a stream. Nothing per stream touches the
// timer with the defaults (a stream ending re-arms it only when the idle
// close is due before the next ping check).
func (cc *cconn) keepalive() {
	defer cc.h.flushDirty()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.closed {
		return
	}
	cfg := &cc.h.cfg
	now := time.Since(cc.born)
	if cc.pingSent && now >= cc.pingDue {
		cfg.Logger.Printf("h2 relay: client connection: timeout waiting for PING response")
		cc.endByProxy()
		cc.stopReader()
		return
	}
	if len(cc.streams) == 0 && now-cc.idleSince >= cfg.IdleTimeout {
		_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeNo, []byte("idle"))
		cc.stopReader()
		return
	}
	if t := cfg.StreamIdleTimeout; t > 0 {
		cc.sweepIdle(now, t)
		if cc.closed {
			return
		}
	}
	if !cc.pingSent && now-time.Duration(cc.lastRead.Load()) >= cfg.PingInterval {
		binary.LittleEndian.PutUint64(cc.pingData[:], rand.Uint64())
		_ = cc.out.fr.WritePing(false, cc.pingData)
		cc.pingSent, cc.pingDue = true, now+cfg.PingTimeout
	}
	cc.armKeepalive(now)
}

// trackTry starts attempt a's timeout (min(the upstream's per-try
// timeout, the caller's time left)); mu held. The list is kept in due
// order: a is inserted from the tail, where it nearly always belongs (one
// per-try timeout per upstream; a deadline shorter than it puts a before
// the attempts that started earlier).
func (cc *cconn) trackTry(a *ratt, timeout time.Duration) {
	now := time.Since(cc.born)
	a.due, a.inTries = now+timeout, true
	p := cc.tryTail
	for p != nil && p.due > a.due {
		p = p.tprev
	}
	a.tprev = p
	if p != nil {
		a.tnext, p.tnext = p.tnext, a
	} else {
		a.tnext, cc.tryHead = cc.tryHead, a
	}
	if a.tnext != nil {
		a.tnext.tprev = a
	} else {
		cc.tryTail = a
	}
	if !cc.triesArmed || cc.triesAt > a.due {
		// Armed for later than a's, or not at all: due at a's. Armed
		// for earlier (an attempt that ended since), it is left be: it
		// fires, finds nothing due and re-arms for the head. A Reset
		// per call was a runtime timer moved per call, which wakes an
		// idle P's thread or the one in the netpoller (wakeNetPoller):
		// with two Ps about one thread wake-up per call.
		cc.triesArmed, cc.triesAt = true, a.due
		if cc.tries == nil {
			cc.tries = time.AfterFunc(timeout, cc.onTries)
		} else {
			cc.tries.Reset(a.due - now)
		}
	}
}

// untrackTry ends attempt a's per-try timeout (it got its headers, or
// ended); mu held.
func (cc *cconn) untrackTry(a *ratt) {
	if !a.inTries {
		return
	}
	a.inTries = false
	if a.tprev != nil {
		a.tprev.tnext = a.tnext
	} else {
		cc.tryHead = a.tnext
	}
	if a.tnext != nil {
		a.tnext.tprev = a.tprev
	} else {
		cc.tryTail = a.tprev
	}
	a.tprev, a.tnext = nil, nil
}

// onTries fails the attempts whose per-try timeout passed and re-arms
// for the next one.
func (cc *cconn) onTries() {
	defer cc.h.flushDirty()
	cc.mu.Lock()
	defer cc.mu.Unlock()
	cc.triesArmed = false
	if cc.closed {
		return
	}
	now := time.Since(cc.born)
	for cc.tryHead != nil && cc.tryHead.due <= now {
		a := cc.tryHead
		cc.untrackTry(a)
		a.perTryTimeout() // may start the next attempt: at the tail
	}
	if h := cc.tryHead; h != nil {
		// For the head even if a retry started above armed it for its
		// own (later) deadline.
		cc.triesArmed, cc.triesAt = true, h.due
		cc.tries.Reset(h.due - now)
	}
}

// sweepIdle ends the streams on which no frame of their call came for t
// (rstream.idleOut); mu held. A stream's frames are counted (acts), not
// timed: one that moved since the last sweep is active as of now, so a
// stream is ended between t and t plus a sweep's period (t/4) after its
// last frame, never before t.
func (cc *cconn) sweepIdle(now, t time.Duration) {
	for _, s := range cc.streams {
		if s.activeAt == 0 || s.acts != s.actsSeen {
			s.actsSeen, s.activeAt = s.acts, now
			continue
		}
		if now-s.activeAt >= t {
			s.idleOut(t)
		}
	}
}

// armKeepalive sets the timer for the next check; mu held.
func (cc *cconn) armKeepalive(now time.Duration) {
	cfg := &cc.h.cfg
	at := time.Duration(cc.lastRead.Load()) + cfg.PingInterval
	if cc.pingSent {
		at = cc.pingDue
	}
	if len(cc.streams) == 0 {
		at = min(at, cc.idleSince+cfg.IdleTimeout)
	} else if t := cfg.StreamIdleTimeout; t > 0 {
		at = min(at, now+t/4)
	}
	at = max(at, now+time.Millisecond)
	cc.ka.Reset(at - now)
	cc.kaAt = at
}

// shutdown sends GOAWAY: no new streams, the open ones finish.
func (cc *cconn) shutdown() {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.out == nil || cc.closed {
		return
	}
	cc.goingAway = true
	_ = cc.out.fr.WriteGoAway(cc.maxSeen, http2.ErrCodeNo, []byte("shutting down"))
	if len(cc.streams) == 0 {
		cc.stopReader()
	}
}

// endByProxy says the relay ends the connection (endBy).
func (cc *cconn) endByProxy() { cc.endBy.CompareAndSwap(0, cutProxyCode) }

// cutProxyCode is endBy's value for the proxy.
const cutProxyCode = 1

// endedBy is who cuts the answers of the connection's streams when they
// end before their end went out: the client, unless the relay ended the
// connection (endBy).
func (cc *cconn) endedBy() string {
	if cc.endBy.Load() == cutProxyCode {
		return accesslog.CutProxy
	}
	return accesslog.CutClient
}

// stopReader makes the reader goroutine end the connection (teardown
// closes it: only that goroutine does, before ServeConn returns); mu held,
// the connection not torn down yet.
func (cc *cconn) stopReader() {
	cc.stop.Store(true)
	_ = cc.nc.SetReadDeadline(time.Now())
	cc.wakeReader()
	cc.stopLoop()
}

// teardown ends every stream of a connection that is gone and closes it.
func (cc *cconn) teardown() {
	cc.mu.Lock()
	cc.closed = true
	cc.logNotLogged(cc.malformed.n)
	for _, s := range cc.streams {
		s.clientReset()
	}
	if cc.ka != nil {
		cc.ka.Stop()
	}
	if cc.tries != nil {
		cc.tries.Stop()
	}
	cc.mu.Unlock()
	_ = cc.cw.Close()
}

// relayAdd registers a client connection (Shutdown's GOAWAY reaches it).
func (h *Handler) relayAdd(cc *cconn) bool {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	if h.closing.Load() {
		return false
	}
	if h.rconns == nil {
		h.rconns = map[*cconn]struct{}{}
	}
	h.rconns[cc] = struct{}{}
	return true
}

func (h *Handler) relayDel(cc *cconn) {
	h.rmu.Lock()
	delete(h.rconns, cc)
	h.rmu.Unlock()
}

// relayShutdown sends GOAWAY on every relayed client connection and waits
// for them to end until done is closed, then closes what is left.
func (h *Handler) relayShutdown(done <-chan struct{}) {
	h.rmu.Lock()
	conns := make([]*cconn, 0, len(h.rconns))
	for cc := range h.rconns {
		conns = append(conns, cc)
	}
	h.rmu.Unlock()
	for _, cc := range conns {
		cc.shutdown()
	}
	h.flushDirty()
	for _, cc := range conns {
		select {
		case <-cc.done:
		case <-done:
			cc.mu.Lock()
			if !cc.closed {
				cc.endByProxy() // the drain's time is out: what it cuts is the proxy's
				cc.stopReader()
			}
			cc.mu.Unlock()
			<-cc.done
		}
	}
	h.relayClosePools()
}

// hostField is the request's Host field, for requests without :authority.
func hostField(fields []hpack.HeaderField) string {
	for _, f := range fields {
		if f.Name == "host" {
			return f.Value
		}
	}
	return ""
}

// grpcContentType reports whether a content-type is gRPC's.
func grpcContentType(ct string) bool {
	return ct == "application/grpc" || strings.HasPrefix(ct, "application/grpc+") || strings.HasPrefix(ct, "application/grpc;")
}
