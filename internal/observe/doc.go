// Package observe answers "what really happened, per request" from access logs: it reads
// retrycap-proxy's per-attempt access log (JSON lines, internal/proxy/accesslog) and Envoy's or
// Istio's access logs in their default text and JSON formats, groups the attempts per key
// (Idempotency-Key, else the traceparent trace id, else the request id: X-Request-Id, or the
// storm lab's baggage member storm-op) and reports, per key: the attempts, the services that
// took part, the first attempt, the span, the failures and the observed amplification (the
// attempts at the deepest service the key reached). It is pure: readers in, a Report out, and
// renderers (table, JSON, the summary line) for it; the command is internal/cli/observe.go.
package observe
