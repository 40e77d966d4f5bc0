package policy

import (
	"strconv"
	"time"
)

// HeaderGRPCTimeout is gRPC's own deadline field (gRPC over HTTP/2:
// "grpc-timeout: 100m", at most 8 digits and a unit). A gRPC call's
// deadline is the smallest of it and the Retrycap-Deadline values
// (IncomingDeadline's rules); the proxy forwards both reduced.
const HeaderGRPCTimeout = "grpc-timeout"

// grpcUnits are grpc-timeout's units, finest first.
var grpcUnits = [...]struct {
	d time.Duration
	c byte
}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}

// maxGRPCTimeout bounds a parsed grpc-timeout (about 146 years): the
// grammar allows 99999999H, which overflows a time.Duration; so large a
// deadline is none in practice, and the bound keeps arithmetic on it safe.
const maxGRPCTimeout = time.Duration(1 << 62)

// ParseGRPCTimeout reads one grpc-timeout value: 1 to 8 ASCII digits and a
// unit (H, M, S, m, u, n), nothing else (no sign, no spaces). ok is false
// when it is malformed: it then counts as absent, as a malformed
// Retrycap-Deadline does. Unlike Retrycap-Deadline, a value above
// MaxDeadline is valid (gRPC's own grammar; a long streaming call's) and
// kept, at most maxGRPCTimeout.
func ParseGRPCTimeout(v []byte) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	var unit time.Duration
	for _, u := range grpcUnits {
		if v[len(v)-1] == u.c {
			unit = u.d
		}
	}
	if unit == 0 {
		return 0, false
	}
	var n int64
	for _, c := range v[:len(v)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > int64(maxGRPCTimeout/unit) {
		return maxGRPCTimeout, true
	}
	return time.Duration(n) * unit, true
}

// AppendGRPCTimeout appends d as a grpc-timeout value: in the finest unit
// whose value fits 8 digits, rounded down, so that a hop can only lower
// the deadline it forwards (as Deadline.HeaderMs does); 0 or less is "0n".
func AppendGRPCTimeout(dst []byte, d time.Duration) []byte {
	if d <= 0 {
		return append(dst, '0', 'n')
	}
	for _, u := range grpcUnits {
		if v := d / u.d; v < 100000000 {
			return append(strconv.AppendInt(dst, int64(v), 10), u.c)
		}
	}
	return append(dst, "99999999H"...)
}
