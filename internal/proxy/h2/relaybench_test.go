package h2

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// BenchmarkRelayFrames: unary gRPC-shaped calls (HEADERS and one DATA
// message each way, trailers with grpc-status) through the frame relay
// over real loopback sockets, between a client and an upstream that speak
// raw frames and allocate nothing per call (they read frames by hand and
// never decode what they need not), so allocs/op and B/op are the
// relay's own: BenchmarkRelayUnary's include two grpc-go ends (about 150
// of its 187 allocations a call). "direct" is the same client against the
// same upstream without the relay, the anchor of the same run: its
// allocs/op show the ends' share (0), its cpu-ns/op theirs.
//
//	go test -run '^$' -bench RelayFrames -benchmem ./internal/proxy/h2/
func BenchmarkRelayFrames(b *testing.B) {
	up := startRawUpstream(b)
	h, _ := newHandler(b, proxyOpts{name: "echo", addr: up, attempts: 3, chainCap: 4})
	relay := serveDirect(b, h, "")
	for _, tc := range []struct {
		name        string
		addr        string
		conns, conc int
	}{
		{"direct/conns=1", up, 1, 16},
		{"relay/conns=1", relay, 1, 16},
		{"relay/conns=8", relay, 8, 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cs := make([]*rawCaller, tc.conns)
			for i := range cs {
				cs[i] = dialRawCaller(b, tc.addr)
				if err := cs[i].run(1, 1); err != nil { // warm: HPACK tables, the upstream connection
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := startCPU()
			var wg sync.WaitGroup
			errs := make([]error, len(cs))
			for i, c := range cs {
				n := b.N / len(cs)
				if i == 0 {
					n += b.N % len(cs)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = c.run(n, tc.conc/len(cs))
				}()
			}
			wg.Wait()
			b.StopTimer()
			cpu.report(b)
			if err := errors.Join(errs...); err != nil {
				b.Fatal(err)
			}
			for _, c := range cs {
				_ = c.c.Close()
			}
		})
	}
}

// rawFrame reads one frame into e.buf (grown when needed): its type,
// flags, stream and payload (valid until the next read).
func (e *rawEnd) rawFrame() (typ http2.FrameType, flags http2.Flags, id uint32, p []byte, err error) {
	hdr := e.hdr[:]
	if _, err = io.ReadFull(e.br, hdr); err != nil {
		return
	}
	n := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
	typ, flags, id = http2.FrameType(hdr[3]), http2.Flags(hdr[4]), binary.BigEndian.Uint32(hdr[5:])&(1<<31-1)
	if cap(e.buf) < n {
		e.buf = make([]byte, n)
	}
	p = e.buf[:n]
	_, err = io.ReadFull(e.br, p)
	return
}

// rawEnd is one side of a raw connection: a Framer writing to a buffered
// writer, an HPACK encoder.
type rawEnd struct {
	c    net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
	buf  []byte
	hdr  [9]byte
	recv int64 // DATA received and not credited back
}

func newRawEnd(c net.Conn) *rawEnd {
	e := &rawEnd{c: c, br: bufio.NewReaderSize(c, 32<<10), bw: bufio.NewWriterSize(c, 32<<10)}
	e.fr = http2.NewFramer(e.bw, nil)
	e.enc = hpack.NewEncoder(&e.hbuf)
	return e
}

func (e *rawEnd) headers(id uint32, end bool, kv ...string) {
	e.hbuf.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		_ = e.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	_ = e.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: e.hbuf.Bytes(), EndHeaders: true, EndStream: end})
}

// credit gives the peer back connection window for DATA received, a
// quarter window at a time (the streams' windows are not used up: one
// small message each).
func (e *rawEnd) credit(n int) {
	if e.recv += int64(n); e.recv >= 16<<10 {
		_ = e.fr.WriteWindowUpdate(0, uint32(e.recv))
		e.recv = 0
	}
}

// rawMessage is a gRPC message (StringValue "hello") in its 5-byte frame.
var rawMessage = []byte{0, 0, 0, 0, 7, 0x0a, 5, 'h', 'e', 'l', 'l', 'o'}

