package h2

import (
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The eighteenth adversarial round (branch h2red18).

// TestUpstreamResetNoErrorAfterWholeAnswer: an upstream may answer a
// request whole before its body has all arrived and then send
// RST_STREAM NO_ERROR to stop the body (RFC 9113 8.1: "clients MUST NOT
// discard responses as a result of receiving such a RST_STREAM"). The
// client's stream window is 0, so the answer is still in the relay when
// the reset comes; the upstream's PING after it, acknowledged, says the
// relay has read it. Then the client opens its window: it must get the
// answer whole (plain HTTP/2: 3000 bytes and END_STREAM; gRPC: the
// message and grpc-status 0), one execution, counted 200 / OK, no cut.
func TestUpstreamResetNoErrorAfterWholeAnswer(t *testing.T) {
	body := bytes.Repeat([]byte("a"), 3000)
	for _, grpcCall := range []bool{false, true} {
		name := map[bool]string{false: "h2", true: "grpc"}[grpcCall]
		t.Run(name, func(t *testing.T) {
			pinged := make(chan struct{}, 1)
			up, arrivals := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				switch f := f.(type) {
				case *http2.MetaHeadersFrame:
					id := f.StreamID
					if grpcCall {
						p.headers(id, false, ":status", "200", "content-type", "application/grpc")
						p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcMessage("ok")) })
						p.headers(id, true, "grpc-status", "0")
					} else {
						p.headers(id, false, ":status", "200", "content-length", "3000")
						p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, true, body) })
					}
					p.do(func(fr *http2.Framer) {
						_ = fr.WriteRSTStream(id, http2.ErrCodeNo)
						_ = fr.WritePing(false, [8]byte{18})
					})
				case *http2.PingFrame:
					if f.IsAck() && f.Data == [8]byte{18} {
						pinged <- struct{}{}
					}
				}
			})
			upName := map[bool]string{false: "web", true: "echo"}[grpcCall] // r.grpcHeaders' authority
			h, _ := newHandler(t, proxyOpts{name: upName, addr: up, attempts: 3})
			r := dialHostile(t, serveDirect(t, h, ""), http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			var blk []byte
			if grpcCall {
				blk = r.grpcHeaders()
			} else {
				blk = r.block(":method", "POST", ":scheme", "http", ":path", "/upload", ":authority", "web")
			}
			_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk, EndHeaders: true})
			_ = r.fr.WriteData(1, false, []byte("part one of a body still coming"))
			select {
			case <-pinged:
			case <-time.After(20 * time.Second):
				t.Fatal("the relay never acknowledged the upstream's PING")
			}
			_ = r.fr.WriteWindowUpdate(1, 1<<20)
			heads, data, rst := r.readStream(1)
			if rst != -1 {
				t.Fatalf("stream reset %v after %d bytes (heads %v): the answer was whole", http2.ErrCode(rst), len(data), heads)
			}
			if grpcCall {
				if len(heads) != 2 || field(heads[0], ":status") != "200" || field(heads[1], "grpc-status") != "0" || !bytes.Equal(data, grpcMessage("ok")) {
					t.Fatalf("answer %v %q, want headers, the message, grpc-status 0", heads, data)
				}
			} else if len(heads) != 1 || field(heads[0], ":status") != "200" || !bytes.Equal(data, body) {
				t.Fatalf("answer %v, %d bytes, want 200 and the 3000 bytes", heads, len(data))
			}
			if n := arrivals.Load(); n != 1 {
				t.Fatalf("the upstream got the request %d times, want 1", n)
			}
			code := map[bool]string{false: "200", true: "OK"}[grpcCall]
			waitFor(t, "the answer counted", func() bool {
				return testutil.ToFloat64(h.m.requests.WithLabelValues(upName, name, code)) == 1
			})
		})
	}
}

