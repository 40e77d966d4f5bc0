package webhook

import (
	"encoding/json"
	"testing"

	"strconv"
	"strings"

	gomodjsonpatch "gomodules.xyz/jsonpatch/v2"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/mesh"
)

// twoRoutes is a VirtualService for ratings with two routes, both retries.attempts: 3 (a
// prefix route and the default): the mesh counts the edge's worst route.
const twoRoutes = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /v2}}]
    route: [{destination: {host: ratings}}]
    retries: {attempts: 3}
  - route: [{destination: {host: ratings}}]
    retries: {attempts: 3}
`

// TestDecideMeshSeveralRoutes: the gate lowered only the field it named. With two routes to the
// same callee, Reject said "even attempts: 0 does not fit: lower the callers' attempts" (2 on
// both fits) and Rewrite set http[0] to 0 and left http[1] alone, "rewritten as far as it goes".
func TestDecideMeshSeveralRoutes(t *testing.T) {
	istioNS := "apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {istio-injection: enabled}}"
	decide := func(t *testing.T, mode v1alpha1.Enforcement, object []byte) MeshDecision {
		set := mesh.NewSet(mesh.Options{})
		if _, err := set.AddManifest([]byte(istioNS)); err != nil {
			t.Fatal(err)
		}
		return DecideMesh(MeshInput{Policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, mode)}, Workloads: bookinfoChain(), Set: set, Object: object})
	}
	t.Run("Reject names what fits on both routes", func(t *testing.T) {
		expectMeshDecision(t, decide(t, v1alpha1.EnforcementReject, jsonOf(t, twoRoutes)), MeshDecision{
			Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 makes " +
				"productpage -x3-> reviews -x4-> ratings = 12 > cap 10; VirtualService bookinfo/ratings may keep attempts: 2"})
	})
	t.Run("Rewrite lowers both routes to what fits, and the result passes again unchanged", func(t *testing.T) {
		obj := jsonOf(t, twoRoutes)
		d := decide(t, v1alpha1.EnforcementRewrite, obj)
		expectMeshDecision(t, d, MeshDecision{Allowed: true,
			Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[0].retries.attempts: 3 -> 2, " +
				"spec.http[1].retries.attempts: 3 -> 2 (productpage -x3-> reviews -x4-> ratings = 12 > cap 10)"},
			Patch: []gomodjsonpatch.JsonPatchOperation{
				{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{"retrycap.dev/rewritten-from": "spec.http[0].retries.attempts: 3; spec.http[1].retries.attempts: 3"}},
				{Operation: "replace", Path: "/spec/http/0/retries/attempts", Value: float64(2)},
				{Operation: "replace", Path: "/spec/http/1/retries/attempts", Value: float64(2)},
			}})
		// The object with the patch applied is admitted as it is.
		stored := applyAddReplace(t, obj, d.Patch)
		expectMeshDecision(t, decide(t, v1alpha1.EnforcementRewrite, stored), MeshDecision{Allowed: true})
	})
}

// applyAddReplace applies a patch of add and replace operations on object members and array
// elements (what the mesh gate's rewrites hold) to doc, RFC 6901 pointers unescaped.
func applyAddReplace(t *testing.T, doc []byte, ops []gomodjsonpatch.JsonPatchOperation) []byte {
	t.Helper()
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Operation != "add" && op.Operation != "replace" {
			t.Fatalf("unexpected operation %s %s", op.Operation, op.Path)
		}
		toks := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		cur := root
		for i, tok := range toks {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			last := i == len(toks)-1
			switch c := cur.(type) {
			case map[string]any:
				if last {
					if _, ok := c[tok]; !ok && op.Operation == "replace" {
						t.Fatalf("replace of missing %s", op.Path)
					}
					c[tok] = op.Value
				}
				cur = c[tok]
			case []any:
				n, err := strconv.Atoi(tok)
				if err != nil || n >= len(c) {
					t.Fatalf("bad index in %s", op.Path)
				}
				if last {
					c[n] = op.Value
				}
				cur = c[n]
			default:
				t.Fatalf("%s: no such path", op.Path)
			}
		}
	}
	out, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
