package mesh

import (
	"slices"
	"testing"
	"time"

	"github.com/retrycap/retrycap/internal/graph"
)

const ms = time.Millisecond

// TestLayerTime reads each system's timeouts off the object and rule that decide the layer's
// tries, through Edge and Entry as the graph builders call them.
func TestLayerTime(t *testing.T) {
	north := func(rules string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  parentRefs: [{name: eg}]\n  rules:\n"+rules)
	}
	envoy := func(per, total time.Duration, source string) LayerTime {
		return LayerTime{PerTry: per, Timeout: total, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Source: source}
	}
	cases := []struct {
		name   string
		docs   string
		caller Caller
		callee string
		entry  *ServiceRef
		want   LayerTime
	}{
		{
			name: "Istio default route: no timeout, Envoy's backoff", docs: nsIstio, caller: caller("bookinfo"), callee: "reviews",
			want: envoy(0, 0, ""),
		},
		{
			name: "VirtualService timeout and perTryTimeout of the route that decides the tries", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 1}\n    timeout: 9s\n  - retries: {attempts: 4, perTryTimeout: 0.5s}\n    timeout: 3s"),
			want: envoy(500*ms, 3*time.Second, "VirtualService bookinfo/ratings spec.http[1]"),
		},
		{
			name: "a route without retries gets the default tries and its timeout", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 1}\n  - timeout: 2s"),
			want: envoy(0, 2*time.Second, "VirtualService bookinfo/ratings spec.http[1]"),
		},
		{
			// linkerd2-proxy: the request timeout is one deadline for all tries; the response
			// timeout bounds each try; the retry timeout each try but the last.
			name: "Linkerd: retry timeout on all tries but the last, response timeout on each, request on the whole", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/timeout: 300ms\n    timeout.linkerd.io/request: 2s\n    timeout.linkerd.io/response: 1500ms"),
			want: LayerTime{PerTry: 300 * ms, LastTry: 1500 * ms, Timeout: 2 * time.Second, BackoffBase: LinkerdBackoffBase, BackoffMax: LinkerdBackoffMax, Source: "Service emojivoto/emoji-svc"},
		},
		{
			name: "Linkerd: a retry timeout alone leaves the last try unbounded", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/timeout: 300ms"),
			want: LayerTime{PerTry: 300 * ms, LastTry: graph.Forever, BackoffBase: LinkerdBackoffBase, BackoffMax: LinkerdBackoffMax, Source: "Service emojivoto/emoji-svc"},
		},
		{
			name: "Linkerd: a response timeout alone bounds every try, the last included", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    timeout.linkerd.io/response: 1s\n    timeout.linkerd.io/idle: 10s"),
			want: LayerTime{PerTry: time.Second, BackoffBase: LinkerdBackoffBase, BackoffMax: LinkerdBackoffMax, Source: "Service emojivoto/emoji-svc"},
		},
		{
			name: "Linkerd: a response timeout shorter than the retry timeout bounds every try", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/timeout: 2s\n    timeout.linkerd.io/response: 1s"),
			want: LayerTime{PerTry: time.Second, BackoffBase: LinkerdBackoffBase, BackoffMax: LinkerdBackoffMax, Source: "Service emojivoto/emoji-svc"},
		},
		{
			// Istio's retry.ConvertPolicy gives Envoy no retry policy for attempts unset or 0,
			// and the per-try timeout is part of it (the warning: TestLayerTimeIgnoredPerTry).
			name: "VirtualService retries without attempts: no per-try timeout applies", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {perTryTimeout: 1s, backoff: 1s}\n    timeout: 5s"),
			want: envoy(0, 5*time.Second, "VirtualService bookinfo/ratings spec.http[0]"),
		},
		{
			// Istio hands retries.backoff to Envoy as its base interval; Envoy caps at 10x.
			name: "VirtualService retries.backoff is the base, ten times it the cap", caller: caller("bookinfo"), callee: "ratings",
			docs: nsIstio + "\n---\n" + vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 3, perTryTimeout: 2s, backoff: 1s}"),
			want: LayerTime{PerTry: 2 * time.Second, BackoffBase: time.Second, BackoffMax: 10 * time.Second, Source: "VirtualService bookinfo/ratings spec.http[0]"},
		},
		{
			name: "GAMMA rule: timeouts.backendRequest per try, request overall, retry.backoff the base", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "reviews", "",
				"  parentRefs: [{group: \"\", kind: Service, name: reviews}]\n  rules:\n  - retry: {attempts: 2, backoff: 100ms}\n    timeouts: {request: 4s, backendRequest: 1s}"),
			want: LayerTime{PerTry: time.Second, Timeout: 4 * time.Second, BackoffBase: 100 * ms, BackoffMax: time.Second, Source: "HTTPRoute bookinfo/reviews spec.rules[0]"},
		},
		{
			// Istio's gateway conversion: without retry, backendRequest is the VirtualService's
			// timeout (over request), under Istio's default tries with no per-try timeout.
			name: "GAMMA rule without retry: backendRequest bounds the whole, in place of request", caller: caller("bookinfo"), callee: "reviews",
			docs: nsIstio + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "bookinfo", "reviews", "",
				"  parentRefs: [{group: \"\", kind: Service, name: reviews}]\n  rules:\n  - timeouts: {request: 4s, backendRequest: 1s}"),
			want: envoy(0, time.Second, "HTTPRoute bookinfo/reviews spec.rules[0]"),
		},
		{
			// Linkerd reads no rules[].retry (the tries: counted as declared) and no
			// backendRequest: only rules[].timeouts.request, unless the route's annotation sets
			// one, and its response timeout on every try.
			name: "GAMMA rule served by Linkerd: no backendRequest, its request timeout, the annotation's response", caller: caller("emojivoto"), callee: "emoji-svc",
			docs: nsLinkerd + "\n---\n" + routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "emojivoto", "r", "timeout.linkerd.io/response: 700ms",
				"  parentRefs: [{group: \"\", kind: Service, name: emoji-svc}]\n  rules:\n  - retry: {attempts: 2, backoff: 1s}\n    timeouts: {request: 4s, backendRequest: 1s}"),
			want: LayerTime{PerTry: 700 * ms, Timeout: 4 * time.Second, BackoffBase: LinkerdBackoffBase, BackoffMax: LinkerdBackoffMax, Source: "HTTPRoute emojivoto/r spec.rules[0]"},
		},
		{
			name: "north-south route rule timeouts", entry: &ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 2}\n    timeouts: {request: 10s}"),
			want: envoy(0, 10*time.Second, "HTTPRoute shop/web spec.rules[0]"),
		},
		{
			name: "Envoy Gateway BackendTrafficPolicy: requestTimeout, perRetry timeout and backOff", entry: &ServiceRef{"shop", "frontend"},
			docs: north("  - backendRefs: [{name: frontend}]") + "\n---\n" +
				btp("shop", "p", "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}",
					"  timeout: {http: {requestTimeout: 8s}}\n  retry:\n    numRetries: 3\n    perRetry: {timeout: 2s, backOff: {baseInterval: 50ms, maxInterval: 400ms}}"),
			want: LayerTime{PerTry: 2 * time.Second, Timeout: 8 * time.Second, BackoffBase: 50 * ms, BackoffMax: 400 * ms, Source: "BackendTrafficPolicy shop/p"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := set(t, Options{}, tc.docs)
			var e Edge
			if tc.entry != nil {
				e = s.Entry(*tc.entry)
			} else {
				e = s.Edge(tc.caller, tc.callee)
			}
			if len(e.Layers) != 1 {
				t.Fatalf("layers %+v", e.Layers)
			}
			if got := s.LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("LayerTime(%+v)\n got %+v\nwant %+v", e.Layers[0], got, tc.want)
			}
			// A clone reads the same; removing the object drops its timeouts.
			if got := s.Clone().LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("clone: %+v", got)
			}
		})
	}
}

func TestLayerTimeErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{vs("bookinfo", "ratings", "  http:\n  - timeout: \"1.5\"\n"),
			`VirtualService bookinfo/ratings spec.http[0].timeout: "1.5" is not a duration ("500ms", "2s")`},
		{vs("bookinfo", "ratings", "  http:\n  - {}\n  - retries: {attempts: 2, perTryTimeout: -1s}\n"),
			`VirtualService bookinfo/ratings spec.http[1].retries.perTryTimeout: "-1s" is not a duration ("500ms", "2s")`},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{timeouts: {backendRequest: soon}}]"),
			`HTTPRoute shop/web spec.rules[0].timeouts.backendRequest: "soon" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{btp("shop", "p", "{kind: Gateway, name: eg}", "  retry: {perRetry: {backOff: {baseInterval: x}}}"),
			`BackendTrafficPolicy shop/p spec.retry.perRetry.backOff.baseInterval: "x" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		// Go reads these; the owner's API refuses them, so the mesh never applies them.
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{timeouts: {request: 1.5s}}]"),
			`HTTPRoute shop/web spec.rules[0].timeouts.request: "1.5s" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{timeouts: {request: 10s, backendRequest: 500us}}]"),
			`HTTPRoute shop/web spec.rules[0].timeouts.backendRequest: "500us" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{timeouts: {request: 100000s}}]"),
			`HTTPRoute shop/web spec.rules[0].timeouts.request: "100000s" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		// GEP-2257 allows a unit twice; Go reads the sum.
		// The Gateway API's GRPCRoute has no timeouts: a bound no implementation applies.
		{routeDoc("gateway.networking.k8s.io/v1", "GRPCRoute", "shop", "web", "", "  rules: [{timeouts: {request: 2s}}]"),
			`GRPCRoute shop/web spec.rules[0].timeouts: the Gateway API's GRPCRoute has no timeouts field (the API server drops it): bound the calls with an Envoy Gateway BackendTrafficPolicy, a VirtualService or the callers' per-try timeouts`},
		// The CRD's rule: backendRequest (each try) within request (the whole).
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{}, {timeouts: {request: 2s, backendRequest: 5s}}]"),
			`HTTPRoute shop/web spec.rules[1].timeouts: backendRequest "5s" is longer than request "2s", which the API server refuses (backendRequest is each try, request all of them)`},
		{vs("bookinfo", "ratings", "  http:\n  - timeout: 0s\n"),
			`VirtualService bookinfo/ratings spec.http[0].timeout: "0s" is refused by Istio (at least 1ms): leave the field out for no timeout`},
		{vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: 2, perTryTimeout: \"-0s\"}\n"),
			`VirtualService bookinfo/ratings spec.http[0].retries.perTryTimeout: "-0s" is refused by Istio (at least 1ms): leave the field out for no timeout`},
		{vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: 2, backoff: \"5\"}\n"),
			`VirtualService bookinfo/ratings spec.http[0].retries.backoff: "5" is not a duration ("500ms", "2s")`},
		{routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  rules: [{retry: {backoff: \"-1s\"}}]"),
			`HTTPRoute shop/web spec.rules[0].retry.backoff: "-1s" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{btp("shop", "p", "{kind: Gateway, name: eg}", "  timeout: {http: {requestTimeout: 1h1m1s1ms1h}}"),
			`BackendTrafficPolicy shop/p spec.timeout.http.requestTimeout: "1h1m1s1ms1h" is not a Gateway API duration: 1 to 4 parts of up to 5 digits and a unit h, m, s or ms ("500ms", "1h30m")`},
		{vs("bookinfo", "ratings", "  http:\n  - retries: {attempts: 2, perTryTimeout: 500us}\n"),
			`VirtualService bookinfo/ratings spec.http[0].retries.perTryTimeout: "500us" is not a whole number of milliseconds of at least 1ms, as Istio requires`},
		{vs("bookinfo", "ratings", "  http:\n  - timeout: 1.0005s\n"),
			`VirtualService bookinfo/ratings spec.http[0].timeout: "1.0005s" is not a whole number of milliseconds of at least 1ms, as Istio requires`},
		{vs("bookinfo", "ratings", "  http:\n  - timeout: 9999999999h\n"),
			`VirtualService bookinfo/ratings spec.http[0].timeout: "9999999999h" is not a duration ("500ms", "2s")`},
	} {
		s := NewSet(Options{})
		_, err := s.AddManifest([]byte(tc.doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("AddManifest error = %v\nwant %q", err, tc.want)
		}
		if got := s.Counts(); len(got) != 0 {
			t.Errorf("an invalid object was added: %v", got)
		}
	}
}