// startRawUpstream is an h2c upstream answering every request, when it
// ended, with 200, rawMessage and grpc-status 0; it never decodes the
// request's header block.
func startRawUpstream(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveRaw(c)
		}
	}()
	return ln.Addr().String()
}

func serveRaw(c net.Conn) {
	defer c.Close()
	e := newRawEnd(c)
	var pre [len(ClientPreface)]byte
	if _, err := io.ReadFull(e.br, pre[:]); err != nil {
		return
	}
	_ = e.fr.WriteSettings()
	answer := func(id uint32) {
		e.headers(id, false, ":status", "200", "content-type", "application/grpc")
		_ = e.fr.WriteData(id, false, rawMessage)
		e.headers(id, true, "grpc-status", "0")
	}
	for {
		typ, flags, id, p, err := e.rawFrame()
		if err != nil {
			return
		}
		switch typ {
		case http2.FrameSettings:
			if !flags.Has(http2.FlagSettingsAck) {
				_ = e.fr.WriteSettingsAck()
			}
		case http2.FramePing:
			if !flags.Has(http2.FlagPingAck) {
				_ = e.fr.WritePing(true, [8]byte(p))
			}
		case http2.FrameHeaders:
			if flags.Has(http2.FlagHeadersEndStream) {
				answer(id)
			}
		case http2.FrameData:
			e.credit(len(p))
			if flags.Has(http2.FlagDataEndStream) {
				answer(id)
			}
		}
		if e.br.Buffered() == 0 {
			if e.bw.Flush() != nil {
				return
			}
		}
	}
}

// rawCaller is a client connection making calls with raw frames.
type rawCaller struct {
	*rawEnd
	t      testing.TB
	mu     sync.Mutex // the writes
	nextID uint32
	dec    *hpack.Decoder
	ok     bool // the trailers being decoded said grpc-status 0
}

func dialRawCaller(t testing.TB, addr string) *rawCaller {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawCaller{rawEnd: newRawEnd(c), t: t, nextID: 1}
	rc.dec = hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == "grpc-status" && f.Value == "0" {
			rc.ok = true
		}
	})
	_, _ = rc.bw.WriteString(ClientPreface)
	_ = rc.fr.WriteSettings()
	if err := rc.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	return rc
}

// run makes n calls, conc at a time, and reads their answers; an answer
// without grpc-status 0 in its trailers is an error.
func (rc *rawCaller) run(n, conc int) error {
	if n == 0 {
		return nil
	}
	free := make(chan struct{}, conc)
	for range min(conc, n) {
		free <- struct{}{}
	}
	var sent atomic.Int64
	go func() {
		for range free {
			if sent.Add(1) > int64(n) {
				return
			}
			rc.mu.Lock()
			id := rc.nextID
			rc.nextID += 2
			rc.headers(id, false, ":method", "POST", ":scheme", "http", ":path", "/retrycap.bench.Echo/Call",
				":authority", "echo:50051", "content-type", "application/grpc", "user-agent", "rawcaller/1", "te", "trailers")
			_ = rc.fr.WriteData(id, true, rawMessage)
			err := rc.bw.Flush()
			rc.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	defer close(free)
	done := 0
	for done < n {
		typ, flags, id, p, err := rc.rawFrame()
		if err != nil {
			return fmt.Errorf("after %d of %d calls: %w", done, n, err)
		}
		switch typ {
		case http2.FrameSettings:
			if !flags.Has(http2.FlagSettingsAck) {
				rc.mu.Lock()
				_ = rc.fr.WriteSettingsAck()
				err = rc.bw.Flush()
				rc.mu.Unlock()
			}
		case http2.FrameData:
			rc.mu.Lock()
			rc.credit(len(p))
			err = rc.bw.Flush()
			rc.mu.Unlock()
		case http2.FrameRSTStream, http2.FrameGoAway:
			return fmt.Errorf("stream %d: %v frame %x", id, typ, p)
		case http2.FrameHeaders:
			rc.ok = false
			if _, err := rc.dec.Write(p); err != nil {
				return err
			}
			if flags.Has(http2.FlagHeadersEndStream) {
				if !rc.ok {
					return errors.New("stream " + strconv.Itoa(int(id)) + ": trailers without grpc-status 0")
				}
				done++
				free <- struct{}{}
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}
