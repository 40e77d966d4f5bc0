package goroutine

import (
	"bufio"
	"io"
	"net"
	"sync"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// connect tunnels a CONNECT request: bytes both ways, never retried.
func (e *Engine) connect(ctx *fasthttp.RequestCtx) {
	target := string(ctx.Request.Header.RequestURI())
	if _, _, err := net.SplitHostPort(target); err != nil {
		ctx.Error("retrycap-proxy: CONNECT target must be HOST:PORT", fasthttp.StatusBadRequest)
		return
	}
	addr := e.f.ResolveAddr(target)
	e.f.M.Tunnels.WithLabelValues("connect").Inc()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		up, err := net.DialTimeout("tcp", addr, e.f.Cfg.PerTryTimeout)
		if err != nil {
			_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		defer up.Close()
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		pipe(c, up)
	})
}

// upgrade passes an Upgrade request (websocket, h2c) through untouched:
// the request head goes to the upstream once, then bytes flow both ways.
func (e *Engine) upgrade(ctx *fasthttp.RequestCtx, up *forward.Upstream, hostPort []byte) {
	addr := string(hostPort)
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "80")
	}
	if up != nil {
		if r, ok := e.f.Cfg.Resolve[up.Name]; ok {
			addr = r
		}
	}
	addr = e.f.ResolveAddr(addr)
	// Serialise the head in origin-form before the request is recycled.
	req := &ctx.Request
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	uri := req.URI()
	req.Header.SetRequestURIBytes(uri.RequestURI())
	if len(req.Header.Host()) == 0 {
		req.Header.SetHostBytes(uri.Host())
	}
	head := append([]byte(nil), req.Header.Header()...)
	body := append([]byte(nil), req.Body()...)
	e.f.M.Tunnels.WithLabelValues("upgrade").Inc()
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		u, err := net.DialTimeout("tcp", addr, e.f.Cfg.PerTryTimeout)
		if err != nil {
			_, _ = io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			return
		}
		defer u.Close()
		w := bufio.NewWriter(u)
		_, _ = w.Write(head)
		_, _ = w.Write(body)
		if err := w.Flush(); err != nil {
			return
		}
		pipe(c, u)
	})
}

// pipe copies both ways until both sides are done; a half close is passed
// on so protocols that rely on it keep working.
func pipe(a, b net.Conn) {
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
