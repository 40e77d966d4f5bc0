package goroutine

import (
	"io"
	"net"
	"testing"
	"time"
)

// Connections handed to the goroutine engine that it has not taken when its
// listener closes (fasthttp's Serve stops calling Accept at Shutdown) are
// closed, not left open for good; so are those handed over after.
func TestHandoffListenerClosesWhatIsLeft(t *testing.T) {
	h := NewHandoff(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	var peers []net.Conn
	for range 3 {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		peers = append(peers, b)
		h.Push(a)
	}
	_ = h.Close()
	a, b := net.Pipe()
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	peers = append(peers, b)
	h.Push(a)
	for i, b := range peers {
		_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := b.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("connection %d: read %v, want it closed (EOF)", i, err)
		}
	}
}
