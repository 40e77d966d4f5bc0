package webhook

import (
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// twoCallers is alpha -> ratings (1 attempt of the application's) and beta -> ratings (5), two
// entrypoints nothing calls: one object's layer (Linkerd's Service ratings) sits on both edges,
// and on beta's no count of its tries fits a cap under 5.
func twoCallers() []*workload.Parsed {
	var out []*workload.Parsed
	for _, d := range []struct{ name, upstreams string }{{"alpha", "ratings=1"}, {"beta", "ratings=5"}, {"ratings", ""}} {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: d.name}}
		dep.Spec.Template.Annotations = map[string]string{}
		if d.upstreams != "" {
			dep.Spec.Template.Annotations[annotations.Upstreams] = d.upstreams
		}
		w, _ := workload.FromObject(dep)
		out = append(out, workload.Parse(w))
	}
	return out
}

// TestDecideMeshRewriteNeverEndsSilentlyOver: the mesh gate's Rewrite lowers only the incoming
// object. Linkerd's retry.linkerd.io/limit "4" on Service ratings makes alpha -x5-> ratings =
// 5 > cap 4 (limit 3 fits it) and beta -x25-> ratings = 25 > cap 4, which no limit fits (beta's
// own 5 attempts at 1 try).
//
//   - one policy (both entrypoints): Reject names beta's chain, which nothing fits; Rewrite
//     lowers the object as far as it goes (its retry annotations removed: 1 try, fewer than a
//     denial leaves, the stored object's or the mesh default's) and warns naming that chain, its
//     value and the cap. On main Reject offered "may keep limit 3" (denied again when sent:
//     beta -x20->), and Rewrite wrote limit 3 for alpha's chain and admitted it with no word of
//     beta's (20 > cap 4 stored): the keep was judged on the first edge's chains only;
//   - two policies, alpha's and beta's: Rewrite lowers for alpha's (to limit 3, the chain the
//     rewrite line names for beta's policy: beta -x20->), then beta's, which no count fits,
//     goes on to the floor with its warning, naming the field and chain as sent. On main the rounds
//     after the first dropped a verdict no count fits: limit 3 admitted, beta's policy at 20 >
//     cap 4 and never named.
func TestDecideMeshRewriteNeverEndsSilentlyOver(t *testing.T) {
	linkerdNS := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}`
	svc := `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "4"}}`
	set := mesh.NewSet(mesh.Options{})
	if _, err := set.AddManifest([]byte(linkerdNS)); err != nil {
		t.Fatal(err)
	}
	policy := func(name string, e v1alpha1.Enforcement, entry ...string) *v1alpha1.RetryPolicy {
		p := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: name},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 4, Enforcement: e}}
		for _, s := range entry {
			p.Spec.Entrypoints = append(p.Spec.Entrypoints, v1alpha1.Entrypoint{Service: s})
		}
		return p
	}
	const (
		field       = `Service bookinfo/ratings metadata.annotations["retry.linkerd.io/limit"]: "4" makes `
		farAsItGoes = " (admitted: enforcement is Rewrite; Service bookinfo/ratings is rewritten as far as it goes)"
		rewrote     = `rewrote Service bookinfo/ratings: metadata.annotations["retry.linkerd.io/http"]: "5xx" -> removed, metadata.annotations["retry.linkerd.io/limit"]: "4" -> removed`
	)
	// Beta's own 5 attempts are what is left once the Service gives 1 try: named, with the cap
	// (wgate19; it said "lower the callers' attempts").
	hopeless := func(policy string) string {
		return "beta -x25-> ratings = 25 > cap 4; even Service bookinfo/ratings retry.linkerd.io/limit: removed, with retry.linkerd.io/http, " +
			"retry.linkerd.io/grpc and retry.linkerd.io/timeout does not fit: lower Deployment bookinfo/beta retrycap.dev/upstreams ratings=5, " +
			"or raise RetryPolicy " + policy + " spec.maxAmplification: 4"
	}
	removed := []jsonpatch.JsonPatchOperation{
		{Operation: "remove", Path: "/metadata/annotations/retry.linkerd.io~1http"},
		{Operation: "remove", Path: "/metadata/annotations/retry.linkerd.io~1limit"},
		{Operation: "add", Path: "/metadata/annotations/retrycap.dev~1rewritten-from", Value: `metadata.annotations["retry.linkerd.io/http"]: "5xx"; metadata.annotations["retry.linkerd.io/limit"]: "4"`},
	}
	for _, tc := range []struct {
		name     string
		policies []*v1alpha1.RetryPolicy
		want     MeshDecision
	}{
		{"Reject: the chain nothing fits is named", []*v1alpha1.RetryPolicy{policy("bookinfo", v1alpha1.EnforcementReject)},
			MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: " + field + hopeless("bookinfo/bookinfo")}},
		{"Rewrite: as far as it goes, the chain still over named", []*v1alpha1.RetryPolicy{policy("bookinfo", v1alpha1.EnforcementRewrite)},
			MeshDecision{Allowed: true, Patch: removed, Warnings: []string{
				"RetryPolicy bookinfo/bookinfo " + rewrote + " (beta -x25-> ratings = 25 > cap 4)",
				"RetryPolicy bookinfo/bookinfo: " + field + hopeless("bookinfo/bookinfo") + farAsItGoes}}},
		{"Rewrite, two policies: the second's chain nothing fits is not dropped",
			[]*v1alpha1.RetryPolicy{policy("a", v1alpha1.EnforcementRewrite, "alpha"), policy("b", v1alpha1.EnforcementRewrite, "beta")},
			MeshDecision{Allowed: true, Patch: removed, Warnings: []string{
				"RetryPolicies bookinfo/a, bookinfo/b " + rewrote + " (alpha -x5-> ratings = 5 > cap 4; beta -x20-> ratings = 20 > cap 4)",
				"RetryPolicy bookinfo/b: " + field + hopeless("bookinfo/b") + farAsItGoes}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := MeshInput{Policies: tc.policies, Workloads: twoCallers(), Set: set, Object: jsonOf(t, svc)}
			expectMeshDecision(t, DecideMesh(in), tc.want)
		})
	}
}
