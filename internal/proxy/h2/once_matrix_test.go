package h2

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/policy"
	"github.com/retrycap/retrycap/internal/proxy/proxytest"
)

// The at-most-once matrix on the h2 relay (issue 25 item 1; the HTTP/1.1
// engines' is internal/proxy/once_matrix_test.go): plain HTTP/2 (h2c)
// requests of every kind and gRPC-shaped calls, 1 and 20 at once over one
// client connection and the relay's pooled upstream connection (warmed
// first), against a raw h2c backend that counts executions (a request's
// HEADERS it processed: not one it refused with REFUSED_STREAM or left
// above a GOAWAY's last-stream-id, RFC 9113 8.7, which it counts apart)
// and fails each request's first arrival as the shape says. Connection
// shapes act once every request of the cell arrived whole (so each cell's
// outcome is exact at 20 at once too). Asserted per request: executions,
// unprocessed arrivals, the status (gRPC: grpc-status), Retrycap-Exhausted
// and, for the relay's own answers, why.

type h2OnceAct int

const (
	h2IdleFIN     h2OnceAct = iota // the pooled connection closed (FIN, no GOAWAY) after the warm-up
	h2IdleGoaway                   // GOAWAY (last-stream-id: the warm-up's) and FIN after the warm-up
	h2Refused                      // RST_STREAM REFUSED_STREAM once the request arrived whole
	h2GoawayBelow                  // all arrived: GOAWAY below their streams, FIN: none processed
	h2GoawayAt                     // all arrived: GOAWAY at the highest stream, FIN, no answer: maybe processed
	h2RstHead                      // RST_STREAM INTERNAL_ERROR on the HEADERS, the body unread
	h2RstBody                      // RST_STREAM INTERNAL_ERROR after the whole request
	h2ConnFIN                      // all arrived: the connection closed (FIN, no GOAWAY), no answer
	h2ConnRST                      // all arrived: the connection reset (TCP RST), no answer
	h2MidStream                    // the answer's headers and part of its body, then (all so far) the connection closed
	h2Status503                    // 503 (gRPC: trailers-only UNAVAILABLE)
	h2Timeout                      // no answer: the per-try timeout
)

var h2OnceShapes = []struct {
	name string
	act  h2OnceAct
}{
	{"idle-fin", h2IdleFIN}, {"idle-goaway", h2IdleGoaway}, {"refused-stream", h2Refused},
	{"goaway-below", h2GoawayBelow}, {"goaway-at", h2GoawayAt}, {"rst-stream-head", h2RstHead},
	{"rst-stream-body", h2RstBody}, {"conn-fin", h2ConnFIN}, {"conn-rst", h2ConnRST},
	{"mid-stream", h2MidStream}, {"503", h2Status503}, {"timeout", h2Timeout},
}

type h2OnceKind struct {
	name       string
	method     string
	body       int
	key        bool
	grpc       bool
	entry      bool // the Handler is an entrypoint (a keyless POST gets a generated key)
	dedup      bool // the upstream deduplicates by key
	replayable bool
}

const h2OnceMaxReplay = 1024

var h2OnceKinds = []h2OnceKind{
	{name: "GET", method: "GET", replayable: true},
	{name: "POST", method: "POST", body: 100},
	{name: "PATCH", method: "PATCH", body: 100},
	{name: "PUT", method: "PUT", body: 100, replayable: true},
	{name: "DELETE", method: "DELETE", replayable: true},
	{name: "POST-key", method: "POST", body: 100, key: true, replayable: true},
	{name: "POST-key-big", method: "POST", body: 2 * h2OnceMaxReplay, key: true},
	{name: "PUT-big", method: "PUT", body: 2 * h2OnceMaxReplay},
	{name: "POST-genkey", method: "POST", body: 100, entry: true},
	{name: "POST-genkey-dedup", method: "POST", body: 100, entry: true, dedup: true, replayable: true},
	// gRPC calls follow gRPC A6: retried by grpc-status and on a reset,
	// whatever the method (docs/grpc.md), within --max-replay-bytes.
	{name: "gRPC", method: "POST", body: 100, grpc: true, replayable: true},
	{name: "gRPC-big", method: "POST", body: 2 * h2OnceMaxReplay, grpc: true},
}

