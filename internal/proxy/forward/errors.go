package forward

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// DialError marks a failure to connect, so it is classified as
// connect-failure rather than reset.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial: " + e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// ErrUnsolicitedSwitch is an upstream's 101 to a request that did not ask
// to upgrade: a bad answer (502), never passed on, never retried (the
// upstream executed the request and then spoke something else).
var ErrUnsolicitedSwitch = errors.New("the upstream switched protocols (101) without being asked to upgrade")

// ErrAnswerHeadTooLarge is an upstream answer whose head is over
// MaxResponseHead: a bad answer (502), never retried.
var ErrAnswerHeadTooLarge = errors.New("the upstream's answer head is larger than 64 KiB")

// classify maps a transport error to a retryOn condition: the rule is
// policy's, shared with the h2 relay; which errors are dial failures or
// timeouts of fasthttp's own is this engine's.
func classify(err error) policy.Condition {
	if errors.Is(err, ErrUnsolicitedSwitch) || errors.Is(err, ErrAnswerHeadTooLarge) {
		return policy.CondNone // not a transport condition: never retried; 502
	}
	var de *DialError
	dial := errors.As(err, &de) || errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns)
	return policy.ClassifyTransport(err, dial, errors.Is(err, fasthttp.ErrTimeout))
}
