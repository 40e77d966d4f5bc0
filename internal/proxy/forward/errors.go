package forward

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// DialError marks a failure to connect, so it is classified as
// connect-failure rather than reset.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial: " + e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// classify maps a transport error to a retryOn condition.
func classify(err error) policy.Condition {
	var de *DialError
	switch {
	case errors.As(err, &de), errors.Is(err, fasthttp.ErrDialTimeout), errors.Is(err, fasthttp.ErrNoFreeConns):
		return policy.CondConnectFailure
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return policy.CondTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return policy.CondTimeout
	}
	return policy.CondReset
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v []byte, now time.Time) (time.Duration, bool) {
	if len(v) == 0 {
		return 0, false
	}
	if s, err := strconv.Atoi(strings.TrimSpace(string(v))); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(string(v))
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}
