package storm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrycap/retrycap/internal/labapp"
)

// The gRPC chain's edge client. A user request is one call of
// retrycap.lab.Chain: Get for the load's GETs, Buy (the charge) for its
// POSTs, with the user operation in baggage (storm-op) and the
// Idempotency-Key, if any, in metadata idempotency-key.

// grpcSpec is u for the gRPC chain: a POST without a key gets one. HTTP/2
// has no key generation at the entry proxy (docs/grpc.md), and a gRPC call
// is retried by its status whatever its method, so a Buy without a key
// would be charged again by any retry below: every Buy carries one, as a
// gRPC client of a payment API does.
func grpcSpec(u userSpec) userSpec {
	if u.method == http.MethodPost && u.key == "" {
		u.key = "key-" + u.op
	}
	return u
}

// attemptGRPC is one edge-client attempt of u over gRPC, its outcome as an
// HTTP-like status for userRequest: 200 OK, 503 UNAVAILABLE (which the
// client retries, as gRPC clients retry only that code), 400 for any other
// code (not retried).
func (c *chain) attemptGRPC(ctx context.Context, u userSpec, key string) int {
	md := metadata.Pairs("baggage", opBaggageKey+"="+u.op)
	if key != "" {
		md.Set("idempotency-key", key)
	}
	method := labapp.GRPCGet
	if u.method == http.MethodPost {
		method = labapp.GRPCBuy
	}
	err := labapp.InvokeGRPC(metadata.NewOutgoingContext(ctx, md), c.gedge, method)
	switch status.Code(err) {
	case codes.OK:
		return http.StatusOK
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusBadRequest
}

// dialConnect opens a tunnel to target through the HTTP proxy at proxy,
// as grpc-go does with HTTPS_PROXY: CONNECT target (the name unresolved),
// a 200, then the connection is the tunnel.
func dialConnect(ctx context.Context, proxy, target string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", proxy)
	if err != nil {
		return nil, fmt.Errorf("dial proxy %s: %w", proxy, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	} else {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	}
	if _, err := fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: grpc-go\r\n\r\n", target, target); err != nil {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s via %s: %w", target, proxy, err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s via %s: %w", target, proxy, err)
	}
	// The body is not read: after a 200 the bytes are the tunnel's.
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s via %s: %s", target, proxy, resp.Status)
	}
	_ = c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: c, r: br}, nil
	}
	return c, nil
}

// bufferedConn reads what the CONNECT response's reader buffered first.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }
