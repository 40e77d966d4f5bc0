package h2

import (
	"bytes"
	"context"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The edges of a client connection read by an event loop (cloop.go):
// frames and header blocks that come in pieces, a client gone mid-frame,
// the frame timeout as a loop timer, one loop's clients not held by one
// that does not read. Each runs on both paths, the loop's and the reader
// goroutine's (loopsOn false): their answers must be the same bytes.

// bothPaths runs f with the event loops on and off.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	for _, on := range []bool{true, false} {
		t.Run("loops="+strconv.FormatBool(on), func(t *testing.T) {
			old := loopsOn.Load()
			loopsOn.Store(on)
			t.Cleanup(func() { loopsOn.Store(old) })
			f(t)
		})
	}
}

// pieceWriter writes what it is given in pieces of n bytes, each its own
// write(2) (TCP_NODELAY: Go's default), so that the relay receives a
// frame in many reads.
type pieceWriter struct {
	c net.Conn
	n int
}

func (w *pieceWriter) Write(p []byte) (int, error) {
	for i := 0; i < len(p); i += w.n {
		if _, err := w.c.Write(p[i:min(i+w.n, len(p))]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

// conversation is a client's whole conversation for one unary call
// whose request header block is cut into CONTINUATIONs of step bytes:
// the preface, SETTINGS, HEADERS, CONTINUATIONs, DATA.
func conversation(t *testing.T, path string, step int, pad int) []byte {
	var out bytes.Buffer
	out.WriteString(ClientPreface)
	fr := http2.NewFramer(&out, nil)
	_ = fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "echo:50051"},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"x-pad", strings.Repeat("p", pad)}} {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	blk := hb.Bytes()
	first := min(step, len(blk))
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:first], EndHeaders: first == len(blk)}); err != nil {
		t.Fatal(err)
	}
	for i := first; i < len(blk); i += step {
		end := min(i+step, len(blk))
		if err := fr.WriteContinuation(1, end == len(blk), blk[i:end]); err != nil {
			t.Fatal(err)
		}
	}
	_ = fr.WriteData(1, true, grpcMessage("split"))
	return out.Bytes()
}

// readAnswer reads stream 1's answer on c: its message and grpc-status.
func readAnswer(t *testing.T, c net.Conn) (msg []byte, status string) {
	t.Helper()
	r := &hostileClient{t: t, c: c, fr: http2.NewFramer(c, c)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	heads, data, rst := r.readStream(1)
	if rst != -1 || len(heads) != 2 {
		t.Fatalf("answer: %d header blocks, reset %d; want headers and trailers", len(heads), rst)
	}
	return data, field(heads[1], "grpc-status")
}

// A unary call whose every piece comes in its own read: the header block
// in CONTINUATIONs of 7 bytes (100 frames) written 5 bytes at a time,
// and the same conversation one byte per write, is answered as if it
// came whole.
func TestLoopPiecemealFrames(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		b := startBackend(t, &backend{unary: func(_ context.Context, _ int, in string) (string, error) { return "got " + in, nil }})
		h, _ := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1})
		addr := serveDirect(t, h, "echo:50051")
		for _, tc := range []struct {
			name        string
			step, piece int
		}{{"continuations-in-5-byte-writes", 7, 5}, {"byte-by-byte", 40, 1}} {
			t.Run(tc.name, func(t *testing.T) {
				conv := conversation(t, methodCall, tc.step, 600)
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				done := make(chan error, 1)
				go func() { _, err := (&pieceWriter{c, tc.piece}).Write(conv); done <- err }()
				_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
				msg, st := readAnswer(t, c)
				if want := grpcMessage("got split"); !bytes.Equal(msg, want) || st != "0" {
					t.Fatalf("answer %q grpc-status %q, want %q 0", msg, st, want)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			})
		}
		if n := b.attempts.Load(); n != 2 {
			t.Fatalf("the server saw %d calls, want 2", n)
		}
	})
}

// A client that closes its connection in the middle of a frame (half of
// a HEADERS, then half of a DATA after a whole HEADERS): the connection
// ends, nothing of it is left in the Handler, and no call reached the
// upstream from the half HEADERS; the call whose HEADERS was whole
// reached it and ends with the connection (its attempt judged).
func TestLoopClientGoneMidFrame(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		b := startBackend(t, &backend{collect: func(int, []string) (string, error) { return "all", nil }})
		h, reg := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1})
		addr := serveDirect(t, h, "echo:50051")
		conv := conversation(t, methodCollect, 1<<10, 10) // a client stream: its handler runs at once
		// The preface, SETTINGS (9 bytes), then the HEADERS.
		hdrs := conv[len(ClientPreface)+frameHeaderLen:]
		hlen := frameHeaderLen + (int(hdrs[0])<<16 | int(hdrs[1])<<8 | int(hdrs[2]))
		// Up to the HEADERS, then a message in a DATA frame that does not
		// end the stream, then half of the next DATA frame.
		var more bytes.Buffer
		mfr := http2.NewFramer(&more, nil)
		_ = mfr.WriteData(1, false, grpcMessage("split"))
		_ = mfr.WriteData(1, true, []byte("0123456789"))
		halfData := append(append([]byte(nil), conv[:len(conv)-len(hdrs)+hlen]...), more.Bytes()[:more.Len()-5]...)
		for _, tc := range []struct {
			name  string
			bytes []byte
			calls int64
		}{
			{"half-headers", conv[:len(conv)-len(hdrs)+hlen/2], 0},
			{"half-data", halfData, 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := b.attempts.Load()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Write(tc.bytes); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the connection served", func() bool {
					h.rmu.Lock()
					defer h.rmu.Unlock()
					return len(h.rconns) == 1
				})
				if tc.calls == 1 {
					waitFor(t, "the call at the server", func() bool { return b.attempts.Load() == before+1 })
				}
				_ = c.Close()
				waitFor(t, "the connection forgotten", func() bool {
					h.rmu.Lock()
					defer h.rmu.Unlock()
					return len(h.rconns) == 0
				})
				if tc.calls == 1 {
					// Its stream ended with the connection: the attempt is
					// judged (the client's cancellation).
					waitFor(t, "the attempt judged", func() bool {
						return strings.Contains(h2Counters(t, reg), "retrycap_proxy_h2_attempts_total{protocol=grpc,upstream=echo} 1\n")
					})
				}
				if got := b.attempts.Load() - before; got != tc.calls {
					t.Fatalf("the server saw %d calls, want %d", got, tc.calls)
				}
			})
		}
	})
}

