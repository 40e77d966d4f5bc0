package forward

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// TestAttemptWords: a timeout is said in the proxy's words with the limit
// that ended it, whichever engine or protocol met it; any other error as
// it reads.
func TestAttemptWords(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}, Err: errors.New("connect: connection refused")}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}, Err: os.ErrDeadlineExceeded}
	for _, tc := range []struct {
		name string
		err  error
		cut  bool
		want string
	}{
		{"fasthttp's timeout (both HTTP/1.1 engines)", fasthttp.ErrTimeout, false, "no answer within the per-try timeout 2s"},
		{"the relay's timeout (HTTP/2)", context.DeadlineExceeded, false, "no answer within the per-try timeout 2s"},
		{"cut by the deadline", fasthttp.ErrTimeout, true, "no answer before the call's deadline"},
		{"the goroutine engine's small-body read timing out", &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}, Err: os.ErrDeadlineExceeded}, false, "no answer within the per-try timeout 2s"},
		{"the loop's connect cut", &DialError{Err: fasthttp.ErrDialTimeout}, false, "dial: not connected within the per-try timeout 2s"},
		{"the goroutine engine's dial timing out", &DialError{Err: dialTimeout}, false, "dial: not connected within the per-try timeout 2s"},
		{"a refused dial names what was dialled", &DialError{Err: refused}, false, "dial: dial tcp 10.0.0.7:8080: connect: connection refused"},
		{"an early close", ClosedEarly(errors.New("unexpected EOF")), false, "the upstream closed the connection before the whole response: unexpected EOF"},
		{"none", nil, false, ""},
	} {
		if got := AttemptWords(tc.err, 2*time.Second, tc.cut); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestGaveUpBody(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		reason policy.Reason
		want   string
	}{
		{"10.0.0.7:8080", policy.ReasonNone, "retrycap-proxy: upstream payment (10.0.0.7:8080): 3 attempt(s), last failed with timeout (no answer within the per-try timeout 2s)\n"},
		{"10.0.0.7:8080", policy.ReasonAttempts, "retrycap-proxy: upstream payment (10.0.0.7:8080): 3 attempt(s), last failed with timeout (no answer within the per-try timeout 2s); not retried: attempts\n"},
		{"", policy.ReasonNone, "retrycap-proxy: upstream payment: 3 attempt(s), last failed with timeout (no answer within the per-try timeout 2s)\n"},
	} {
		if got := GaveUpBody("payment", tc.addr, 3, "timeout", "no answer within the per-try timeout 2s", tc.reason); got != tc.want {
			t.Errorf("%q %v: %q, want %q", tc.addr, tc.reason, got, tc.want)
		}
	}
	const self = "retrycap-proxy: request addressed to the proxy itself (127.0.0.1:15001): loop refused; send requests for upstreams through HTTP_PROXY in absolute form\n"
	if got := SelfAddressedBody("127.0.0.1:15001"); got != self {
		t.Errorf("SelfAddressedBody: %q, want %q", got, self)
	}
}
