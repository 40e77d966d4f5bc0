package mesh

import (
	"strings"
	"testing"
)

// kumaService is Service kuma-demo/redis with one port of appProtocol proto.
func kumaService(proto string) string {
	return "\napiVersion: v1\nkind: Service\nmetadata: {name: redis, namespace: kuma-demo}\nspec:\n  ports:\n  - {name: p, port: 6379, appProtocol: " + proto + "}"
}

// meshRetryIn is a MeshRetry in namespace ns with a top-level targetRef of kind top.
func meshRetryIn(name, ns, top, to, dflt string) string {
	return "\napiVersion: kuma.io/v1alpha1\nkind: MeshRetry\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n  targetRef: {kind: " + top + "}\n  to:\n  - targetRef: " + to + "\n    default: " + dflt
}

// TestKumaMergeAsKumaDoes checks the Kuma layer against kumahq/kuma at
// 348b6528bc234b3c4bd7f22ad7c5bf950d6149fc:
//   - pkg/plugins/policies/core/rules/outbound/resourcerules.go:205-225 (buildRules) merges every
//     to[] item covering a MeshService with merge.Entries (merge/merge.go:62-88, RFC 7396 merge
//     patches) in the order of outbound/sort.go:13-21: top-level targetRef kind
//     (api/common/v1alpha1/targetref.go:25-32), policy role (system < producer < consumer,
//     api/mesh/v1alpha1/dataplane_helpers.go:160-169; pkg/core/resources/labels/compute.go:224-283
//     ComputePolicyRole), to[] kind (Mesh before MeshService), then name descending
//     (sort/sort.go:32-34): the last item setting numRetries decides, lower or higher;
//   - pkg/plugins/policies/meshretry/plugin/xds/configurer.go:37-48 (GetRouteRetryConfig): the
//     http conf on an http route, the grpc conf on a grpc one, nothing for http2 or tcp; :80-83
//     numRetries 0 configures no retry;
//   - pkg/defaults/mesh/mesh.go:70-106: mesh-retry-all-<mesh> is created with every new Mesh,
//     whatever other MeshRetries exist.
//
// Before: the largest item counted (6 where a MeshService item lowers the default to 1 or 2
// tries), the larger of http and grpc on any port (8 on an http port whose http conf gives 2),
// http2 counted (Kuma: no retry).
func TestKumaMergeAsKumaDoes(t *testing.T) {
	cases := []struct {
		name string
		docs []string
		want string
	}{
		{name: "a producer MeshRetry lowers the default", docs: []string{kumaService("http"),
			meshRetryIn("redis-retry", "kuma-demo", "Mesh", "{kind: MeshService, labels: {kuma.io/display-name: redis}}", "{http: {numRetries: 1}}")},
			want: "Kuma 2 (Kuma MeshRetry kuma-demo/redis-retry numRetries 1) at MeshRetry kuma-demo/redis-retry spec.to[0].default.http.numRetries"},
		{name: "a MeshService item with numRetries 0 turns retries off", docs: []string{kumaService("http"),
			meshRetryIn("redis-off", "kuma-system", "Mesh", "{kind: MeshService, name: redis, namespace: kuma-demo}", "{http: {numRetries: 0}}")},
			want: "Kuma 1 (Kuma MeshRetry kuma-system/redis-off numRetries 0) at MeshRetry kuma-system/redis-off spec.to[0].default.http.numRetries"},
		{name: "a MeshService item raises the default", docs: []string{kumaService("http"),
			meshRetryIn("redis-more", "kuma-system", "Mesh", "{kind: MeshService, name: redis, namespace: kuma-demo}", "{http: {numRetries: 8}}")},
			want: "Kuma 9 (Kuma MeshRetry kuma-system/redis-more numRetries 8) at MeshRetry kuma-system/redis-more spec.to[0].default.http.numRetries"},
		{name: "an http port reads the http conf", docs: []string{kumaService("http"),
			meshRetryIn("mesh-retry-all-default", "kuma-system", "Mesh", "{kind: Mesh}", "{http: {numRetries: 1}, grpc: {numRetries: 7}}")},
			want: "Kuma 2 (Kuma MeshRetry kuma-system/mesh-retry-all-default numRetries 1) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "a grpc port reads the grpc conf", docs: []string{kumaService("grpc"),
			meshRetryIn("mesh-retry-all-default", "kuma-system", "Mesh", "{kind: Mesh}", "{http: {numRetries: 1}, grpc: {numRetries: 7}}")},
			want: "Kuma 8 (Kuma MeshRetry kuma-system/mesh-retry-all-default numRetries 7) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.grpc.numRetries"},
		{name: "an http2 port is not retried", docs: []string{kumaService("http2")},
			want: "Kuma 1 (Kuma does not retry http2 port 6379 (p) of Service kuma-demo/redis (MeshRetry configures http and grpc routes only))"},
		{name: "a Dataplane-scoped item may decide: counted as the upper bound", docs: []string{kumaService("http"),
			meshRetryIn("some", "kuma-system", "Dataplane", "{kind: Mesh}", "{http: {numRetries: 9}}")},
			want: "Kuma 10 (Kuma MeshRetry kuma-system/some numRetries 9) at MeshRetry kuma-system/some spec.to[0].default.http.numRetries"},
		{name: "a Dataplane-scoped lowering may not apply to this caller: the default counts", docs: []string{kumaService("http"),
			meshRetryIn("some", "kuma-system", "Dataplane", "{kind: Mesh}", "{http: {numRetries: 0}}")},
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "a certain block without numRetries beside an uncertain 0: Envoy's 1 retry counts", docs: []string{kumaService("http"),
			"\napiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {skipCreatingInitialPolicies: [MeshRetry]}",
			meshRetryIn("all", "kuma-system", "Mesh", "{kind: Mesh}", "{http: {}}"),
			meshRetryIn("some", "kuma-system", "Dataplane", "{kind: Mesh}", "{http: {numRetries: 0}}")},
			want: "Kuma 2 (Kuma MeshRetry kuma-system/all no numRetries: Envoy's 1 retry) at MeshRetry kuma-system/all spec.to[0].default.http.numRetries"},
		{name: "only an uncertain 0: no retry either way", docs: []string{kumaService("http"),
			"\napiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {skipCreatingInitialPolicies: [MeshRetry]}",
			meshRetryIn("some", "kuma-system", "Dataplane", "{kind: Mesh}", "{http: {numRetries: 0}}")},
			want: "Kuma 1 (Kuma MeshRetry kuma-system/some numRetries 0) at MeshRetry kuma-system/some spec.to[0].default.http.numRetries"},
		{name: "a MeshService item for the port called (sectionName) decides", docs: []string{kumaService("http"),
			meshRetryIn("redis-p", "kuma-system", "Mesh", "{kind: MeshService, name: redis, namespace: kuma-demo, sectionName: p}", "{http: {numRetries: 1}}")},
			want: "Kuma 2 (Kuma MeshRetry kuma-system/redis-p numRetries 1) at MeshRetry kuma-system/redis-p spec.to[0].default.http.numRetries"},
		{name: "a MeshService item for another port does not lower this one", docs: []string{kumaService("http"),
			meshRetryIn("redis-q", "kuma-system", "Mesh", "{kind: MeshService, name: redis, namespace: kuma-demo, sectionName: q}", "{http: {numRetries: 0}}")},
			want: "Kuma 6 (Kuma default MeshRetry mesh-retry-all-default (5 retries), assumed: Mesh default is in the input and no MeshRetry mesh-retry-all-default is (Kuma creates it beside the others)) at MeshRetry kuma-system/mesh-retry-all-default spec.to[0].default.http.numRetries"},
		{name: "two system MeshRetries to Mesh: the name first in order decides", docs: []string{kumaService("http"),
			meshRetryIn("a-retry", "kuma-system", "Mesh", "{kind: Mesh}", "{http: {numRetries: 2}}"),
			meshRetryIn("z-retry", "kuma-system", "Mesh", "{kind: Mesh}", "{http: {numRetries: 4}}")},
			want: "Kuma 3 (Kuma MeshRetry kuma-system/a-retry numRetries 2) at MeshRetry kuma-system/a-retry spec.to[0].default.http.numRetries"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := set(t, Options{}, strings.Join(append([]string{nsKuma, kumaMeshDefault}, c.docs...), "\n---\n"))
			e := s.EdgePort(caller("kuma-demo"), "redis", 6379)
			var got []string
			for _, l := range e.Layers {
				g := string(l.Kind) + " " + l.String()
				if l.Object != "" {
					g += " at " + l.Object + " " + l.FieldPath
				}
				got = append(got, g)
			}
			if strings.Join(got, "; ") != c.want {
				t.Fatalf("layers %q, want %q", strings.Join(got, "; "), c.want)
			}
		})
	}
}
