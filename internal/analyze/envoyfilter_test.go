package analyze

import (
	"strings"
	"testing"
)

// TestEnvoyFilterRetriesWarned: an EnvoyFilter that merges Envoy's retry_policy into a route
// (the shape public guides use to change the backoff or retry_on) is warned about, naming the
// object and the patch; one without retry keys only counts as ignored. Before, both were an
// "ignored: EnvoyFilter" count and nothing else.
func TestEnvoyFilterRetriesWarned(t *testing.T) {
	const docs = `apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: retry-interval, namespace: shop}
spec:
  workloadSelector: {labels: {app: curl}}
  configPatches:
  - applyTo: HTTP_ROUTE
    match:
      context: SIDECAR_OUTBOUND
      routeConfiguration: {vhost: {name: "httpbin.shop.svc.cluster.local:80"}}
    patch:
      operation: MERGE
      value:
        route:
          retry_policy: {num_retries: 5, retry_back_off: {base_interval: 4s, max_interval: 5s}}
---
apiVersion: networking.istio.io/v1alpha3
kind: EnvoyFilter
metadata: {name: ratelimit, namespace: shop}
spec:
  configPatches:
  - applyTo: HTTP_FILTER
    patch: {operation: INSERT_BEFORE, value: {name: envoy.filters.http.local_ratelimit}}
`
	m := NewManifests()
	if errs := (Reader{}).Read(m, "test.yaml", strings.NewReader(docs)); len(errs) != 0 {
		t.Fatal(errs)
	}
	if len(m.Warnings) != 1 || m.Summary.Ignored["EnvoyFilter"] != 2 {
		t.Fatalf("warnings %v, ignored %v: want one warning, EnvoyFilter 2", m.Warnings, m.Summary.Ignored)
	}
	const want = "EnvoyFilter shop/retry-interval: spec.configPatches[0].patch.value.route.retry_policy patches Envoy's retry policy: not counted"
	if w := m.Warnings[0]; w.Source.Document != 1 || !strings.HasPrefix(w.Msg, want) {
		t.Fatalf("warning %+v, want document 1 and %q...", w, want)
	}
}