// h2OnceWant is a request's outcome.
type h2OnceWant struct {
	execs       int
	unprocessed int    // arrivals the backend refused or left above its GOAWAY
	code        int    // HTTP status (gRPC: 200, the status is in grpc-status)
	grpcStatus  string // "" for plain HTTP/2
	exhausted   string
	why         string // in the relay's own answer (body, gRPC: grpc-message)
	cut         bool   // the answer's body ended short
}

func h2OnceExpect(k h2OnceKind, act h2OnceAct) h2OnceWant {
	ok := h2OnceWant{execs: 1, code: 200}
	if k.grpc {
		ok.grpcStatus = "0"
	}
	switch act {
	case h2IdleFIN, h2IdleGoaway:
		return ok
	case h2Refused, h2GoawayBelow:
		// Never processed: re-sent, whatever the kind.
		ok.unprocessed = 1
		return ok
	case h2MidStream:
		// An answer passed on (its headers; gRPC: a message) is
		// committed: never retried; its end cut (gRPC: trailers
		// UNAVAILABLE saying the upstream broke the stream).
		if k.grpc {
			ok.grpcStatus, ok.why = "14", "broke the stream after the answer began"
		} else {
			ok.cut = true
		}
		return ok
	}
	if k.replayable {
		ok.execs = 2
		return ok
	}
	w := h2OnceWant{execs: 1, code: 502, why: "not-retryable"}
	switch act {
	case h2Status503:
		w = h2OnceWant{execs: 1, code: 503}
	case h2Timeout:
		w.code = 504
	}
	if k.grpc {
		// The relay's own failure, as gRPC maps a 502/503/504: UNAVAILABLE.
		w.code, w.grpcStatus = 200, "14"
		if act == h2Status503 {
			w.why = ""
		}
	}
	return w
}

// h2OnceBackend is a raw h2c upstream driven by x/net's Framer.
type h2OnceBackend struct {
	t    *testing.T
	ln   net.Listener
	act  h2OnceAct
	conc int

	mu          sync.Mutex
	execs       map[string]int
	unprocessed map[string]int
	arrived     int
	all         chan struct{} // every request of the cell arrived whole (first arrivals)
	stop        chan struct{} // the test ended
	wg          sync.WaitGroup
	open        []net.Conn
}

type h2OnceConn struct {
	b      *h2OnceBackend
	c      *net.TCPConn
	fr     *http2.Framer
	wmu    sync.Mutex
	enc    *hpack.Encoder
	hb     bytes.Buffer
	st     map[uint32]*h2OnceStream
	warm   uint32 // the highest warm-up stream
	high   uint32 // the highest test stream
	done   bool   // closed by the backend: nothing read any more is served
	acting bool
	// The relay's flow control: its SETTINGS_INITIAL_WINDOW_SIZE (it
	// sends 0, then grants each stream a window).
	initWin int64
}

type h2OnceStream struct {
	id    string
	warm  bool
	grpc  bool
	first bool // the request's first arrival (failed as the shape says)
	dead  bool // refused or reset: nothing more to do
	// win is the stream's send window; an answer whose DATA does not fit
	// waits (later) for the WINDOW_UPDATE that makes need fit.
	win   int64
	need  int64
	later func()
}

func newH2OnceBackend(t *testing.T, act h2OnceAct, conc int) *h2OnceBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &h2OnceBackend{t: t, ln: ln, act: act, conc: conc, execs: map[string]int{}, unprocessed: map[string]int{}, all: make(chan struct{}), stop: make(chan struct{})}
	t.Cleanup(func() {
		close(b.stop)
		_ = ln.Close()
		b.mu.Lock()
		for _, c := range b.open {
			_ = c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	b.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.open = append(b.open, c)
			b.mu.Unlock()
			b.wg.Go(func() { b.serve(c.(*net.TCPConn)) })
		}
	})
	return b
}

