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

// ErrTooManyInterim is an upstream that sent more than MaxInterim interim
// (1xx) answers before a final one: a bad answer (502), never retried.
// Before, the 101st interim answer was taken as the final one and passed
// on: the client got a "100 Continue" as its whole answer and read the
// next answer on its connection as the one to this request.
var ErrTooManyInterim = errors.New("the upstream sent more than 100 interim (1xx) answers")

// ErrBadStatus is an answer whose status is below 100 (a status line
// "HTTP/1.1 099 X" parses to 99): no HTTP status at all, a bad answer (502)
// at once, never retried. Before, it was skipped like an interim 1xx answer
// and the attempt waited for its per-try timeout.
var ErrBadStatus = errors.New("the upstream's answer has a status below 100")

// ErrAnswerBareLF is an answer head with a line that ends in a bare LF:
// refused at once as a malformed answer, like those fasthttp's parser
// refuses (a transport failure, classified reset: an idempotent request
// is retried, a keyless POST gets the 502). fasthttp's reader never finds
// the end of such a head: the goroutine engine waited for the per-try
// timeout (a 504 for a POST) where the loop failed at once.
var ErrAnswerBareLF = errors.New("the upstream's answer head has a line that ends in a bare LF")

// BadAnswer reports the upstream answers that are the upstream's fault and
// not a transport failure: 502 at once, never retried (the upstream ran the
// request and then answered something that is no HTTP answer).
func BadAnswer(err error) bool {
	return errors.Is(err, ErrUnsolicitedSwitch) || errors.Is(err, ErrAnswerHeadTooLarge) ||
		errors.Is(err, ErrTooManyInterim) || errors.Is(err, ErrBadStatus)
}

// Interim judges the status of an answer head read while waiting for the
// final answer, after n interim answers were skipped: skip it (another
// interim answer), or err (a bad answer). A 101 is final here: the callers
// judge it.
func Interim(st, n int) (skip bool, err error) {
	switch {
	case st < 100:
		return false, ErrBadStatus
	case st >= 200 || st == fasthttp.StatusSwitchingProtocols:
		return false, nil
	case n >= MaxInterim:
		return false, ErrTooManyInterim
	}
	return true, nil
}

// classify maps a transport error to a retryOn condition: the rule is
// policy's, shared with the h2 relay; which errors are dial failures or
// timeouts of fasthttp's own is this engine's.
func classify(err error) policy.Condition {
	if BadAnswer(err) {
		return policy.CondNone // not a transport condition: never retried; 502
	}
	var de *DialError
	dial := errors.As(err, &de) || errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns)
	return policy.ClassifyTransport(err, dial, errors.Is(err, fasthttp.ErrTimeout))
}
