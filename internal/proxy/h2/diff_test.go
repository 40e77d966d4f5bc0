package h2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// The relay against x/net's own HTTP/2 server (net/http's bundled copy,
// h2c with prior knowledge, the same 16 KiB read limit the relay has):
// the same frame sequences, hostile or malformed, sent to both; each must
// end the same way: the same GOAWAY code, or the same RST_STREAM code on
// the stream, or the same answer status.

// xnetServer serves h2c with net/http's HTTP/2 server (x/net's, bundled),
// answering every request 200 "ok", but /hold, which it holds until the
// stream is reset (so no answer races what a sequence sends next).
func xnetServer(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols: &protos,
		HTTP2:     &http.HTTP2Config{MaxReadFrameSize: relayMaxFrame, MaxConcurrentStreams: 1000},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hold" {
				<-r.Context().Done()
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "ok")
		}),
		ErrorLog: nil,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// frameSeq writes a sequence of frames (after the preface) with a Framer
// and an HPACK encoder of its own.
type frameSeq func(fr *http2.Framer, hdrs func(kv ...string) []byte)

// req is a well-formed GET's header block fields, with extra appended.
func req(extra ...string) []string {
	return append([]string{":method", "GET", ":scheme", "http", ":path", "/x", ":authority", "web"}, extra...)
}

// outcome sends preface, the client's SETTINGS (unless the sequence
// replaces them) and seq to addr, and reads what the server does:
// "goaway:CODE", "rst:ID:CODE", "status:ID:NNN", "closed", or "none"
// (nothing decisive within the read window).
func diffOutcome(t *testing.T, addr string, settingsFirst bool, seq frameSeq) string {
	t.Helper()
	var out bytes.Buffer
	if settingsFirst {
		_ = http2.NewFramer(&out, nil).WriteSettings()
	}
	out.Write(seqBytes(seq))
	return outcomeOf(t, addr, out.Bytes())
}

