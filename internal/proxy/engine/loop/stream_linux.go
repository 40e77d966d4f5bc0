//go:build linux

package loop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
	"golang.org/x/sys/unix"

	"github.com/retrycap/retrycap/internal/proxy/forward"
	"github.com/retrycap/retrycap/internal/proxy/netpoll"
)

// stream finishes an attempt whose response body must stream (chunked,
// delimited by the end of the connection, or over 64 KiB): the retry
// decision is made here on the loop from the status and headers, as in the
// other engine; an answer to pass on is written by a goroutine that streams
// the body, and the client's connection continues in the goroutine engine.
// body is what arrived of the body with the head.
func (uc *upConn) stream(body []byte, n int) {
	l, cl := uc.l, uc.cl
	c := cl.c
	l.timers.Cancel(cl.t)
	// The framing the client will get is set before the decision, as the
	// other engine's transport does (SetBodyStream in RoundTrip): a body
	// that is not of known length goes out chunked, and the Transfer-Encoding
	// this adds to the headers must come before those the decision adds
	// (Retrycap-Exhausted), as it does there.
	if n < 0 {
		cl.resp.Header.SetContentLength(-1)
	}
	cl.x.Streams() // the line of an answer passed on waits for its body's end
	retry, wait := cl.x.AfterAttempt(nil)
	if retry {
		// The body of an answer being retried is not wanted: drop it with
		// its connection. Unlike the goroutine engine, which keeps it until
		// the next attempt, should a breaker refuse that attempt the client
		// gets this answer's status and headers with an empty body.
		uc.close()
		cl.resp.Header.SetContentLength(0)
		if wait > 0 {
			cl.backoff = true
			l.timers.Schedule(cl.t, l.now()+int64(wait))
			return
		}
		cl.attempt()
		return
	}
	r := &fasthttp.Response{}
	cl.resp.CopyTo(r)
	closeClient := c.closeAfter || l.draining
	if closeClient {
		r.SetConnectionClose()
	}
	bodyCopy := append([]byte(nil), body...)
	rest := append([]byte(nil), c.in...)
	// An interim answer the client's socket did not take yet goes first.
	var pending []byte
	if c.writing() {
		pending = append(pending, c.out...)
	}
	end := cl.x.StreamEnd()
	uc.cl, cl.uc = nil, nil
	cl.x.End()
	c.call = nil
	l.putCall(cl)

	upFd, clientFd := uc.fd, c.fd
	uc.closed = true
	l.poll.Forget(upFd)
	c.detach()
	upc, err := netpoll.FileConn(upFd, "upstream")
	if err != nil {
		l.f.Logger.Printf("event loop: streaming an answer: %v", err)
		_ = unix.Close(clientFd)
		end.Done(forward.CutProxy, 0) // nothing of it went out: the client's connection is closed
		return
	}
	client, err := netpoll.FileConn(clientFd, "client")
	if err != nil {
		l.f.Logger.Printf("event loop: streaming an answer: %v", err)
		_ = upc.Close()
		end.Done(forward.CutProxy, 0)
		return
	}
	l.f.M.Handoffs.WithLabelValues(HandoffStreamedResponse.String()).Inc()
	l.e.streams.Add(1)
	l.e.track(client, upc)
	go l.e.streamAnswer(client, upc, bodyCopy, n, r, rest, pending, closeClient, end)
}

