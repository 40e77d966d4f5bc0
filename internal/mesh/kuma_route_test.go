package mesh

import (
	"strings"
	"testing"
)

// mesx20: a MeshRetry item naming a MeshHTTPRoute covers the calls to the route's callees only
// (its to[] items: kumahq/kuma 348b6528 pkg/plugins/policies/meshretry/plugin/v1alpha1/plugin.go
// applyToRealResource merges the item over the service's conf on the routes of that callee's
// outbound listener). The MeshHTTPRoute is hand-written, modelled on kumahq/kuma 348b6528
// pkg/plugins/policies/meshhttproute/api/v1alpha1 (its to[].targetRef and rules; not copied).
// Before, the item counted for every callee of the mesh: web 7 tries where Kuma makes 3.
func TestKumaRouteItemOnlyItsCallee(t *testing.T) {
	const mr = `
apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: mr-1, namespace: kuma-demo}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: Mesh}
    default: {http: {numRetries: 2}}
  - targetRef: {kind: MeshHTTPRoute, labels: {kuma.io/display-name: test-route}}
    default: {http: {numRetries: 6}}`
	route := func(ns, labels, to string) string {
		return "\napiVersion: kuma.io/v1alpha1\nkind: MeshHTTPRoute\nmetadata: {name: test-route, namespace: " + ns + labels + "}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: " + to +
			"\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /v2}}]\n      default: {backendRefs: [{kind: MeshService, name: redis-v2}]}"
	}
	const (
		onRoute  = "Kuma 7 (Kuma MeshRetry kuma-demo/mr-1 numRetries 6 for MeshHTTPRoute kuma-demo/test-route, whose rules may not take every call: counted as if it covers this call, an upper bound) at MeshRetry kuma-demo/mr-1 spec.to[1].default.http.numRetries"
		notIn    = "Kuma 7 (Kuma MeshRetry kuma-demo/mr-1 numRetries 6 for MeshHTTPRoute test-route, which is not in the input: counted as if it covers this call, an upper bound) at MeshRetry kuma-demo/mr-1 spec.to[1].default.http.numRetries"
		meshItem = "Kuma 3 (Kuma MeshRetry kuma-demo/mr-1 numRetries 2) at MeshRetry kuma-demo/mr-1 spec.to[0].default.http.numRetries"
	)
	byName := route("kuma-demo", "", "{kind: MeshService, name: redis}")
	for _, c := range []struct {
		name, docs, callee, want string
	}{
		{"its callee", byName, "redis", onRoute},
		{"another callee", byName, "web", meshItem},
		{"another callee, route not in the input", "", "web", notIn},
		{"its callee by labels (Kuma's v3 API)", route("kuma-demo", "", "{kind: MeshService, labels: {kuma.io/display-name: redis, k8s.kuma.io/namespace: kuma-demo}}"), "redis", onRoute},
		{"a route naming redis of another namespace", route("kuma-demo", "", "{kind: MeshService, name: redis, namespace: other}"), "redis", meshItem},
		{"a route of another mesh is not it", route("kuma-demo", ", labels: {kuma.io/mesh: other}", "{kind: MeshService, name: redis}"), "web", notIn},
		{"a route to a MeshExternalService", route("kuma-demo", "", "{kind: MeshExternalService, name: httpbin}") + "\n---\n" + mesDoc("httpbin", "http"), "httpbin.extsvc.mesh.local",
			onRoute},
		{"a route to a MeshExternalService, another host", route("kuma-demo", "", "{kind: MeshExternalService, name: httpbin}") + "\n---\n" + mesDoc("other", "http"), "other.extsvc.mesh.local", meshItem},
	} {
		t.Run(c.name, func(t *testing.T) {
			docs := nsKuma + "\n---\n" + mr
			if c.docs != "" {
				docs += "\n---\n" + c.docs
			}
			s := set(t, Options{}, docs)
			var got []string
			for _, l := range s.Edge(caller("kuma-demo"), c.callee).Layers {
				got = append(got, string(l.Kind)+" "+l.String()+" at "+l.Object+" "+l.FieldPath)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}

// mesx20: the policy roles of Kuma's v3 API (kumahq/kuma 348b6528
// pkg/core/resources/labels/compute.go ComputePolicyRole: an item naming one MeshService or one
// MeshHTTPRoute by its display name, in the policy's namespace or none, is a producer's). A
// MeshRetry of kuma-demo naming its own namespace's route is a producer: it selects callers of
// every namespace (before, taken for a consumer: team-b's call had no layer where Kuma makes 7).
// A MeshHTTPRoute of team-a naming kuma-demo's redis is a consumer: its routes are on team-a's
// proxies only, so the item naming it covers no call of team-b's.
func TestKumaRouteRoles(t *testing.T) {
	ns := func(name string) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + ", labels: {kuma.io/sidecar-injection: enabled}}"
	}
	const producerRetry = `apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: mr-route, namespace: kuma-demo}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshHTTPRoute, labels: {kuma.io/display-name: test-route}}
    default: {http: {numRetries: 6}}`
	const producerRoute = `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: test-route, namespace: kuma-demo}
spec:
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: redis, k8s.kuma.io/namespace: kuma-demo}}
    rules: [{matches: [{path: {type: PathPrefix, value: /v2}}], default: {}}]`
	const systemRetry = `apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata: {name: mr-route, namespace: kuma-system}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshHTTPRoute, labels: {kuma.io/display-name: test-route, k8s.kuma.io/namespace: team-a}}
    default: {http: {numRetries: 6}}`
	const consumerRoute = `apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata: {name: test-route, namespace: team-a}
spec:
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: redis, k8s.kuma.io/namespace: kuma-demo}}
    rules: [{matches: [{path: {type: PathPrefix, value: /v2}}], default: {}}]`
	for _, c := range []struct {
		name, docs, caller, want string
	}{
		{"a producer MeshRetry naming its route, a caller elsewhere", producerRetry + "\n---\n" + producerRoute, "team-b",
			"Kuma 7 (Kuma MeshRetry kuma-demo/mr-route numRetries 6 for MeshHTTPRoute kuma-demo/test-route, whose rules may not take every call: counted as if it covers this call, an upper bound) at MeshRetry kuma-demo/mr-route spec.to[0].default.http.numRetries"},
		{"a consumer route, a caller of its namespace", systemRetry + "\n---\n" + consumerRoute, "team-a",
			"Kuma 7 (Kuma MeshRetry kuma-system/mr-route numRetries 6 for MeshHTTPRoute team-a/test-route, whose rules may not take every call: counted as if it covers this call, an upper bound) at MeshRetry kuma-system/mr-route spec.to[0].default.http.numRetries"},
		{"a consumer route, a caller elsewhere", systemRetry + "\n---\n" + consumerRoute, "team-b", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join([]string{ns("kuma-demo"), ns("team-a"), ns("team-b"), c.docs}, "\n---\n"))
			var got []string
			for _, l := range s.Edge(caller(c.caller), "redis.kuma-demo").Layers {
				got = append(got, string(l.Kind)+" "+l.String()+" at "+l.Object+" "+l.FieldPath)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q\nwant %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}
