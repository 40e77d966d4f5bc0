package webhook

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// linkerdRatingsRoute is an HTTPRoute of Service ratings (parentRef without port) with the
// annotations given ("" for none) and one rule of the match given.
func linkerdRatingsRoute(name, anns, match string) string {
	return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ` + name + `, namespace: bookinfo, annotations: {` + anns + `}}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - matches: [{path: {value: ` + match + `}}]
    backendRefs: [{name: ratings}]
`
}

// TestDecideMeshLinkerdRoutes: under Linkerd the time model times a call over every HTTPRoute of
// the callee's Service (mesh.Set.CallHops), each with its own retry and timeout annotations, or
// the Service's timeouts where it sets none; the edge counts the route of the most tries. A
// timeout raised on another route, or on the Service such a route inherits it from, was admitted
// while the status said over (docs/meshes.md listed it as not judged yet). ratings-fast counts (4 tries
// within a request timeout of 1s: 1s); ratings-rest makes 2 tries, each bounded by its response
// timeout: 1s -> 15s makes reviews -> ratings 2 x 15s + 25ms = 30.025s, and productpage over it
// (Linkerd's 1 try on reviews) the same.
func TestDecideMeshLinkerdRoutes(t *testing.T) {
	ns := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}`
	svc := func(anns string) string {
		return `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo, annotations: {` + anns + `}}
spec: {ports: [{name: http, port: 9080}]}`
	}
	fast := linkerdRatingsRoute("ratings-fast", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "3", timeout.linkerd.io/request: 1s`, "/fast")
	rest := func(anns string) string {
		return linkerdRatingsRoute("ratings-rest", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "1"`+anns, "/")
	}
	policy := func(e v1alpha1.Enforcement) []*v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute} // bounds no hop: the mesh's timeouts do
		return []*v1alpha1.RetryPolicy{p}
	}
	const restRaised = `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest metadata.annotations["timeout.linkerd.io/response"]: "1s" -> "15s" (per-try timeout 1s -> 15s) makes ` +
		"productpage 30.025s -> reviews 30.025s -> ratings ? = 30.025s > maxTimeToAnswer 20s"
	// The Service's timeouts raised, which ratings-rest (no annotations: Linkerd's 1 try)
	// inherits: 30s.
	const svcRaised = `RetryPolicy bookinfo/bookinfo: Service bookinfo/ratings metadata.annotations["timeout.linkerd.io/response"]: "1s" -> "30s" (HTTPRoute bookinfo/ratings-rest: per-try timeout 1s -> 30s) makes ` +
		"productpage 30s -> reviews 30s -> ratings ? = 30s > maxTimeToAnswer 20s"
	bare := linkerdRatingsRoute("ratings-rest", "", "/")
	for _, tc := range []struct {
		name        string
		cluster     []string
		policies    []*v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{
			name: "Reject: another route's response timeout raised", cluster: []string{ns, svc(""), fast, rest(", timeout.linkerd.io/response: 1s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest(", timeout.linkerd.io/response: 15s"), old: rest(", timeout.linkerd.io/response: 1s"),
			want: MeshDecision{Message: restRaised},
		},
		{
			name: "Audit: the same as a warning", cluster: []string{ns, svc(""), fast, rest(", timeout.linkerd.io/response: 1s")},
			policies: policy(v1alpha1.EnforcementAudit), object: rest(", timeout.linkerd.io/response: 15s"), old: rest(", timeout.linkerd.io/response: 1s"),
			want: MeshDecision{Allowed: true, Warnings: []string{restRaised + " (admitted: enforcement is Audit)"}},
		},
		{
			name: "Rewrite: refused, as a raised timeout always is", cluster: []string{ns, svc(""), fast, rest(", timeout.linkerd.io/response: 1s")},
			policies: policy(v1alpha1.EnforcementRewrite), object: rest(", timeout.linkerd.io/response: 15s"), old: rest(", timeout.linkerd.io/response: 1s"),
			want: MeshDecision{Message: restRaised + " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"},
		},
		{
			name: "raised within the maximum: 2 x 5s + 25ms = 10.025s, admitted", cluster: []string{ns, svc(""), fast, rest(", timeout.linkerd.io/response: 1s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest(", timeout.linkerd.io/response: 5s"), old: rest(", timeout.linkerd.io/response: 1s"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "lowered: admitted", cluster: []string{ns, svc(""), fast, rest(", timeout.linkerd.io/response: 15s")},
			policies: policy(v1alpha1.EnforcementReject), object: rest(", timeout.linkerd.io/response: 1s"), old: rest(", timeout.linkerd.io/response: 15s"),
			want: MeshDecision{Allowed: true},
		},
		{
			// The brief's first form: a route with no timeout (unbounded) given one is a
			// bound where there was none, a lowering.
			name: "no timeout -> 15s: admitted", cluster: []string{ns, svc(""), fast, rest("")},
			policies: policy(v1alpha1.EnforcementReject), object: rest(", timeout.linkerd.io/response: 15s"), old: rest(""),
			want: MeshDecision{Allowed: true},
		},
		{
			// Its own timeouts replace the Service's 1s (Linkerd takes them apart from the
			// retry): 15s where it inherited 1s.
			name: "a route's own timeout replacing the Service's shorter one", cluster: []string{ns, svc("timeout.linkerd.io/response: 1s"), fast, rest("")},
			policies: policy(v1alpha1.EnforcementReject), object: rest(", timeout.linkerd.io/response: 15s"), old: rest(""),
			want: MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings-rest metadata.annotations["timeout.linkerd.io/response"]: unset -> "15s" (per-try timeout 1s -> 15s) makes ` +
				"productpage 30.025s -> reviews 30.025s -> ratings ? = 30.025s > maxTimeToAnswer 20s"},
		},
		{
			name: "the Service's timeout a route inherits, raised", cluster: []string{ns, svc("timeout.linkerd.io/response: 1s"), fast, bare},
			policies: policy(v1alpha1.EnforcementReject), object: svc("timeout.linkerd.io/response: 30s"), old: svc("timeout.linkerd.io/response: 1s"),
			want: MeshDecision{Message: svcRaised},
		},
		{
			name: "the Service's timeout raised where every route sets its own: admitted", cluster: []string{ns, svc("timeout.linkerd.io/response: 1s"), fast, rest(", timeout.linkerd.io/response: 1s")},
			policies: policy(v1alpha1.EnforcementReject), object: svc("timeout.linkerd.io/response: 30s"), old: svc("timeout.linkerd.io/response: 1s"),
			want: MeshDecision{Allowed: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			for _, o := range tc.cluster {
				if _, err := set.AddManifest([]byte(o)); err != nil {
					t.Fatal(err)
				}
			}
			in := MeshInput{Policies: tc.policies, Workloads: bookinfoChain(), Set: set, Object: jsonOf(t, tc.object)}
			if tc.old != "" {
				in.Old = jsonOf(t, tc.old)
			}
			expectMeshDecision(t, DecideMesh(in), tc.want)
		})
	}
}

// TestDecideMeshMembershipLinkerdInherited: a Service without retry annotations reaches the mesh
// gate through the membership webhook only (its match condition: a changed key of
// mesh.ServiceKeys, timeout.linkerd.io/* among them); its timeouts bound a route that sets none
// (ratings-rest: Linkerd's 1 try), whose time changedEdges did not see (the edge counts
// ratings-fast's 4 tries).
func TestDecideMeshMembershipLinkerdInherited(t *testing.T) {
	ns := namespaceYAML(`, annotations: {linkerd.io/inject: enabled}`)
	svc := func(response string) string {
		return serviceYAML("ratings", `, annotations: {timeout.linkerd.io/response: `+response+`}`)
	}
	fast := linkerdRatingsRoute("ratings-fast", `retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "3", timeout.linkerd.io/request: 1s`, "/fast")
	bare := linkerdRatingsRoute("ratings-rest", "", "/")
	p := timedMeshPolicy(100, v1alpha1.EnforcementReject, 20*time.Second)
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute}
	for _, tc := range []struct {
		name        string
		cluster     []string
		object, old string
		want        MeshDecision
	}{
		{
			name: "raised over the maximum: refused", cluster: []string{ns, svc("1s"), fast, bare}, object: svc("30s"), old: svc("1s"),
			want: MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: Service bookinfo/ratings metadata.annotations["timeout.linkerd.io/response"]: "1s" -> "30s" makes ` +
				"productpage 30s -> reviews 30s -> ratings ? = 30s > maxTimeToAnswer 20s"},
		},
		{
			name: "raised within it: admitted", cluster: []string{ns, svc("1s"), fast, bare}, object: svc("15s"), old: svc("1s"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "no route inherits it: admitted", cluster: []string{ns, svc("1s"), fast}, object: svc("30s"), old: svc("1s"),
			want: MeshDecision{Allowed: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			for _, y := range tc.cluster {
				if _, err := set.AddJSON(jsonOf(t, y)); err != nil {
					t.Fatal(err)
				}
			}
			in := MeshInput{Policies: []*v1alpha1.RetryPolicy{p}, Workloads: bookinfoChain(), Set: set, Object: jsonOf(t, tc.object), Old: jsonOf(t, tc.old)}
			expectMeshDecision(t, DecideMeshMembership(in, mesh.ServiceKeys()), tc.want)
		})
	}
}
