package observe

import (
	"strings"
	"time"
)

// Format is where an attempt's line came from.
type Format string

// The formats Parse reads.
const (
	FormatRetrycap  Format = "retrycap"   // retrycap-proxy --access-log (JSON lines)
	FormatEnvoyText Format = "envoy-text" // Envoy's or Istio's default text format
	FormatEnvoyJSON Format = "envoy-json" // Istio's default JSON encoding
	// FormatIngressNginx is ingress-nginx's default log-format-upstream: one line per client
	// request, one attempt per upstream try it lists.
	FormatIngressNginx Format = "ingress-nginx"
)

// Direction tells an Envoy line's side: the caller's sidecar (outbound) or the callee's
// (inbound). retrycap-proxy only logs outbound attempts.
type Direction string

// Directions.
const (
	Outbound Direction = "outbound"
	Inbound  Direction = "inbound"
)

// Attempt is one attempt as a log line tells it.
type Attempt struct {
	Format    Format
	Direction Direction
	Time      time.Time
	// Caller is the service that made the attempt ("" when the line does not say: an Envoy
	// inbound line, or an outbound one read without a source); Target the service it went to.
	Caller, Target string
	Method         string
	Authority      string
	Path           string // without the query
	// Number is the attempt's number within its call (1 = first try); 0 when unknown (Envoy).
	Number int
	// BudgetIn is the chain budget the call came with, BudgetOut the one this attempt
	// carried; -1 when unknown.
	BudgetIn, BudgetOut int
	// Status is the HTTP status (0: no response); GRPCStatus the grpc-status (-1: none).
	Status     int
	GRPCStatus int
	Duration   time.Duration
	// Exhausted is the Retrycap-Exhausted reason of the call's answer, or Envoy's response
	// flags; Error the transport failure (retrycap's condition).
	Exhausted string
	Error     string
	// Cut is who ended the answer's streamed body short after its head went to the client
	// (CutUpstream, CutClient, CutProxy; "" when it ended whole), and BodyBytes how many of its
	// bytes the proxy had read from the upstream by then (retrycap's "cut", "body_bytes").
	Cut       string
	BodyBytes int64
	TraceID   string
	IdemKey   string
	RequestID string // X-Request-Id
	StormOp   string // the storm lab's baggage member storm-op
}

// Key is the attempt's grouping key and what it is: Idempotency-Key, else trace id, else
// request id (X-Request-Id, else storm-op); "" when the line has none.
func (a *Attempt) Key() (key, kind string) {
	switch {
	case a.IdemKey != "":
		return a.IdemKey, "idempotency-key"
	case a.TraceID != "":
		return a.TraceID, "trace-id"
	case a.RequestID != "":
		return a.RequestID, "request-id"
	case a.StormOp != "":
		return a.StormOp, "storm-op"
	}
	return "", ""
}

// Who cut an answer's streamed body (retrycap's "cut"; the proxy's forward.CutUpstream, ...).
const (
	CutUpstream = "upstream"
	CutClient   = "client"
	CutProxy    = "proxy"
)

// Failed reports whether the attempt failed: no response, a 5xx or 429, a gRPC status other
// than OK, InvalidArgument, NotFound, AlreadyExists, PermissionDenied, FailedPrecondition,
// OutOfRange, Unauthenticated (the caller's errors), or an answer whose body was cut after its
// head (Cut: the client got a head and part of a body it cannot trust, whatever the status
// said; as Envoy's UC/UR and DC flags are no success).
func (a *Attempt) Failed() bool {
	return failed(a.Status, a.GRPCStatus, a.Cut != "")
}

// End is when the attempt ended.
func (a *Attempt) End() time.Time { return a.Time.Add(a.Duration) }

// ServiceOfHost is the service a host names: the first label of a DNS name
// (payment.shop.svc.cluster.local -> payment), without the port; an IP stays as it is.
func ServiceOfHost(h string) string {
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return h[1:i]
		}
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.Count(h, ":") == 1 {
		h = h[:i]
	}
	if isIPv4(h) {
		return h
	}
	if i := strings.IndexByte(h, '.'); i > 0 {
		h = h[:i]
	}
	return strings.ToLower(h)
}

func isIPv4(h string) bool {
	if h == "" {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

// TraceIDOf is the trace id of a W3C traceparent (version-traceid-spanid-flags); "" if it is
// not one.
func TraceIDOf(tp string) string {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) < 4 || len(parts[1]) != 32 {
		return ""
	}
	return strings.ToLower(parts[1])
}
