package policy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestClassifyTransport(t *testing.T) {
	timeoutErr := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	cases := []struct {
		name           string
		err            error
		dial, timedOut bool
		want           Condition
	}{
		{"dial refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true, false, CondConnectFailure},
		{"dial timed out", timeoutErr, true, true, CondConnectFailure},
		{"per-try timer", io.EOF, false, true, CondTimeout},
		{"context deadline", fmt.Errorf("attempt: %w", context.DeadlineExceeded), false, false, CondTimeout},
		{"net.Error timeout", timeoutErr, false, false, CondTimeout},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false, false, CondReset},
		{"eof", io.ErrUnexpectedEOF, false, false, CondReset},
		{"canceled", context.Canceled, false, false, CondReset},
		{"plain", errors.New("stream broken"), false, false, CondReset},
	}
	for _, c := range cases {
		if got := ClassifyTransport(c.err, c.dial, c.timedOut); got != c.want {
			t.Errorf("%s: ClassifyTransport(%v, %v, %v) = %v, want %v", c.name, c.err, c.dial, c.timedOut, got, c.want)
		}
	}
}
