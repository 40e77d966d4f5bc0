package h2

import (
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// A client connection nothing is read from gets a PING (both engines, as
// net/http's server does with SendPingTimeout); answered, the next one
// comes after the next quiet interval; unanswered, the connection is
// closed without a GOAWAY. The intervals are Config's, short here; the
// test waits on frames, not on time.
func TestKeepalivePing(t *testing.T) { forEngines(t, testKeepalivePing) }

func testKeepalivePing(t *testing.T) {
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1, pingInterval: 50 * time.Millisecond, pingTimeout: 200 * time.Millisecond})
	rc := newRawClient(t, h)
	isPing := func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && !p.IsAck() }
	p1 := rc.until("the first PING", isPing).(*http2.PingFrame)
	rc.w <- func() { _ = rc.fr.WritePing(true, p1.Data) }
	p2 := rc.until("the second PING (the first was answered)", isPing).(*http2.PingFrame)
	if p2.Data == p1.Data {
		t.Fatalf("both PINGs carry %v", p1.Data)
	}
	// Not answered: the connection ends, with nothing more written.
	f, err := rc.fr.ReadFrame()
	if err == nil {
		t.Fatalf("after an unanswered PING: %v, want the connection closed", f)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("after an unanswered PING: %v, want EOF", err)
	}
}

// A client connection without a stream for IdleTimeout gets GOAWAY
// (NO_ERROR, last stream 0) and is closed, on both engines.
func TestIdleConnectionClosed(t *testing.T) { forEngines(t, testIdleConnectionClosed) }

func testIdleConnectionClosed(t *testing.T) {
	h, _ := newHandler(t, proxyOpts{name: "echo", addr: "127.0.0.1:1", attempts: 1, idle: 100 * time.Millisecond})
	rc := newRawClient(t, h)
	g := rc.until("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 0 {
		t.Fatalf("GOAWAY %v last stream %d, want NO_ERROR 0", g.ErrCode, g.LastStreamID)
	}
	for {
		f, err := rc.fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("after GOAWAY: %v, want EOF", err)
			}
			return
		}
		if _, ok := f.(*http2.SettingsFrame); !ok {
			t.Fatalf("after GOAWAY: %v", f)
		}
	}
}
