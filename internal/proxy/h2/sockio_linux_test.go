//go:build linux

package h2

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/proxy/forward"
)

// bufferedConn holds bytes above its socket, as fasthttp's hijacked
// connection does, and names the socket by NetConn.
type bufferedConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.br.Read(p) }
func (c *bufferedConn) NetConn() net.Conn          { return c.Conn }

// opaqueConn wraps a socket without naming it.
type opaqueConn struct{ net.Conn }

// TestTakeHeld: every byte the wrappers hold comes first, in order, and
// none from the socket; then the socket is read directly. Wrappers that do
// not name their socket keep the reads.
func TestTakeHeld(t *testing.T) {
	server, client := tcpPair(t)
	if _, err := io.WriteString(client, "abcdefghijklmnop"); err != nil {
		t.Fatal(err)
	}
	bc := &bufferedConn{Conn: server, br: bufio.NewReaderSize(server, 16)}
	first := make([]byte, 3)
	if _, err := io.ReadFull(bc, first); err != nil || string(first) != "abc" {
		t.Fatalf("first read %q %v", first, err)
	}
	// The buffered reader filled itself with the rest: "defghijklmnop".
	pc := &forward.PrefixConn{Conn: bc, Prefix: []byte("<prefix>")}
	if _, err := io.WriteString(client, "QRS"); err != nil { // in the socket, not in the buffer
		t.Fatal(err)
	}
	held, sock, ok := takeHeld(pc)
	if !ok || sock == nil || string(held) != "<prefix>defghijklmnop" {
		t.Fatalf("takeHeld = %q, %v, %v; want \"<prefix>defghijklmnop\", a socket reader, true", held, sock, ok)
	}
	got := make([]byte, 3)
	if _, err := io.ReadFull(sock, got); err != nil || string(got) != "QRS" {
		t.Fatalf("the socket read %q %v, want \"QRS\"", got, err)
	}
	// The deadline is cleared (past, a read would fail before it looked).
	if _, err := io.WriteString(client, "T"); err != nil {
		t.Fatal(err)
	}
	if n, err := sock.Read(got); err != nil || string(got[:n]) != "T" {
		t.Fatalf("a later read %q %v, want \"T\"", got[:n], err)
	}

	if held, sock, ok := takeHeld(&opaqueConn{server}); ok || sock != nil || held != nil {
		t.Fatalf("an opaque wrapper: takeHeld = %q, %v, %v; want nothing taken", held, sock, ok)
	}
}

// TestSockReaderErrors: its errors read as net.Conn's: EOF at the peer's
// close, the deadline as os.ErrDeadlineExceeded in a *net.OpError, a
// closed connection as net.ErrClosed.
func TestSockReaderErrors(t *testing.T) {
	server, client := tcpPair(t)
	r := newSockReader(server)
	if r == nil {
		t.Fatal("no socket reader for a *net.TCPConn")
	}
	if newSockReader(&opaqueConn{server}) != nil {
		t.Fatal("a socket reader under a wrapper: the wrapper's own bytes would be skipped")
	}
	_ = server.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var buf [8]byte
	_, err := r.Read(buf[:])
	var oe *net.OpError
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &oe) || oe.Op != "read" ||
		!strings.HasSuffix(err.Error(), "i/o timeout") || oe.Addr.String() != client.LocalAddr().String() {
		t.Fatalf("past the deadline: %v, want a read *net.OpError from %s ending in i/o timeout", err, client.LocalAddr())
	}
	_ = server.SetReadDeadline(time.Time{})
	_ = client.Close()
	if n, err := r.Read(buf[:]); n != 0 || err != io.EOF {
		t.Fatalf("after the peer's close: %d %v, want 0 EOF", n, err)
	}
	_ = server.Close()
	if _, err := r.Read(buf[:]); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after our close: %v, want net.ErrClosed", err)
	}
}
