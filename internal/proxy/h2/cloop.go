package h2

import (
	"io"
	"time"

	"golang.org/x/net/http2"
)

// A client connection read by an event loop (cloop_linux.go): the loop
// receives what the socket holds and hands it here, where every whole
// frame is parsed by the connection's Framer (from feed, never waiting)
// and handled at once with the reader goroutine's code (readErr,
// firstFrame, handle); the bytes of a frame not whole yet wait in pend
// for the next receive. A header block is decoded fragment by fragment
// as its frames come (hreader.begin, more, end), so that what waits is
// at most one frame, never a whole block, and handled as one block when
// its END_HEADERS came, as the reader goroutine's hr.read does.

// Where a loop-read connection is (loopRead.phase).
const (
	phasePreface = iota // the client preface is awaited
	phaseFirst          // its first frame, which must be SETTINGS
	phaseFrames         // any frame
)

// loopRead is a client connection's read state on an event loop; only
// the loop touches it.
type loopRead struct {
	sys   loopSys // the platform's part (the loop, the descriptor)
	fr    *http2.Framer
	feed  feedReader
	pend  []byte // the start of a frame not whole yet (a buffer of the loop's)
	phase uint8
	// fh is a frame's header read (hasFH) whose payload is not whole yet.
	fh    http2.FrameHeader
	hasFH bool
	// inBlock: a HEADERS without END_HEADERS was decoded, its
	// CONTINUATIONs are awaited; blockFH is its header.
	inBlock bool
	blockFH http2.FrameHeader
	// mid: a frame (or header block) is under way since since: it must
	// be whole within RequestTimeout (the timer: loopSys).
	mid   bool
	since time.Time
}

// feedReader is what the loop path's Framer reads: the bytes of one
// whole frame (or header) at a time, so that it never waits.
type feedReader struct{ b []byte }

func (r *feedReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// Results of consume and of a loop-read connection's end (cconn.verdict).
const (
	loopGoOn     = iota // read on
	loopEnd             // end the connection
	loopHalfOpen        // a FIN at a frame boundary: waitAnswers, then end
)

// consume handles the whole frames at the start of in (the preface
// first, while it is awaited) and returns how many bytes it used, and
// loopEnd when the connection ends (its GOAWAY, where due, written).
func (cc *cconn) consume(in []byte) (int, int) {
	lr := &cc.lr
	used := 0
	if lr.phase == phasePreface {
		if len(in) < len(ClientPreface) {
			return 0, loopGoOn
		}
		if string(in[:len(ClientPreface)]) != ClientPreface {
			return 0, loopEnd
		}
		used = len(ClientPreface)
		lr.fr = http2.NewFramer(cc.cw, &lr.feed)
		cc.greet(lr.fr)
		lr.phase = phaseFirst
	}
	for {
		if cc.stop.Load() {
			return used, loopEnd
		}
		b := in[used:]
		if !lr.hasFH {
			if len(b) < frameHeaderLen {
				return used, loopGoOn
			}
			lr.feed.b = b[:frameHeaderLen]
			fh, err := lr.fr.ReadFrameHeader()
			used += frameHeaderLen
			if err != nil {
				if lr.inBlock {
					fh = lr.blockFH
				}
				if !cc.readErr(fh, err) {
					return used, loopEnd
				}
				continue // (readErr ends the connection on every header error)
			}
			lr.fh, lr.hasFH = fh, true
			b = in[used:]
		}
		if len(b) < int(lr.fh.Length) {
			return used, loopGoOn
		}
		fh := lr.fh
		lr.feed.b = b[:fh.Length]
		f, err := lr.fr.ReadFrameForHeader(fh)
		used += int(fh.Length)
		lr.hasFH = false
		var blk *hblock
		if err == nil {
			switch hf := f.(type) {
			case *http2.ContinuationFrame:
				if lr.inBlock { // (else a HEADERS that failed: ignored, as frame ignores it)
					fh = lr.blockFH
					if err = cc.hr.more(hf.HeaderBlockFragment()); err == nil {
						if !hf.HeadersEnded() {
							continue
						}
						blk, err = cc.hr.end()
					}
					lr.inBlock = false
				}
			case *http2.HeadersFrame:
				cc.hr.begin(hf.StreamID, hf.StreamEnded())
				if err = cc.hr.more(hf.HeaderBlockFragment()); err == nil {
					if !hf.HeadersEnded() {
						// Its CONTINUATIONs come: the block is under way
						// (its time runs from the HEADERS' first byte).
						lr.inBlock, lr.blockFH = true, fh
						continue
					}
					blk, err = cc.hr.end()
				}
			}
		}
		if lr.phase == phaseFrames {
			lr.mid = false // a frame or block ended: the next one's time starts at its first byte
		}
		if err != nil {
			if !cc.readErr(fh, err) {
				return used, loopEnd
			}
			continue
		}
		if lr.phase == phaseFirst {
			lr.phase = phaseFrames
			lr.mid = false
			if !cc.firstFrame(f) {
				return used, loopEnd
			}
		}
		if !cc.handle(f, blk) {
			return used, loopEnd
		}
	}
}

// underWay reports whether a frame or header block is under way after
// consume left left bytes: its time runs (RequestTimeout).
func (lr *loopRead) underWay(left int) bool {
	return lr.phase != phaseFrames || left > 0 || lr.hasFH || lr.inBlock
}

// atEOF is what the client's FIN means after consume left left bytes:
// at a frame boundary, after its first frame and without a GOAWAY
// before, a half-close (waitAnswers), else the end, as serve reads it.
func (cc *cconn) atEOF(left int) int {
	lr := &cc.lr
	if lr.phase == phaseFrames && left == 0 && !lr.hasFH && !cc.clientGoAway {
		return loopHalfOpen
	}
	return loopEnd
}
