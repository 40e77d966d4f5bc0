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

// RetryOn is the set of failures that may be retried: transport conditions,
// HTTP status codes and gRPC status codes, as bitmasks and a bitset so a
// lookup is a shift.
type RetryOn struct {
	conds  uint8
	grpc   uint32     // bits for gRPC codes 0..16 (OK is never set)
	status [10]uint64 // bits for status codes 0..639
}

// grpcCodeNames are the gRPC status code names (google.golang.org/grpc/codes,
// in --retry-on's lower-case, dash-separated spelling), indexed by code.
var grpcCodeNames = [...]string{
	"ok", "cancelled", "unknown", "invalid-argument", "deadline-exceeded", "not-found",
	"already-exists", "permission-denied", "resource-exhausted", "failed-precondition",
	"aborted", "out-of-range", "unimplemented", "internal", "unavailable", "data-loss",
	"unauthenticated",
}

// GRPCCodeName is the name of gRPC status code c as --retry-on spells it
// ("unavailable"), or its number for a code outside 0..16.
func GRPCCodeName(c int) string {
	if c >= 0 && c < len(grpcCodeNames) {
		return grpcCodeNames[c]
	}
	return strconv.Itoa(c)
}

// grpcCode finds a gRPC code by name: gRPC's own spelling (UNAVAILABLE,
// DEADLINE_EXCEEDED) or the lower-case, dash-separated one; tok is already
// lower-cased. OK is not a failure and has no entry.
func grpcCode(tok string) (int, bool) {
	tok = strings.ReplaceAll(tok, "_", "-")
	for c := 1; c < len(grpcCodeNames); c++ {
		if grpcCodeNames[c] == tok {
			return c, true
		}
	}
	return 0, false
}

// ParseRetryOn parses a comma list such as
// "connect-failure,reset,timeout,502,503,504,429,unavailable"; "5xx" adds
// 500..599; gRPC status names (unavailable, resource-exhausted, cancelled,
// deadline-exceeded, internal, ..., or gRPC's UNAVAILABLE spelling) add
// gRPC codes, which judge gRPC calls (by grpc-status) and only them.
func ParseRetryOn(s string) (RetryOn, error) {
	var r RetryOn
	for _, tok := range strings.Split(s, ",") {
		tok = strings.TrimSpace(strings.ToLower(tok))
		if c, ok := grpcCode(tok); ok {
			r.grpc |= 1 << c
			continue
		}
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
				return RetryOn{}, fmt.Errorf("unknown retry-on condition %q (want connect-failure, reset, timeout, 5xx, a status code 100..599 or a gRPC status name such as unavailable)", tok)
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

// GRPC reports whether gRPC status code c is retryable (OK never is).
func (r *RetryOn) GRPC(c int) bool {
	if c <= 0 || c >= len(grpcCodeNames) {
		return false
	}
	return r.grpc&(1<<c) != 0
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
	for c := 1; c < len(grpcCodeNames); c++ {
		if r.GRPC(c) {
			parts = append(parts, grpcCodeNames[c])
		}
	}
	return strings.Join(parts, ",")
}
