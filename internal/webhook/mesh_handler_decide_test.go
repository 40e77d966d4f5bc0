package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/meshwatch"
	"github.com/retrycap/retrycap/internal/workload"
)

// timedMeshPolicy is meshPolicy "bookinfo" with spec.maxTimeToAnswer maxT and a per-try timeout
// of 2s.
func timedMeshPolicy(cap int32, e v1alpha1.Enforcement, maxT time.Duration) *v1alpha1.RetryPolicy {
	p := meshPolicy("bookinfo", cap, e)
	p.Spec.MaxTimeToAnswer = &metav1.Duration{Duration: maxT}
	p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Second}
	return p
}

func meshPolicy(name string, cap int32, e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
	return &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: name},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: e, Entrypoints: []v1alpha1.Entrypoint{{Service: "productpage"}}}}
}

// bookinfoChain is productpage -> reviews -> ratings, one attempt each in the application.
func bookinfoChain() []*workload.Parsed {
	var out []*workload.Parsed
	for _, d := range []struct{ name, upstreams string }{{"productpage", "reviews=1"}, {"ratings", ""}, {"reviews", "ratings=1"}} {
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

func jsonOf(t *testing.T, y string) []byte {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func vsYAML(attempts string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - route: [{destination: {host: ratings}}]
    retries: {attempts: ` + attempts + `}
`
}

// gatewayRoute is a north-south HTTPRoute from Gateway bookinfo-gateway to productpage with the
// rule's retry given ("" for none).
func gatewayRoute(retry string) string {
	r := `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: bookinfo}
spec:
  parentRefs: [{name: bookinfo-gateway}]
  rules:
  - backendRefs: [{name: productpage, port: 9080}]
`
	if retry != "" {
		r += "    " + retry + "\n"
	}
	return r
}

// manyGatewayRules is gatewayRoute with n rules to productpage, each retry.attempts: 3.
func manyGatewayRules(n int) string {
	r := gatewayRoute("retry: {attempts: 3}")
	for range n - 1 {
		r += "  - backendRefs: [{name: productpage, port: 9080}]\n    retry: {attempts: 3}\n"
	}
	return r
}

// manyIngressRoutes is a VirtualService bound to ingress Gateway bookinfo-gateway with n http
// routes to productpage, each retries.attempts: 3.
func manyIngressRoutes(n int) string {
	v := `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: bookinfo}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http:
`
	for i := range n {
		v += fmt.Sprintf("  - match: [{uri: {prefix: /v%d/}}]\n    route: [{destination: {host: productpage}}]\n    retries: {attempts: 3}\n", i)
	}
	return v
}

// gammaRatings is a GAMMA HTTPRoute (parentRef Service ratings) with one rule's retry given.
func gammaRatings(retry string) string {
	return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings, port: 9080}]
  rules:
  - backendRefs: [{name: ratings, port: 9080}]
    ` + retry + `
`
}

// timedRetry is a route rule's 3 retries with timeouts.request d.
func timedRetry(d string) string {
	return "retry: {attempts: 3}\n    timeouts: {request: " + d + "}"
}

func TestDecideMesh(t *testing.T) {
	istioNS := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, labels: {istio-injection: enabled}}`
	ambientNS := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, labels: {istio.io/dataplane-mode: ambient, istio.io/use-waypoint: waypoint}}`
	linkerdNS := `apiVersion: v1
kind: Namespace
metadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}`
	svc := func(limit string) string {
		return `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "` + limit + `"}}`
	}
	reject10 := meshPolicy("bookinfo", 10, v1alpha1.EnforcementReject)
	// slowPolicy's own per-try timeout (1m) bounds no hop: the mesh's timeouts do.
	slowPolicy := timedMeshPolicy(100, "", 20*time.Second)
	slowPolicy.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: time.Minute}
	vsTimed := func(perTry string) string {
		return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - route: [{destination: {host: ratings}}]
    retries: {attempts: 2, perTryTimeout: ` + perTry + `}
`
	}
	linkerdTimed := func(response string) string {
		return `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "2", retry.linkerd.io/timeout: 1s, timeout.linkerd.io/response: ` + response + `}}`
	}
	for _, tc := range []struct {
		name     string
		cluster  []string // the Set's objects
		policies []*v1alpha1.RetryPolicy
		object   string
		old      string
		want     MeshDecision
	}{
		{
			name: "Reject: 3 retries on ratings make 3 x 4 = 12 > 10", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{reject10}, object: vsYAML("3"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 makes " +
				"productpage -x3-> reviews -x4-> ratings = 12 > cap 10; VirtualService bookinfo/ratings may keep attempts: 2"},
		},
		{
			// Istio ambient (mesh/waypoint.go): no sidecar; the namespace's waypoint applies the
			// VirtualService to ambient callers, Istio's default (3) where none binds (reviews).
			name: "ambient: a VirtualService applied at the namespace's waypoint is judged the same", cluster: []string{ambientNS},
			policies: []*v1alpha1.RetryPolicy{reject10}, object: vsYAML("3"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 makes " +
				"productpage -x3-> reviews -x4-> ratings = 12 > cap 10; VirtualService bookinfo/ratings may keep attempts: 2"},
		},
		{
			name: "what fits passes", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{reject10}, object: vsYAML("2"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "a lowering passes, even over the cap", cluster: []string{istioNS, vsYAML("5")},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")}, object: vsYAML("4"), old: vsYAML("5"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "a raise is judged: no retry at all fits", cluster: []string{istioNS, vsYAML("1")},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")}, object: vsYAML("2"), old: vsYAML("1"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 makes " +
				"productpage -x3-> reviews -x3-> ratings = 9 > cap 4; VirtualService bookinfo/ratings may keep attempts: 0"},
		},
		{
			name: "a raise on a chain over the cap above the object: nothing fits", cluster: []string{istioNS, vsYAML("1")},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 2, "")}, object: vsYAML("2"), old: vsYAML("1"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 makes " +
				"productpage -x3-> reviews -x3-> ratings = 9 > cap 2; even VirtualService bookinfo/ratings attempts: 0 does not fit: lower the 3 tries of productpage -> reviews (Istio default, no VirtualService binds reviews), or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 2"},
		},
		{
			name: "outside any mesh a VirtualService adds no layer", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 2, "")}, object: vsYAML("3"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "Rewrite: lowered to what fits, the old value kept", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, v1alpha1.EnforcementRewrite)}, object: vsYAML("3"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[0].retries.attempts: 3 -> 2 (productpage -x3-> reviews -x4-> ratings = 12 > cap 10)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: "spec.http[0].retries.attempts: 3"}},
					{Operation: "replace", Path: "/spec/http/0/retries/attempts", Value: float64(2)},
				}},
		},
		{
			// Istio refuses perTryTimeout, retryOn or retryRemoteLocalities beside attempts 0
			// (ValidateHTTPRetry): the patch removes them, each named with its old value.
			name: "Rewrite: a VirtualService route to attempts 0 keeps attempts alone", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, v1alpha1.EnforcementRewrite)},
			object:   strings.Replace(vsYAML("3"), "{attempts: 3}", "{attempts: 3, perTryTimeout: 2s, retryOn: 5xx, retryRemoteLocalities: true}", 1),
			want: MeshDecision{Allowed: true,
				Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote VirtualService bookinfo/ratings: spec.http[0].retries.attempts: 3 -> 0, " +
					`spec.http[0].retries.perTryTimeout: "2s" -> removed, spec.http[0].retries.retryOn: "5xx" -> removed, spec.http[0].retries.retryRemoteLocalities: true -> removed, ` +
					`spec.http[0].timeout: unset -> "2s" ` +
					"(productpage -x3-> reviews -x4-> ratings = 12 > cap 3)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: `spec.http[0].retries.attempts: 3; spec.http[0].retries.perTryTimeout: "2s"; spec.http[0].retries.retryOn: "5xx"; spec.http[0].retries.retryRemoteLocalities: true; spec.http[0].timeout: unset`}},
					{Operation: "replace", Path: "/spec/http/0/retries/attempts", Value: float64(0)},
					{Operation: "remove", Path: "/spec/http/0/retries/perTryTimeout"},
					{Operation: "remove", Path: "/spec/http/0/retries/retryOn"},
					{Operation: "remove", Path: "/spec/http/0/retries/retryRemoteLocalities"},
					// Its one try keeps the per-try timeout's bound (Istio drops the per-try
					// timeout with the retry policy at attempts 0): rewrite18.
					{Operation: "add", Path: "/spec/http/0/timeout", Value: "2s"},
				}},
		},
		{
			name: "Audit: a warning", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 10, v1alpha1.EnforcementAudit)}, object: vsYAML("3"),
			want: MeshDecision{Allowed: true, Warnings: []string{"RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 makes " +
				"productpage -x3-> reviews -x4-> ratings = 12 > cap 10; VirtualService bookinfo/ratings may keep attempts: 2 (admitted: enforcement is Audit)"}},
		},
		{
			name: "several Reject policies: the strictest's message, the others named", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{reject10, meshPolicy("strict", 9, "")}, object: vsYAML("3"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/strict: VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 makes " +
				"productpage -x3-> reviews -x4-> ratings = 12 > cap 9; VirtualService bookinfo/ratings may keep attempts: 2; also over the cap of RetryPolicy bookinfo/bookinfo (cap 10)"},
		},
		{
			name: "a negative attempts is refused, naming the object, the field and the value", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{reject10}, object: vsYAML("-1"),
			want: MeshDecision{Message: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: -1 is negative"},
		},
		{
			name: "Linkerd: a Service's retry limit", cluster: []string{linkerdNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 4, "")}, object: svc("4"),
			want: MeshDecision{Message: `RetryPolicy bookinfo/bookinfo: Service bookinfo/ratings metadata.annotations["retry.linkerd.io/limit"]: "4" makes ` +
				`productpage -x1-> reviews -x5-> ratings = 5 > cap 4; Service bookinfo/ratings may keep retry.linkerd.io/limit: "3"`},
		},
		{
			name: "a Gateway route multiplies the entrypoint's client attempts", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, "")}, object: gatewayRoute("retry: {attempts: 3}"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0].retry.attempts: 3 makes " +
				"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3; HTTPRoute bookinfo/web may keep attempts: 2"},
		},
		{
			// maxTimeToAnswer (#29): the chain below productpage takes 2s (the policy's per-try
			// timeout on each hop's own layer); the route's 4 tries over it, no per-try timeout,
			// Envoy's backoff (25, 50, 100ms): 4 x 2s + 175ms = 8.175s > 5s; attempts 1: 2 x 2s
			// + 25ms = 4.025s fits, attempts 2 (6.075s) does not.
			name: "a Gateway route's retries push the entry's chain over maxTimeToAnswer", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute("retry: {attempts: 3}"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0].retry.attempts: 3 makes " +
				"client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s; HTTPRoute bookinfo/web may keep attempts: 1"},
		},
		{
			name: "Rewrite: the route lowered until the chain's time fits", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, v1alpha1.EnforcementRewrite, 5*time.Second)}, object: gatewayRoute("retry: {attempts: 3}"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/web: spec.rules[0].retry.attempts: 3 -> 1 (client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: "spec.rules[0].retry.attempts: 3"}},
					{Operation: "replace", Path: "/spec/rules/0/retry/attempts", Value: float64(1)},
				}},
		},
		{
			// A raised timeout alone (#29): the route's 4 tries take 8.175s (above) but its
			// timeouts.request bounds them together; 4s fits 5s, 9s does not: 8.175s.
			name: "Reject: a route's timeout raised over maxTimeToAnswer, tries unchanged", cluster: []string{gatewayRoute(timedRetry("4s"))},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute(timedRetry("9s")), old: gatewayRoute(timedRetry("4s")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0]: timeout 4s -> 9s makes " +
				"client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s"},
		},
		{
			name: "a route's timeout removed is a raise to no bound", cluster: []string{gatewayRoute(timedRetry("4s"))},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute("retry: {attempts: 3}"), old: gatewayRoute(timedRetry("4s")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0]: timeout 4s -> unset makes " +
				"client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s"},
		},
		{
			name: "a timeout raised within maxTimeToAnswer passes", cluster: []string{gatewayRoute(timedRetry("4s"))},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute(timedRetry("4500ms")), old: gatewayRoute(timedRetry("4s")),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "a timeout lowered passes, even over maxTimeToAnswer", cluster: []string{gatewayRoute(timedRetry("9s"))},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute(timedRetry("8s")), old: gatewayRoute(timedRetry("9s")),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "Rewrite: a raised timeout is refused, not lowered", cluster: []string{gatewayRoute(timedRetry("4s"))},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, v1alpha1.EnforcementRewrite, 5*time.Second)}, object: gatewayRoute(timedRetry("9s")), old: gatewayRoute(timedRetry("4s")),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0]: timeout 4s -> 9s makes " +
				"client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s " +
				"(refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"},
		},
		{
			name: "Audit: a raised timeout is a warning", cluster: []string{gatewayRoute(timedRetry("4s"))},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, v1alpha1.EnforcementAudit, 5*time.Second)}, object: gatewayRoute(timedRetry("9s")), old: gatewayRoute(timedRetry("4s")),
			want: MeshDecision{Allowed: true, Warnings: []string{"RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0]: timeout 4s -> 9s makes " +
				"client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s (admitted: enforcement is Audit)"}},
		},
		{
			name: "a per-try timeout raised: backendRequest 1s -> 3s", cluster: []string{gatewayRoute("retry: {attempts: 3}\n    timeouts: {backendRequest: 1s}")},
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute("retry: {attempts: 3}\n    timeouts: {backendRequest: 3s}"),
			old: gatewayRoute("retry: {attempts: 3}\n    timeouts: {backendRequest: 1s}"),
			// 1s per try: 4 x 1s + 175ms = 4.175s fits; 3s: the 2s below bounds each try again.
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0]: per-try timeout 1s -> 3s makes " +
				"client -x4-> productpage 2s -> reviews 2s -> ratings ? = 8.175s > maxTimeToAnswer 5s"},
		},
		{
			// Istio: the VirtualService's 3 tries of up to 1s make reviews -> ratings 3.075s,
			// Istio's default 3 tries above it productpage 9.3s; 4s per try: 12.075s, 36.3s.
			name: "Istio: a VirtualService's perTryTimeout raised, its attempts unchanged", cluster: []string{istioNS, vsTimed("1s")},
			policies: []*v1alpha1.RetryPolicy{slowPolicy}, object: vsTimed("4s"), old: vsTimed("1s"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0]: per-try timeout 1s -> 4s makes " +
				"productpage 36.3s -> reviews 12.075s -> ratings ? = 36.3s > maxTimeToAnswer 20s"},
		},
		{
			// Linkerd: the retry timeout (1s) bounds the tries before the last, the response
			// timeout alone the last (LastTry): raising only the response timeout lengthens
			// that try, which PerTry (1s on both sides) does not show.
			name: "Linkerd: the response timeout raised behind a shorter retry timeout", cluster: []string{linkerdNS, linkerdTimed("2s")},
			policies: []*v1alpha1.RetryPolicy{slowPolicy}, object: linkerdTimed("30s"), old: linkerdTimed("2s"),
			// 1s + 1s + 30s and Linkerd's backoffs (25ms, 50ms): 32.075s.
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: Service bookinfo/ratings: last-try timeout 2s -> 30s makes " +
				"productpage 32.075s -> reviews 32.075s -> ratings ? = 32.075s > maxTimeToAnswer 20s"},
		},
		{
			name: "Istio: a VirtualService's timeout raised", cluster: []string{istioNS, vsTimed("4s") + "    timeout: 10s\n"},
			policies: []*v1alpha1.RetryPolicy{slowPolicy}, object: vsTimed("4s") + "    timeout: 15s\n", old: vsTimed("4s") + "    timeout: 10s\n",
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0]: timeout 10s -> 15s makes " +
				"productpage 36.3s -> reviews 12.075s -> ratings ? = 36.3s > maxTimeToAnswer 20s"},
		},
		{
			// A route other than the counted one (timered17): route 0 counts (3 tries of up to
			// 1s); route 1 (/slow, 2 tries) raises its per-try timeout from 1s to 9s. The time
			// model takes the worse route (mesh.Set.Hops): reviews -> ratings 2 x 9s + 25ms =
			// 18.025s, productpage over it Istio's 3 default tries, 54.15s. Before, the gate
			// compared route 0's timeouts only and admitted it, while the status said over.
			name: "Istio: a timeout raised on a route other than the counted one", cluster: []string{istioNS, vsTimed("1s") + "  - match: [{uri: {prefix: /slow}}]\n    route: [{destination: {host: ratings}}]\n    retries: {attempts: 1, perTryTimeout: 1s}\n"},
			policies: []*v1alpha1.RetryPolicy{slowPolicy},
			object:   vsTimed("1s") + "  - match: [{uri: {prefix: /slow}}]\n    route: [{destination: {host: ratings}}]\n    retries: {attempts: 1, perTryTimeout: 9s}\n",
			old:      vsTimed("1s") + "  - match: [{uri: {prefix: /slow}}]\n    route: [{destination: {host: ratings}}]\n    retries: {attempts: 1, perTryTimeout: 1s}\n",
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[1]: per-try timeout 1s -> 9s makes " +
				"productpage 54.15s -> reviews 18.025s -> ratings ? = 54.15s > maxTimeToAnswer 20s"},
		},
		{
			// Istio's fault delay holds each request before the route's timeout starts: 30s
			// added to reviews' hop, whose tries the 10s timeout bounds.
			name: "Istio: a VirtualService's fault delay added", cluster: []string{istioNS, vsTimed("4s") + "    timeout: 10s\n"},
			policies: []*v1alpha1.RetryPolicy{slowPolicy}, object: vsTimed("4s") + "    timeout: 10s\n    fault: {delay: {fixedDelay: 30s, percentage: {value: 100}}}\n",
			old: vsTimed("4s") + "    timeout: 10s\n",
			// reviews: 30s + the 10s timeout; productpage: Istio's 3 default tries of 40s each,
			// cut by slowPolicy's 1m per try of the proxy around them.
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/ratings spec.http[0], " +
				"VirtualService bookinfo/ratings spec.http[0].fault.delay.fixedDelay 30s: fault delay 0s -> 30s makes " +
				"productpage 1m0s -> reviews 40s -> ratings ? = 1m0s > maxTimeToAnswer 20s"},
		},
		{
			name: "within maxTimeToAnswer passes", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{timedMeshPolicy(100, "", 5*time.Second)}, object: gatewayRoute("retry: {attempts: 1}"),
			want: MeshDecision{Allowed: true},
		},
		{
			name: "Envoy Gateway: a BackendTrafficPolicy on a route without retry", cluster: []string{gatewayRoute("")},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, v1alpha1.EnforcementRewrite)}, object: `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: retry, namespace: bookinfo, annotations: {owner: web}}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
  retry: {numRetries: 5}
