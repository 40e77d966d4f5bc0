package h2

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The third adversarial round (branch hostile3), towards the upstream:
// what hostile2_test.go's TestHostileUpstreamFrames and
// TestUpstreamMalformedHead did not try. A CONTINUATION flood
// (CVE-2023-45288's shape: a header block that never ends, in empty
// frames, at full speed or trickled), PING and SETTINGS floods from an
// upstream that never reads, a connection WINDOW_UPDATE past 2^31-1, an
// HPACK dynamic table size update above the size the relay allows, and
// SETTINGS values RFC 9113 6.5.2 forbids. Each first call is answered as
// the policy says (three attempts, reset retried): ok from a second
// connection, with the executions counted; the hostile connection ends;
// the heap's peak growth stays under 16 MiB.

// flood writes frames built by one on p's connection, batch by batch,
// until a write fails or limit bytes went, or stop is closed; it returns
// the bytes written and whether a write failed (the relay closed).
func flood(p *upPeer, one func(fr *http2.Framer), perBatch int, limit int64, gap time.Duration) (int64, bool) {
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	for range perBatch {
		one(fr)
	}
	var n int64
	for n < limit {
		_ = p.c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		p.mu.Lock()
		k, err := p.c.Write(buf.Bytes())
		p.mu.Unlock()
		n += int64(k)
		if err != nil {
			return n, true
		}
		if gap > 0 {
			time.Sleep(gap) // the upstream's pace, not a synchronisation
		}
	}
	return n, false
}

