package webhook

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// kumaExtMesh is mesx20's Kuma input (internal/meshwatch/agree/kumaext_envtest_test.go): Mesh
// kext, namespace kext in it, no MeshRetry (Kuma's default mesh-retry-all-kext, 5 retries).
const kumaExtMesh = `apiVersion: v1
kind: Namespace
metadata:
  name: kext
  labels: {kuma.io/sidecar-injection: enabled, kuma.io/mesh: kext}
---
apiVersion: kuma.io/v1alpha1
kind: Mesh
metadata: {name: kext}
`

// kumaExtService is the MeshExternalService kuma-system/httpbin of the protocol given.
func kumaExtService(protocol string) string {
	return `apiVersion: kuma.io/v1alpha1
kind: MeshExternalService
metadata:
  name: httpbin
  namespace: kuma-system
  labels: {kuma.io/mesh: kext}
spec:
  match: {type: HostnameGenerator, port: 80, protocol: ` + protocol + `}
  endpoints: [{address: httpbin.org, port: 80}]
`
}

// kumaRouteRetry is a MeshRetry item naming the MeshHTTPRoute kext/web-route: 9 retries on the
// route's requests, the default's 5 elsewhere.
const kumaRouteRetry = `apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata:
  name: route-retry
  namespace: kext
  labels: {kuma.io/mesh: kext}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshHTTPRoute, labels: {kuma.io/display-name: web-route, k8s.kuma.io/namespace: kext}}
    default:
      http: {numRetries: 9}
`

// kumaWebRoute is the MeshHTTPRoute kext/web-route whose one callee is callee.
func kumaWebRoute(callee string) string {
	return `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata:
  name: web-route
  namespace: kext
  labels: {kuma.io/mesh: kext}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: ` + callee + `, k8s.kuma.io/namespace: kext}}
    rules:
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      default: {backendRefs: [{kind: MeshService, labels: {kuma.io/display-name: api-v2}}]}
`
}

// kumaExtSet is a Set of the documents of manifests.
func kumaExtSet(t *testing.T, manifests ...string) *mesh.Set {
	t.Helper()
	set := mesh.NewSet(mesh.Options{})
	for _, m := range manifests {
		for _, doc := range strings.Split(m, "---\n") {
			if _, err := set.AddManifest([]byte(doc)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return set
}

// kumaExtChain is web -> api -> httpbin.extsvc.mesh.local, each at 1 attempt.
func kumaExtChain() []*workload.Parsed {
	var out []*workload.Parsed
	for _, d := range []struct{ name, upstreams string }{{"api", "httpbin.extsvc.mesh.local"}, {"web", "api=1"}} {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kext", Name: d.name}}
		dep.Spec.Template.Annotations = map[string]string{annotations.Service: d.name, annotations.Upstreams: d.upstreams}
		w, _ := workload.FromObject(dep)
		out = append(out, workload.Parse(w))
	}
	return out
}

// TestDecideMeshKumaExternalService: a MeshExternalService has no retry field, yet its
// spec.match.protocol decides whether Kuma's MeshRetry retries its host's calls (tcp: none;
// http: the default's 5 retries). Before, DecideMesh judged only the layers an object's own
// fields set: tcp -> http, raising web -x6-> api -x1-> httpbin from 6 to 36 over cap 10, was
// admitted under Reject and Rewrite alike.
func TestDecideMeshKumaExternalService(t *testing.T) {
	policy := func(cap int32, e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
		return &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "kext", Name: "kext"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: e}}
	}
	const over = "RetryPolicy kext/kext: MeshExternalService kuma-system/httpbin spec.match.protocol: tcp -> http makes " +
		"web -x6-> api -x6-> httpbin.extsvc.mesh.local = 36 > cap 10; " +
		"lower MeshRetry kuma-system/mesh-retry-all-kext spec.to[0].default.http.numRetries (6 tries), or raise RetryPolicy kext/kext spec.maxAmplification: 10"
	for _, tc := range []struct {
		name        string
		policy      *v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		{name: "Reject: tcp -> http refused, naming the object, the field and the layer", policy: policy(10, v1alpha1.EnforcementReject),
			object: kumaExtService("http"), old: kumaExtService("tcp"), want: MeshDecision{Message: over}},
		{name: "Rewrite: refused, a protocol is not lowered", policy: policy(10, v1alpha1.EnforcementRewrite),
			object: kumaExtService("http"), old: kumaExtService("tcp"),
			want: MeshDecision{Message: over + " (refused although enforcement is Rewrite: a MeshExternalService has no retry field to lower; lower the MeshRetry's numRetries for the call)"}},
		{name: "Audit: admitted with the warning", policy: policy(10, v1alpha1.EnforcementAudit),
			object: kumaExtService("http"), old: kumaExtService("tcp"), want: MeshDecision{Allowed: true, Warnings: []string{over + " (admitted: enforcement is Audit)"}}},
		{name: "within the cap", policy: policy(36, v1alpha1.EnforcementReject),
			object: kumaExtService("http"), old: kumaExtService("tcp"), want: MeshDecision{Allowed: true}},
		{name: "http -> tcp: a lowering passes", policy: policy(10, v1alpha1.EnforcementReject),
			object: kumaExtService("tcp"), old: kumaExtService("http"), want: MeshDecision{Allowed: true}},
		{name: "created tcp: lower than the upper bound counted without it", policy: policy(10, v1alpha1.EnforcementReject),
			object: kumaExtService("tcp"), want: MeshDecision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := kumaExtSet(t, kumaExtMesh)
			in := MeshInput{Policies: []*v1alpha1.RetryPolicy{tc.policy}, Workloads: kumaExtChain(), Set: set, Object: jsonOf(t, tc.object)}
			if tc.old != "" {
				in.Old = jsonOf(t, tc.old)
				if _, err := set.AddJSON(in.Old); err != nil {
					t.Fatal(err)
				}
			}
			expectMeshDecision(t, DecideMesh(in), tc.want)
		})
	}
}