`,
			want: MeshDecision{Allowed: true,
				Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote BackendTrafficPolicy bookinfo/retry: spec.retry.numRetries: 5 -> 2 (client -x6-> productpage -x1-> reviews -x1-> ratings = 6 > cap 3)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations/retrycap.dev~1rewritten-from", Value: "spec.retry.numRetries: 5"},
					{Operation: "replace", Path: "/spec/retry/numRetries", Value: float64(2)},
				}},
		},
		{
			name: "Linkerd Rewrite to one try removes the retry annotations", cluster: []string{linkerdNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 1, v1alpha1.EnforcementRewrite)}, object: svc("2"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{`RetryPolicy bookinfo/bookinfo rewrote Service bookinfo/ratings: metadata.annotations["retry.linkerd.io/http"]: "5xx" -> removed, ` +
					`metadata.annotations["retry.linkerd.io/limit"]: "2" -> removed (productpage -x1-> reviews -x3-> ratings = 3 > cap 1)`},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "remove", Path: "/metadata/annotations/retry.linkerd.io~1http"},
					{Operation: "remove", Path: "/metadata/annotations/retry.linkerd.io~1limit"},
					{Operation: "add", Path: "/metadata/annotations/retrycap.dev~1rewritten-from", Value: `metadata.annotations["retry.linkerd.io/http"]: "5xx"; metadata.annotations["retry.linkerd.io/limit"]: "2"`},
				}},
		},
		{
			// Every rule to the entrypoint is lowered at once: 16 rules (the CRD's most) were
			// lowered one per round (at most 8), and "even attempts: 0 does not fit" where 2 fits.
			name: "a Gateway route of 16 rules to the entrypoint: the fitting value", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, "")}, object: manyGatewayRules(16),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0].retry.attempts: 3 makes " +
				"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3; HTTPRoute bookinfo/web may keep attempts: 2"},
		},
		{
			name: "Rewrite: a Gateway route of 16 rules, every one lowered", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, v1alpha1.EnforcementRewrite)}, object: manyGatewayRules(16),
			want: manyLowered("HTTPRoute bookinfo/web", "/spec/rules/%d/retry/attempts", 16, 3, 2,
				"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3"),
		},
		{
			name: "an ingress VirtualService of 20 routes to the entrypoint: the fitting value", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, "")}, object: manyIngressRoutes(20),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/front spec.http[0].retries.attempts: 3 makes " +
				"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3; VirtualService bookinfo/front may keep attempts: 2"},
		},
		{
			name: "Rewrite: an ingress VirtualService of 20 routes, every one lowered", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, v1alpha1.EnforcementRewrite)}, object: manyIngressRoutes(20),
			want: manyLowered("VirtualService bookinfo/front", "/spec/http/%d/retries/attempts", 20, 3, 2,
				"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 3"),
		},
		{
			// The CRD refuses attempts: 0; a Gateway rule without retry (and no
			// BackendTrafficPolicy) is 1 try.
			name: "a Gateway rule to 1 try: its retry removed", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 1, "")}, object: gatewayRoute("retry: {attempts: 3}"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/web spec.rules[0].retry.attempts: 3 makes " +
				"client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 1; HTTPRoute bookinfo/web may keep 1 try: remove spec.rules[0].retry"},
		},
		{
			name: "Rewrite: a Gateway rule to 1 try", cluster: nil,
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 1, v1alpha1.EnforcementRewrite)}, object: gatewayRoute("retry: {attempts: 3, codes: [503]}"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{`RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/web: spec.rules[0].retry: {"attempts":3,"codes":[503]} -> removed (client -x4-> productpage -x1-> reviews -x1-> ratings = 4 > cap 1)`},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: `spec.rules[0].retry: {"attempts":3,"codes":[503]}`}},
					{Operation: "remove", Path: "/spec/rules/0/retry"},
				}},
		},
		{
			// Istio: attempts is at least 1 (2 tries), and a rule without retry gets Istio's
			// default 2 retries: 1 try is out of the route's reach (it proposed attempts: 0).
			name: "Istio GAMMA route: 2 tries is the fewest", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, "")}, object: gammaRatings("retry: {attempts: 3}"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[0].retry.attempts: 3 makes " +
				"productpage -x3-> reviews -x4-> ratings = 12 > cap 3; even HTTPRoute bookinfo/ratings attempts: 1 does not fit: lower the 3 tries of productpage -> reviews (Istio default, no VirtualService binds reviews), or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 3 " +
				"(the Gateway API CRD's attempts is at least 1, and without retry the rule gets 3 tries)"},
		},
		{
			name: "Rewrite: an Istio GAMMA route lowered as far as it goes, attempts 1", cluster: []string{istioNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 3, v1alpha1.EnforcementRewrite)}, object: gammaRatings("retry: {attempts: 3}"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{
					"RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/ratings: spec.rules[0].retry.attempts: 3 -> 1 (productpage -x3-> reviews -x4-> ratings = 12 > cap 3)",
					"RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[0].retry.attempts: 3 makes productpage -x3-> reviews -x4-> ratings = 12 > cap 3; " +
						"even HTTPRoute bookinfo/ratings attempts: 1 does not fit: lower the 3 tries of productpage -> reviews (Istio default, no VirtualService binds reviews), or raise RetryPolicy bookinfo/bookinfo spec.maxAmplification: 3 (the Gateway API CRD's attempts is at least 1, and without retry the rule gets 3 tries) " +
						"(admitted: enforcement is Rewrite; HTTPRoute bookinfo/ratings is rewritten as far as it goes)"},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: "spec.rules[0].retry.attempts: 3"}},
					{Operation: "replace", Path: "/spec/rules/0/retry/attempts", Value: float64(1)},
				}},
		},
		{
			// Linkerd reads no rules[].retry (its annotations alone): without the block the
			// rule adds no try.
			name: "Rewrite: a Linkerd GAMMA route to 1 try, its retry removed", cluster: []string{linkerdNS},
			policies: []*v1alpha1.RetryPolicy{meshPolicy("bookinfo", 1, v1alpha1.EnforcementRewrite)}, object: gammaRatings("retry: {attempts: 3}"),
			want: MeshDecision{Allowed: true,
				Warnings: []string{`RetryPolicy bookinfo/bookinfo rewrote HTTPRoute bookinfo/ratings: spec.rules[0].retry: {"attempts":3} -> removed (productpage -x1-> reviews -x4-> ratings = 4 > cap 1)`},
				Patch: []jsonpatch.JsonPatchOperation{
					{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: `spec.rules[0].retry: {"attempts":3}`}},
					{Operation: "remove", Path: "/spec/rules/0/retry"},
				}},
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

// manyLowered is the Rewrite decision that lowers the field at pointer (%d: the route) of routes
// 0..n-1 of object from one value to another.
func manyLowered(object, pointer string, n int, from, to int, chain string) MeshDecision {
	var ptrs []string
	for i := range n {
		ptrs = append(ptrs, fmt.Sprintf(pointer, i))
	}
	sort.Strings(ptrs) // pointer order, as the annotation, the warning and the patch list them
	var old, changes []string
	ops := []jsonpatch.JsonPatchOperation{{}}
	for _, p := range ptrs {
		old = append(old, fmt.Sprintf("%s: %d", pointerToPath(p), from))
		changes = append(changes, fmt.Sprintf("%s: %d -> %d", pointerToPath(p), from, to))
		ops = append(ops, jsonpatch.JsonPatchOperation{Operation: "replace", Path: p, Value: float64(to)})
	}
	ops[0] = jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/annotations", Value: map[string]any{annotations.RewrittenFrom: strings.Join(old, "; ")}}
	return MeshDecision{Allowed: true, Patch: ops,
		Warnings: []string{"RetryPolicy bookinfo/bookinfo rewrote " + object + ": " + strings.Join(changes, ", ") + " (" + chain + ")"}}
}

// expectMeshDecision fails t unless got is want, the patches compared through JSON (values
// decode as float64).
func expectMeshDecision(t *testing.T, got, want MeshDecision) {
	t.Helper()
	got.rewrites = nil
	if got.Patch != nil {
		data, _ := json.Marshal(got.Patch)
		got.Patch = nil
		if err := json.Unmarshal(data, &got.Patch); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecideMesh =\n%#v\nwant\n%#v", got, want)
	}
}

func TestPointerToPath(t *testing.T) {
	for in, want := range map[string]string{
		"/spec/http/0/retries/attempts":                 "spec.http[0].retries.attempts",
		"/metadata/annotations/retry.linkerd.io~1limit": `metadata.annotations["retry.linkerd.io/limit"]`,
		"/spec/rules/12/retry":                          "spec.rules[12].retry",
		"/spec/retry/numRetries":                        "spec.retry.numRetries",
	} {
		if got := pointerToPath(in); got != want {
			t.Errorf("pointerToPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMeshWebhook(t *testing.T) {
	caBundle := []byte("CA")
	path := "/gate-workloads"
	gateHook := admissionregistrationv1.MutatingWebhook{Name: GateWebhookName,
		ClientConfig:      admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "retrycap-system", Name: "retrycap-webhook-service", Path: &path}, CABundle: caBundle},
		NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system"}}}}}
	vs := meshwatch.API{Group: "networking.istio.io", Version: "v1", Resource: "virtualservices", Kind: "VirtualService"}
	sp := meshwatch.API{Group: "linkerd.io", Version: "v1alpha2", Resource: "serviceprofiles", Kind: "ServiceProfile"}
	for _, tc := range []struct {
		apis []meshwatch.API
		want []string
	}{
		{[]meshwatch.API{vs}, []string{"networking.istio.io/*:virtualservices"}},
		{[]meshwatch.API{vs, sp}, []string{"networking.istio.io/*:virtualservices", "linkerd.io/*:serviceprofiles", "/v1:services"}},
	} {
		h, err := MeshWebhook(tc.apis, gateHook)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range h.Rules {
			got = append(got, r.APIGroups[0]+"/"+r.APIVersions[0]+":"+r.Resources[0])
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("rules %q, want %q", got, tc.want)
		}
		if *h.ClientConfig.Service.Path != MeshPath || h.ClientConfig.Service.Name != "retrycap-webhook-service" || string(h.ClientConfig.CABundle) != "CA" ||
			*gateHook.ClientConfig.Service.Path != "/gate-workloads" || !reflect.DeepEqual(h.NamespaceSelector, gateHook.NamespaceSelector) ||
			*h.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("webhook %+v", h)
		}
	}
	url := "https://127.0.0.1:9443/gate-workloads"
	gateHook.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle}
	h, err := MeshWebhook([]meshwatch.API{vs}, gateHook)
	if err != nil || *h.ClientConfig.URL != "https://127.0.0.1:9443/gate-mesh" {
		t.Errorf("URL %v, %v", h.ClientConfig.URL, err)
	}
}