func (b *h2OnceBackend) serve(c *net.TCPConn) {
	defer c.Close()
	var preface [len(ClientPreface)]byte
	if _, err := io.ReadFull(c, preface[:]); err != nil {
		return
	}
	k := &h2OnceConn{b: b, c: c, fr: http2.NewFramer(c, c), st: map[uint32]*h2OnceStream{}, initWin: 65535}
	k.enc = hpack.NewEncoder(&k.hb)
	k.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	k.write(func(fr *http2.Framer) { _ = fr.WriteSettings() })
	for {
		f, err := k.fr.ReadFrame()
		if err != nil {
			return
		}
		k.wmu.Lock()
		done := k.done
		k.wmu.Unlock()
		if done {
			continue // closed: read until the relay closes too
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				k.initWin = int64(v)
			}
			if !f.IsAck() {
				k.write(func(fr *http2.Framer) { _ = fr.WriteSettingsAck() })
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				k.write(func(fr *http2.Framer) { _ = fr.WritePing(true, f.Data) })
			}
		case *http2.WindowUpdateFrame:
			if s := k.st[f.StreamID]; s != nil {
				s.win += int64(f.Increment)
				if s.later != nil && s.win >= s.need {
					later := s.later
					s.later = nil
					later()
				}
			}
		case *http2.MetaHeadersFrame:
			k.onHeaders(f)
		case *http2.DataFrame:
			if n := len(f.Data()); n > 0 {
				k.write(func(fr *http2.Framer) { _ = fr.WriteWindowUpdate(0, uint32(n)) })
			}
			if s := k.st[f.StreamID]; s != nil && f.StreamEnded() {
				k.onEnd(f.StreamID, s)
			}
		}
	}
}

func (k *h2OnceConn) write(fn func(fr *http2.Framer)) {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	if !k.done {
		fn(k.fr)
	}
}

func (k *h2OnceConn) headers(id uint32, end bool, kv ...string) {
	k.write(func(fr *http2.Framer) {
		k.hb.Reset()
		for i := 0; i+1 < len(kv); i += 2 {
			_ = k.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: bytes.Clone(k.hb.Bytes()), EndHeaders: true, EndStream: end})
	})
}

func (k *h2OnceConn) onHeaders(f *http2.MetaHeadersFrame) {
	b := k.b
	path := f.PseudoValue("path")
	s := &h2OnceStream{grpc: strings.HasPrefix(fieldValue(f.RegularFields(), "content-type"), "application/grpc"), win: k.initWin}
	k.st[f.StreamID] = s
	if strings.HasPrefix(path, "/warm/") {
		s.warm, k.warm = true, f.StreamID
	} else {
		s.id = strings.TrimPrefix(path, "/x/")
		k.high = max(k.high, f.StreamID)
		b.mu.Lock()
		s.first = b.execs[s.id]+b.unprocessed[s.id] == 0
		if s.first && (b.act == h2Refused || b.act == h2GoawayBelow) {
			b.unprocessed[s.id]++
		} else {
			b.execs[s.id]++
		}
		b.mu.Unlock()
		if s.first && b.act == h2RstHead {
			s.dead = true
			k.write(func(fr *http2.Framer) { _ = fr.WriteRSTStream(f.StreamID, http2.ErrCodeInternal) })
			return
		}
	}
	if f.StreamEnded() {
		k.onEnd(f.StreamID, s)
	}
}

// onEnd: stream id's request arrived whole.
func (k *h2OnceConn) onEnd(id uint32, s *h2OnceStream) {
	if s.dead {
		return
	}
	if s.warm {
		k.answer(id, s, "warm", func() {
			switch k.b.act {
			case h2IdleFIN:
				k.closeConn(false)
			case h2IdleGoaway:
				k.write(func(fr *http2.Framer) { _ = fr.WriteGoAway(id, http2.ErrCodeNo, nil) })
				k.closeConn(false)
			}
		})
		return
	}
	if !s.first {
		k.answer(id, s, "ok "+s.id, nil)
		return
	}
	switch k.b.act {
	case h2IdleFIN, h2IdleGoaway:
		k.answer(id, s, "ok "+s.id, nil)
	case h2Refused:
		// Refused once the whole request arrived: the relay holds a body
		// over the replay buffer no more.
		k.write(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream) })
	case h2RstBody:
		k.write(func(fr *http2.Framer) { _ = fr.WriteRSTStream(id, http2.ErrCodeInternal) })
	case h2Status503:
		if s.grpc {
			k.headers(id, true, ":status", "200", "content-type", "application/grpc", "grpc-status", "14", "grpc-message", "busy")
		} else {
			k.headers(id, true, ":status", "503")
		}
	case h2Timeout:
	case h2MidStream:
		k.partial(id, s)
	default: // connection shapes: once all arrived
		k.arrive()
	}
}

