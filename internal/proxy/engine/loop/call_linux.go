//go:build linux

package loop

import (
	"net/netip"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// call is one request served by a loop: its exchange (the policy, shared
// with the goroutine engine) and the attempt under way. Calls are pooled
// per loop, with their request, response and scratch buffers.
type call struct {
	l      *evLoop
	c      *cliConn
	req    fasthttp.Request
	resp   fasthttp.Response
	sc     forward.Scratch
	x      forward.Exchange
	up     *forward.Upstream
	seen   forward.Seen   // the request's header names the data path looks up (forward.ScanRequestHeaders)
	target string         // host:port the attempts go to (the idle pool's key)
	uc     *upConn        // the attempt's upstream connection
	t      *netpoll.Timer // the attempt's timeout, or the backoff before the next
	// backoff: t is a backoff, not a per-try timeout.
	backoff bool
	// seq numbers the attempts, so that a DNS answer for an attempt that
	// timed out meanwhile is ignored.
	seq uint64
	// The addresses the attempt's connect goes through in turn.
	ips    []netip.Addr
	ipNext int
	ipLeft int
	port   int
	// reused: the attempt's connection came from the idle pool; resent:
	// the attempt was re-sent on a fresh connection after a reused one
	// failed before any byte of the request left (once per attempt).
	reused bool
	resent bool
}

func (l *evLoop) getCall() *call {
	if n := len(l.free); n > 0 {
		cl := l.free[n-1]
		l.free = l.free[:n-1]
		return cl
	}
	cl := &call{l: l}
	cl.t = netpoll.NewTimer(cl.onTimer)
	cl.t.Owner = cl
	return cl
}

// putCall recycles a call; at most 1024 are kept per loop.
func (l *evLoop) putCall(cl *call) {
	l.timers.Cancel(cl.t)
	cl.req.Reset()
	cl.resp.Reset()
	cl.c, cl.up, cl.uc, cl.target, cl.backoff, cl.ips = nil, nil, nil, "", false, nil
	cl.reused, cl.resent = false, false
	cl.x = forward.Exchange{}
	if len(l.free) < 1024 {
		l.free = append(l.free, cl)
	}
}

// run starts the call: the exchange's checks, then the first attempt.
func (cl *call) run() {
	if !cl.x.Begin(cl.l.f, cl.up, &cl.req, &cl.resp, cl.seen, &cl.sc) {
		cl.c.answer()
		return
	}
	cl.x.LogTo(cl.l.alog)
	cl.x.SetTarget(cl.target)
	cl.attempt()
}

// attempt starts the next attempt, or answers when the exchange refuses it.
func (cl *call) attempt() {
	if !cl.x.NextAttempt() {
		cl.c.answer()
		return
	}
	l := cl.l
	cl.seq++
	cl.backoff = false
	l.timers.Schedule(cl.t, l.now()+int64(cl.x.TryTimeout()))
	cl.resent = false
	if uc := l.idle(cl.target, !cl.x.Replayable()); uc != nil {
		cl.reused = true
		uc.send(cl)
		return
	}
	cl.reused = false
	cl.dial()
}

// onTimer is the per-try timeout, or the end of a backoff.
func (cl *call) onTimer() {
	if cl.backoff {
		cl.backoff = false
		if cl.c.eof {
			// The client closed its end during the backoff (a FIN:
			// curl's --max-time): no retry for a client that left; the
			// last answer for one that only half-closed.
			cl.x.ClientLeft()
			cl.c.answer()
			return
		}
		cl.x.Waited()
		cl.attempt()
		return
	}
	cl.seq++ // a DNS answer still on its way is for nobody now
	// Not connected yet (a DNS answer or the connect pending): a connect
	// failure, as a dial timeout is in the goroutine engine.
	var err error = fasthttp.ErrTimeout
	if cl.uc == nil || cl.uc.connecting {
		err = &forward.DialError{Err: fasthttp.ErrDialTimeout}
	}
	if cl.uc != nil {
		cl.uc.close()
		cl.uc = nil
	}
	cl.after(err)
}

// after hands the attempt's result to the exchange: retry (now, or after
// its backoff), or answer.
func (cl *call) after(err error) {
	l := cl.l
	l.timers.Cancel(cl.t)
	if cl.c.eof {
		// The client closed its end while the attempt ran: its own
		// cancellation, not the upstream's failure.
		cl.x.ClientGone()
	}
	retry, wait := cl.x.AfterAttempt(err)
	if !retry {
		cl.c.answer()
		return
	}
	if wait > 0 {
		cl.backoff = true
		l.timers.Schedule(cl.t, l.now()+int64(wait))
		return
	}
	cl.attempt()
}

// failed ends the attempt with a transport error. On a reused connection
// that failed before any byte of an answer came back, the upstream may have
// closed it idle (policy.MayResend, Go's transport's rule, says when the
// request may go again). When no byte of it left for the upstream, the
// upstream provably never saw it: it is re-sent once, on a fresh
// connection, within the same attempt (not counted as one, nor as a
// breaker failure, with the same budget). When bytes left and it is
// replayable, the upstream may have run it: the exchange judges the
// failure as a stale attempt (forward.StaleError), whose repeat is the next
// attempt, with its number and lowered budget, or none when none is left
// (the chain cap holds). A request not safe to repeat fails here, and its
// exchange answers 502.
func (cl *call) failed(err error) {
	if uc := cl.uc; uc != nil {
		stale := cl.reused && !cl.resent && uc.got == 0 && cl.x.MayResend(uc.sent > 0)
		wrote := uc.sent > 0
		uc.close()
		cl.uc = nil
		if stale && !wrote {
			cl.resent, cl.reused = true, false
			cl.l.f.M.StaleResends.Inc()
			cl.dial()
			return
		}
		if stale {
			err = &forward.StaleError{Err: err}
		}
	}
	cl.after(err)
}

// abandon stops the call's attempt and timers (its client went away).
func (cl *call) abandon() {
	if !cl.backoff {
		cl.x.Abandon() // an attempt under way has no outcome
	}
	cl.seq++
	cl.l.timers.Cancel(cl.t)
	if cl.uc != nil {
		cl.uc.close()
		cl.uc = nil
	}
}
