package h2

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"

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

// statusFromHTTP maps the HTTP status of an answer to a gRPC call that is
// not gRPC's (no gRPC content-type) to a code, as gRPC's
// http-grpc-status-mapping and grpc-go's HTTPStatusConvTab do: any
// status they do not name, 200 included, is UNKNOWN.
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

// grpcRead is the gRPC code grpc-go's client (v1.85,
// http2Client.operateHeaders) reads from an answer's block, so that the
// retry decision, the metrics and the access log say what the client
// sees. head: the answer's first block (not 1xx), whose :status is
// status; else trailers. end: the block ends the stream. known is false
// for headers that are not the call's status (a gRPC head without
// END_STREAM: the status comes later). In grpc-go's order:
//   - a malformed grpc-status (strconv.ParseInt(v, 10, 32): a space
//     around it) is UNKNOWN whatever else the block holds;
//   - a head without gRPC's content-type is not gRPC's answer: its HTTP
//     status maps to the code (gRPC's http-grpc-status-mapping; 200 and
//     any status it does not name are UNKNOWN), open or not, grpc-status
//     ignored;
//   - under gRPC's content-type (and in trailers) :status is ignored
//     (a trailers-only 503 without grpc-status is UNKNOWN, not
//     UNAVAILABLE); a -bin metadata value that is not base64 is
//     INTERNAL; else the last grpc-status, a negative one as the uint32
//     grpc-go makes of it, and none at all is UNKNOWN (not INTERNAL);
//     one grpc-status-details-bin holding a google.rpc.Status of
//     another code makes it INTERNAL.
func grpcRead(fs []hpack.HeaderField, status int, head, end bool) (code int, known bool) {
	isGRPC, badBin := !head, false
	code = codeUnknown
	details, nDetails := "", 0
	for i := range fs {
		switch name := fs[i].Name; name {
		case "grpc-status-details-bin":
			details, nDetails = fs[i].Value, nDetails+1
			badBin = badBin || !validBin(details)
		case "content-type":
			isGRPC = isGRPC || grpcContentType(fs[i].Value)
		case "grpc-status":
			n, err := strconv.ParseInt(fs[i].Value, 10, 32)
			if err != nil {
				return codeUnknown, true
			}
			code = int(uint32(n))
		case "user-agent", "grpc-message-type", "grpc-encoding", "grpc-message", "grpc-timeout", "te":
			// Reserved (isReservedHeader): not metadata, not decoded.
		default:
			if strings.HasSuffix(name, "-bin") && !strings.HasPrefix(name, ":") && !validBin(fs[i].Value) {
				badBin = true
			}
		}
	}
	switch {
	case !isGRPC:
		return statusFromHTTP(status), true
	case badBin:
		return codeInternal, true
	case !end:
		return 0, false
	case nDetails == 1 && detailsDiffer(details, code):
		return codeInternal, true
	}
	return code, true
}

// detailsDiffer reports whether a grpc-status-details-bin value is a
// google.rpc.Status whose code is not the grpc-status: grpc-go's client
// then reads INTERNAL ("grpc-status-details-bin mismatch",
// internal/status.NewWithProto). A value that is no such proto (or more
// than one value: the caller's) is ignored, as grpc-go ignores it.
func detailsDiffer(v string, code int) bool {
	b, err := decodeBin(v)
	st := &spb.Status{}
	if err != nil || proto.Unmarshal(b, st) != nil {
		return false
	}
	return st.GetCode() != int32(uint32(code))
}

// validBin reports whether a -bin metadata value decodes as grpc-go
// decodes it.
func validBin(v string) bool {
	_, err := decodeBin(v)
	return err == nil
}

// decodeBin is grpc-go's decodeBinHeader: padded base64 when the value's
// length is a multiple of 4, else unpadded.
func decodeBin(v string) ([]byte, error) {
	if len(v)%4 == 0 {
		return base64.StdEncoding.DecodeString(v)
	}
	return base64.RawStdEncoding.DecodeString(v)
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