// partial answers with headers and part of the body (gRPC: a message),
// when the relay's window allows, then counts the request arrived.
func (k *h2OnceConn) partial(id uint32, s *h2OnceStream) {
	if k.wait(s, 9, func() { k.partial(id, s) }) {
		return
	}
	if s.grpc {
		k.headers(id, false, ":status", "200", "content-type", "application/grpc")
		k.write(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcFrame("part")) })
	} else {
		k.headers(id, false, ":status", "200", "content-length", "100")
		k.write(func(fr *http2.Framer) { _ = fr.WriteData(id, false, []byte("part")) })
	}
	k.arrive()
}

// wait defers again, until the stream's window holds need bytes.
func (k *h2OnceConn) wait(s *h2OnceStream, need int64, again func()) bool {
	if s.win >= need {
		return false
	}
	s.need, s.later = need, again
	return true
}

// answer answers with body (gRPC: one message), then runs then (nil: nothing).
func (k *h2OnceConn) answer(id uint32, s *h2OnceStream, body string, then func()) {
	if k.wait(s, int64(len(body)+5), func() { k.answer(id, s, body, then) }) {
		return
	}
	if s.grpc {
		k.headers(id, false, ":status", "200", "content-type", "application/grpc")
		k.write(func(fr *http2.Framer) { _ = fr.WriteData(id, false, grpcFrame(body)) })
		k.headers(id, true, "grpc-status", "0")
	} else {
		k.headers(id, false, ":status", "200", "content-length", strconv.Itoa(len(body)))
		k.write(func(fr *http2.Framer) { _ = fr.WriteData(id, true, []byte(body)) })
	}
	if then != nil {
		then()
	}
}

// arrive counts a request arrived whole; the first to arrive on this
// connection starts its wait for all, then the shape's connection act.
func (k *h2OnceConn) arrive() {
	b := k.b
	b.mu.Lock()
	if b.arrived++; b.arrived == b.conc {
		close(b.all)
	}
	start := !k.acting
	k.acting = true
	b.mu.Unlock()
	if !start {
		return
	}
	b.wg.Go(func() {
		select {
		case <-b.all:
		case <-b.stop:
			return
		}
		switch b.act {
		case h2GoawayBelow:
			k.write(func(fr *http2.Framer) { _ = fr.WriteGoAway(k.warm, http2.ErrCodeNo, nil) })
			k.closeConn(false)
		case h2GoawayAt:
			k.write(func(fr *http2.Framer) { _ = fr.WriteGoAway(k.high, http2.ErrCodeNo, nil) })
			k.closeConn(false)
		case h2ConnFIN:
			k.closeConn(false)
		case h2ConnRST:
			k.closeConn(true)
		case h2MidStream:
			// A FIN: the partial answers read before the end (a reset
			// would drop what the relay had not read yet, and a replayable
			// request whose answer it never saw is rightly retried).
			k.closeConn(false)
		}
	})
}

// closeConn ends the connection: a FIN (its write side shut, the rest
// read and ignored until the relay closes) or a reset.
func (k *h2OnceConn) closeConn(rst bool) {
	k.wmu.Lock()
	defer k.wmu.Unlock()
	k.done = true
	if rst {
		_ = k.c.SetLinger(0)
		_ = k.c.Close()
		return
	}
	_ = k.c.CloseWrite()
}

func grpcFrame(s string) []byte {
	out := make([]byte, 5, 5+len(s))
	binary.BigEndian.PutUint32(out[1:], uint32(len(s)))
	return append(out, s...)
}

func (b *h2OnceBackend) counts(id string) (execs, unprocessed int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.execs[id], b.unprocessed[id]
}

// newOnceHandler is a relay with one upstream "web" at addr: 3 attempts,
// --retry-on with timeout, --max-replay-bytes h2OnceMaxReplay.
func newOnceHandler(t *testing.T, addr string, k h2OnceKind, perTry time.Duration) *Handler {
	t.Helper()
	ro, err := policy.ParseRetryOn("connect-failure,reset,timeout,502,503,504,unavailable,deadline-exceeded")
	if err != nil {
		t.Fatal(err)
	}
	up := &Upstream{Name: "web", Attempts: 3, Addr: addr, Budget: policy.NewRetryBudget(100, 10000, 10*time.Second), Dedup: k.dedup}
	cfg := Config{
		Lookup: func(host string) *Upstream {
			if policy.MatchHost([]byte(host), up.Name) {
				return up
			}
			return nil
		},
		PerTryTimeout:  perTry,
		Policy:         policy.Policy{RetryOn: ro, BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond, Jitter: true},
		RetryMethods:   []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"},
		MaxReplayBytes: h2OnceMaxReplay,
		Entrypoint:     k.entry,
	}
	if k.entry {
		cfg.ChainCap = 4
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = h.Shutdown(ctx)
	})
	return h
}