// --http-request-timeout on a frame under way, on the loop a timer of
// its own: a frame's first 4 bytes, then nothing: GOAWAY NO_ERROR with
// the timeout's words after 300 ms (not before), the connection closed,
// counted as a timeout; the same for a header block whose CONTINUATION
// never comes, though a CONTINUATION came 150 ms after the HEADERS (the
// time runs from the block's first byte, not each frame's).
func TestLoopFrameTimeout(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1, requestTimeout: 300 * time.Millisecond})
		addr := serveDirect(t, h, "echo:50051")
		for _, tc := range []struct {
			name string
			send func(r *hostileClient)
		}{
			{"partial-ping", func(r *hostileClient) { _, _ = r.c.Write([]byte{0, 0, 8, byte(http2.FramePing)}) }},
			{"block-without-end", func(r *hostileClient) {
				blk := r.grpcHeaders()
				_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:3]})
				time.Sleep(150 * time.Millisecond) // the CONTINUATION comes later, within the time
				_ = r.fr.WriteContinuation(1, false, blk[3:6])
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := dialHostile(t, addr)
				r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
				// The relay's SETTINGS, then its ACK of ours: our SETTINGS
				// was handled, the frame's time starts after.
				_ = r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
				for acked := false; !acked; {
					f, err := r.fr.ReadFrame()
					if err != nil {
						t.Fatal(err)
					}
					if sf, ok := f.(*http2.SettingsFrame); ok && sf.IsAck() {
						acked = true
					}
				}
				start := time.Now()
				tc.send(r)
				ga, ok := r.goAway(nil)
				d := time.Since(start)
				if !ok || ga.ErrCode != http2.ErrCodeNo || string(ga.DebugData()) != errReadTimeout.Error() {
					t.Fatalf("GOAWAY %v, want NO_ERROR %q", ga, errReadTimeout.Error())
				}
				if d < 300*time.Millisecond || d > 5*time.Second {
					t.Fatalf("GOAWAY after %v, want 300 ms .. 5 s", d)
				}
				if d := r.closedAfter(start); d > 5*time.Second {
					t.Fatalf("closed after %v", d)
				}
			})
		}
		if got := testutil.ToFloat64(h.m.closed.WithLabelValues("timeout")); got != 2 {
			t.Fatalf("connections closed for a timeout: %v, want 2", got)
		}
	})
}

// One loop (GOMAXPROCS 1 when the Handler's loops are made) serving 20
// clients, one of which asks for 16 answers of 1 MiB and never reads
// them: the others' calls are all answered meanwhile, and the one not
// reading loses its connection after the write timeout (500 ms), the
// others keep theirs.
func TestLoopOneClientNotReading(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		b := startBackend(t, &backend{unary: func(_ context.Context, _ int, in string) (string, error) { return bigAnswers(in), nil }})
		h, reg := newHandler(t, proxyOpts{name: "echo", addr: b.addr, attempts: 1, writeTimeout: 500 * time.Millisecond})
		addr := serveDirect(t, h, "echo:50051")
		old := runtime.GOMAXPROCS(1)
		stuck := dialHostile(t, addr, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
		_ = stuck.fr.WriteWindowUpdate(0, 1<<31-1-65535)
		// The relay's ACK of its SETTINGS: the connection was dealt.
		_ = stuck.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		for acked := false; !acked; {
			f, err := stuck.fr.ReadFrame()
			if err != nil {
				runtime.GOMAXPROCS(old)
				t.Fatal(err)
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && sf.IsAck() {
				acked = true
			}
		}
		runtime.GOMAXPROCS(old)
		h.loopOnce.Do(func() {})
		if loopsOn.Load() && runtime.GOOS == "linux" && len(h.loops) != 1 {
			t.Fatalf("%d loops, want 1", len(h.loops))
		}
		for i := range 16 {
			stuck.call(uint32(2*i+1), "big")
		}
		var wg sync.WaitGroup
		errs := make(chan string, 19*10)
		for range 19 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := dialHostile(t, addr)
				r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
				for i := range 10 {
					id := uint32(2*i + 1)
					r.call(id, "x")
					heads, data, rst := r.readStream(id)
					if rst != -1 || len(heads) != 2 || !bytes.Equal(data, grpcMessage("ok")) || field(heads[1], "grpc-status") != "0" {
						errs <- "stream " + strconv.Itoa(int(id)) + ": not answered ok"
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
		waitFor(t, "the client not reading closed", func() bool {
			return testutil.ToFloat64(h.m.closed.WithLabelValues("not-reading")) == 1
		})
		waitFor(t, "only its connection gone", func() bool {
			h.rmu.Lock()
			defer h.rmu.Unlock()
			return len(h.rconns) == 19
		})
		_ = reg
	})
}
