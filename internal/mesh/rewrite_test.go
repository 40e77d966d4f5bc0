package mesh

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"sigs.k8s.io/yaml"
)

// applyPatch applies a patch of type typ ("json": RFC 6902, "merge": RFC 7386) to obj.
func applyPatch(obj []byte, typ string, patch []byte) ([]byte, error) {
	if typ == "merge" {
		return jsonpatch.MergePatch(obj, patch)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, err
	}
	return p.Apply(obj)
}

func TestPlanRewrite(t *testing.T) {
	cases := []struct {
		name       string
		layer      Layer
		tries      int64
		object     string // YAML
		suggestion string
		patch      string
		static     string // "type patch"
	}{
		{
			name:  "VirtualService attempts 3 -> 0",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 4},
			tries: 1, object: vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 3, perTryTimeout: 2s}"),
			suggestion: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 -> 0 (" + IstioZeroAttemptsAlone + ")",
			patch:      `[{"op":"replace","path":"/spec/http/0/retries/attempts","value":0},{"op":"remove","path":"/spec/http/0/retries/perTryTimeout"},{"op":"add","path":"/spec/http/0/timeout","value":"2s"}]`,
			static:     `json [{"op":"test","path":"/spec/http/0/retries/perTryTimeout","value":"2s"},{"op":"test","path":"/spec/http/0/retries/attempts","value":3},{"op":"replace","path":"/spec/http/0/retries","value":{"attempts":0}},{"op":"add","path":"/spec/http/0/timeout","value":"2s"}]`,
		},
		{
			// Istio's ValidateHTTPRetry refuses any of the three beside attempts 0; backoff and
			// retryIgnorePreviousHosts it takes, but its proxy config drops the block then.
			name:  "VirtualService attempts 2 -> 0 takes every other retries field away",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[1].retries.attempts", Tries: 3},
			tries: 1, object: vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 2, perTryTimeout: 1s}\n  - retries: {attempts: 2, perTryTimeout: 2s, retryOn: '5xx,reset', retryRemoteLocalities: false, backoff: 25ms, retryIgnorePreviousHosts: true}\n    timeout: 9s"),
			suggestion: "VirtualService bookinfo/ratings spec.http[1].retries.attempts: 2 -> 0 (" + IstioZeroAttemptsAlone + ")",
			patch:      `[{"op":"replace","path":"/spec/http/1/retries/attempts","value":0},{"op":"remove","path":"/spec/http/1/retries/backoff"},{"op":"remove","path":"/spec/http/1/retries/perTryTimeout"},{"op":"remove","path":"/spec/http/1/retries/retryIgnorePreviousHosts"},{"op":"remove","path":"/spec/http/1/retries/retryOn"},{"op":"remove","path":"/spec/http/1/retries/retryRemoteLocalities"},{"op":"replace","path":"/spec/http/1/timeout","value":"2s"}]`,
			static:     `json [{"op":"test","path":"/spec/http/1/retries/perTryTimeout","value":"2s"},{"op":"test","path":"/spec/http/1/retries/attempts","value":2},{"op":"replace","path":"/spec/http/1/retries","value":{"attempts":0}},{"op":"test","path":"/spec/http/1/timeout","value":"9s"},{"op":"replace","path":"/spec/http/1/timeout","value":"2s"}]`,
		},
		{
			name:  "VirtualService retries without attempts (Istio's 2) -> 0",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 3, Default: true},
			tries: 1, object: vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {perTryTimeout: 2s, retryOn: 5xx}"),
			suggestion: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: unset (2) -> 0 (" + IstioZeroAttemptsAlone + ")",
			patch:      `[{"op":"add","path":"/spec/http/0/retries/attempts","value":0},{"op":"remove","path":"/spec/http/0/retries/perTryTimeout"},{"op":"remove","path":"/spec/http/0/retries/retryOn"},{"op":"add","path":"/spec/http/0/timeout","value":"2s"}]`,
			static:     `json [{"op":"test","path":"/spec/http/0/retries/perTryTimeout","value":"2s"},{"op":"replace","path":"/spec/http/0/retries","value":{"attempts":0}},{"op":"add","path":"/spec/http/0/timeout","value":"2s"}]`,
		},
		{
			// A route timeout at or below the per-try timeout bounds the one try already (rewrite18).
			name:  "VirtualService attempts 2 -> 0 under a route timeout shorter than perTryTimeout: timeout kept",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 3},
			tries: 1, object: vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 2, perTryTimeout: 2s}\n    timeout: 1500ms"),
			suggestion: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 -> 0 (" + IstioZeroAttemptsAlone + ")",
			patch:      `[{"op":"replace","path":"/spec/http/0/retries/attempts","value":0},{"op":"remove","path":"/spec/http/0/retries/perTryTimeout"}]`,
			static:     `json [{"op":"test","path":"/spec/http/0/retries/attempts","value":2},{"op":"replace","path":"/spec/http/0/retries","value":{"attempts":0}}]`,
		},
		{
			name:  "VirtualService attempts 2 -> 0, the route timeout equal to perTryTimeout: kept",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 3},
			tries: 1, object: vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 2, perTryTimeout: 2s}\n    timeout: 2000ms"),
			suggestion: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 -> 0 (" + IstioZeroAttemptsAlone + ")",
			patch:      `[{"op":"replace","path":"/spec/http/0/retries/attempts","value":0},{"op":"remove","path":"/spec/http/0/retries/perTryTimeout"}]`,
			static:     `json [{"op":"test","path":"/spec/http/0/retries/attempts","value":2},{"op":"replace","path":"/spec/http/0/retries","value":{"attempts":0}}]`,
		},
		{
			name:  "VirtualService route without retries -> attempts 0",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries", Tries: 3, Default: true},
			tries: 1, object: vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]"),
			suggestion: "VirtualService bookinfo/ratings spec.http[0].retries.attempts: unset (2) -> 0 (" + IstioZeroAttemptsAlone + ")",
			patch:      `[{"op":"add","path":"/spec/http/0/retries","value":{"attempts":0}}]`,
			static:     `json [{"op":"add","path":"/spec/http/0/retries","value":{"attempts":0}}]`,
		},
		{
			name:  "a binding route without retries gets a retries block",
			layer: Layer{Kind: Istio, Object: "VirtualService bookinfo/reviews", FieldPath: "spec.http[1].retries", Tries: 3, Default: true},
			tries: 2, object: vs("bookinfo", "reviews", "  hosts: [reviews]\n  http:\n  - retries: {attempts: 0}\n  - route: [{destination: {host: reviews}}]"),
			suggestion: "VirtualService bookinfo/reviews spec.http[1].retries.attempts: unset (2) -> 1",
			patch:      `[{"op":"add","path":"/spec/http/1/retries","value":{"attempts":1}}]`,
			static:     `json [{"op":"add","path":"/spec/http/1/retries","value":{"attempts":1}}]`,
		},
		{
			// The CRD's attempts is at least 1 (it was "attempts: 0", which the API server refuses).
			name:  "HTTPRoute retry {} gets attempts 1 (Istio: 2 tries, the fewest)",
			layer: Layer{Kind: GAMMA, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[0].retry.attempts", Tries: 3, Default: true, Unset: 3},
			tries: 2, object: routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "reviews", "", "  rules: [{retry: {}}]"),
			suggestion: "HTTPRoute bookinfo/reviews spec.rules[0].retry.attempts: unset (2) -> 1",
			patch:      `[{"op":"add","path":"/spec/rules/0/retry/attempts","value":1}]`,
			static:     `json [{"op":"add","path":"/spec/rules/0/retry/attempts","value":1}]`,
		},
		{
			name:  "HTTPRoute rule without retry gets attempts 1 (Istio's default 2 retries before)",
			layer: Layer{Kind: Istio, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[1].retry", Tries: 3, Default: true, Unset: 3},
			tries: 2, object: routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "reviews", "", "  rules: [{retry: {attempts: 1}}, {backendRefs: [{name: reviews}]}]"),
			suggestion: "HTTPRoute bookinfo/reviews spec.rules[1].retry.attempts: unset (2) -> 1",
			patch:      `[{"op":"add","path":"/spec/rules/1/retry","value":{"attempts":1}}]`,
			static:     `json [{"op":"add","path":"/spec/rules/1/retry","value":{"attempts":1}}]`,
		},
		{
			// Linkerd reads no rules[].retry: without the block the rule adds no try.
			name:  "HTTPRoute to 1 try where the rule without retry gives 1: the block is removed",
			layer: Layer{Kind: GAMMA, Object: "HTTPRoute emojivoto/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 4, Unset: 1},
			tries: 1, object: routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "web", "", "  rules: [{retry: {attempts: 3, codes: [503], backoff: 100ms}, timeouts: {request: 5s}}]"),
			suggestion: "HTTPRoute emojivoto/web spec.rules[0].retry: {attempts: 3} -> removed (1 try)",
			patch:      `[{"op":"remove","path":"/spec/rules/0/retry"}]`,
			static:     `json [{"op":"test","path":"/spec/rules/0/retry/attempts","value":3},{"op":"remove","path":"/spec/rules/0/retry"}]`,
		},
		{
			name:  "HTTPRoute retry {} to 1 try on a Gateway no BackendTrafficPolicy covers: removed",
			layer: Layer{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[1].retry.attempts", Tries: 3, Default: true, Unset: 1},
			tries: 1, object: routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{backendRefs: [{name: a}]}, {retry: {codes: [503]}}]"),
			suggestion: "HTTPRoute shop/web spec.rules[1].retry: {} (2 retries) -> removed (1 try)",
			patch:      `[{"op":"remove","path":"/spec/rules/1/retry"}]`,
			static:     `json [{"op":"remove","path":"/spec/rules/1/retry"}]`,
		},
		{
			name:  "BackendTrafficPolicy numRetries 5 -> 1",
			layer: Layer{Kind: EnvoyGateway, Object: "BackendTrafficPolicy shop/p", FieldPath: "spec.retry.numRetries", Tries: 6},
			tries: 2, object: btp("shop", "p", "{kind: HTTPRoute, name: web}", "  retry: {numRetries: 5}"),
			suggestion: "BackendTrafficPolicy shop/p spec.retry.numRetries: 5 -> 1",
			patch:      `[{"op":"replace","path":"/spec/retry/numRetries","value":1}]`,
			static:     `json [{"op":"test","path":"/spec/retry/numRetries","value":5},{"op":"replace","path":"/spec/retry/numRetries","value":1}]`,
		},
		{
			// Envoy Gateway's CRD: numRetries minimum 0, no rule across the retry's fields: the
			// rest of the block stays (Envoy sends no retry with num_retries 0).
			name:  "BackendTrafficPolicy numRetries 2 -> 0 keeps the block's other fields",
			layer: Layer{Kind: EnvoyGateway, Object: "BackendTrafficPolicy shop/p", FieldPath: "spec.retry.numRetries", Tries: 3},
			tries: 1, object: btp("shop", "p", "{kind: HTTPRoute, name: web}", "  retry: {numRetries: 2, perRetry: {timeout: 1s}, retryOn: {triggers: [5xx]}}"),
			suggestion: "BackendTrafficPolicy shop/p spec.retry.numRetries: 2 -> 0",
			patch:      `[{"op":"replace","path":"/spec/retry/numRetries","value":0}]`,
			static:     `json [{"op":"test","path":"/spec/retry/numRetries","value":2},{"op":"replace","path":"/spec/retry/numRetries","value":0}]`,
		},
		{
			name:  `Linkerd limit "2" -> "1"`,
			layer: Layer{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 3},
			tries: 2, object: svc("emojivoto", "emoji-svc", `retry.linkerd.io/limit: "2"`),
			suggestion: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "2" -> "1"`,
			patch:      `[{"op":"replace","path":"/metadata/annotations/retry.linkerd.io~1limit","value":"1"}]`,
			static:     `merge {"metadata":{"annotations":{"retry.linkerd.io/limit":"1"}}}`,
		},
		{
			name:  "Linkerd to 1 try removes the retry annotations",
			layer: Layer{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 2, Default: true},
			tries: 1, object: svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    other: kept"),
			suggestion: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: unset (1) -> removed, with retry.linkerd.io/http, retry.linkerd.io/grpc and retry.linkerd.io/timeout`,
			patch:      `[{"op":"remove","path":"/metadata/annotations/retry.linkerd.io~1http"}]`,
			static:     `merge {"metadata":{"annotations":{"retry.linkerd.io/grpc":null,"retry.linkerd.io/http":null,"retry.linkerd.io/limit":null,"retry.linkerd.io/timeout":null}}}`,
		},
		{
			// Linkerd's policy controller reads a retry timeout alone as 1 retry (limit 1).
			name:  "Linkerd to 1 try removes the retry timeout too",
			layer: Layer{Kind: Linkerd, Object: "Service emojivoto/emoji-svc", FieldPath: `metadata.annotations["retry.linkerd.io/limit"]`, Tries: 3},
			tries: 1, object: svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"2\"\n    retry.linkerd.io/timeout: 300ms\n    timeout.linkerd.io/response: 2s"),
			suggestion: `Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/limit"]: "2" -> removed, with retry.linkerd.io/http, retry.linkerd.io/grpc and retry.linkerd.io/timeout`,
			patch:      `[{"op":"remove","path":"/metadata/annotations/retry.linkerd.io~1http"},{"op":"remove","path":"/metadata/annotations/retry.linkerd.io~1limit"},{"op":"remove","path":"/metadata/annotations/retry.linkerd.io~1timeout"}]`,
			static:     `merge {"metadata":{"annotations":{"retry.linkerd.io/grpc":null,"retry.linkerd.io/http":null,"retry.linkerd.io/limit":null,"retry.linkerd.io/timeout":null}}}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rw, err := PlanRewrite(tc.layer, tc.tries)
			if err != nil {
				t.Fatal(err)
			}
			if rw.Suggestion != tc.suggestion {
				t.Errorf("Suggestion = %q, want %q", rw.Suggestion, tc.suggestion)
			}
			obj, err := yaml.YAMLToJSON([]byte(tc.object))
			if err != nil {
				t.Fatal(err)
			}
			patch, err := rw.Patch(obj)
			if err != nil {
				t.Fatal(err)
			}
			// In path order: the diff lists a block's removed fields in map order.
			var ops []map[string]any
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			sort.SliceStable(ops, func(i, j int) bool { return ops[i]["path"].(string) < ops[j]["path"].(string) })
			if patch, err = json.Marshal(ops); err != nil {
				t.Fatal(err)
			}
			if string(patch) != tc.patch {
				t.Errorf("Patch = %s, want %s", patch, tc.patch)
			}
			typ, p, err := rw.StaticPatch(obj)
			if err != nil {
				t.Fatal(err)
			}
			if typ+" "+string(p) != tc.static {
				t.Errorf("StaticPatch = %s %s, want %s", typ, p, tc.static)
			}
			// The two patches, applied, leave the same object (gate19: the static patch
			// left out the route timeout of a lowering to attempts 0).
			viaPatch, err := applyPatch(obj, "json", patch)
			if err != nil {
				t.Fatal(err)
			}
			viaStatic, err := applyPatch(obj, typ, p)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonpatch.Equal(viaPatch, viaStatic) {
				t.Errorf("Patch applied = %s\nStaticPatch applied = %s", viaPatch, viaStatic)
			}
		})
	}
}

func TestPlanRewriteRefuses(t *testing.T) {
	cases := []struct {
		layer Layer
		tries int64
		want  string
	}{
		// A mesh's default names the object and field that set it (adv20; it said "lower the
		// caller's attempts", which leaves the default's tries as they are).
		{Layer{Kind: Istio, Tries: 3, Default: true, Note: "Istio default, no VirtualService binds reviews"}, 1,
			"Istio default, no VirtualService binds reviews: no object declares these 3 tries, the mesh's default: declare the retries on the callee (a VirtualService route with retries.attempts: 0), or lower the default of every route that sets none (MeshConfig defaultHttpRetryPolicy.attempts: 0, ConfigMap istio-system/istio data.mesh)"},
		{Layer{Kind: Istio, Tries: 5, Default: true, Note: "Istio default --istio-default-retries=4, no VirtualService binds reviews"}, 2,
			"Istio default --istio-default-retries=4, no VirtualService binds reviews: no object declares these 5 tries, the mesh's default: declare the retries on the callee (a VirtualService route with retries.attempts: 1), or lower the default of every route that sets none (MeshConfig defaultHttpRetryPolicy.attempts: 1, ConfigMap istio-system/istio data.mesh), and retrycap's --istio-default-retries with it"},
		{Layer{Kind: Istio, Object: "ConfigMap istio-system/istio", FieldPath: "data.mesh", Tries: 5, Default: true, Note: "n"}, 2,
			"n: the default is YAML inside ConfigMap istio-system/istio data.mesh: change defaultHttpRetryPolicy.attempts to 1 there, or declare the retries on the callee"},
		{Layer{Kind: Istio, Object: "VirtualService a/b", FieldPath: "spec.http[0].retries.attempts", Tries: 2, Note: "VirtualService a/b spec.http[0].retries.attempts: 1"}, 2,
			"VirtualService a/b spec.http[0].retries.attempts: 1: cannot rewrite 2 tries to 2: the target must be at least 1 and below the layer's tries"},
		{Layer{Kind: Linkerd, Object: "ServiceProfile e/x", Tries: 1, Default: true, Note: "p"}, 0,
			"p: cannot rewrite 1 tries to 0: the target must be at least 1 and below the layer's tries"},
		// The Gateway API CRD refuses attempts: 0, and without retry Istio's default applies.
		{Layer{Kind: GAMMA, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[2].retry.attempts", Tries: 4, Unset: 3, Note: "HTTPRoute bookinfo/reviews spec.rules[2].retry.attempts: 3"}, 1,
			"HTTPRoute bookinfo/reviews spec.rules[2].retry.attempts: 3: HTTPRoute bookinfo/reviews spec.rules[2].retry cannot give 1 try: the Gateway API CRD's retry.attempts is at least 1 (2 tries), and without retry the rule gets 3 tries; set HTTPRoute bookinfo/reviews spec.rules[2].retry.attempts: 1 (2 tries, its fewest), or raise the policy's spec.maxAmplification"},
		{Layer{Kind: Istio, Object: "HTTPRoute bookinfo/reviews", FieldPath: "spec.rules[0].retry", Tries: 3, Default: true, Unset: 3, Note: "n"}, 1,
			"n: HTTPRoute bookinfo/reviews spec.rules[0].retry cannot give 1 try: the Gateway API CRD's retry.attempts is at least 1 (2 tries), and without retry the rule gets 3 tries; set HTTPRoute bookinfo/reviews spec.rules[0].retry.attempts: 1 (2 tries, its fewest), or raise the policy's spec.maxAmplification"},
		// GRPCRoute has no retry in its CRD: a rewrite would be dropped by the API server.
		{Layer{Kind: Istio, Object: "GRPCRoute bookinfo/reviews", FieldPath: "spec.rules[0].retry", Tries: 3, Default: true, Unset: 3, Note: "n"}, 2,
			"n: GRPCRoute bookinfo/reviews has no retry field (the Gateway API's GRPCRoute: the API server drops one), so its rules get the mesh's default: declare the retries on a VirtualService route for the Service with retries.attempts: 1, or raise the policy's spec.maxAmplification"},
		// An Ingress under Istio has no retry field: the fix is another object; the advice
		// ends with the policy's cap (advice19; it said "lower the callers' attempts", also
		// where the callers were at 1), which the mesh gate replaces with the chain's levers.
		{Layer{Kind: Istio, Object: "Ingress bookinfo/gateway", FieldPath: "spec.rules[0].http.paths[0]", Tries: 3, Default: true, Note: "Istio default, Ingress bookinfo/gateway"}, 2,
			"Istio default, Ingress bookinfo/gateway: an Ingress has no retry field (Istio translates it with none, pilot/pkg/config/kube/ingress): route its paths through a VirtualService bound to the ingress gateway with retries.attempts: 1 instead, or raise the policy's spec.maxAmplification"},
		// A BackendTrafficPolicy gives the rule without retry 6 tries.
		{Layer{Kind: Gateway, Object: "HTTPRoute shop/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 3, Unset: 6, Note: "g"}, 1,
			"g: HTTPRoute shop/web spec.rules[0].retry cannot give 1 try: the Gateway API CRD's retry.attempts is at least 1 (2 tries), and without retry the rule gets 6 tries; set HTTPRoute shop/web spec.rules[0].retry.attempts: 1 (2 tries, its fewest), or raise the policy's spec.maxAmplification"},
	}
	for _, tc := range cases {
		_, err := PlanRewrite(tc.layer, tc.tries)
		if err == nil || err.Error() != tc.want {
			t.Errorf("PlanRewrite(%v, %d) error = %v, want %q", tc.layer, tc.tries, err, tc.want)
		}
	}
}

// TestRewriteRuleRemovalStale: the removal of a rule's retry block checks the attempts it was
// planned from, as a count's rewrite does.
func TestRewriteRuleRemovalStale(t *testing.T) {
	l := Layer{Kind: GAMMA, Object: "HTTPRoute emojivoto/web", FieldPath: "spec.rules[0].retry.attempts", Tries: 4, Unset: 1}
	rw, err := PlanRewrite(l, 1)
	if err != nil {
		t.Fatal(err)
	}
	for doc, want := range map[string]string{
		"  rules: [{retry: {attempts: 5}}]": "HTTPRoute emojivoto/web spec.rules[0].retry.attempts is 5, not {attempts: 3}: the object changed since the layer was read",
		"  rules: [{retry: {}}]":            "HTTPRoute emojivoto/web spec.rules[0].retry.attempts is unset, not {attempts: 3}: the object changed since the layer was read",
		"  rules: [{}]":                     "HTTPRoute emojivoto/web spec.rules[0].retry is unset, not {attempts: 3}: the object changed since the layer was read",
	} {
		obj, _ := yaml.YAMLToJSON([]byte(routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "web", "", doc)))
		if _, err := rw.Apply(obj); err == nil || err.Error() != want {
			t.Errorf("%s: Apply error = %v, want %q", doc, err, want)
		}
	}
	l.Default, l.Tries = true, 3 // retry: {}
	rw, err = PlanRewrite(l, 1)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := yaml.YAMLToJSON([]byte(routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "web", "", "  rules: [{retry: {attempts: 2}}]")))
	want := "HTTPRoute emojivoto/web spec.rules[0].retry.attempts is 2, not {} (2 retries): the object changed since the layer was read"
	if _, err := rw.Apply(obj); err == nil || err.Error() != want {
		t.Errorf("Apply error = %v, want %q", err, want)
	}
	if MinTries(l) != 1 || MinTries(Layer{Object: "HTTPRoute a/b", FieldPath: "spec.rules[0].retry", Unset: 3}) != 2 ||
		MinTries(Layer{Object: "VirtualService a/b", FieldPath: "spec.http[0].retries"}) != 1 {
		t.Error("MinTries")
	}
}

func TestRewriteStaleObject(t *testing.T) {
	rw, err := PlanRewrite(Layer{Kind: Istio, Object: "VirtualService bookinfo/ratings", FieldPath: "spec.http[0].retries.attempts", Tries: 4}, 1)
	if err != nil {
		t.Fatal(err)
	}
	obj, _ := yaml.YAMLToJSON([]byte(vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: 5}")))
	_, err = rw.Apply(obj)
	want := "VirtualService bookinfo/ratings spec.http[0].retries.attempts is 5, not 3: the object changed since the layer was read"
	if err == nil || err.Error() != want {
		t.Errorf("Apply error = %v, want %q", err, want)
	}
	obj, _ = yaml.YAMLToJSON([]byte(vs("bookinfo", "ratings", "  http: []")))
	_, err = rw.Apply(obj)
	want = "VirtualService bookinfo/ratings spec.http[0].retries.attempts: spec.http has no item 0"
	if err == nil || err.Error() != want {
		t.Errorf("Apply error = %v, want %q", err, want)
	}
}

// TestRewriteRoundTrip: lowering a layer and reading the object again gives the target tries
// (the route without retries, at the default 3, is lowered too, one rewrite at a time).
func TestRewriteRoundTrip(t *testing.T) {
	obj, err := yaml.YAMLToJSON([]byte(vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 3}\n  - route: [{destination: {host: ratings}}]")))
	if err != nil {
		t.Fatal(err)
	}
	c := caller("bookinfo")
	edge := func() Edge {
		s := set(t, Options{}, nsIstio)
		if _, err := s.AddJSON(obj); err != nil {
			t.Fatal(err)
		}
		return s.Edge(c, "ratings")
	}
	var suggestions []string
	for want := int64(3); want >= 1; want-- {
		for edge().Tries() > want {
			rw, err := PlanRewrite(edge().Layers[0], want)
			if err != nil {
				t.Fatal(err)
			}
			suggestions = append(suggestions, rw.Suggestion)
			if obj, err = rw.Apply(obj); err != nil {
				t.Fatal(err)
			}
		}
		if got := edge().Tries(); got != want {
			t.Fatalf("after rewriting to %d: %d tries", want, got)
		}
	}
	want := []string{
		"VirtualService bookinfo/ratings spec.http[0].retries.attempts: 3 -> 2",
		"VirtualService bookinfo/ratings spec.http[0].retries.attempts: 2 -> 1",
		"VirtualService bookinfo/ratings spec.http[1].retries.attempts: unset (2) -> 1",
		"VirtualService bookinfo/ratings spec.http[0].retries.attempts: 1 -> 0 (" + IstioZeroAttemptsAlone + ")",
		"VirtualService bookinfo/ratings spec.http[1].retries.attempts: 1 -> 0 (" + IstioZeroAttemptsAlone + ")",
	}
	if strings.Join(suggestions, "\n") != strings.Join(want, "\n") {
		t.Errorf("suggestions:\n%s\nwant:\n%s", strings.Join(suggestions, "\n"), strings.Join(want, "\n"))
	}
}
