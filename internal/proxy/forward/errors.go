package forward

import (
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// DialError marks a failure to connect, so it is classified as
// connect-failure rather than reset.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial: " + e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// StaleError is an attempt's failure on a reused pooled connection before
// any byte of an answer came back, after bytes of a replayable request were
// written (policy.MayResend allows its re-send): the upstream's idle close
// may have raced the reuse, or it read the request and crashed. The engine
// does not re-send it itself: the exchange judges it as an attempt
// (policy.Outcome.Stale), so that its repeat takes the next attempt's
// number and budget and the chain cap holds.
type StaleError struct{ Err error }

func (e *StaleError) Error() string { return "stale pooled connection: " + e.Err.Error() }
func (e *StaleError) Unwrap() error { return e.Err }

// ErrUnsolicitedSwitch is an upstream's 101 to a request that did not ask
// to upgrade: a bad answer (BadAnswer), never passed on.
var ErrUnsolicitedSwitch = errors.New("the upstream switched protocols (101) without being asked to upgrade")

// ErrAnswerHeadTooLarge is an upstream answer whose head is over
// MaxResponseHead: a bad answer (BadAnswer).
var ErrAnswerHeadTooLarge = errors.New("the upstream's answer head is larger than 64 KiB")

// ErrTooManyInterim is an upstream that sent more than MaxInterim interim
// (1xx) answers before a final one: a bad answer (BadAnswer).
// Before, the 101st interim answer was taken as the final one and passed
// on: the client got a "100 Continue" as its whole answer and read the
// next answer on its connection as the one to this request.
var ErrTooManyInterim = errors.New("the upstream sent more than 100 interim (1xx) answers")

// ErrBadStatus is an answer whose status is outside 100-599 (a status line
// "HTTP/1.1 099 X" parses to 99, "HTTP/1.1 600 X" to 600): no HTTP status
// (RFC 9110 15: values outside the range are invalid; a client treats
// such an answer as a 5xx), a bad answer (BadAnswer) at once, its value
// named (BadStatus). Before, a status below 100 was skipped like an
// interim 1xx answer and the attempt waited for its per-try timeout, and
// one over 599 was passed on to a client that may not understand it.
var ErrBadStatus = errors.New("the upstream's answer has a status outside 100-599")

// BadStatus is ErrBadStatus with the value named.
func BadStatus(st int) error { return fmt.Errorf("%w: %03d", ErrBadStatus, st) }

// ErrAnswerBareLF is an answer head with a line that ends in a bare LF:
// refused at once as a malformed answer, like those fasthttp's parser
// refuses. fasthttp's reader never finds the end of such a head: the
// goroutine engine waited for the per-try timeout (a 504 for a POST) where
// the loop failed at once.
var ErrAnswerBareLF = errors.New("the upstream's answer head has a line that ends in a bare LF")

// ClosedEarly is the failure of an attempt whose upstream closed (or
// reset) its connection before the whole answer (its head, or a body read
// before the head goes out) came, err the read's: one wording on both
// engines. The goroutine engine's 502 for a 1,000-byte body cut at 500
// read "(unexpected EOF)" where the loop's said this.
func ClosedEarly(err error) error {
	return fmt.Errorf("the upstream closed the connection before the whole response: %w", err)
}

// answerParseError is an answer head fasthttp's parser refused (its whole
// head was read: no transport failure). Its text is the proxy's own, one of
// a fixed set (Reason): fasthttp's message quotes the upstream's bytes
// (and, without SecureErrorLogMessage, up to 400 bytes of the head), which
// would otherwise reach the client in the 502 and the proxy's log.
type answerParseError struct {
	why string
	err error
}

func (e *answerParseError) Error() string { return "the upstream's answer is malformed: " + e.why }
func (e *answerParseError) Unwrap() error { return e.err }

// AnswerParseError wraps the error of fasthttp's parser on an answer head
// the engine read whole (head: its bytes): a bad answer (BadAnswer) whose
// text names the problem in the proxy's words. A head with more than one
// Transfer-Encoding field reads ReasonTooManyTE whatever fasthttp said
// of it (its wording depends on the fields' values and on
// SecureErrorLogMessage, which only the goroutine engine sets).
func AnswerParseError(err error, head []byte) error {
	why := Reason(err, "its head cannot be parsed")
	if why == "unsupported transfer-encoding" && TransferEncodingFields(head) > 1 {
		why = ReasonTooManyTE
	}
	return &answerParseError{why: why, err: err}
}

// BadAnswer reports an attempt that failed on an upstream answer that is no
// HTTP/1.1 answer the proxy passes on: a head the parser refuses, a bare
// LF in it, a head over MaxResponseHead, more than MaxInterim interim
// answers, a status outside 100-599, an unsolicited 101. The upstream's
// connection is closed; the answer is the proxy's 502.
//
// How it counts is Envoy's for an upstream protocol error (its codec
// resets the stream with reason ProtocolError: retried under retry_on
// "reset" (and 5xx, gateway-error), not under "connect-failure"; reported
// to outlier detection as a local-origin failure; 502, response flag UPE):
// the condition is reset (classify), so an idempotent or keyed request is
// retried when --retry-on names reset, the breaker counts a failure, and
// the access log names it "bad-answer" rather than "reset". A request that
// may not be repeated is never re-sent for it: the bytes of the answer
// came back, so no engine takes it for a stale pooled connection.
func BadAnswer(err error) bool {
	var pe *answerParseError
	return errors.As(err, &pe) || errors.Is(err, ErrAnswerBareLF) || errors.Is(err, ErrUnsolicitedSwitch) ||
		errors.Is(err, ErrAnswerHeadTooLarge) || errors.Is(err, ErrTooManyInterim) || errors.Is(err, ErrBadStatus)
}

// Interim judges the status of an answer head read while waiting for the
// final answer, after n interim answers were skipped: skip it (another
// interim answer), or err (a bad answer). A 101 is final here: the callers
// judge it.
func Interim(st, n int) (skip bool, err error) {
	switch {
	case st < 100 || st > 599:
		return false, BadStatus(st)
	case st >= 200 || st == fasthttp.StatusSwitchingProtocols:
		return false, nil
	case n >= MaxInterim:
		return false, ErrTooManyInterim
	}
	return true, nil
}

// classify maps a transport error to a retryOn condition: the rule is
// policy's, shared with the h2 relay; which errors are dial failures or
// timeouts of fasthttp's own is this engine's. A bad answer is reset
// (BadAnswer: Envoy's class for an upstream protocol error).
func classify(err error) policy.Condition {
	if BadAnswer(err) {
		return policy.CondReset
	}
	var de *DialError
	dial := errors.As(err, &de) || errors.Is(err, fasthttp.ErrDialTimeout) || errors.Is(err, fasthttp.ErrNoFreeConns)
	return policy.ClassifyTransport(err, dial, errors.Is(err, fasthttp.ErrTimeout))
}