type h2OnceAnswer struct {
	code                        int
	grpcStatus, grpcMsg         string
	exhausted, key, body, cutBy string
}

func h2OnceDo(c *http.Client, k h2OnceKind, path string) (h2OnceAnswer, error) {
	var a h2OnceAnswer
	var body io.Reader
	payload := proxytest.Pattern(k.body)
	if k.grpc {
		payload = grpcFrame(string(payload[:k.body-5]))
	}
	if k.body > 0 {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequest(k.method, "http://web"+path, body)
	if err != nil {
		return a, err
	}
	if k.key {
		req.Header.Set("Idempotency-Key", "k-"+k.name+path)
	}
	if k.grpc {
		req.Header.Set("Content-Type", "application/grpc")
		req.Header.Set("Te", "trailers")
	}
	resp, err := c.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	a.code, a.body = resp.StatusCode, string(got)
	if err != nil {
		a.cutBy = err.Error()
	}
	get := func(name string) string {
		if v := resp.Header.Get(name); v != "" {
			return v
		}
		return resp.Trailer.Get(name)
	}
	a.grpcStatus, a.grpcMsg, a.exhausted, a.key = get("Grpc-Status"), get("Grpc-Message"), get("Retrycap-Exhausted"), get("Idempotency-Key")
	return a, nil
}

func runH2OnceCell(t *testing.T, k h2OnceKind, act h2OnceAct, conc int) {
	perTry := 5 * time.Second
	if act == h2Timeout {
		perTry = 500 * time.Millisecond
	}
	b := newH2OnceBackend(t, act, conc)
	h := newOnceHandler(t, b.ln.Addr().String(), k, perTry)
	front := serveDirect(t, h, "")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, front)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: proxytest.Bound}
	if a, err := h2OnceDo(c, h2OnceKind{method: "GET"}, "/warm/0"); err != nil || a.code != 200 || a.body != "warm" {
		t.Fatalf("warm-up: %+v %v", a, err)
	}
	if act == h2IdleFIN || act == h2IdleGoaway {
		// The close arrived (the relay's reader may not have read it yet:
		// a request that may not be sent twice finds it by a poll).
		proxytest.Eventually(t, "the upstream's close reaches the relay", func() bool { return proxytest.PeerClosed(b.ln.Addr().String()) })
	}
	answers := make([]h2OnceAnswer, conc)
	errs := make([]error, conc)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() { answers[i], errs[i] = h2OnceDo(c, k, "/x/"+strconv.Itoa(i)) })
	}
	wg.Wait()
	for i, a := range answers {
		id := strconv.Itoa(i)
		if errs[i] != nil {
			t.Errorf("request %s: %v", id, errs[i])
			continue
		}
		want := h2OnceExpect(k, act)
		got := h2OnceWant{code: a.code, grpcStatus: a.grpcStatus, exhausted: a.exhausted, cut: a.cutBy != ""}
		got.execs, got.unprocessed = b.counts(id)
		if want.why != "" && (strings.Contains(a.body, want.why) || strings.Contains(a.grpcMsg, want.why)) {
			got.why = want.why
		}
		if got != want {
			t.Errorf("request %s: got %+v (body %q, grpc-message %q, cut %q); want %+v", id, got, a.body, a.grpcMsg, a.cutBy, want)
		}
		if want.code == 200 && !want.cut && !k.grpc && a.body != "ok "+id {
			t.Errorf("request %s: 200 with body %q", id, a.body)
		}
		if k.entry && want.code >= 500 && !strings.HasPrefix(a.key, "retrycap-gen-") {
			t.Errorf("request %s: %d without the generated Idempotency-Key (%q)", id, a.code, a.key)
		}
	}
}

