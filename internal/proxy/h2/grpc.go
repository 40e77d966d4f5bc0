package h2

import (
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/retrycap/retrycap/internal/proxy/policy"
)

// gRPC metadata the proxy reads or writes (HTTP/2 header names are lower
// case on the wire; net/http canonicalises them in maps).
const (
	hdrGRPCStatus      = "Grpc-Status"
	hdrGRPCMessage     = "Grpc-Message"
	hdrGRPCTimeout     = "Grpc-Timeout"
	hdrGRPCPushback    = "Grpc-Retry-Pushback-Ms"
	hdrGRPCPrevious    = "Grpc-Previous-Rpc-Attempts"
	hdrBaggage         = "Baggage"
	hdrIdempotencyKey  = "Idempotency-Key"
	hdrRetryAfter      = "Retry-After"
	codeOK             = 0
	codeUnknown        = 2
	codeDeadline       = 4
	codeInternal       = 13
	codeUnavailable    = 14
	codeUnauthenticate = 16
)

// parsePushback reads grpc-retry-pushback-ms (gRPC A6): a non-negative
// integer is the wait before the retry; a negative or malformed value means
// do not retry (stop). As grpc-go's client reads it (stream.go
// shouldRetry): the one value by strconv (no space around it), more than
// one value is no retry either.
func parsePushback(vs []string) (wait time.Duration, has, stop bool) {
	if len(vs) == 0 {
		return 0, false, false
	}
	if len(vs) > 1 {
		return 0, false, true
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < 0 {
		return 0, false, true
	}
	if n > int64(1<<62)/int64(time.Millisecond) {
		n = int64(1<<62) / int64(time.Millisecond)
	}
	return time.Duration(n) * time.Millisecond, true, false
}

// statusFromHTTP maps the HTTP status of a gRPC answer without grpc-status
// to a code, as gRPC's http-grpc-status-mapping does.
func statusFromHTTP(s int) int {
	switch s {
	case 400:
		return codeInternal
	case 401:
		return codeUnauthenticate
	case 403:
		return 7 // PERMISSION_DENIED
	case 404:
		return 12 // UNIMPLEMENTED
	case 429, 502, 503, 504:
		return codeUnavailable
	}
	return codeUnknown
}

// grpcStatus reads an answer block's grpc-status as grpc-go's client
// reads it (operateHeaders): every value strconv.ParseInt(v, 10, 32), one
// malformed (a space around it: the client sees UNKNOWN, and the relay
// must not retry it as the code it is not) makes it UNKNOWN, else the
// last value counts, a negative one as the uint32 grpc-go makes of it
// (no code any --retry-on names). ok is false when there is none. Before,
// the first value counted: "14" then "0" was retried where the client
// reads OK.
func grpcStatus(fs []hpack.HeaderField) (code int, ok bool) {
	for i := range fs {
		if fs[i].Name != "grpc-status" {
			continue
		}
		n, err := strconv.ParseInt(fs[i].Value, 10, 32)
		if err != nil {
			return codeUnknown, true
		}
		code, ok = int(uint32(n)), true
	}
	return code, ok
}

// codeLabel is a gRPC code as gRPC names it (UNAVAILABLE), for metrics;
// a code past 16 is UNKNOWN, as gRPC's status codes document says
// clients treat it: one series, not one per value an upstream sends.
func codeLabel(c int) string {
	if c >= 0 && c <= 16 {
		return grpcUpper[c]
	}
	return grpcUpper[codeUnknown]
}

var grpcUpper = func() (out [17]string) {
	for c := range out {
		out[c] = strings.ToUpper(strings.ReplaceAll(policy.GRPCCodeName(c), "-", "_"))
	}
	return out
}()

// encodeMessage percent-encodes a grpc-message value: bytes outside
// printable ASCII, and '%', as %XX (gRPC over HTTP/2).
func encodeMessage(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// ClientPreface is the HTTP/2 client connection preface (RFC 9113 3.4):
// the first bytes of every h2c connection with prior knowledge.
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
