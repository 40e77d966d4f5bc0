// Package labapp is a small HTTP "chain app" for retrycap's chain tests and
// the storm lab: a service that, for each inbound request, calls its
// upstreams through an HTTP proxy (as an app behind retrycap-proxy would),
// propagating Retrycap-Budget and/or baggage from its inbound request; or a
// leaf that fails on demand, has a capacity limit and counts what it
// received. It also starts real retrycap-proxy processes (StartProxy).
//
// The gRPC chain app (grpcapp.go: a hand-registered retrycap.lab.Chain
// service) does the same over gRPC, propagating the chain budget, baggage,
// traceparent and idempotency key in metadata; it runs in a child process
// of its own (grpcproc.go) so that its HTTPS_PROXY names its own proxy.
package labapp
