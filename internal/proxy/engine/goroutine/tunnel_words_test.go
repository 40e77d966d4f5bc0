package goroutine

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestTunnelWords: a tunnel's 502 says a timeout as the limit and an early
// close as a close, never a timeout or a close as a "bad answer".
func TestTunnelWords(t *testing.T) {
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.ErrDeadlineExceeded}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Addr: addr, Err: os.ErrDeadlineExceeded}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: errors.New("connect: connection refused")}
	for _, tc := range []struct {
		name, got, want string
	}{
		{"dial timeout", upgradeWords(dialTimeout, 2*time.Second, "dial: not connected"), "dial: not connected within the per-try timeout 2s"},
		{"dial refused", upgradeWords(refused, 2*time.Second, "dial: not connected"), "dial tcp 10.0.0.7:8080: connect: connection refused"},
		{"head: silence", headWords(readTimeout, 2*time.Second), "no answer within the per-try timeout 2s"},
		{"head: close", headWords(io.EOF, 2*time.Second), "the upstream closed the connection before the whole response: EOF"},
		{"head: no status line", headWords(errors.New("no status line"), 2*time.Second), "bad answer: no status line"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, tc.got, tc.want)
		}
	}
}
