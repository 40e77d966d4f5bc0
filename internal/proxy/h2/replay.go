package h2

import (
	"errors"
	"io"
	"sync"
)

// errStale is what a superseded attempt's body reads: a later attempt (or
// the transport's own re-send after a GOAWAY) owns the request body now.
var errStale = errors.New("retrycap-proxy: request body taken over by a later attempt")

// replay is the request body of one call, read from the client once and
// served to each attempt from the start: the bytes read so far stay in buf
// while they fit maxReplay (gRPC A6's replay buffer), so a retry re-sends
// the messages the client already sent and then goes on reading the
// client. Once more than maxReplay bytes were read the call can no longer
// be retried (overflow); buf then only holds what the current attempt has
// not sent yet.
//
// Only one read of the client's body is under way at a time (reading): an
// attempt at the end of buf waits for it instead of reading concurrently,
// and whatever it returns lands in buf, for whichever attempt is current.
type replay struct {
	src       io.ReadCloser
	maxReplay int

	mu       sync.Mutex
	cond     sync.Cond
	buf      []byte
	base     int64 // offset of buf[0] in the body (> 0 only after overflow)
	overflow bool
	reading  bool
	err      error // the client body's end (io.EOF) or failure
	gen      int   // generation of the current attempt's reader
}

func newReplay(src io.ReadCloser, maxReplay int) *replay {
	r := &replay{src: src, maxReplay: maxReplay}
	r.cond.L = &r.mu
	return r
}

// replayable reports whether every byte read so far can still be re-sent.
func (r *replay) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.overflow
}

// reader returns the body for a new attempt, superseding earlier ones. It
// fails once the body overflowed and the start is gone.
func (r *replay) reader() (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.overflow {
		return nil, errors.New("retrycap-proxy: request body larger than --max-replay-bytes: cannot re-send")
	}
	r.gen++
	r.cond.Broadcast()
	return &attemptBody{r: r, gen: r.gen}, nil
}

// attemptBody is one attempt's view of the body.
type attemptBody struct {
	r      *replay
	gen    int
	off    int64
	closed bool
}

func (a *attemptBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r := a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if a.closed {
			return 0, io.ErrClosedPipe
		}
		if a.gen != r.gen {
			return 0, errStale
		}
		if end := r.base + int64(len(r.buf)); a.off < end {
			n := copy(p, r.buf[a.off-r.base:])
			a.off += int64(n)
			if r.overflow {
				// Nothing before the current attempt's offset will be read again.
				drop := a.off - r.base
				r.buf = r.buf[drop:]
				r.base = a.off
			}
			return n, nil
		}
		if r.err != nil {
			return 0, r.err
		}
		if r.reading {
			r.cond.Wait()
			continue
		}
		r.reading = true
		r.mu.Unlock()
		// Read into a pooled buffer and keep only what came: the transport
		// reads with a frame-sized p (16 KiB and more), and a fresh
		// zeroed buffer that size per read (two per unary call: the
		// message, then the end) was most of the proxy's allocation and
		// so of its GC work, for 5-byte messages.
		bufp := bufPool.Get().(*[]byte) //nolint:forcetypeassert // only *[]byte is pooled
		tmp := (*bufp)[:min(max(len(p), 4<<10), len(*bufp))]
		n, err := r.src.Read(tmp)
		r.mu.Lock()
		r.reading = false
		r.buf = append(r.buf, tmp[:n]...)
		bufPool.Put(bufp)
		if !r.overflow && r.base+int64(len(r.buf)) > int64(r.maxReplay) {
			r.overflow = true
		}
		if err != nil {
			r.err = err
		}
		r.cond.Broadcast()
	}
}

// Close ends this attempt's view (the transport closes a request body when
// the stream is done); the client's body stays open for the next attempt.
func (a *attemptBody) Close() error {
	a.r.mu.Lock()
	a.closed = true
	a.r.cond.Broadcast()
	a.r.mu.Unlock()
	return nil
}