// seqBytes is what seq writes, with an HPACK encoder of its own.
func seqBytes(seq frameSeq) []byte {
	var out bytes.Buffer
	fr := http2.NewFramer(&out, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	seq(fr, func(kv ...string) []byte {
		hb.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		return bytes.Clone(hb.Bytes())
	})
	return out.Bytes()
}

// outcomeOf sends the preface and payload to addr and reads what the
// server does (diffOutcome); the connection is closed after.
func outcomeOf(t *testing.T, addr string, payload []byte) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append([]byte(ClientPreface), payload...)); err != nil {
		return "closed"
	}
	rf := http2.NewFramer(io.Discard, c)
	rf.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	for {
		f, err := rf.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return "none"
			}
			return "closed"
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			if f.ErrCode == http2.ErrCodeNo {
				continue
			}
			return "goaway:" + f.ErrCode.String()
		case *http2.RSTStreamFrame:
			return "rst:" + strconv.Itoa(int(f.StreamID)) + ":" + f.ErrCode.String()
		case *http2.MetaHeadersFrame:
			return "status:" + strconv.Itoa(int(f.StreamID)) + ":" + f.PseudoValue("status")
		}
	}
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// diffCases are the sequences both servers get: frame-size, stream-id,
// state, flow-control, SETTINGS and header-validation errors of RFC 9113.
var diffCases = []struct {
	name          string
	settingsFirst bool
	seq           frameSeq
}{
	{"valid-get", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req()...), EndHeaders: true, EndStream: true})
	}},
	{"first-frame-ping", false, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WritePing(false, [8]byte{})
	}},
	{"data-16385", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req(":method", "POST")[2:]...), EndHeaders: true})
		_ = fr.WriteData(1, true, make([]byte, 16385))
	}},
	{"ping-16385", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteRawFrame(http2.FramePing, 0, 0, make([]byte, 16385))
	}},
	{"headers-even-id", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: h(req()...), EndHeaders: true, EndStream: true})
	}},
	{"stream-id-went-down", true, func(fr *http2.Framer, h func(...string) []byte) {
		// Stream 5's request left open: no answer races the GOAWAY.
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: h(req(":method", "POST")[2:]...), EndHeaders: true})
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: h(req()...), EndHeaders: true, EndStream: true})
	}},
	{"push-promise", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: h(req()...), EndHeaders: true})
	}},
	{"settings-window-too-big", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
	}},
	{"settings-enable-push-2", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 2})
	}},
	{"settings-frame-size-too-small", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1000})
	}},
	// Found by FuzzRelayFrames once it ran at speed: x/net's server
	// hangs up on a SETTINGS with a setting twice, or more than 100.
	{"settings-duplicates", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65535})
	}},
	{"settings-101-entries", true, func(fr *http2.Framer, _ func(...string) []byte) {
		many := make([]http2.Setting, 101)
		for i := range many {
			many[i] = http2.Setting{ID: http2.SettingID(0x100 + i), Val: 1}
		}
		_ = fr.WriteSettings(many...)
	}},
	{"settings-on-stream", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteRawFrame(http2.FrameSettings, 0, 1, nil)
	}},
	{"conn-window-overflow", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteWindowUpdate(0, 1<<31-1)
	}},
	{"window-update-zero-conn", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, u32(0))
	}},
	{"window-update-zero-stream", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req(":method", "POST")[2:]...), EndHeaders: true})
		_ = fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 1, u32(0))
	}},
	{"window-update-idle-stream", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteWindowUpdate(7, 100)
	}},
	{"rst-idle-stream", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteRSTStream(7, http2.ErrCodeCancel)
	}},
	{"data-idle-stream", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteData(7, true, []byte("x"))
	}},
	// Found by FuzzRelayFrames: an even id below the highest odd one seen
	// is still idle (the relay took it for a closed stream and reset it).
	{"data-even-stream-below-max", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: h(req(":method", "POST")[2:]...), EndHeaders: true})
		_ = fr.WriteData(2, true, []byte("x"))
	}},
	{"data-stream-0", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteRawFrame(http2.FrameData, 0, 0, []byte("x"))
	}},
	{"continuation-without-headers", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteContinuation(1, true, h(req()...))
	}},
	{"headers-then-ping-mid-block", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req()...), EndStream: true})
		_ = fr.WritePing(false, [8]byte{})
	}},
	{"headers-half-closed", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(":method", "POST", ":scheme", "http", ":path", "/hold", ":authority", "web"), EndHeaders: true})
		_ = fr.WriteData(1, true, []byte("x"))
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h("x-trailer", "1"), EndHeaders: true, EndStream: true})
	}},
	{"uppercase-field", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req("X-Up", "1")...), EndHeaders: true, EndStream: true})
	}},
	{"connection-specific-field", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req("connection", "keep-alive")...), EndHeaders: true, EndStream: true})
	}},
	{"te-gzip", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(req("te", "gzip")...), EndHeaders: true, EndStream: true})
	}},
	{"missing-path", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h(":method", "GET", ":scheme", "http", ":authority", "web"), EndHeaders: true, EndStream: true})
	}},
	{"pseudo-after-regular", true, func(fr *http2.Framer, h func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h("x-a", "1", ":method", "GET", ":scheme", "http", ":path", "/", ":authority", "web"), EndHeaders: true, EndStream: true})
	}},
	{"bad-hpack", true, func(fr *http2.Framer, _ func(...string) []byte) {
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}, EndHeaders: true, EndStream: true})
	}},
}

// knownDifferences are where the relay deliberately differs from x/net's
// server: a request with a connection-specific field or a TE other than
// "trailers" is malformed (RFC 9113 8.2.2), which "MUST be treated as a
// stream error of type PROTOCOL_ERROR" and an intermediary "MUST NOT
// forward" (8.1.1); x/net's server answers 400 itself, the relay resets.
var knownDifferences = map[string]string{
	"connection-specific-field": "rst:1:PROTOCOL_ERROR",
	"te-gzip":                   "rst:1:PROTOCOL_ERROR",
}

