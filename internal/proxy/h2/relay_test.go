package h2

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// rawClient is an HTTP/2 client speaking frames to a Handler's ServeConn
// directly (prior knowledge), to test the relay as an intermediary.
type rawClient struct {
	t   *testing.T
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
	w   chan func() // writes, in order, by one goroutine (net.Pipe blocks a write until it is read)
}

func newRawClient(t *testing.T, h *Handler) *rawClient {
	t.Helper()
	a, b := net.Pipe()
	go h.ServeConn(b, "")
	t.Cleanup(func() { _ = a.Close() })
	rc := &rawClient{t: t, c: a, w: make(chan func(), 64)}
	rc.fr = http2.NewFramer(a, a)
	rc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	rc.enc = hpack.NewEncoder(&rc.buf)
	_ = a.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		for fn := range rc.w {
			fn()
		}
	}()
	t.Cleanup(func() { close(rc.w) })
	rc.w <- func() {
		_, _ = io.WriteString(a, ClientPreface)
		_ = rc.fr.WriteSettings()
	}
	return rc
}

func (rc *rawClient) headers(id uint32, end bool, fields ...string) {
	rc.buf.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		_ = rc.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	blk := bytes.Clone(rc.buf.Bytes())
	rc.w <- func() {
		_ = rc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndStream: end, EndHeaders: true})
	}
}

// until reads frames until one satisfies ok (acking SETTINGS on the way).
func (rc *rawClient) until(what string, ok func(http2.Frame) bool) http2.Frame {
	rc.t.Helper()
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			rc.t.Fatalf("waiting for %s: %v", what, err)
		}
		if sf, isS := f.(*http2.SettingsFrame); isS && !sf.IsAck() {
			rc.w <- func() { _ = rc.fr.WriteSettingsAck() }
		}
		if ok(f) {
			return f
		}
	}
}

// The relay answers PING, refuses malformed requests with RST_STREAM
// PROTOCOL_ERROR (connection-specific fields, TE other than trailers,
// a missing :path) and answers a protocol error with GOAWAY naming it.
func TestRelayIntermediary(t *testing.T) {
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1})
	rc := newRawClient(t, h)
	rc.w <- func() { _ = rc.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}) }
	p := rc.until("PING ack", func(f http2.Frame) bool { pf, ok := f.(*http2.PingFrame); return ok && pf.IsAck() }).(*http2.PingFrame)
	if p.Data != [8]byte{1, 2, 3, 4, 5, 6, 7, 8} {
		t.Fatalf("PING ack carries %v", p.Data)
	}
	for i, bad := range [][]string{
		{":method", "GET", ":scheme", "http", ":authority", "echo", ":path", "/", "connection", "close"},
		{":method", "GET", ":scheme", "http", ":authority", "echo", ":path", "/", "te", "gzip"},
		{":method", "GET", ":scheme", "http", ":authority", "echo"},
		{":method", "GET", ":scheme", "http", ":authority", "echo", ":path", "/", "transfer-encoding", "chunked"},
	} {
		id := uint32(1 + 2*i)
		rc.headers(id, true, bad...)
		f := rc.until("RST_STREAM", func(f http2.Frame) bool { _, ok := f.(*http2.RSTStreamFrame); return ok }).(*http2.RSTStreamFrame)
		if f.StreamID != id || f.ErrCode != http2.ErrCodeProtocol {
			t.Fatalf("request %d: RST_STREAM stream %d %v, want stream %d PROTOCOL_ERROR", i, f.StreamID, f.ErrCode, id)
		}
	}
	// A client stream id that is even is a connection error.
	rc.headers(20, true, ":method", "GET", ":scheme", "http", ":authority", "echo", ":path", "/")
	g := rc.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if g.ErrCode != http2.ErrCodeProtocol || string(g.DebugData()) != "client stream id 20 is even" || g.LastStreamID != 7 {
		t.Fatalf("GOAWAY %v last %d %q", g.ErrCode, g.LastStreamID, g.DebugData())
	}
}

// Messages far larger than every flow-control window pass both ways
// (the relay credits WINDOW_UPDATEs as each side consumes), on both
// engines: a 3 MiB unary request and answer, retried once with the
// request replayed (under a 4 MiB --max-replay-bytes).

func TestLargeMessagesThroughWindows(t *testing.T) {
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB
	b := startBackend(t, &backend{unary: func(_ context.Context, n int, in string) (string, error) {
		if n == 1 {
			return "", status.Error(codes.Unavailable, "once")
		}
		return in + in[:1<<20], nil
	}}, grpc.MaxRecvMsgSize(16<<20), grpc.MaxSendMsgSize(16<<20))
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 3, replay: 4 << 20})
	theFront.route(t, "echo", h, b.addr)
	cc := dialName(t, "echo", grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20), grpc.MaxCallSendMsgSize(16<<20)))
	out, err := callUnary(ctxT(t), cc, big)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(big)+1<<20 || out[:len(big)] != big {
		t.Fatalf("answer of %d bytes, want %d", len(out), len(big)+1<<20)
	}
	if got := b.attempts.Load(); got != 2 {
		t.Fatalf("server saw %d attempts, want 2", got)
	}
	// A server stream of 64 messages of 64 KiB each.
	b.stream = func(_ int, in string, send func(string) error) error {
		for range 64 {
			if err := send(strings.Repeat(in, 64<<10)); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := cc.NewStream(ctxT(t), &grpc.StreamDesc{ServerStreams: true}, methodStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendMsg(wrapperspb.String("z")); err != nil {
		t.Fatal(err)
	}
	_ = s.CloseSend()
	n := 0
	for {
		m := new(wrapperspb.StringValue)
		if err := s.RecvMsg(m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(m.GetValue()) != 64<<10 {
			t.Fatalf("message %d of %d bytes", n, len(m.GetValue()))
		}
		n++
	}
	if n != 64 {
		t.Fatalf("%d messages, want 64", n)
	}
}
