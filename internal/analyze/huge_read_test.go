package analyze

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// hugeVirtualService is one VirtualService of n routes, each with a match, retries and a route
// (the red team's shape: 50,000 of them are 8.6 MB).
func hugeVirtualService(n int) string {
	var b strings.Builder
	b.WriteString("apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata:\n  name: reviews\n  namespace: shop\nspec:\n  hosts: [reviews]\n  http:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - match:\n    - uri:\n        prefix: /r%d\n    retries:\n      attempts: 3\n      perTryTimeout: 2s\n    route:\n    - destination:\n        host: reviews\n        subset: v%d\n", i, i%3)
	}
	return b.String()
}

// TestReadHugeVirtualServiceBounded: reading and checking one VirtualService of 20,000 routes
// (3.4 MB) allocates at most 64 times its size in all, a bound on its peak heap (61.8x; 77.7x
// before the documents were slices of the input and the JSON was written straight from the
// parsed value, yamlToJSON; most of the rest is the YAML parser's node tree and the map decoded
// from it), and reads its routes' layer.
func TestReadHugeVirtualServiceBounded(t *testing.T) {
	const base = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}\n---\n" +
		"apiVersion: v1\nkind: Service\nmetadata: {name: reviews, namespace: shop}\nspec: {selector: {app: reviews}, ports: [{port: 80}]}\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: reviews, namespace: shop}\nspec:\n  selector: {matchLabels: {app: reviews}}\n  template:\n    metadata: {labels: {app: reviews}}\n    spec: {containers: [{name: a, image: x}]}\n---\n" +
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop}\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}, annotations: {retrycap.dev/upstreams: reviews}}\n    spec: {containers: [{name: a, image: x}]}\n---\n" +
		"apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: p, namespace: shop}\nspec: {maxAmplification: 10, selector: {}}\n"
	huge := hugeVirtualService(20000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := NewManifests()
	errs := Reader{}.Read(m, "base.yaml", strings.NewReader(base))
	errs = append(errs, Reader{}.Read(m, "huge-vs.yaml", strings.NewReader(huge))...)
	rep := m.Analyze()
	runtime.ReadMemStats(&after)
	if len(errs) != 0 || len(rep.Policies) != 1 {
		t.Fatalf("errors %v, %d policies", errs, len(rep.Policies))
	}
	if got, want := kindCounts(m.Summary.Mesh), "VirtualService 1"; got != want {
		t.Fatalf("mesh objects %q, want %q", got, want)
	}
	p := rep.Policies[0]
	if p.Amplification != 4 || !p.WithinCap {
		t.Fatalf("amplification %d, within cap %v; want 4 (reviews' 3 attempts), true", p.Amplification, p.WithinCap)
	}
	size := uint64(len(base) + len(huge))
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("input %d bytes, allocated %d bytes (%.1fx)", size, alloc, float64(alloc)/float64(size))
	if alloc > 64*size {
		t.Fatalf("allocated %d bytes reading and checking %d bytes: %.1fx, over the bound of 64x", alloc, size, float64(alloc)/float64(size))
	}
}
