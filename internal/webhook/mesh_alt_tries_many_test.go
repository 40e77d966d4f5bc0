package webhook

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
)

// TestDecideMeshAltTriesMany: 20 routes other than the counted one raised at once. Lowered one
// per round, rewriteMesh's 16 rounds left 4 raised (27.075s admitted), and each warned that its
// old value did not fit (the others still raised): they are judged and lowered together.
func TestDecideMeshAltTriesMany(t *testing.T) {
	vs := func(attempts string, n int) string {
		var b strings.Builder
		b.WriteString(`apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
    timeout: 1s
    retries: {attempts: 3, perTryTimeout: 250ms}
`)
		for i := range n {
			fmt.Fprintf(&b, "  - match: [{uri: {prefix: /r%d}}]\n    route: [{destination: {host: ratings}}]\n    retries: {attempts: %s, perTryTimeout: 9s}\n", i, attempts)
		}
		return b.String()
	}
	reviews := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute}
		return []*v1alpha1.RetryPolicy{p}
	}
	cluster := []string{altIstioNS, reviews, vs("1", 20)}
	const over = "productpage 27.075s -> reviews 27.075s -> ratings ? = 27.075s > maxTimeToAnswer 20s"
	expectMeshDecision(t, decideOn(t, cluster, policy(v1alpha1.EnforcementReject), vs("2", 20), vs("1", 20)), MeshDecision{
		Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1].retries.attempts: 1 -> 2 (a route other than the counted one: the time takes its tries too; " +
			"with 19 more such route(s) of VirtualService bookinfo/ratings raised on the same call, judged together) makes " + over +
			"; VirtualService bookinfo/ratings may keep attempts: 1 (the others at most 2 tries each, or their old value)"})
	d := decideOn(t, cluster, policy(v1alpha1.EnforcementRewrite), vs("2", 20), vs("1", 20))
	// In JSON pointer order, as the rewrite lists them: /spec/http/1, /spec/http/10, ...
	idx := make([]string, 0, 20)
	for i := 1; i <= 20; i++ {
		idx = append(idx, fmt.Sprint(i))
	}
	sort.Strings(idx)
	var changes, from []string
	want := []jsonpatch.Operation{{}}
	for _, i := range idx {
		changes = append(changes, "spec.http["+i+"].retries.attempts: 2 -> 1")
		from = append(from, "spec.http["+i+"].retries.attempts: 2")
		want = append(want, jsonpatch.Operation{Operation: "replace", Path: "/spec/http/" + i + "/retries/attempts", Value: float64(1)})
	}
	want[0] = jsonpatch.Operation{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"retrycap.dev/rewritten-from": strings.Join(from, "; ")}}
	expectMeshDecision(t, d, MeshDecision{Allowed: true,
		Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: " + strings.Join(changes, ", ") + " (" + over + ")"},
		Patch:    want})
}
