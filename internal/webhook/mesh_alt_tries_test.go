package webhook

import (
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

func decideOn(t *testing.T, cluster []string, policies []*v1alpha1.RetryPolicy, object, old string) MeshDecision {
	t.Helper()
	set := mesh.NewSet(mesh.Options{})
	for _, o := range cluster {
		if _, err := set.AddManifest([]byte(o)); err != nil {
			t.Fatal(err)
		}
	}
	in := MeshInput{Policies: policies, Workloads: bookinfoChain(), Set: set, Object: jsonOf(t, object)}
	if old != "" {
		in.Old = jsonOf(t, old)
	}
	d := DecideMesh(in)
	expectStaticAgrees(t, in.Object, d)
	return d
}

const altIstioNS = `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, labels: {istio-injection: enabled}}`

// TestDecideMeshAltTriesLinkerd: the time model times a call over every HTTPRoute of the
// callee's Service (mesh.Set.CallHops) while the edge counts the route of the most tries
// (ratings-fast: limit 3 within a request timeout of 1s). ratings-rest's limit raised 1 -> 2
// under a response timeout of 9s takes reviews -> ratings from 2 x 9s + 25ms = 18.025s to
// 3 x 9s + 75ms = 27.075s, over maxTimeToAnswer 20s, and changed no layer of the edge: it was
// admitted (Allowed: true) under every enforcement. Now it is judged as a timeout raise is, and
// Rewrite lowers the raised limit back to the most that fits.
func TestDecideMeshAltTriesLinkerd(t *testing.T) {
	ns := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}`
	svc := `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}`
	fast := linkerdRatingsRoute("ratings-fast", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "3", timeout.linkerd.io/request: 1s`, "/fast")
	rest := func(limit, response string) string {
		return linkerdRatingsRoute("ratings-rest", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "`+limit+`", timeout.linkerd.io/response: `+response, "/")
	}
	linkerdSvc := func(limit string) string {
		return `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "` + limit + `", timeout.linkerd.io/response: 9s}}
