package workload

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/graph"
)

// The worked example of docs/concepts.md through the real builder: annotations, the policy's
// per-try timeout and backoff, an Istio VirtualService under order's calls to payment, and a
// Gateway route's timeouts at the entrypoint.
func TestAnalyzeTimeWorkedExample(t *testing.T) {
	p := policy("shop", "p", 100, v1alpha1.Entrypoint{Service: "gateway", ClientAttempts: 2})
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Second}
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: 5 * time.Second}
	ws := []Workload{
		deploy("shop", "gateway", "order=3", nil),
		deploy("shop", "order", "payment=3/200ms", nil),
		deploy("shop", "payment", "db=1/500ms", nil),
	}
	set := meshSet(t,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}",
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: payment, namespace: shop}\nspec:\n  hosts: [payment]\n  http:\n  - route: [{destination: {host: payment}}]\n    retries: {attempts: 2}",
	)
	// Only order runs an Istio sidecar.
	ws[1].Annotations = PairsOf(map[string]string{annotations.Upstreams: "payment=3/200ms"})
	ws[1].Labels = PairsOf(map[string]string{"sidecar.istio.io/inject": "true"})
	r := Build(ForRetryPolicy(p), ws, set)
	ta := r.AnalyzeTime()
	if got := graph.FormatTime(ta.Worst); got != "6s" || strings.Join(ta.WorstPath, ">") != "gateway>order>payment>db" {
		t.Fatalf("worst %s %v, want 6s gateway>order>payment>db", got, ta.WorstPath)
	}
	wantV := "client -x2-> gateway 3s -> order 900ms -> payment 500ms -> db ? = 6s > maxTimeToAnswer 5s"
	if len(ta.Violations) != 1 || ta.Violations[0].Message != wantV {
		t.Fatalf("violations %+v\nwant %q", ta.Violations, wantV)
	}
	wantI := "order -> payment: Deployment shop/order per-try timeout 200ms < Istio VirtualService shop/payment's worst time on payment 1.575s: " +
		"order retries while payment still works on the abandoned try"
	if ta.InversionsTotal != 1 || ta.Inversions[0].Message != wantI {
		t.Fatalf("inversions %d %+v\nwant %q", ta.InversionsTotal, ta.Inversions, wantI)
	}

	// A Gateway route to gateway with 2 tries of at most 2.5s and a 4s request timeout: the
	// graph's client attempts are 2 x 2 = 4, the time counts the client's own 2 over the route:
	// 2 x min(4s, 2 x min(2.5s, 3s) + 25ms) = 8s.
	p.Spec.Entrypoints = nil
	set2 := meshSet(t,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}",
		"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: payment, namespace: shop}\nspec:\n  hosts: [payment]\n  http:\n  - route: [{destination: {host: payment}}]\n    retries: {attempts: 2}",
		"apiVersion: v1\nkind: Service\nmetadata: {name: gateway, namespace: shop}\nspec: {selector: {app: gateway}}",
		"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: web, namespace: shop}\nspec:\n  parentRefs: [{name: eg}]\n  rules:\n  - backendRefs: [{name: gateway, port: 80}]\n    retry: {attempts: 1}\n    timeouts: {request: 4s, backendRequest: 2500ms}",
	)
	r = Build(ForRetryPolicy(p), ws, set2)
	if eps := r.Graph.Entrypoints(); len(eps) != 0 {
		t.Fatalf("explicit entrypoints %+v", eps)
	}
	ta = r.AnalyzeTime()
	var got []string
	for _, c := range ta.Chains {
		got = append(got, c.Entrypoint+":"+graph.FormatTime(c.Time))
	}
	if strings.Join(got, ",") != "gateway:4s" {
		t.Fatalf("chains %v, want gateway:4s (one client try over the route: min(4s, 2 x min(2.5s, 3s) + 25ms))", got)
	}
}
