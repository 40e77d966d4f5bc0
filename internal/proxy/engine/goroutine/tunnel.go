package goroutine

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// connect tunnels a CONNECT request: bytes both ways, never retried.
func (e *Engine) connect(ctx *fasthttp.RequestCtx) {
	target := string(ctx.Request.Header.RequestURI())
	if _, _, err := net.SplitHostPort(target); err != nil {
		refuse(ctx, fasthttp.StatusBadRequest, "retrycap-proxy: CONNECT target must be HOST:PORT, got "+forward.QuoteValue(ctx.Request.Header.RequestURI())+"\n")
		return
	}
	addr := e.f.ResolveAddr(target)
	e.f.M.Tunnels.WithLabelValues("connect").Inc()
	stopScan(ctx.Conn())
	ctx.HijackSetNoResponse(true)
	hook := e.ConnectHook
	ctx.Hijack(func(c net.Conn) {
		// The server's request deadlines (--http-request-timeout,
		// --client-timeout) do not apply to a tunnel or an h2c session.
		_ = c.SetDeadline(time.Time{})
		if hook != nil && hook(c, target, addr) {
			return
		}
		up, err := net.DialTimeout("tcp", addr, e.f.Cfg.PerTryTimeout)
		if err != nil {
			// Why, as every own answer says it (it had no body).
			// A timeout as the limit ("dial tcp ...: i/o timeout" named none).
			_, _ = c.Write(forward.OwnAnswer(fasthttp.StatusBadGateway, "retrycap-proxy: CONNECT "+target+": "+upgradeWords(err, e.f.Cfg.PerTryTimeout, "dial: not connected")+"\n", true))
			return
		}
		defer up.Close()
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		Pipe(c, up)
	})
}

// upgrade forwards an Upgrade request (websocket, h2c) and tunnels the
// connection only once the upstream switched protocols. The request goes
// once, never retried, with the chain budget clamped and the proxy's own
// fields removed, framed as it will be read: a body fasthttp de-chunked goes
// with its Content-Length, never with the Transfer-Encoding it came with
// (that would let the decoded bytes be read as a second request). The
// upstream's first final answer decides: a 101 opens the pipe; any other
// answer is passed on as an ordinary one and the client's connection goes
// on being parsed and routed request by request.
func (e *Engine) upgrade(ctx *fasthttp.RequestCtx, up *forward.Upstream, hostPort []byte) {
	addr := string(hostPort)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "80")
	}
	if up != nil && up.Resolved != "" {
		addr = up.Resolved
	}
	addr = e.f.ResolveAddr(addr)
	sc := e.f.GetScratch()
	defer e.f.PutScratch(sc)
	req := &ctx.Request
	e.f.PrepareUpgrade(&req.Header, sc)
	req.Header.SetRequestURIBytes(forward.UpstreamTarget(req))
	// The Host the request is routed by, as fasthttp's writer sets it for
	// every other request: an absolute-form target's host replaces the
	// Host field (RFC 9112 3.2.2: a proxy MUST). It went with the client's
	// Host, unlike any other request: "GET http://backend/x" with "Host:
	// other" reached backend saying "other".
	req.Header.SetHostBytes(req.URI().Host())
	body := req.Body()
	if len(body) > 0 || req.Header.ContentLength() == -1 {
		forward.SetContentLength(&req.Header, len(body), sc) // and no Transfer-Encoding
	}
	perTry := e.f.Cfg.PerTryTimeout
	// Every refusal names the upstream, by name and address, as the
	// exchange's answers do.
	name := e.f.Unknown.Name
	if up != nil {
		name = up.Name
	}
	refused := "retrycap-proxy: upgrade: " + forward.UpstreamNamed(name, addr) + ": "
	u, err := net.DialTimeout("tcp", addr, perTry)
	if err != nil {
		refuse(ctx, fasthttp.StatusBadGateway, refused+upgradeWords(err, perTry, "dial: not connected")+"\n")
		return
	}
	_ = u.SetDeadline(time.Now().Add(perTry))
	w := bufio.NewWriter(u)
	_, _ = w.Write(forward.UpgradeHead(&req.Header, len(body) == 0))
	_, _ = w.Write(body)
	if err := w.Flush(); err != nil {
		_ = u.Close()
		refuse(ctx, fasthttp.StatusBadGateway, refused+"writing the request: "+upgradeWords(err, perTry, "not written")+"\n")
		return
	}
	br := bufio.NewReaderSize(u, 8192)
	var raw []byte
	st := 0
	for n := 0; ; n++ {
		raw, err = readHead(br, raw[:0], forward.MaxResponseHead)
		if err == nil {
			// What the exchange refuses in an answer head (a bare LF, a
			// field name with a blank), refused here too: passed on as it
			// came, "Bad Name: x" reached the client of a refused upgrade.
			_, err = forward.CheckAnswerHead(raw)
		}
		if err == nil {
			st, err = statusOf(raw)
		}
		if err != nil {
			_ = u.Close()
			refuse(ctx, fasthttp.StatusBadGateway, refused+headWords(err, perTry)+"\n")
			return
		}
		if st >= 200 || st == fasthttp.StatusSwitchingProtocols || n >= forward.MaxInterim {
			break
		}
	}
	e.f.M.Tunnels.WithLabelValues("upgrade").Inc()
	if st == fasthttp.StatusSwitchingProtocols {
		_ = u.SetDeadline(time.Time{})
		stopScan(ctx.Conn())
		ctx.HijackSetNoResponse(true)
		ctx.Hijack(func(c net.Conn) {
			defer u.Close()
			if _, err := c.Write(raw); err != nil {
				return
			}
			Pipe(c, &readConn{Conn: u, r: br})
		})
		return
	}
	// Refused: an ordinary answer, on a connection that stays HTTP.
	defer u.Close()
	resp := &ctx.Response
	e.transport.answer.CopyTo(&resp.Header)
	err = resp.Header.Read(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		if id, ok := forward.IdentityAnswer(raw); ok {
			// Read to the close, as the exchange reads it.
			err = resp.Header.Read(bufio.NewReader(bytes.NewReader(id)))
		}
	}
	if err != nil {
		// In the proxy's words: fasthttp's quotes the upstream's bytes.
		e.refuseReset(ctx, fasthttp.StatusBadGateway, refused+"bad answer: "+forward.AnswerParseError(err, raw).Error()+"\n")
		return
	}
	forward.DropTrailerField(&resp.Header) // its trailers are not read either
	if req.Header.IsHead() || st == fasthttp.StatusNoContent || st == fasthttp.StatusNotModified {
		resp.SkipBody = true
	} else if err := resp.ReadBody(br, forward.MaxRequestBody); err != nil {
		// In the proxy's words where fasthttp's parser refused the body
		// (its message may quote the upstream's bytes).
		e.refuseReset(ctx, fasthttp.StatusBadGateway, refused+"reading the answer: "+forward.Reason(err, upgradeWords(err, perTry, "no answer"))+"\n")
		return
	}
	forward.StripResponse(&resp.Header, sc)
}

