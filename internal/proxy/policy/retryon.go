package policy

import (
	"fmt"
	"strconv"
	"strings"
)

// Condition is a transport-level failure an attempt can end in.
type Condition uint8

// Transport failure conditions, as named in --retry-on.
const (
	CondNone Condition = iota
	CondConnectFailure
	CondReset
	CondTimeout
)

func (c Condition) String() string {
	switch c {
	case CondConnectFailure:
		return "connect-failure"
	case CondReset:
		return "reset"
	case CondTimeout:
		return "timeout"
	}
	return "none"
}

// RetryOn is the set of failures that may be retried: transport conditions
// and HTTP status codes, as a bitmask and a bitset so a lookup is a shift.
type RetryOn struct {
	conds  uint8
	status [10]uint64 // bits for status codes 0..639
}

// ParseRetryOn parses a comma list such as
// "connect-failure,reset,timeout,502,503,504,429"; "5xx" adds 500..599.
func ParseRetryOn(s string) (RetryOn, error) {
	var r RetryOn
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(strings.ToLower(tok))
		switch tok {
		case "":
			continue
		case "connect-failure":
			r.conds |= 1 << CondConnectFailure
		case "reset":
			r.conds |= 1 << CondReset
		case "timeout":
			r.conds |= 1 << CondTimeout
		case "5xx":
			for c := 500; c < 600; c++ {
				r.setStatus(c)
			}
		default:
			c, err := strconv.Atoi(tok)
			if err != nil || c < 100 || c > 599 {
				return RetryOn{}, fmt.Errorf("unknown retry-on condition %q (want connect-failure, reset, timeout, 5xx or a status code 100..599)", tok)
			}
			r.setStatus(c)
		}
	}
	return r, nil
}

func (r *RetryOn) setStatus(c int) { r.status[c/64] |= 1 << (c % 64) }

// Status reports whether status code c is retryable.
func (r *RetryOn) Status(c int) bool {
	if c < 0 || c >= 640 {
		return false
	}
	return r.status[c/64]&(1<<(c%64)) != 0
}

// Cond reports whether a transport condition is retryable.
func (r *RetryOn) Cond(c Condition) bool { return c != CondNone && r.conds&(1<<c) != 0 }

// String renders the set in canonical order (for --check).
func (r RetryOn) String() string {
	var parts []string
	for _, c := range []Condition{CondConnectFailure, CondReset, CondTimeout} {
		if r.Cond(c) {
			parts = append(parts, c.String())
		}
	}
	for c := 100; c < 600; c++ {
		if r.Status(c) {
			parts = append(parts, strconv.Itoa(c))
		}
	}
	return strings.Join(parts, ",")
}