// TestDecideMeshKumaHTTPRoute: a MeshRetry item naming a MeshHTTPRoute applies to the route's
// callees only. A route changed to name api brings web -> api under the item's 9 retries:
// web -x10-> api -x1-> httpbin (tcp) = 10 > cap 6. Before, admitted: the route has no retry
// field, and the layer is the MeshRetry's.
func TestDecideMeshKumaHTTPRoute(t *testing.T) {
	policy := func(e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
		return &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "kext", Name: "kext"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 6, Enforcement: e}}
	}
	const over = "RetryPolicy kext/kext: MeshHTTPRoute kext/web-route spec.to[0].targetRef: MeshService api makes web -x10-> api -x1-> httpbin.extsvc.mesh.local = 10 > cap 6; " +
		"lower MeshRetry kext/route-retry spec.to[0].default.http.numRetries (10 tries), or raise RetryPolicy kext/kext spec.maxAmplification: 6"
	for _, tc := range []struct {
		name        string
		policy      *v1alpha1.RetryPolicy
		object, old string
		want        MeshDecision
	}{
		// Without the route the item counts on every callee (an upper bound, mesx20): creating
		// it raises nothing the count did not already hold.
		{name: "a route created for api: no raise over the upper bound counted without it", policy: policy(v1alpha1.EnforcementReject), object: kumaWebRoute("api"), want: MeshDecision{Allowed: true}},
		{name: "Reject: a route changed from another callee to api", policy: policy(v1alpha1.EnforcementReject), object: kumaWebRoute("api"), old: kumaWebRoute("other"),
			want: MeshDecision{Message: over}},
		{name: "Rewrite: refused", policy: policy(v1alpha1.EnforcementRewrite), object: kumaWebRoute("api"), old: kumaWebRoute("other"),
			want: MeshDecision{Message: over + " (refused although enforcement is Rewrite: a MeshHTTPRoute has no retry field to lower; lower the MeshRetry's numRetries for the call)"}},
		{name: "a route for another callee: a lowering from the upper bound", policy: policy(v1alpha1.EnforcementReject), object: kumaWebRoute("other"), want: MeshDecision{Allowed: true}},
		{name: "Audit: admitted with the warning", policy: policy(v1alpha1.EnforcementAudit), object: kumaWebRoute("api"), old: kumaWebRoute("other"),
			want: MeshDecision{Allowed: true, Warnings: []string{over + " (admitted: enforcement is Audit)"}}},
		{name: "api -> another callee: a lowering passes", policy: policy(v1alpha1.EnforcementReject), object: kumaWebRoute("other"), old: kumaWebRoute("api"),
			want: MeshDecision{Allowed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := kumaExtSet(t, kumaExtMesh, kumaExtService("tcp"), kumaRouteRetry)
			in := MeshInput{Policies: []*v1alpha1.RetryPolicy{tc.policy}, Workloads: kumaExtChain(), Set: set, Object: jsonOf(t, tc.object)}
			if tc.old != "" {
				in.Old = jsonOf(t, tc.old)
				if _, err := set.AddJSON(in.Old); err != nil {
					t.Fatal(err)
				}
			}
			expectMeshDecision(t, DecideMesh(in), tc.want)
		})
	}
}