// upgradeWords is why a tunnel's (an upgrade's, a CONNECT's) dial, write or read failed, as its 502
// says it: a timeout as what did not happen (what) within the per-try
// timeout, not Go's "i/o timeout"; any other error as it reads (a dial's
// names what was dialled).
func upgradeWords(err error, perTry time.Duration, what string) string {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return what + " within the per-try timeout " + perTry.String()
	}
	return err.Error()
}

// headWords is why an upgrade's answer head was refused: the upstream's
// close or silence as it happened, anything else a bad answer (before,
// a read timeout read "bad answer from the upstream: read tcp ...: i/o
// timeout").
func headWords(err error, perTry time.Duration) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return forward.ClosedEarly(err).Error()
	}
	if w := upgradeWords(err, perTry, "no answer"); w != err.Error() {
		return w
	}
	return "bad answer: " + err.Error()
}

// readHead appends one message head (through its empty line) from br to
// dst, at most max bytes.
func readHead(br *bufio.Reader, dst []byte, maxLen int) ([]byte, error) {
	start := len(dst)
	for {
		line, err := br.ReadSlice('\n')
		dst = append(dst, line...)
		if len(dst)-start > maxLen {
			return dst, errors.New("answer head too large")
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return dst, err
		}
		if len(line) == 1 || (len(line) == 2 && line[0] == '\r') {
			if len(dst)-start == len(line) {
				continue // an empty line before the status line
			}
			return dst, nil
		}
	}
}

// statusOf reads the status code of a status line.
func statusOf(head []byte) (int, error) {
	if len(head) < 12 || !bytes.HasPrefix(head, []byte("HTTP/1.")) || head[8] != ' ' {
		return 0, errors.New("no status line")
	}
	st := 0
	for _, c := range head[9:12] {
		if c < '0' || c > '9' {
			return 0, errors.New("bad status")
		}
		st = st*10 + int(c-'0')
	}
	if st < 100 || st > 599 {
		return 0, forward.BadStatus(st)
	}
	return st, nil
}

// readConn is a connection whose first bytes were read into r.
type readConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *readConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// CloseWrite passes a half close on.
func (c *readConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// Pipe copies both ways until both sides are done; a half close is passed
// on so protocols that rely on it keep working. The h2c path's blind
// tunnel (package proxy) uses it too.
func Pipe(a, b net.Conn) {
	// The server's request deadlines (--http-request-timeout,
	// --client-timeout) do not apply to a tunnel.
	_ = a.SetDeadline(time.Time{})
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}