// TestDifferentialAgainstXNet sends every diffCases sequence to the relay
// (its upstream an x/net server too) and to an x/net server, and wants the
// same outcome, but for knownDifferences, where it wants the relay's own
// and checks x/net still answers 400.
func TestDifferentialAgainstXNet(t *testing.T) {
	up := xnetServer(t)
	h, _ := newHandler(t, proxyOpts{name: "web", addr: up, attempts: 1})
	relay := serveDirect(t, h, "")
	ref := xnetServer(t)
	for _, tc := range diffCases {
		t.Run(tc.name, func(t *testing.T) {
			got := diffOutcome(t, relay, tc.settingsFirst, tc.seq)
			ours := diffOutcome(t, ref, tc.settingsFirst, tc.seq)
			want := ours
			if k, ok := knownDifferences[tc.name]; ok {
				if ours != "status:1:400" {
					t.Fatalf("x/net: %s, the known difference expects status:1:400", ours)
				}
				want = k
			}
			if got != want || got == "none" {
				t.Fatalf("relay: %s; want %s (x/net: %s)", got, want, ours)
			}
		})
	}
}

// FuzzRelayFrames feeds arbitrary bytes after the preface and SETTINGS to
// the relay (its upstream x/net's server) and to x/net's server: the
// relay must not panic, must end a connection x/net ends with a protocol
// error (with a GOAWAY of the same code, or by closing it), and must
// forget the connection once the client has gone (nothing of it left in
// the Handler). The seeds are diffCases', diffCases4's and diffCases19's sequences; go test runs them,
// `go test -fuzz FuzzRelayFrames ./internal/proxy/h2/` explores.
//
// Each input ends deterministically, in milliseconds rather than a read
// window: it is completed to whole frames (completeFrames) and followed
// by a PING whose acknowledgement says both servers processed every frame
// before it (each reads and acts on its frames in order; a GOAWAY for one
// of them comes before the acknowledgement, or instead of it).
func FuzzRelayFrames(f *testing.F) {
	for _, tc := range diffCases {
		if tc.settingsFirst {
			f.Add(seqBytes(tc.seq))
		}
	}
	for _, tc := range diffCases4 {
		f.Add(seqBytes(tc.seq))
	}
	for _, tc := range diffCases19 {
		f.Add(seqBytes(tc.seq))
	}
	up := xnetServer(f)
	h, _ := newHandler(f, proxyOpts{name: "web", addr: up, attempts: 1, requestTimeout: 200 * time.Millisecond})
	relay := serveDirect(f, h, "")
	ref := xnetServer(f)
	var settings bytes.Buffer
	_ = http2.NewFramer(&settings, nil).WriteSettings()
	f.Fuzz(func(t *testing.T, in []byte) {
		payload := append(bytes.Clone(settings.Bytes()), completeFrames(in)...)
		payload = append(payload, endPing...)
		got, gotEnd, why := settledOutcome(t, relay, payload)
		ours, _, _ := settledOutcome(t, ref, payload)
		// The relay's Framer (x/net's) knows RFC 9218's PRIORITY_UPDATE
		// (type 0x10) and refuses a malformed one, as 7.1 wants; net/http's
		// bundled server predates it and ignores the type.
		// And a HEADERS on an even stream id is a connection error (RFC
		// 9113 5.1.1) even when its block is malformed too; x/net's
		// server decodes the block first and only resets the stream.
		// And net/http's server keeps a stream it reset until its
		// RST_STREAM is written, counting WINDOW_UPDATE and SETTINGS
		// changes against its window meanwhile (a FLOW_CONTROL_ERROR for
		// a stream it had reset: seed fuzz-window-of-a-reset-stream); the
		// relay forgot the stream (RFC 9113 6.9: frames on a closed
		// stream do not count; x/net v0.62.0's own server finds an
		// overflow only when it writes).
		// The same when the relay answered the request itself while its
		// body was still open (a 400 for no :authority: END_STREAM, then
		// RST_STREAM NO_ERROR, the stream closed; net/http's handler
		// still reads the body: seed fuzz-window-of-an-answered-stream,
		// found by the fuzzer in branch h2red17, older than it).
		// And net/http's server predates RFC 9218's
		// SETTINGS_NO_RFC7540_PRIORITIES (x/net's refuses a value above
		// 1, as the relay does: seed fuzz-settings-no-rfc7540-priorities).
		known := strings.HasPrefix(why, "PRIORITY_UPDATE") || strings.HasPrefix(why, "bad SETTINGS: SETTINGS_NO_RFC7540_PRIORITIES") || got == "goaway:PROTOCOL_ERROR" && strings.HasPrefix(why, "HEADERS on even stream id") ||
			ours == "goaway:FLOW_CONTROL_ERROR" && (strings.HasPrefix(got, "rst:") || strings.HasPrefix(got, "status:"))
		// The relay may reset the malformed request's stream before it
		// ends the connection the same way (gotEnd): the same end.
		if strings.HasPrefix(ours, "goaway:") && got != ours && got != "closed" && gotEnd != ours && gotEnd != "closed" && !known {
			t.Fatalf("x/net: %s; relay: %s, then %s (%s)", ours, got, gotEnd, why)
		}
		waitFor(t, "the relay to forget the connection", func() bool {
			h.rmu.Lock()
			defer h.rmu.Unlock()
			return len(h.rconns) == 0
		})
	})
}

