package policy

import (
	"context"
	"errors"
	"net"
)

// ClassifyTransport is the retry-on condition of an attempt that failed
// without an answer, the one rule both engines apply: a failure to
// connect is connect-failure; a timeout (the proxy's own per-try timer,
// dialTimeout or timedOut, a context deadline, or a net.Error that says
// so) is timeout; anything else (a reset, an EOF, a broken stream) is
// reset. Whether err is a failure to connect, or a timeout of its own
// kind, only the engine knows (fasthttp's sentinels, the h2 relay's
// dialError), so it says so with dial and timedOut; a dial that timed
// out is connect-failure (both engines always counted it so).
func ClassifyTransport(err error, dial, timedOut bool) Condition {
	if dial {
		return CondConnectFailure
	}
	var ne net.Error
	if timedOut || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return CondTimeout
	}
	return CondReset
}