spec: {ports: [{name: http, port: 9080}]}`
	}
	bare := linkerdRatingsRoute("ratings-rest", "", "/")
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute} // bounds no hop: the mesh's timeouts do
		return []*v1alpha1.RetryPolicy{p}
	}
	const over = "productpage 27.075s -> reviews 27.075s -> ratings ? = 27.075s > maxTimeToAnswer 20s"
	const raised = `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest metadata.annotations["retry.linkerd.io/limit"]: "1" -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
		over + `; HTTPRoute bookinfo/ratings-rest may keep retry.linkerd.io/limit: "1"`
	const created = `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest metadata.annotations["retry.linkerd.io/limit"]: unset (a new route) -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
		over + `; HTTPRoute bookinfo/ratings-rest may keep retry.linkerd.io/limit: "1"`
	const overBefore = `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest metadata.annotations["retry.linkerd.io/limit"]: "1" -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
		`productpage 33.075s -> reviews 33.075s -> ratings ? = 33.075s > maxTimeToAnswer 20s; HTTPRoute bookinfo/ratings-rest retry.linkerd.io/limit: "1" does not fit either: ` +
		// advice19: the callers are at 1 attempt (it said "lower the callers' attempts"); the
		// wait is 2 x 11s + 25ms of the route's own per-try timeout.
		`lower the timeouts of HTTPRoute bookinfo/ratings-rest (at 2 tries: per-try timeout 11s, timeout unset), or raise RetryPolicy bookinfo/bookinfo spec.maxTimeToAnswer: 22.025s`
	lowered := MeshDecision{Allowed: true,
		Warnings: []string{`RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/ratings-rest: metadata.annotations["retry.linkerd.io/limit"]: "2" -> "1" (` + over + ")"},
		Patch: []jsonpatch.Operation{
			{Operation: "replace", Path: "/metadata/annotations/retry.linkerd.io~1limit", Value: "1"},
			{Operation: "add", Path: "/metadata/annotations/retrycap.dev~1rewritten-from", Value: `metadata.annotations["retry.linkerd.io/limit"]: "2"`},
		}}
	for _, tc := range []struct {
		name        string
		cluster     []string
		policies    []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{
			name: "Reject: the limit of a route other than the counted one raised", cluster: []string{ns, svc, fast, rest("1", "9s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest("2", "9s"), old: rest("1", "9s"),
			want: MeshDecision{Message: raised},
		},
		{
			name: "Audit: the same as a warning", cluster: []string{ns, svc, fast, rest("1", "9s")},
			policies: policy(v1alpha1.EnforcementAudit), object: rest("2", "9s"), old: rest("1", "9s"),
			want: MeshDecision{Allowed: true, Warnings: []string{raised + " (admitted: enforcement is Audit)"}},
		},
		{
			name: "Rewrite: the raised limit lowered to the most that fits", cluster: []string{ns, svc, fast, rest("1", "9s")},
			policies: policy(v1alpha1.EnforcementRewrite), object: rest("2", "9s"), old: rest("1", "9s"),
			want: lowered,
		},
		{
			// 3 x 5s + 75ms = 15.075s.
			name: "raised within the maximum: admitted", cluster: []string{ns, svc, fast, rest("1", "5s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest("2", "5s"), old: rest("1", "5s"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "lowered: admitted", cluster: []string{ns, svc, fast, rest("2", "9s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest("1", "9s"), old: rest("2", "9s"),
			want: MeshDecision{Allowed: true},
		},
		{
			// A route created is judged against the fewest tries its field gives (1): it
			// adds its time to the call as surely as a raise does.
			name: "Reject: a new route whose tries take the chain over", cluster: []string{ns, svc, fast},
			policies: policy(v1alpha1.EnforcementReject), object: rest("2", "9s"),
			want: MeshDecision{Message: created},
		},
		{
			name: "Rewrite: a new route lowered to the most that fits", cluster: []string{ns, svc, fast},
			policies: policy(v1alpha1.EnforcementRewrite), object: rest("2", "9s"),
			want: lowered,
		},
		{
			name: "a new route within the maximum: admitted", cluster: []string{ns, svc, fast},
			policies: policy(v1alpha1.EnforcementReject), object: rest("2", "5s"),
			want: MeshDecision{Allowed: true},
		},
		{
			// 2 x 11s + 25ms = 22.025s was over before: no limit above "1" fits, nor "1".
			name: "Reject: over before the raise too", cluster: []string{ns, svc, fast, rest("1", "11s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest("2", "11s"), old: rest("1", "11s"),
			want: MeshDecision{Message: overBefore},
		},
		{
			name: "Rewrite: over before the raise too: back to its old limit, with a warning", cluster: []string{ns, svc, fast, rest("1", "11s")},
			policies: policy(v1alpha1.EnforcementRewrite), object: rest("2", "11s"), old: rest("1", "11s"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{
					`RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/ratings-rest: metadata.annotations["retry.linkerd.io/limit"]: "2" -> "1" (productpage 33.075s -> reviews 33.075s -> ratings ? = 33.075s > maxTimeToAnswer 20s)`,
					overBefore + ` (admitted: enforcement is Rewrite; lowered back to HTTPRoute bookinfo/ratings-rest retry.linkerd.io/limit: "1", its value before the raise or, new, its fewest tries)`,
				},
				Patch: lowered.Patch},
		},
		{
			// ratings-rest sets no annotation: it takes the Service's retry and timeouts
			// (mesh.LinkerdRoute), and the Service's limit raised is its raise.
			name: "Reject: the Service's limit a route inherits, raised", cluster: []string{ns, linkerdSvc("1"), fast, bare},
			policies: policy(v1alpha1.EnforcementReject), object: linkerdSvc("2"), old: linkerdSvc("1"),
			want: MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: Service bookinfo/ratings metadata.annotations["retry.linkerd.io/limit"]: "1" -> "2" (a route other than the counted one: the time takes its tries too) makes ` +
				over + `; Service bookinfo/ratings may keep retry.linkerd.io/limit: "1"`},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectMeshDecision(t, decideOn(t, tc.cluster, tc.policies, tc.object, tc.old), tc.want)
		})
	}
}

// TestDecideMeshAltTriesIstio: a VirtualService's http routes for sidecars are each timed
// (mesh.Set.TimeAlternatives) while the edge counts the route of the most tries (spec.http[0]:
// attempts 3 within a timeout of 1s). spec.http[1].retries.attempts raised 1 -> 2 under a
// perTryTimeout of 9s: 27.075s > 20s, admitted before. reviews' VirtualService makes one try
// (attempts 0) so that the chain is the ratings hop's.
func TestDecideMeshAltTriesIstio(t *testing.T) {
	vs := func(second string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
    timeout: 1s
    retries: {attempts: 3, perTryTimeout: 250ms}
` + second
	}
	route := func(attempts, perTry string) string {
		return `  - route: [{destination: {host: ratings}}]
    retries: {attempts: ` + attempts + `, perTryTimeout: ` + perTry + `}
`
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
	const over = "productpage 27.075s -> reviews 27.075s -> ratings ? = 27.075s > maxTimeToAnswer 20s"
	lowered := func(from, over string) MeshDecision {
		return MeshDecision{Allowed: true,
			Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[1].retries.attempts: " + from + " -> 1 (" + over + ")"},
			Patch: []jsonpatch.Operation{
				{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"retrycap.dev/rewritten-from": "spec.http[1].retries.attempts: " + from}},
				{Operation: "replace", Path: "/spec/http/1/retries/attempts", Value: float64(1)},
			}}
	}
	for _, tc := range []struct {
		name        string
		policies    []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{
			name: "Reject: spec.http[1] raised", policies: policy(v1alpha1.EnforcementReject),
			object: vs(route("2", "9s")), old: vs(route("1", "9s")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1].retries.attempts: 1 -> 2 (a route other than the counted one: the time takes its tries too) makes " +
				over + "; VirtualService bookinfo/ratings may keep attempts: 1"},
		},
		{
			name: "Rewrite: lowered to the most that fits", policies: policy(v1alpha1.EnforcementRewrite),
			object: vs(route("2", "9s")), old: vs(route("1", "9s")),
			want: lowered("2", over),
		},
		{
			// 3 x 5s = 15.075s.
			name: "raised within the maximum: admitted", policies: policy(v1alpha1.EnforcementReject),
			object: vs(route("2", "5s")), old: vs(route("1", "5s")),
			want: MeshDecision{Allowed: true},
		},
		{
			// A route new to the VirtualService is judged against its fewest tries (attempts 0).
			name: "Reject: a new http entry with retries and a long per-try timeout", policies: policy(v1alpha1.EnforcementReject),
			object: vs(route("2", "9s")), old: vs(""),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1].retries.attempts: unset (a new route) -> 2 (a route other than the counted one: the time takes its tries too) makes " +
				over + "; VirtualService bookinfo/ratings may keep attempts: 1"},
		},
		{
			name: "Rewrite: a new http entry lowered", policies: policy(v1alpha1.EnforcementRewrite),
			object: vs(route("2", "9s")), old: vs(""),
			want: lowered("2", over),
		},
		{
			// 4 x 9s + 175ms = 36.175s: attempts 1 (2 x 9s + 25ms = 18.025s) fits, attempts 2 does not.
			name: "Rewrite: a new entry of attempts 3 lowered to 1", policies: policy(v1alpha1.EnforcementRewrite),
			object: vs(route("3", "9s")), old: vs(""),
			want: lowered("3", "productpage 36.175s -> reviews 36.175s -> ratings ? = 36.175s > maxTimeToAnswer 20s"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := []string{altIstioNS, reviews}
			if tc.old != "" {
				cluster = append(cluster, tc.old)
			}
			expectMeshDecision(t, decideOn(t, cluster, tc.policies, tc.object, tc.old), tc.want)
		})
	}
}