// endData is the end-of-input PING's payload; endPing the frame.
var (
	endData = [8]byte{'r', 'c', '-', 'e', 'n', 'd', '!', '!'}
	endPing = func() []byte {
		var b bytes.Buffer
		_ = http2.NewFramer(&b, nil).WritePing(false, endData)
		return b.Bytes()
	}()
)

// completeFrames is in padded with zero bytes to end on a frame boundary
// (a last frame header cut short completed, a last payload filled up to
// the length its header declares), so that what follows it is read as a
// frame of its own. A frame declaring more than the 16 KiB both servers
// read ends the connection at its header (FRAME_SIZE_ERROR): nothing
// after it is read, nothing is added.
func completeFrames(in []byte) []byte {
	b := bytes.Clone(in)
	for off := 0; off < len(b); {
		if len(b)-off < 9 {
			b = append(b, make([]byte, 9-(len(b)-off))...)
		}
		n := int(b[off])<<16 | int(b[off+1])<<8 | int(b[off+2])
		if n > relayMaxFrame {
			return b
		}
		if rest := len(b) - off - 9; rest < n {
			b = append(b, make([]byte, n-rest)...)
		}
		off += 9 + n
	}
	return b
}

// settledOutcome sends the preface and payload (ending with endPing) to
// addr and reads until the connection's end: a GOAWAY other than
// NO_ERROR ("goaway:CODE", with its debug data), "closed", or the
// acknowledgement of endPing ("settled": every frame before it processed
// without ending the connection); "none" if none comes within the read
// window (only a server that stopped reading: one waiting for a header
// block's CONTINUATION reads the PING as the protocol error it is). first
// is the first of what outcomeOf calls decisive (that, or "rst:ID:CODE",
// "status:ID:NNN" before it), end the connection's end.
func settledOutcome(t *testing.T, addr string, payload []byte) (first, end, debug string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append([]byte(ClientPreface), payload...)); err != nil {
		return "closed", "closed", ""
	}
	rf := http2.NewFramer(io.Discard, c)
	rf.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	ended := func(e, d string) (string, string, string) {
		if first == "" {
			first = e
		}
		return first, e, d
	}
	for {
		f, err := rf.ReadFrame()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return ended("none", "")
			}
			return ended("closed", "")
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeNo {
				return ended("goaway:"+f.ErrCode.String(), string(f.DebugData()))
			}
		case *http2.RSTStreamFrame:
			// What outcomeOf calls decisive, as it does: the check is the
			// same as before, only faster to reach.
			if first == "" {
				first = "rst:" + strconv.Itoa(int(f.StreamID)) + ":" + f.ErrCode.String()
			}
		case *http2.MetaHeadersFrame:
			if first == "" {
				first = "status:" + strconv.Itoa(int(f.StreamID)) + ":" + f.PseudoValue("status")
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data == endData {
				return ended("settled", "")
			}
		}
	}
}
