package analyze

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestFaultDelayTime: Istio's fault.delay on the ratings route is held before the route's
// timeout, so that route takes 10s (3s without it); the other route of the VirtualService (every
// user but jason) has no timeout, and reviews' own 15s per try bounds it: reviews takes 15s
// (before, 10s: the time of the first route alone, as if every request took it), productpage
// 15s, over maxTimeToAnswer 12s; the table names the delay (testdata/faultdelay, worked by hand
// there).
func TestFaultDelayTime(t *testing.T) {
	m := NewManifests()
	if errs := (Reader{}).ReadPathsInto(m, []string{filepath.Join("testdata", "faultdelay", "bookinfo-test-delay-timeout.yaml")}); len(errs) > 0 {
		t.Fatal(errs)
	}
	rep := m.Analyze()
	var b bytes.Buffer
	if err := RenderTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "  worst time") || strings.HasPrefix(l, "  over max") || strings.HasPrefix(l, "  timeout inv") ||
			strings.HasPrefix(l, "    - ") || strings.HasPrefix(l, "      fix: ") || strings.Contains(l, "fault.delay") {
			got = append(got, l)
		}
	}
	want := []string{
		"  worst time to answer:  15s (productpage -> reviews -> ratings)  max 12s, WITHIN: no",
		"  over maxTimeToAnswer:",
		"    - productpage 15s -> reviews 15s -> ratings ? = 15s > maxTimeToAnswer 12s",
		"  timeout inversions:",
		"    - productpage -> reviews: Deployment bookinfo/productpage per-try timeout 15s < Istio default's worst time on reviews 45.075s: productpage retries while reviews still works on the abandoned try",
		"      fix: Deployment bookinfo/productpage per-try timeout for reviews >= 45.075s, or Istio default finishing within 15s (its tries x per-try timeout + backoff, or its timeout)",
		"  warning: VirtualService bookinfo/ratings spec.http[0].fault.delay.fixedDelay 7s: Istio's fault injection holds each request it hits in the caller's proxy before the route's timeouts start: counted once per request in the worst time to answer",
	}
	if !slices.Equal(got, want) {
		t.Errorf("time lines\n got %q\nwant %q\n%s", got, want, b.String())
	}
}

// TestEnvoyGatewayFaultDelayTime: an Envoy Gateway BackendTrafficPolicy's
// spec.faultInjection.delay is held at the entry before the route's timeouts: the entry takes
// 8.025s (4.025s without it, within maxTimeToAnswer 6s, as on main); the table names the delay
// (testdata/faultdelay/envoy-gateway-delay.yaml, worked by hand there).
func TestEnvoyGatewayFaultDelayTime(t *testing.T) {
	m := NewManifests()
	if errs := (Reader{}).ReadPathsInto(m, []string{filepath.Join("testdata", "faultdelay", "envoy-gateway-delay.yaml")}); len(errs) > 0 {
		t.Fatal(errs)
	}
	var b bytes.Buffer
	if err := RenderTable(&b, m.Analyze()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "  worst time") || strings.HasPrefix(l, "  over max") || strings.HasPrefix(l, "    - client") || strings.Contains(l, "faultInjection") {
			got = append(got, l)
		}
	}
	want := []string{
		"  worst time to answer:  8.025s (frontend -> backend)  max 6s, WITHIN: no",
		"  over maxTimeToAnswer:",
		"    - client -x2-> frontend 2.1s -> backend ? = 8.025s > maxTimeToAnswer 6s",
		"    - client -> frontend: EnvoyGateway BackendTrafficPolicy shop/web per-try timeout 2s < frontend's worst time 2.1s: client retries while frontend still works on the abandoned try",
		"  warning: BackendTrafficPolicy shop/web spec.faultInjection.delay.fixedDelay 4s: Envoy Gateway's fault injection holds each request it hits in the gateway before the route's timeouts start: counted once per request in the worst time to answer",
	}
	if !slices.Equal(got, want) {
		t.Errorf("time lines\n got %q\nwant %q\n%s", got, want, b.String())
	}
}