// A Linkerd timeout annotation Linkerd cannot parse is ignored by Linkerd (no timeout): the
// model counts no timeout, keeps the Service's retries, and warns on the edge naming the object,
// the annotation and the value. Refusing the object (as before) dropped its retries from the
// status, which leaves out what the Set refuses.
func TestLinkerdTimeoutIgnored(t *testing.T) {
	const lk = `is not a Linkerd duration: a whole number and one unit ms, s, m, h or d ("500ms", "90s"): Linkerd ignores it: counted as no timeout`
	// A request, response or idle timeout that does not parse: Linkerd drops all three.
	const lkAll = `is not a Linkerd duration: a whole number and one unit ms, s, m, h or d ("500ms", "90s"): Linkerd ignores it, and timeout.linkerd.io/request, /response and /idle with it: counted as no timeout`
	for _, tc := range []struct {
		annotations string
		want        LayerTime
		warnings    []string
	}{
		{"retry.linkerd.io/timeout: \"5\"\n    timeout.linkerd.io/request: 2s", LayerTime{Timeout: 2 * time.Second},
			[]string{`Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/timeout"]: "5" ` + lk}},
		{"timeout.linkerd.io/request: 1m30s\n    timeout.linkerd.io/response: 1.5s", LayerTime{}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/request"]: "1m30s" ` + lkAll,
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/response"]: "1.5s" ` + lkAll}},
		{"retry.linkerd.io/timeout: 300us\n    timeout.linkerd.io/request: \"-1s\"", LayerTime{}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/timeout"]: "300us" ` + lk,
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/request"]: "-1s" ` + lkAll}},
		// One bad timeout annotation drops the others: the 2s request timeout is not applied
		// (Linkerd's parse_timeouts fails whole), and the idle one is read for that alone.
		{"timeout.linkerd.io/request: 2s\n    timeout.linkerd.io/idle: 1.5s", LayerTime{}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/idle"]: "1.5s" ` + lkAll}},
		{"timeout.linkerd.io/response: 1s\n    timeout.linkerd.io/request: \"5\"", LayerTime{}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/request"]: "5" ` + lkAll}},
		// Linkerd counts in milliseconds of a u64: past that it refuses the value.
		{"timeout.linkerd.io/request: 18446744073709551615s", LayerTime{}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/request"]: "18446744073709551615s" ` + lkAll}},
		{"retry.linkerd.io/timeout: 18446744073709551616s", LayerTime{},
			[]string{`Service emojivoto/emoji-svc metadata.annotations["retry.linkerd.io/timeout"]: "18446744073709551616s" ` + lk}},
		{"timeout.linkerd.io/request: 1d", LayerTime{Timeout: 24 * time.Hour}, nil},
		// A zero is passed on to the proxy as a deadline of now: said, not read as "none" in silence.
		{"timeout.linkerd.io/request: \"0\"\n    timeout.linkerd.io/response: 2s", LayerTime{PerTry: 2 * time.Second}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/request"]: "0" is a zero timeout, which Linkerd's proxy enforces (every request fails at once), not "none": leave the annotation out for no timeout; counted as no timeout`}},
		{"retry.linkerd.io/timeout: 0s\n    timeout.linkerd.io/idle: 0ms", LayerTime{}, []string{
			`Service emojivoto/emoji-svc metadata.annotations["timeout.linkerd.io/idle"]: "0ms" is a zero timeout, which Linkerd's proxy enforces (every request fails at once), not "none": leave the annotation out for no timeout; counted as no timeout`}},
	} {
		s := set(t, Options{}, nsLinkerd+"\n---\n"+svc("emojivoto", "emoji-svc", "retry.linkerd.io/http: 5xx\n    retry.linkerd.io/limit: \"2\"\n    "+tc.annotations))
		e := s.Edge(caller("emojivoto"), "emoji-svc")
		if len(e.Layers) != 1 || e.Layers[0].Tries != 3 {
			t.Fatalf("%s: layers %+v, want Linkerd's 3 tries kept", tc.annotations, e.Layers)
		}
		want := tc.want
		want.BackoffBase, want.BackoffMax = LinkerdBackoffBase, LinkerdBackoffMax
		if want.Timeout > 0 || want.PerTry > 0 {
			want.Source = "Service emojivoto/emoji-svc"
		}
		if got := s.LayerTime(e.Layers[0]); got != want {
			t.Errorf("%s: LayerTime %+v, want %+v", tc.annotations, got, want)
		}
		if !slices.Equal(e.Warnings, tc.warnings) {
			t.Errorf("%s: warnings\n%q\nwant\n%q", tc.annotations, e.Warnings, tc.warnings)
		}
	}
}

// TestDurationGrammars: each owner's values that Go's parser would read differently.
func TestDurationGrammars(t *testing.T) {
	for _, tc := range []struct {
		g    grammar
		in   string
		want time.Duration
		ok   bool
	}{
		{gatewayGrammar, "0s", 0, true},
		{gatewayGrammar, "1h30m", 90 * time.Minute, true},
		{gatewayGrammar, "99999h59m59s999ms", 99999*time.Hour + 59*time.Minute + 59*time.Second + 999*ms, true},
		{gatewayGrammar, "500ms", 500 * ms, true},
		{gatewayGrammar, "1µs", 0, false},
		{gatewayGrammar, " 1s", 0, false},
		{gatewayGrammar, "+1s", 0, false},
		{gatewayGrammar, "1e3s", 0, false},
		{linkerdGrammar, "0", 0, true},
		{linkerdGrammar, " 2s ", 2 * time.Second, true},
		{linkerdGrammar, "1d", 24 * time.Hour, true},
		{linkerdGrammar, "+5s", 5 * time.Second, true}, // Rust's u64 parser takes a "+"
		{linkerdGrammar, "90m", 90 * time.Minute, true},
		{linkerdGrammar, "18446744073709551615ms", time.Duration(1<<63 - 1), true}, // saturated, never wrapped
		{linkerdGrammar, "18446744073709551615d", 0, false},                        // past a u64 of ms: Linkerd refuses it
		{linkerdGrammar, "18446744073709551s", time.Duration(1<<63 - 1), true},     // 18446744073709551000ms: within a u64
		{linkerdGrammar, "18446744073709552s", 0, false},
		{linkerdGrammar, "1", 0, false},
		{linkerdGrammar, "s", 0, false},
		{linkerdGrammar, "1us", 0, false},
		{linkerdGrammar, "1 s", 0, false},
		{goPlainGrammar, "1.5s", 1500 * ms, true}, // Linkerd's HTTPRoute: the CRD's format duration
		{goPlainGrammar, "500us", 500 * time.Microsecond, true},
		{goPlainGrammar, "0s", 0, true},
		{goPlainGrammar, "-1s", 0, false},
		{goPlainGrammar, "5", 0, false},
		{goGrammar, "1.5s", 1500 * ms, true},
		{goGrammar, "1m30s", 90 * time.Second, true},
		{goGrammar, "0s", 0, false}, // Istio's CRD: at least 1ms
		{goGrammar, "1h1h", 2 * time.Hour, true},
		{goGrammar, "0.5s", 500 * ms, true},
		{goGrammar, "5", 0, false},
		{gatewayGrammar, "1h1h", 2 * time.Hour, true},
		{gatewayGrammar, "0.5s", 0, false},
		{gatewayGrammar, "99999999h", 0, false},
		{goGrammar, "1ms", ms, true},
		{goGrammar, "1µs", 0, false},
		{goGrammar, "-0s", 0, false},
		{goGrammar, "1e9s", 0, false},
	} {
		v := tc.in
		d, err := parseTime("X a/b", "f", &v, tc.g)
		if (err == nil) != tc.ok || d != tc.want {
			t.Errorf("grammar %d %q: %v, %v; want %v, ok %v", tc.g, tc.in, d, err, tc.want, tc.ok)
		}
	}
}

func TestLayerTimeRemoved(t *testing.T) {
	s := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 2, perTryTimeout: 1s}"))
	l := s.Edge(caller("bookinfo"), "ratings").Layers[0]
	if got := s.LayerTime(l).PerTry; got != time.Second {
		t.Fatalf("per try %v", got)
	}
	if !s.Remove(GroupIstio, "VirtualService", "bookinfo", "ratings") {
		t.Fatal("not removed")
	}
	if got := s.LayerTime(l); got.PerTry != 0 || got.Source != "" {
		t.Fatalf("after remove: %+v", got)
	}
}

// Istio's MeshConfig retry policies bring their per-try timeout and backoff with their tries: a
// route that sets no retries takes defaultHttpRetryPolicy whole (pilot's route.go), and the
// inbound policy honours attempts, retryOn and backoff. Without them a mesh-wide backoff of 1s
// was timed as Envoy's 25ms.
func TestLayerTimeMeshConfig(t *testing.T) {
	cm := func(mesh string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: |\n" + mesh
	}
	inside := Caller{Name: "Deployment shop/web", Namespace: "shop"}
	ns := "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled}}\n"
	const src = "ConfigMap istio-system/istio data.mesh"
	for _, tc := range []struct {
		name, mesh, extra string
		want              []LayerTime
	}{
		{"no VirtualService: the mesh default's per-try timeout and backoff",
			"    defaultHttpRetryPolicy: {attempts: 3, perTryTimeout: 2s, backoff: 1s}\n", "",
			[]LayerTime{{PerTry: 2 * time.Second, BackoffBase: time.Second, BackoffMax: 10 * time.Second, Source: src}}},
		{"a route without retries: its timeout, the mesh default's per-try timeout and backoff",
			"    defaultHttpRetryPolicy: {attempts: 3, perTryTimeout: 2s, backoff: 100ms}\n",
			vs("shop", "orders", "  hosts: [orders]\n  http:\n  - timeout: 9s"),
			[]LayerTime{{PerTry: 2 * time.Second, Timeout: 9 * time.Second, BackoffBase: 100 * ms, BackoffMax: time.Second, Source: "VirtualService shop/orders spec.http[0]"}}},
		{"a route with retries: its own, not the mesh default's",
			"    defaultHttpRetryPolicy: {attempts: 3, perTryTimeout: 2s, backoff: 1s}\n",
			vs("shop", "orders", "  hosts: [orders]\n  http:\n  - retries: {attempts: 1}"),
			[]LayerTime{{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}}},
		// Istio validates no field of defaultHttpRetryPolicy (istio/istio 86c9f01fd735
		// pkg/config/validation/agent/validation.go:1072, ValidateMeshConfig checks the inbound
		// policy alone), and retry.ConvertPolicy (pilot/pkg/networking/core/route/retry/
		// retry.go:114-117) gives Envoy no retry policy at all for attempts 0 or unset: no
		// per-try timeout. Before: 2s per try counted on a route Envoy never cuts.
		{"the mesh default with attempts 0: no retry policy, its per-try timeout dropped",
			"    defaultHttpRetryPolicy: {attempts: 0, perTryTimeout: 2s, backoff: 1s}\n", "",
			[]LayerTime{{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}}},
		{"the mesh default without attempts: the same",
			"    defaultHttpRetryPolicy: {perTryTimeout: 2s}\n", "",
			[]LayerTime{{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}}},
		// "0s" is not validated there either: Envoy reads a per-try timeout of 0 as none
		// (before: an error, "refused by Istio", and the check stopped on a MeshConfig Istio runs).
		{"the mesh default's perTryTimeout 0s: none, no error",
			"    defaultHttpRetryPolicy: {attempts: 2, perTryTimeout: 0s, backoff: 100ms}\n", "",
			[]LayerTime{{BackoffBase: 100 * ms, BackoffMax: time.Second, Source: src}}},
		{"the inbound policy's backoff",
			"    defaultInboundHttpRetryPolicy: {attempts: 2, retryOn: 5xx, backoff: 500ms}\n", "",
			[]LayerTime{{BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax}, {BackoffBase: 500 * ms, BackoffMax: 5 * time.Second, Source: src}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs := ns + "---\n" + cm(tc.mesh)
			if tc.extra != "" {
				docs += "---\n" + tc.extra
			}
			s := set(t, Options{}, docs)
			e := s.Edge(inside, "orders")
			var got []LayerTime
			for _, l := range e.Layers {
				got = append(got, s.LayerTime(l))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("layers %+v\n got %+v\nwant %+v", e.Layers, got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ mesh, want string }{
		{"    defaultHttpRetryPolicy: {attempts: 2, perTryTimeout: 1.5}\n",
			`ConfigMap istio-system/istio data.mesh defaultHttpRetryPolicy.perTryTimeout: "1.5" is not a duration ("500ms", "2s")`},
		{"    defaultInboundHttpRetryPolicy: {attempts: 2, retryOn: 5xx, backoff: soon}\n",
			`ConfigMap istio-system/istio data.mesh defaultInboundHttpRetryPolicy.backoff: "soon" is not a duration ("500ms", "2s")`},
	} {
		if _, err := NewSet(Options{}).AddManifest([]byte(cm(tc.mesh))); err == nil || err.Error() != tc.want {
			t.Errorf("error %v\nwant %s", err, tc.want)
		}
	}
}

// Linkerd's own HTTPRoute reads its timeouts in Go's form (its CRD's format duration): "1.5s"
// is valid there, where the Gateway API's Duration refuses it.
func TestLinkerdRouteDurations(t *testing.T) {
	doc := routeDoc("policy.linkerd.io/v1beta3", "HTTPRoute", "emojivoto", "r", "", "  rules: [{timeouts: {request: 1.5s, backendRequest: 500us}}]")
	if _, err := NewSet(Options{}).AddManifest([]byte(doc)); err != nil {
		t.Fatalf("refused: %v", err)
	}
	doc = routeDoc("policy.linkerd.io/v1beta3", "HTTPRoute", "emojivoto", "r", "", "  rules: [{timeouts: {request: \"-1s\"}}]")
	want := `HTTPRoute emojivoto/r spec.rules[0].timeouts.request: "-1s" is not a duration ("500ms", "1m30s")`
	if _, err := NewSet(Options{}).AddManifest([]byte(doc)); err == nil || err.Error() != want {
		t.Fatalf("error %v\nwant %s", err, want)
	}
}

// TestLayerTimeIgnoredPerTry: the per-try timeout of a VirtualService route without retries is
// said to apply nowhere, on the edge, naming the object, the field and the value.
func TestLayerTimeIgnoredPerTry(t *testing.T) {
	s := set(t, Options{}, nsIstio+"\n---\n"+vs("bookinfo", "ratings", "  hosts: [ratings]\n  http:\n  - retries: {attempts: 0, perTryTimeout: 1s}"))
	e := s.Edge(caller("bookinfo"), "ratings")
	want := []string{`VirtualService bookinfo/ratings spec.http[0].retries.perTryTimeout: "1s" with no retries (attempts 0 or unset): Istio drops the retry policy and the per-try timeout with it: counted as no per-try timeout`}
	if !slices.Equal(e.Warnings, want) {
		t.Fatalf("warnings %q\nwant %q", e.Warnings, want)
	}
	if lt := s.LayerTime(e.Layers[0]); lt.PerTry != 0 {
		t.Fatalf("per try %v", lt.PerTry)
	}
}

// TestLayerTimeEnvoyGateway: the route timeout of an entry layer Envoy Gateway serves (a
// BackendTrafficPolicy covers the route), as envoyproxy/gateway d32f28294245 builds it:
// internal/xds/translator/route.go:118-123 sets the Envoy route's timeout only from
// getEffectiveRequestTimeout (:442-456: the rule's timeout, "gateway-api timeout takes
// precedence", else the policy's timeout.http.requestTimeout); internal/gatewayapi/route.go
// :1086-1106 processRouteTimeout makes the rule's timeout timeouts.request, or backendRequest
// when the rule has no retry, "0s" included (none); with neither, Envoy's own default applies,
// 15s (envoyproxy/envoy 0036e0f1623d source/common/router/config_impl.h DEFAULT_ROUTE_TIMEOUT_MS
// = 15000; Envoy Gateway's own golden internal/xds/translator/testdata/out/xds-ir/
// retry.routes.yaml has retry policies and no route timeout). The retry and its per-try timeout
// are the rule's when it has one, else the policy's (internal/ir/xds.go:1101-1111 GetRetry). Before, an entry layer's timeout was its own
// object's alone: the policy's 10s where the rule's 60s applies (a false pass), none where the
// policy's 8s or Envoy's 15s applies.
func TestLayerTimeEnvoyGateway(t *testing.T) {
	north := func(rules string) string {
		return routeDoc("gateway.networking.k8s.io/v1", "HTTPRoute", "shop", "web", "", "  parentRefs: [{name: eg}]\n  rules:\n"+rules)
	}
	const (
		toWeb = "{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}"
		toGW  = "{group: gateway.networking.k8s.io, kind: Gateway, name: eg}"
		s     = time.Second
	)
	envoy := func(per, total time.Duration, source string) LayerTime {
		return LayerTime{PerTry: per, Timeout: total, BackoffBase: EnvoyBackoffBase, BackoffMax: EnvoyBackoffMax, Source: source}
	}
	for _, tc := range []struct {
		name, docs string
		layer      string // the entry layer's object
		want       LayerTime
		before     time.Duration // the timeout read before
	}{
		{"the rule's request timeout over the policy's, under the policy's retry",
			north("  - backendRefs: [{name: frontend}]\n    timeouts: {request: 60s}") + "\n---\n" +
				btp("shop", "p", toWeb, "  retry: {numRetries: 2}\n  timeout: {http: {requestTimeout: 10s}}"), "BackendTrafficPolicy shop/p",
			envoy(0, 60*s, "BackendTrafficPolicy shop/p, HTTPRoute shop/web spec.rules[0]"), 10 * s},
		{"the rule's backendRequest without retry is the route timeout, the policy's perRetry the tries'",
			north("  - backendRefs: [{name: frontend}]\n    timeouts: {backendRequest: 3s}") + "\n---\n" +
				btp("shop", "p", toWeb, "  retry:\n    numRetries: 2\n    perRetry: {timeout: 1s}\n  timeout: {http: {requestTimeout: 10s}}"), "BackendTrafficPolicy shop/p",
			envoy(s, 3*s, "BackendTrafficPolicy shop/p, HTTPRoute shop/web spec.rules[0]"), 10 * s},
		{"the rule's \"0s\": no timeout, not the policy's",
			north("  - backendRefs: [{name: frontend}]\n    timeouts: {request: 0s}") + "\n---\n" +
				btp("shop", "p", toWeb, "  retry: {numRetries: 2}\n  timeout: {http: {requestTimeout: 10s}}"), "BackendTrafficPolicy shop/p",
			envoy(0, 0, "BackendTrafficPolicy shop/p, HTTPRoute shop/web spec.rules[0]"), 10 * s},
		{"the rule's own retry under a Gateway's policy's requestTimeout",
			north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 2}") + "\n---\n" +
				btp("shop", "g", toGW, "  timeout: {http: {requestTimeout: 8s}}"), "HTTPRoute shop/web",
			envoy(0, 8*s, "BackendTrafficPolicy shop/g spec.timeout.http.requestTimeout"), 0},
		{"the rule's retry and backendRequest, no timeout anywhere: Envoy's 15s over the tries",
			north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 2}\n    timeouts: {backendRequest: 2s}") + "\n---\n" +
				btp("shop", "g", toGW, "  retry: {numRetries: 5}"), "HTTPRoute shop/web",
			envoy(2*s, 15*s, "HTTPRoute shop/web spec.rules[0], Envoy's default route timeout 15s (BackendTrafficPolicy shop/g and HTTPRoute shop/web set none)"), 0},
		{"the policy's retry, no timeout anywhere: Envoy's 15s",
			north("  - backendRefs: [{name: frontend}]") + "\n---\n" + btp("shop", "p", toWeb, "  retry: {numRetries: 4}"), "BackendTrafficPolicy shop/p",
			envoy(0, 15*s, "Envoy's default route timeout 15s (BackendTrafficPolicy shop/p and HTTPRoute shop/web set none)"), 0},
		{"the policy's \"0s\": no timeout, not Envoy's 15s",
			north("  - backendRefs: [{name: frontend}]") + "\n---\n" + btp("shop", "p", toWeb, "  retry: {numRetries: 4}\n  timeout: {http: {requestTimeout: 0s}}"), "BackendTrafficPolicy shop/p",
			envoy(0, 0, "BackendTrafficPolicy shop/p spec.timeout.http.requestTimeout"), 0},
		{"the route's policy sets no timeout, a Gateway's 60s: the longer (mergeType would merge them)",
			north("  - backendRefs: [{name: frontend}]") + "\n---\n" + btp("shop", "p", toWeb, "  retry: {numRetries: 1}") + "\n---\n" +
				btp("shop", "g", toGW, "  timeout: {http: {requestTimeout: 60s}}"), "BackendTrafficPolicy shop/p",
			envoy(0, 60*s, "BackendTrafficPolicy shop/g spec.timeout.http.requestTimeout"), 0},
		{"no policy covers the route: its implementation is not known, its rule's timeouts alone",
			north("  - backendRefs: [{name: frontend}]\n    retry: {attempts: 2}"), "HTTPRoute shop/web",
			envoy(0, 0, ""), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := set(t, Options{}, tc.docs)
			e := set.Entry(ServiceRef{"shop", "frontend"})
			if len(e.Layers) != 1 || e.Layers[0].Object != tc.layer {
				t.Fatalf("layers %+v, want one of %s", e.Layers, tc.layer)
			}
			if got := set.LayerTime(e.Layers[0]); got != tc.want {
				t.Errorf("LayerTime(%+v)\n got %+v\nwant %+v", e.Layers[0], got, tc.want)
			}
			if got := set.layerTimeOwn(e.Layers[0]).Timeout; got != tc.before {
				t.Errorf("the layer's own object's timeout (read before) %v, want %v", got, tc.before)
			}
		})
	}
}
