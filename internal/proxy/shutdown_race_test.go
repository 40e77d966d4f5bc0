package proxy

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// A Shutdown that comes before the goroutine engine's Serve has begun (a
// SIGTERM right after start, or the Serve goroutine not yet scheduled)
// stops it all the same: fasthttp's own Shutdown returned at once when no
// listener was registered, and the Serve that began after it accepted for
// good (the -engine=goroutine CI run saw TestLoopDrainWhileWriting's
// listener still open after 20 s). Now that Serve closes its listener and
// returns nil, and a listener Serve had taken is closed by the Shutdown.
func TestGoroutineShutdownBeforeServe(t *testing.T) {
	cfg, err := ParseFlags([]string{"--engine", "goroutine", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstreams", "svc=3"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(t.Context()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.gor.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown before Serve: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- p.gor.Serve(ln) }()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve after Shutdown: %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve after Shutdown still serving after 5s")
	}
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("the listener %s still accepts after Shutdown", ln.Addr())
	}
}
