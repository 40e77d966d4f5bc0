package analyze

import (
	"fmt"
	"testing"
)

// TestGroupWarningsAcrossKindsAndPaths: the same warning about objects of different kinds, in
// files at different depths, is one group. Istio's samples read with -R (istio/istio samples/,
// 141 files) printed 52 lines of "is also at" before: grouped by kind and by the depth of the
// paths, into groups too small to fold; now one line with the count.
func TestGroupWarningsAcrossKindsAndPaths(t *testing.T) {
	ws := []string{
		"samples/addons/extras/zipkin.yaml: document 2: Service istio-system/tracing is also at samples/addons/extras/skywalking.yaml: document 2: the later wins",
		"samples/addons/prometheus.yaml: document 6: Deployment istio-system/prometheus is also at samples/addons/extras/prometheus-secure-metrics.yaml: document 6: the later wins",
		"samples/bookinfo/gateway-api/route-all-v1.yaml: document 1: HTTPRoute default/reviews is also at samples/ambient-argo/application/route-reviews-90-10.yaml: document 1: the later wins",
		"samples/ambient-argo/tag-chart/Chart.yaml: a Helm chart, not a Kubernetes manifest: skipped (run helm template first)",
		"samples/sleep/sleep.yaml: document 3: Deployment default/sleep is also at samples/security/spire/sleep-spire.yaml: document 3: the later wins",
	}
	want := []string{
		ws[0] + " (and 3 more like it; -o json lists them all)",
		ws[3],
	}
	if got := GroupWarnings(ws); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	// Different warnings stay apart.
	two := []string{"a.yaml: document 1: Service shop/a: x", "b.yaml: document 1: Service shop/b: y", "c.yaml: document 1: Service shop/c: z"}
	if got := GroupWarnings(two); len(got) != 3 {
		t.Fatalf("got %q: want the 3 apart", got)
	}
}

// TestGroupWarningsClusterScoped: a cluster-scoped object given twice ("Kind name", no
// namespace) is the same warning as a namespaced one. Istio's manifests read with -R printed the
// MutatingWebhookConfiguration and ClusterRole repeats each on its own line beside the group.
func TestGroupWarningsClusterScoped(t *testing.T) {
	ws := []string{
		"manifests/a.yaml: document 1: Service istio-system/istiod is also at manifests/b.yaml: document 1: the later wins",
		"manifests/a.yaml: document 2: MutatingWebhookConfiguration istio-sidecar-injector is also at manifests/b.yaml: document 2: the later wins",
		"manifests/a.yaml: document 3: ClusterRole istiod-clusterrole-istio-system is also at manifests/b.yaml: document 3: the later wins",
		"manifests/a.yaml: document 4: ClusterRetryPolicy all: no workload selected",
	}
	want := []string{
		ws[0] + " (and 2 more like it; -o json lists them all)",
		ws[3],
	}
	if got := GroupWarnings(ws); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
}
