package mesh

import (
	"fmt"
	"slices"
	"strings"
)

// Istio's inbound retry policy (DESIGN.md, "Real inputs, third round"), read from istio/istio at
// 86c9f01fd735fb01d8192f5bcaf0d424afb7f14c: pilot/pkg/networking/core/route/route.go
// BuildDefaultHTTPInboundRoute gives the callee sidecar's default inbound route of every HTTP port
// (never gRPC) retry.ConvertInboundPolicy(MeshConfig defaultInboundHttpRetryPolicy); in
// route/retry/retry.go, unset, that is 2 retries on "reset-before-request" only: a request reset
// before it reached the application, which the app never received, so it adds no try to what the
// app sees and retrycap counts none. attempts 0 (or unset in a set policy) disables it. A policy
// whose retryOn names any other condition re-sends requests the app did receive: 1 + attempts
// tries, callee-side, for every caller reaching a callee that runs Istio's sidecar (its
// namespace's injection label: a pod-level opt-out of the callee is not known here, an upper
// bound), whether the caller is meshed or not. A gRPC port gets it too here (Istio skips gRPC
// ports: an upper bound, said in the note).

// IstioInboundRetryOn is the condition of Istio's default inbound retries.
const IstioInboundRetryOn = "reset-before-request"

// parseInbound reads defaultInboundHttpRetryPolicy; nil when it adds no try.
func parseInbound(cm configMap) (*meshDefault, error) {
	mc, err := cm.meshConfig()
	if mc == nil || err != nil {
		return nil, err
	}
	p := mc.DefaultInboundHTTPRetryPolicy
	if p == nil || p.Attempts == nil {
		return nil, nil
	}
	if err := boundsInt32.check(cm.id(), "data."+IstioConfigKey+" defaultInboundHttpRetryPolicy.attempts", *p.Attempts); err != nil {
		return nil, err
	}
	if *p.Attempts == 0 || onlyResetBeforeRequest(p.RetryOn) {
		return nil, nil
	}
	base, err := parseTime(cm.id(), "data."+IstioConfigKey+" defaultInboundHttpRetryPolicy.backoff", p.Backoff, goGrammar)
	if err != nil {
		return nil, err
	}
	// Istio honours attempts, retryOn and backoff here (no per-try timeout on an inbound route).
	return &meshDefault{retries: *p.Attempts, base: base, object: cm.id(), note: fmt.Sprintf("%s data.%s defaultInboundHttpRetryPolicy.attempts: %d, retryOn %q",
		cm.id(), IstioConfigKey, *p.Attempts, p.RetryOn)}, nil
}

// onlyResetBeforeRequest: retryOn empty (Istio's default condition) or naming reset-before-request
// alone.
func onlyResetBeforeRequest(retryOn string) bool {
	for _, c := range strings.Split(retryOn, ",") {
		if c = strings.TrimSpace(c); c != "" && c != IstioInboundRetryOn {
			return false
		}
	}
	return true
}

// istioCallee reports whether the Service ref's namespace runs Istio's sidecar.
func (s *Set) istioCallee(ref ServiceRef) bool {
	nl := s.namespaces[ref.Namespace].Labels
	if v, ok := nl[IstioInjectionLabel]; ok {
		return v == "enabled"
	}
	_, rev := nl[IstioRevLabel]
	return rev
}

// inboundEdge adds the callee sidecar's inbound retries on a call into ref, when MeshConfig sets
// an inbound policy that retries what the app received.
func (s *Set) inboundEdge(e *Edge, ref ServiceRef) {
	if s.inbound == nil || !s.istioCallee(ref) {
		return
	}
	grpc := slices.ContainsFunc(s.ports[ref], func(p servicePort) bool { return istioProtocol(p).name == "grpc" })
	note := fmt.Sprintf("Istio inbound retry policy at %s's sidecar, from %s", ref, s.inbound.note)
	if grpc {
		note += " (Istio skips gRPC ports; counted, an upper bound)"
	}
	e.Layers = append(e.Layers, Layer{Kind: Istio, Object: s.inbound.object, FieldPath: "data." + IstioConfigKey,
		Tries: s.inbound.retries + 1, Note: note})
}
