package forward

import (
	"sync"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/accesslog"
)

// Who ended a streamed answer body before its end (StreamEnd.Done; the access log's "cut"):
// accesslog's, shared with the h2 relay.
const (
	// CutUpstream: the upstream closed or reset its connection, stalled past
	// BodyIdleTimeout, or broke the body's framing (a chunk size that is no number, ...).
	CutUpstream = accesslog.CutUpstream
	// CutClient: the client went away (reset its connection, or the proxy's writes to it
	// failed).
	CutClient = accesslog.CutClient
	// CutProxy: the proxy ended it: the event loop could not hand the connections to the
	// goroutine that streams (descriptors ran out; the client got nothing of it), or a drain
	// ran out of time.
	CutProxy = accesslog.CutProxy
)

// StreamEnd is the end of an answer whose body streams after its head went to the client
// (chunked, delimited by the close, or a length over BufferedBodyMax): the engine that streams
// it calls Done when the body ends, whole or not. The attempt's access-log line waits for it:
// written at the head, as every other line is, it read "status":200 for a body the upstream cut
// halfway, with nothing to tell it from a whole one (the client's connection is closed then,
// so that the client sees the cut; the operator reading the log did not). As Envoy (UC/UR, DC)
// and HAProxy (SD, CD) log at the stream's end.
type StreamEnd struct {
	up   *Upstream
	w    *accesslog.Writer // nil: no access log
	rec  accesslog.Record  // the attempt's line as it was at the head
	done bool
}

// Streams tells the exchange, before AfterAttempt judges an answer, that the answer's body
// will stream after its head (StreamEnd).
func (x *Exchange) Streams() { x.streams = true }

// StreamEnd is the end of the streamed answer AfterAttempt passed on (Streams), whose
// access-log line waits for Done; nil when there is none (no answer that streams, or one being
// retried, whose line was written at once).
func (x *Exchange) StreamEnd() *StreamEnd { return x.end }

// Done ends the streamed body: cut is "" when it ended whole, else who cut it (CutUpstream,
// CutClient, CutProxy), and body is how many of its bytes the proxy read from the upstream. It writes the
// attempt's line with the cut (and the bytes) and counts the cut in
// retrycap_proxy_responses_cut_total. Safe on nil, and once only.
func (s *StreamEnd) Done(cut string, body int64) {
	if s == nil || s.done {
		return
	}
	s.done = true
	switch cut {
	case CutUpstream:
		s.up.M.CutByUpstream.Inc()
	case CutClient:
		s.up.M.CutByClient.Inc()
	case CutProxy:
		s.up.M.CutByProxy.Inc()
	}
	if s.w != nil {
		s.rec.Cut, s.rec.BodyBytes = cut, body
		s.w.CommitRecord(&s.rec)
	}
}

// CutWait bounds how long a drain that ran out of time waits for the streamed bodies it cut
// to end, so that their lines reach the access log, which closes after the drain (their
// connections closed or their deadlines passed: milliseconds).
const CutWait = time.Second

// WaitBounded waits for wg at most d.
func WaitBounded(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