// streamAnswer writes r to the client with its body read from the
// upstream as it arrives (fasthttp decodes a length or the close, Go's
// reader chunks, and fasthttp encodes the client's framing), each read making progress within
// forward.BodyIdleTimeout. A body cut short closes the client's connection, so that
// it never looks complete, and end (the attempt's access-log line, the cut metric) says who
// cut it. Afterwards the client's connection is served by the goroutine engine.
// pending is what the client's socket had not taken yet of the call's
// interim answers: written before r's head.
func (e *Engine) streamAnswer(client, upc net.Conn, body []byte, n int, r *fasthttp.Response, rest, pending []byte, closeClient bool, end *forward.StreamEnd) {
	defer e.streams.Done()
	defer e.untrack(client, upc)
	defer upc.Close()
	idle := e.f.Cfg.StreamIdle()
	br := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(body), &idleReader{c: upc, idle: idle}), 8192)
	var own fasthttp.Response
	var stream io.Reader
	if n == -1 {
		// Chunked: Go's decoder, with its bounds (forward.NewChunkedBody).
		stream = forward.NewChunkedBody(br)
	} else {
		own.StreamBody = true
		own.Header.SetContentLength(n)
		if err := own.ReadBody(br, 0); err != nil { // sets up the decoder; reads nothing
			_ = client.Close()
			end.Done(forward.CutProxy, 0)
			return
		}
		stream = own.BodyStream()
	}
	counted := &countedStream{r: stream}
	size := n
	if size < 0 {
		size = -1 // to the client: chunked, whatever framing the upstream used
	}
	// r gets the decoder behind a wrapper, so that own alone closes it:
	// writing r closes r's body stream, and fasthttp's stream closed there
	// goes back to its pool while own still holds it; own.Reset would then
	// close it and pool it a second time, by then perhaps another
	// response's (a data race, and one stream shared by two responses).
	// The other engine's upstreamBody wraps it the same way.
	// A client that resets its connection while the body streams has the
	// upstream connection closed at once (the upstream app sees its
	// request end), not when the next bytes find it gone or after the
	// idle timeout. A FIN alone is a half-close: the body goes on.
	hung := &upstreamCut{c: upc}
	tok, werr := watchHangup(client, hung)
	if werr != nil {
		e.watchErr.Do(func() { e.f.Logger.Printf("event loop: clients that go away mid-body are not cut: %v", werr) })
	}
	r.SetBodyStream(ownedStream{counted}, size)
	r.ImmediateHeaderFlush = true
	// fasthttp frames the body; the head is the loop's own (head.go).
	// Each write to the client must make progress within idle too: a
	// client that stopped reading held the upstream connection for as
	// long as it kept its own open.
	sw := &headSwap{w: idleWriter{c: client, idle: idle}, head: func() []byte { return appendAnswerHead(pending, &r.Header) }}
	bw := bufio.NewWriterSize(sw, 16<<10)
	err := r.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	own.Reset()
	netpoll.StopHangup(tok) // before the client's socket closes or moves on
	cut := ""
	switch {
	case err == nil:
	case e.drainCut.Load():
		cut = forward.CutProxy // a drain out of time closed both connections
	case hung.gone.Load():
		cut = forward.CutClient // its reset closed the upstream connection under the read
	case counted.err != nil:
		cut = forward.CutUpstream
	default:
		cut = forward.CutClient // the writes to it failed
	}
	end.Done(cut, counted.n)
	if err != nil || closeClient {
		_ = client.Close()
		return
	}
	_ = client.SetWriteDeadline(time.Time{}) // the next answers' writes are the goroutine engine's
	e.handoff.Push(&forward.PrefixConn{Conn: client, Prefix: rest})
}

// idleWriter writes to a connection with a deadline per write.
type idleWriter struct {
	c    net.Conn
	idle time.Duration
}

func (w idleWriter) Write(p []byte) (int, error) {
	if err := w.c.SetWriteDeadline(time.Now().Add(w.idle)); err != nil {
		return 0, err
	}
	return w.c.Write(p)
}

// upstreamCut closes the upstream connection of an answer being streamed
// when its client resets (netpoll.Hungup; Close ends the read blocked on
// it); gone says it did, so that the read's failure is put down to the
// client.
type upstreamCut struct {
	c    net.Conn
	gone atomic.Bool
}

func (u *upstreamCut) Hungup() {
	u.gone.Store(true)
	_ = u.c.Close()
}

// countedStream is an answer's body as read from the upstream: how many
// bytes, and the read's failure (not the end of the body).
type countedStream struct {
	r   io.Reader
	n   int64
	err error
}

func (s *countedStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// watchHangup watches the client's socket for its reset (0 and an error:
// not watched, the stream then runs as before).
func watchHangup(client net.Conn, h netpoll.Hungup) (tok uint64, err error) {
	sc, ok := client.(syscall.Conn)
	if !ok {
		return 0, fmt.Errorf("hang-up watch: a %T has no socket", client)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("hang-up watch: %w", err)
	}
	cerr := rc.Control(func(fd uintptr) {
		tok, err = netpoll.WatchHangup(int(fd), h) //nolint:gosec // a descriptor
	})
	if cerr != nil {
		return 0, fmt.Errorf("hang-up watch: %w", cerr)
	}
	return tok, err
}

// ownedStream is a body stream that its reader does not close: the
// fasthttp.Response that made it does, on Reset.
type ownedStream struct{ io.Reader }

// idleReader reads a connection with a deadline per read.
type idleReader struct {
	c    net.Conn
	idle time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	if err := r.c.SetReadDeadline(time.Now().Add(r.idle)); err != nil {
		return 0, err
	}
	return r.c.Read(p)
}

// track and untrack keep the connections of the answers being streamed, so
// that a drain that runs out of time can cut them (closeStreams) as it
// cuts the loops' connections.
func (e *Engine) track(conns ...net.Conn) {
	e.streamMu.Lock()
	defer e.streamMu.Unlock()
	if e.streamConns == nil {
		e.streamConns = make(map[net.Conn]struct{})
	}
	for _, c := range conns {
		e.streamConns[c] = struct{}{}
	}
}

func (e *Engine) untrack(conns ...net.Conn) {
	e.streamMu.Lock()
	defer e.streamMu.Unlock()
	for _, c := range conns {
		delete(e.streamConns, c)
	}
}

func (e *Engine) closeStreams() {
	e.streamMu.Lock()
	defer e.streamMu.Unlock()
	e.drainCut.Store(true)
	for c := range e.streamConns {
		_ = c.Close()
	}
}