// TestRequestLineInjectionRefused: a :method that is not a token (RFC
// 9110 9.1) or a :path with a space (RFC 9110 4.1) is malformed and must
// not be forwarded (RFC 9113 8.1.1): an upstream, or a hop behind it,
// that writes HTTP/1.1 would write a request line of the client's
// making ("GET /admin HTTP/1.1 /x HTTP/1.1"). x/net's server takes
// both (answers 200); the relay forwarded both. Now: the stream reset
// PROTOCOL_ERROR, nothing reaches the upstream; a token method such as
// "get" or "PURGE" still goes through.
func TestRequestLineInjectionRefused(t *testing.T) {
	ref := xnetModServer(t)
	for _, tc := range []struct {
		name, method, path, want string
	}{
		{"method-request-line", "GET /admin HTTP/1.1", "/x", "rst:1:PROTOCOL_ERROR"},
		{"method-space", "G T", "/x", "rst:1:PROTOCOL_ERROR"},
		{"method-slash", "GET/x", "/x", "rst:1:PROTOCOL_ERROR"},
		{"method-paren", "G(T", "/x", "rst:1:PROTOCOL_ERROR"},
		{"path-space", "GET", "/a b", "rst:1:PROTOCOL_ERROR"},
		{"path-request-line", "GET", "/x HTTP/1.1", "rst:1:PROTOCOL_ERROR"},
		{"path-space-in-query", "GET", "/x?a=b c", "rst:1:PROTOCOL_ERROR"},
		{"method-lower-token", "get", "/x", "status:1:200"},
		{"method-purge", "PURGE", "/x", "status:1:200"},
		{"path-encoded-space", "GET", "/a%20b", "status:1:200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, seen := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if f.Header().Flags.Has(http2.FlagDataEndStream) && (f.Header().Type == http2.FrameData || f.Header().Type == http2.FrameHeaders) {
					p.headers(f.Header().StreamID, true, ":status", "200")
				}
			})
			h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 1})
			relay := serveDirect(t, h, "")
			seq := func(fr *http2.Framer, h func(...string) []byte) {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(":method", tc.method, ":scheme", "http", ":path", tc.path, ":authority", "web"), EndHeaders: true, EndStream: true})
			}
			if xnet := diffOutcome(t, ref, true, seq); xnet != "status:1:200" {
				t.Fatalf("x/net's server: %s, want status:1:200 (the reference drifted)", xnet)
			}
			if got := diffOutcome(t, relay, true, seq); got != tc.want {
				t.Fatalf("relay: %s, want %s", got, tc.want)
			}
			want := int64(0)
			if tc.want == "status:1:200" {
				want = 1
			}
			if n := seen.Load(); n != want {
				t.Fatalf("the upstream got %d requests, want %d", n, want)
			}
		})
	}
}