func TestHostileUpstreamFrames3(t *testing.T) {
	emptyCont := func(id uint32) func(fr *http2.Framer) {
		return func(fr *http2.Framer) { _ = fr.WriteContinuation(id, false, nil) }
	}
	for _, tc := range []struct {
		name string
		// script runs on the upstream's reader goroutine for the first
		// call's stream: the upstream reads nothing while it runs.
		script     func(t *testing.T, p *upPeer, id uint32) string
		executions int64 // the first call's
	}{
		// A header block without END_HEADERS, then empty CONTINUATION
		// frames as fast as the socket takes them (up to 256 MiB). x/net's
		// rule (a fragment over twice what the list may still hold) never
		// fires on empty frames; the relay counts 9 bytes a frame against
		// the same bound and closes the connection (PROTOCOL_ERROR) within
		// 2 MiB of frames. Before, it read them all, its reader held in the
		// block: every stream of the connection waited, the retry too.
		// The upstream sent a header block: the call is not retried
		// (answered, below; session 18, grpcmal18).
		{"continuation-flood", func(t *testing.T, p *upPeer, id uint32) string {
			p.do(func(fr *http2.Framer) {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.block(":status", "200", "content-type", "application/grpc")})
			})
			n, cut := flood(p, emptyCont(id), 10000, 256<<20, 0)
			t.Logf("CONTINUATION flood: %d bytes written, cut %v", n, cut)
			if !cut || n > 16<<20 {
				return "the relay took the flood"
			}
			return ""
		}, 1},
		// The same block trickled, a frame every 20 ms: under any byte
		// bound, so the time bound cuts it: a header block must end within
		// --http-request-timeout (1 s here) of its first frame, as a
		// client's frames must. Before: never cut. The upstream began its
		// answer: the call is not retried (answered, below; branch
		// proto18: before, it ran twice).
		{"continuation-trickle", func(t *testing.T, p *upPeer, id uint32) string {
			p.do(func(fr *http2.Framer) {
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.block(":status", "200", "content-type", "application/grpc")})
			})
			start := time.Now()
			_, cut := flood(p, emptyCont(id), 1, 9*1000, 20*time.Millisecond)
			if !cut {
				return "the relay kept reading the trickle for 20 s"
			}
			t.Logf("CONTINUATION trickle cut after %v", time.Since(start).Round(time.Millisecond))
			return ""
		}, 1},
		// PINGs the relay must acknowledge, from an upstream that never
		// reads them: what the relay has pending is bounded (1.25 MiB),
		// the connection failed; x/net's Transport bounds its queued
		// control frames likewise.
		{"ping-flood-not-reading", func(t *testing.T, p *upPeer, _ uint32) string {
			n, cut := flood(p, func(fr *http2.Framer) { _ = fr.WritePing(false, [8]byte{1}) }, 10000, 256<<20, 0)
			t.Logf("PING flood: %d bytes written, cut %v", n, cut)
			if !cut {
				return "the relay took 256 MiB of PINGs"
			}
			return ""
		}, 2},
		{"settings-flood-not-reading", func(t *testing.T, p *upPeer, _ uint32) string {
			n, cut := flood(p, func(fr *http2.Framer) { _ = fr.WriteSettings() }, 10000, 256<<20, 0)
			t.Logf("SETTINGS flood: %d bytes written, cut %v", n, cut)
			if !cut {
				return "the relay took 256 MiB of SETTINGS"
			}
			return ""
		}, 2},
		// The connection's send window past 2^31-1 (RFC 9113 6.9.1):
		// FLOW_CONTROL_ERROR on the connection; the call retried.
		{"connection-window-overflow", func(_ *testing.T, p *upPeer, _ uint32) string {
			p.do(func(fr *http2.Framer) {
				_ = fr.WriteWindowUpdate(0, 1<<31-1)
				_ = fr.WriteWindowUpdate(0, 1<<31-1)
			})
			return ""
		}, 2},
		// A dynamic table size update above SETTINGS_HEADER_TABLE_SIZE
		// (4,096, the relay never raises it): RFC 7541 6.3, a
		// COMPRESSION_ERROR on the connection; the call, its header
		// block sent, not retried (answered, below).
		{"hpack-table-size-above-the-setting", func(_ *testing.T, p *upPeer, id uint32) string {
			p.do(func(fr *http2.Framer) {
				p.enc.SetMaxDynamicTableSizeLimit(1 << 20)
				p.enc.SetMaxDynamicTableSize(1 << 20)
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: p.block(":status", "200", "content-type", "application/grpc"), EndHeaders: true})
			})
			return ""
		}, 1},
		// The table shrunk to 0 and grown back within the setting, in
		// one block (legal): the answer passes.
		{"hpack-table-size-updates-within-the-setting", func(_ *testing.T, p *upPeer, id uint32) string {
			p.do(func(fr *http2.Framer) {
				p.enc.SetMaxDynamicTableSize(0)
				p.enc.SetMaxDynamicTableSize(4096)
			})
			p.grpcOK(id)
			return ""
		}, 1},
		// SETTINGS RFC 9113 6.5.2 forbids: a connection error each, the
		// call retried on a new connection.
		{"settings-max-frame-size-below-16k", func(_ *testing.T, p *upPeer, _ uint32) string {
			p.do(func(fr *http2.Framer) { _ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1000}) })
			return ""
		}, 2},
		{"settings-initial-window-over-2^31-1", func(_ *testing.T, p *upPeer, _ uint32) string {
			p.do(func(fr *http2.Framer) {
				_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
			})
			return ""
		}, 2},
		{"settings-enable-push-2", func(_ *testing.T, p *upPeer, _ uint32) string {
			p.do(func(fr *http2.Framer) { _ = fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2}) })
			return ""
		}, 2},
		// RFC 9218 2.1: SETTINGS_NO_RFC7540_PRIORITIES above 1 is a
		// connection PROTOCOL_ERROR; the answer after it is never read
		// (the relay reads in order), the call retried on a new
		// connection. Before, the setting was ignored and the answer
		// taken (one execution).
		{"settings-no-rfc7540-priorities-2", func(_ *testing.T, p *upPeer, id uint32) string {
			p.do(func(fr *http2.Framer) {
				_ = fr.WriteSettings(http2.Setting{ID: http2.SettingNoRFC7540Priorities, Val: 2})
			})
			p.grpcOK(id)
			return ""
		}, 2},
		// A huge SETTINGS_HEADER_TABLE_SIZE: the relay's encoder keeps its
		// own 4,096 (the setting is a limit, not a demand), the call goes
		// on.
		{"settings-header-table-size-2^32-1", func(_ *testing.T, p *upPeer, id uint32) string {
			p.do(func(fr *http2.Framer) {
				_ = fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 1<<32 - 1})
			})
			p.grpcOK(id)
			return ""
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ended atomic.Int64
			problem := make(chan string, 1)
			up, seen := scriptedUpstream(t, nil, func(p *upPeer, f http2.Frame) {
				if f.Header().Type != http2.FrameData || !f.Header().Flags.Has(http2.FlagDataEndStream) {
					return
				}
				if ended.Add(1) == 1 {
					problem <- tc.script(t, p, f.Header().StreamID)
					return
				}
				p.grpcOK(f.Header().StreamID)
			})
			h, _ := newHandler(t, proxyOpts{name: "hup3", addr: up, attempts: 3, perTry: 10 * time.Second, requestTimeout: time.Second})
			theFront.route(t, "hup3", h, up)
			cc := dialName(t, "hup3")
			hs := sampleHeap()
			start := time.Now()
			// The cases whose upstream sent the call's header block before
			// it broke the connection: the call ran there, INTERNAL, not
			// retried (TestGRPCAnsweredNotResent).
			answered := map[string]string{
				"continuation-flood":                 "header block in more frames than SETTINGS_MAX_HEADER_LIST_SIZE allows (CONTINUATION flood)",
				"hpack-table-size-above-the-setting": "its header block cannot be decoded (HPACK: decoding error: dynamic table size update too large)",
			}
			// The cases whose header block the relay's own time bound cut:
			// answered too, the connection lost in the block.
			cutBlock := map[string]string{
				"continuation-trickle": "retrycap-proxy: upstream hup3 (" + up + "): 1 attempt(s), last failed with reset (retrycap-proxy: upstream connection lost: " +
					"retrycap-proxy: the upstream's header block not whole within 1s: header block timeout); not retried: not-retryable",
			}
			if why, ok := answered[tc.name]; ok {
				want := "retrycap-proxy: upstream hup3 (" + up + "): 1 attempt(s), last failed with bad-answer (the upstream's answer is malformed: " + why + "); not retried: not-retryable"
				if out, err := callUnary(ctxT(t), cc, "x"); status.Code(err) != codes.Internal || status.Convert(err).Message() != want {
					t.Fatalf("first call: %q, %v (after %v); want INTERNAL %q", out, err, time.Since(start), want)
				}
			} else if want, ok := cutBlock[tc.name]; ok {
				if out, err := callUnary(ctxT(t), cc, "x"); status.Code(err) != codes.Internal || status.Convert(err).Message() != want {
					t.Fatalf("first call: %q, %v (after %v); want INTERNAL %q", out, err, time.Since(start), want)
				}
			} else if out, err := callUnary(ctxT(t), cc, "x"); err != nil || out != "ok" {
				t.Fatalf("first call: %q, %v (after %v)", out, err, time.Since(start))
			}
			t.Logf("first call answered after %v", time.Since(start).Round(time.Millisecond))
			select {
			case msg := <-problem:
				if msg != "" {
					t.Fatal(msg)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the hostile upstream's script did not end")
			}
			// What the relay holds for an upstream's unbounded input is
			// bounded: its reads in a block, its pending writes
			// (1.25 MiB a connection); the test's upstream is in this
			// heap too.
			g := hs.growth()
			t.Logf("heap peak growth %.1f MiB", float64(g)/(1<<20))
			if g > 16<<20 {
				t.Errorf("heap grew %d MiB, want < 16", g>>20)
			}
			if n := seen.Load(); n != tc.executions {
				t.Fatalf("the upstream executed the first call %d times, want %d", n, tc.executions)
			}
			if out, err := callUnary(ctxT(t), cc, "y"); err != nil || out != "ok" {
				t.Fatalf("second call: %q, %v", out, err)
			}
		})
	}
}