func TestAtMostOnceMatrixH2(t *testing.T) {
	type cell struct {
		kind h2OnceKind
		name string
		act  h2OnceAct
		conc int
	}
	var cells []cell
	for _, k := range h2OnceKinds {
		for _, s := range h2OnceShapes {
			if s.act == h2RstHead && k.body == 0 {
				continue // the HEADERS end the request: rst-stream-body's cell
			}
			for _, conc := range []int{1, 20} {
				cells = append(cells, cell{k, s.name, s.act, conc})
			}
		}
	}
	next := make(chan cell)
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for c := range next {
				t.Run(fmt.Sprintf("%s/%s/c%d", c.kind.name, c.name, c.conc), func(t *testing.T) {
					runH2OnceCell(t, c.kind, c.act, c.conc)
				})
			}
		})
	}
	for _, c := range cells {
		next <- c
	}
	close(next)
	wg.Wait()
	t.Logf("%d cells", len(cells))
}

// TestUnprocessedOverflowRefused: a request the upstream refuses unprocessed
// (REFUSED_STREAM, GOAWAY below it) whose body overflowed the replay buffer
// cannot go again from the relay: its client's stream is reset
// REFUSED_STREAM (safe to retry, RFC 9113 8.7), nothing executed. Before,
// the client got 502 "not retried: not-retryable", which says the request
// may have run, or (20 at once) 200 for those whose body had not yet
// overflowed when the refusal came. A client that cannot rewind the body
// sees the refusal itself (Go's Transport: "cannot retry ... REFUSED_STREAM").
func TestUnprocessedOverflowRefused(t *testing.T) {
	for _, act := range []h2OnceAct{h2Refused, h2GoawayBelow} {
		k := h2OnceKind{name: "POST-key-big", method: "POST", body: 2 * h2OnceMaxReplay, key: true}
		b := newH2OnceBackend(t, act, 1)
		h := newOnceHandler(t, b.ln.Addr().String(), k, 5*time.Second)
		front := serveDirect(t, h, "")
		var protos http.Protocols
		protos.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, front)
		}}
		t.Cleanup(tr.CloseIdleConnections)
		c := &http.Client{Transport: tr, Timeout: proxytest.Bound}
		// Not rewindable: no GetBody.
		req, err := http.NewRequest("POST", "http://web/x/0", io.MultiReader(bytes.NewReader(proxytest.Pattern(k.body))))
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = int64(k.body)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("act %d: answered %d, want the stream refused", act, resp.StatusCode)
		}
		if !strings.Contains(err.Error(), "REFUSED_STREAM") {
			t.Fatalf("act %d: %v, want REFUSED_STREAM", act, err)
		}
		if e, u := b.counts("0"); e != 0 || u != 1 {
			t.Fatalf("act %d: executed %d, unprocessed %d; want 0 and 1", act, e, u)
		}
	}
}

// TestStalledAnswersDoNotStarveOthers: one client connection with 16 calls
// whose answers began (headers, a few bytes) and then stall, as a gRPC
// server-streaming watch does between its messages; another call on it
// is answered at once. Found by the matrix's mid-stream cells at 20 at
// once: each answer that had passed a byte on was granted a 256 KiB
// window, four of them held the client's whole 1 MiB budget, and every
// later stream got no window: its answer waited for the per-try timeout
// (3 attempts, then 503): here the fifth stalled call already.
func TestStalledAnswersDoNotStarveOthers(t *testing.T) {
	b := newH2OnceBackend(t, h2MidStream, 1000) // never all arrived: the stalled answers stay open
	h := newOnceHandler(t, b.ln.Addr().String(), h2OnceKind{}, 500*time.Millisecond)
	front := serveDirect(t, h, "")
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &protos, DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, front)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr, Timeout: proxytest.Bound}
	for i := range 16 {
		resp, err := c.Get("http://web/x/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		part := make([]byte, 4)
		if _, err := io.ReadFull(resp.Body, part); err != nil || string(part) != "part" {
			t.Fatalf("stalled answer %d: %q %v", i, part, err)
		}
	}
	a, err := h2OnceDo(c, h2OnceKind{method: "GET"}, "/warm/1")
	if err != nil || a.code != 200 || a.body != "warm" {
		t.Fatalf("a call beside 16 stalled answers: %+v %v; want 200 warm", a, err)
	}
}