// TestHeadersFirstWhileClientSends: a gRPC server that sends its headers
// first (grpc-go's ServerStream.SendHeader) and then waits for the
// client, whose client waits for them (ClientStream.Header) before it
// sends: grpc-go called directly completes in a millisecond; through the
// relay the call hung until its deadline (the headers held back for a
// message that could not come: Header() returned nothing after 3 s,
// DeadlineExceeded). Now headers arriving while the client's request is
// still open are passed on at once, the call committed as by a message
// (gRPC A6 commits at the response headers): the client gets them and
// its echo, one execution. Committed, such a call is not retried: one
// that then fails UNAVAILABLE without a message reaches the upstream
// once (it was retried three times, the client's Header() waiting
// meanwhile), while one whose request had ended is still held and
// retried (TestGRPCAnswerReadAsGRPCGo's "open" shape).
func TestHeadersFirstWhileClientSends(t *testing.T) {
	for _, fail := range []bool{false, true} {
		name := map[bool]string{false: "echo", true: "unavailable"}[fail]
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var execs atomic.Int64
			srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
				execs.Add(1)
				if err := st.SendHeader(metadata.Pairs("x-ready", "1")); err != nil {
					return err
				}
				if fail {
					return status.Error(codes.Unavailable, "not now")
				}
				in := new(wrapperspb.StringValue)
				if err := st.RecvMsg(in); err != nil {
					return err
				}
				return st.SendMsg(wrapperspb.String("echo:" + in.GetValue()))
			}))
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(srv.Stop)
			up := ln.Addr().String()
			relayName := "r18hdr-" + name
			h, _ := newHandler(t, proxyOpts{name: relayName, addr: up, attempts: 3})
			theFront.route(t, relayName, h, up)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := dialName(t, relayName).NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/r18.Bidi/Call")
			if err != nil {
				t.Fatal(err)
			}
			md, err := st.Header()
			if err != nil || len(md.Get("x-ready")) != 1 || md.Get("x-ready")[0] != "1" {
				t.Fatalf("Header(): %v, %v; want x-ready: 1 before the client sends", md, err)
			}
			_ = st.SendMsg(wrapperspb.String("x"))
			_ = st.CloseSend()
			out := new(wrapperspb.StringValue)
			err = st.RecvMsg(out)
			if fail {
				if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "not now" {
					t.Fatalf("RecvMsg: %v, want UNAVAILABLE not now", err)
				}
			} else if err != nil || out.GetValue() != "echo:x" {
				t.Fatalf("RecvMsg: %q, %v; want echo:x", out.GetValue(), err)
			}
			if n := execs.Load(); n != 1 {
				t.Fatalf("the upstream executed the call %d times, want 1", n)
			}
			code := map[bool]string{false: "OK", true: "UNAVAILABLE"}[fail]
			waitFor(t, "the call counted", func() bool {
				return testutil.ToFloat64(h.m.requests.WithLabelValues(relayName, "grpc", code)) == 1
			})
			if got := testutil.ToFloat64(h.m.attempts.WithLabelValues(relayName, "grpc")); got != 1 {
				t.Fatalf("attempts %v, want 1", got)
			}
		})
	}
}

// TestUpstreamTableSizeUpdateAfterAField: an upstream answer block with a
// dynamic table size update after its first field (RFC 7541 4.2: "MUST
// occur at the beginning of the first header block following the
// change"; x/net's decoder, the relay's, makes it a COMPRESSION_ERROR
// once the dynamic table holds an entry, and lets it pass while the table
// is empty, as for a client's block) ends that upstream connection with
// GOAWAY COMPRESSION_ERROR; the GET is retried on a new connection and
// answered, two executions; the client's connection is untouched.
func TestUpstreamTableSizeUpdateAfterAField(t *testing.T) {
	goaways := make(chan http2.ErrCode, 4)
	up, arrivals := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
		if ga, ok := f.(*http2.GoAwayFrame); ok {
			goaways <- ga.ErrCode
			return
		}
		if _, ok := f.(*http2.MetaHeadersFrame); !ok || !f.Header().Flags.Has(http2.FlagHeadersEndStream) {
			return
		}
		id := f.Header().StreamID
		if p.n == 1 {
			p.do(func(fr *http2.Framer) {
				// A size update after a field that entered the table (x/net's
				// decoder lets one pass while the table is empty).
				blk := append(p.block(":status", "200", "x-pad", "1"), 0x20)
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true, EndStream: true})
			})
			return
		}
		p.headers(id, false, ":status", "200")
		p.do(func(fr *http2.Framer) { _ = fr.WriteData(id, true, []byte("ok")) })
	})
	h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 2})
	r := dialHostile(t, serveDirect(t, h, ""))
	_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(":method", "GET", ":scheme", "http", ":path", "/x", ":authority", "web"), EndHeaders: true, EndStream: true})
	heads, data, rst := r.readStream(1)
	if rst != -1 || len(heads) != 1 || field(heads[0], ":status") != "200" || string(data) != "ok" {
		t.Fatalf("answer %v %q reset %d, want 200 ok", heads, data, rst)
	}
	select {
	case code := <-goaways:
		if code != http2.ErrCodeCompression {
			t.Fatalf("GOAWAY %v to the upstream, want COMPRESSION_ERROR", code)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no GOAWAY to the upstream")
	}
	if n := arrivals.Load(); n != 2 {
		t.Fatalf("the upstream got the request %d times, want 2", n)
	}
}
