package mesh

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The mesh readers take objects from manifests and clusters anyone may write. FuzzMeshObjects
// turns a fuzz byte stream into objects of every kind the package reads (each a small template
// of that kind, its values swapped for hostile ones: huge, negative, fractional numbers, wrong
// types, odd durations, long strings) and reads them: never a panic, an error that names the
// object, and what is read stays in bounds. go test runs the seeds and testdata/fuzz;
// go test -run '^$' -fuzz '^FuzzMeshObjects$' ./internal/mesh fuzzes.

// fuzzTemplates are one object of each kind read, written for this test, all about the Service
// orders in namespace shop.
var fuzzTemplates = []string{
	"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vs, namespace: shop}\nspec:\n  hosts: [orders]\n  http:\n  - timeout: 10s\n    retries: {attempts: 3, perTryTimeout: 2s, retryOn: 5xx, backoff: 25ms}\n    route: [{destination: {host: orders, port: {number: 8080}}}]\n    delegate: {name: d, namespace: shop}",
	"apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: hr, namespace: shop, annotations: {retry.linkerd.io/limit: '3', timeout.linkerd.io/request: 5s}}\nspec:\n  parentRefs: [{group: '', kind: Service, name: orders}, {name: gw}]\n  rules:\n  - backendRefs: [{name: orders, port: 8080}]\n    timeouts: {request: 10s, backendRequest: 2s}\n    retry: {attempts: 3, codes: [503], backoff: 100ms}",
	"apiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: gr, namespace: shop}\nspec:\n  parentRefs: [{group: '', kind: Service, name: orders}]\n  rules:\n  - backendRefs: [{name: orders, port: 8080}]\n    retry: {attempts: 2}",
	"apiVersion: policy.linkerd.io/v1beta3\nkind: HTTPRoute\nmetadata: {name: lr, namespace: shop, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: '2', retry.linkerd.io/timeout: 300ms, timeout.linkerd.io/response: 1s}}\nspec:\n  parentRefs: [{group: core, kind: Service, name: orders}]\n  rules: [{timeouts: {request: 2s, backendRequest: 1s}}]",
	"apiVersion: v1\nkind: Service\nmetadata: {name: orders, namespace: shop, annotations: {retry.linkerd.io/http: 5xx, retry.linkerd.io/grpc: unavailable, retry.linkerd.io/limit: '4', timeout.linkerd.io/request: 3s, consul.hashicorp.com/service-name: orders}}\nspec:\n  ports: [{name: http, port: 8080, protocol: TCP, appProtocol: http}]",
	"apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata: {name: orders.shop.svc.cluster.local, namespace: shop}\nspec:\n  routes: [{name: GET /, condition: {method: GET}, isRetryable: true, timeout: 1s}]\n  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10s}",
	"apiVersion: kuma.io/v1alpha1\nkind: MeshRetry\nmetadata: {name: mr, namespace: kuma-system, labels: {kuma.io/mesh: default}}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: orders, namespace: shop}\n    default: {http: {numRetries: 3, perTryTimeout: 1s, backOff: {baseInterval: 25ms, maxInterval: 250ms}}, grpc: {numRetries: 2}}",
	"apiVersion: kuma.io/v1alpha1\nkind: Mesh\nmetadata: {name: default}\nspec: {skipCreatingInitialPolicies: [MeshRetry]}",
	"apiVersion: consul.hashicorp.com/v1alpha1\nkind: ServiceRouter\nmetadata: {name: orders, namespace: shop}\nspec:\n  routes:\n  - match: {http: {pathPrefix: /}}\n    destination: {service: orders, numRetries: 4, retryOnConnectFailure: true, retryOnStatusCodes: [503], requestTimeout: 2s}",
	"apiVersion: dapr.io/v1alpha1\nkind: Resiliency\nmetadata: {name: res, namespace: shop}\nscopes: [checkout]\nspec:\n  policies:\n    retries:\n      once: {policy: constant, duration: 1s, maxRetries: 1}\n      DaprBuiltInServiceRetries: {maxRetries: 6}\n    timeouts: {short: 2s}\n  targets:\n    apps: {orders: {retry: once, timeout: short}}",
	"apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: BackendTrafficPolicy\nmetadata: {name: btp, namespace: shop}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: hr}]\n  timeout: {http: {requestTimeout: 5s}}\n  retry:\n    numRetries: 5\n    perRetry: {backOff: {baseInterval: 100ms, maxInterval: 10s}, timeout: 250ms}\n    retryOn: {httpStatusCodes: [500], triggers: [connect-failure, retriable-status-codes]}",
	"apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: ing, namespace: shop, annotations: {nginx.ingress.kubernetes.io/proxy-next-upstream: error timeout http_503, nginx.ingress.kubernetes.io/proxy-next-upstream-tries: '3', nginx.ingress.kubernetes.io/proxy-next-upstream-timeout: '5'}}\nspec:\n  ingressClassName: nginx\n  rules: [{http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: orders, port: {number: 8080}}}}]}}]",
	"apiVersion: networking.k8s.io/v1\nkind: IngressClass\nmetadata: {name: nginx}\nspec: {controller: k8s.io/ingress-nginx}",
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: istio, namespace: istio-system}\ndata:\n  mesh: \"defaultHttpRetryPolicy:\\n  attempts: 5\\n  perTryTimeout: 2s\\n  backoff: 10ms\\n\"",
	"apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: waypoint, namespace: shop, labels: {istio.io/waypoint-for: service}}\nspec: {gatewayClassName: istio-waypoint, listeners: [{name: mesh, port: 15008, protocol: HBONE}]}",
	"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {istio-injection: enabled, istio.io/use-waypoint: waypoint}, annotations: {linkerd.io/inject: enabled}}",
	// Fault injection (fault.go): Istio's route fault (a delay on the sidecars' route, another
	// on the gateway's, an abort) and Envoy Gateway's policy on a route and a Gateway.
	"apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: vsf, namespace: shop}\nspec:\n  hosts: [orders]\n  gateways: [mesh, shop/gw]\n  http:\n  - match: [{headers: {end-user: {exact: jason}}, gateways: [mesh]}]\n    fault:\n      delay: {percentage: {value: 50}, fixedDelay: 7s}\n      abort: {percentage: {value: 10}, httpStatus: 503}\n    timeout: 3s\n    retries: {attempts: 2, perTryTimeout: 1s}\n    route: [{destination: {host: orders, port: {number: 8080}}}]\n  - match: [{gateways: [shop/gw]}]\n    fault: {delay: {percent: 30, fixedDelay: 2s}, abort: {percentage: {value: 100}, grpcStatus: UNAVAILABLE}}\n    route: [{destination: {host: orders}}]",
	"apiVersion: gateway.envoyproxy.io/v1alpha1\nkind: BackendTrafficPolicy\nmetadata: {name: btpf, namespace: shop}\nspec:\n  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: hr}, {group: gateway.networking.k8s.io, kind: Gateway, name: gw}]\n  faultInjection:\n    delay: {fixedDelay: 7s, percentage: 50}\n    abort: {httpStatus: 503, percentage: 10}\n  timeout: {http: {requestTimeout: 5s}}\n  retry: {numRetries: 2}",
}

// hostileValues replace a template's leaves.
var hostileValues = []any{
	json.Number("-1"), json.Number("0"), json.Number("1"), json.Number("2147483648"), json.Number("9223372036854775807"),
	json.Number("9223372036854775808"), json.Number("1e300"), json.Number("-1e300"), json.Number("2.5"), json.Number("1e3"),
	"", "0", "-1", "+5", "1.5s", "-1s", "0s", "1d", "99999h99999h99999h99999h", "9223372036854775807ms", "2562048h",
	"18446744073709551615ms", "1h30m", "500us", " 2s ", "1ms1ms1ms1ms1ms", "5xx,5xx", "unavailable", "*", "99999999999999999999",
	strings.Repeat("a", 300), "true", true, false, nil, []any{}, map[string]any{}, []any{json.Number("1"), "x"},
}

// fuzzBytes hands out the fuzz input byte by byte (keep, 100, once it is used up: 0 would
// delete every member left, and a seed of a template's index alone read an empty object, not
// the template as written).
type fuzzBytes []byte

// keep is a byte that keeps a member and its value as they are.
const keep = 100

func (b *fuzzBytes) next() int {
	if len(*b) == 0 {
		return keep
	}
	c := (*b)[0]
	*b = (*b)[1:]
	return int(c)
}

// mutate swaps leaves of v for hostile values, drops members and keeps others, as b says.
func mutate(v any, b *fuzzBytes) any {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if k == "apiVersion" || k == "kind" {
				continue
			}
			switch c := b.next(); {
			case c < 16:
				delete(x, k)
			default:
				x[k] = mutate(x[k], b)
			}
		}
		return x
	case []any:
		if c := b.next(); c >= 240 && len(x) > 0 {
			x = append(x, clone(x[0])) // a repeat
		}
		for i := range x {
			x[i] = mutate(x[i], b)
		}
		return x
	}
	if c := b.next(); c >= 128 {
		return clone(hostileValues[c%len(hostileValues)])
	}
	return v
}

// clone is a deep copy of a decoded JSON value: a value placed twice in a tree must not be
// mutated through both places (or into a cycle).
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	}
	return v
}

// fuzzObjects builds the objects the input describes: for each of its first bytes, a template
// (byte % templates) mutated by the bytes after it.
func fuzzObjects(t *testing.T, data []byte) [][]byte {
	b := fuzzBytes(data)
	var objs [][]byte
	for n := 0; len(b) > 0 && n < 6; n++ {
		tpl := fuzzTemplates[b.next()%len(fuzzTemplates)]
		js, err := yaml.YAMLToJSON([]byte(tpl))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(strings.NewReader(string(js)))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		out, err := json.Marshal(mutate(v, &b))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, out)
	}
	return objs
}

// asWritten is the fuzz input that builds the templates idx, each as written: its index, then
// a keep for every byte mutate reads of it.
func asWritten(tb testing.TB, idx ...int) []byte {
	var out []byte
	for _, i := range idx {
		js, err := yaml.YAMLToJSON([]byte(fuzzTemplates[i]))
		if err != nil {
			tb.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(js, &v); err != nil {
			tb.Fatal(err)
		}
		out = append(out, byte(i))
		out = append(out, slices.Repeat([]byte{keep}, reads(v))...)
	}
	return out
}

// reads is how many bytes mutate reads of v when it keeps everything.
func reads(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := 0
		for k, e := range x {
			if k != "apiVersion" && k != "kind" {
				n += 1 + reads(e)
			}
		}
		return n
	case []any:
		n := 1
		for _, e := range x {
			n += reads(e)
		}
		return n
	}
	return 1
}

func FuzzMeshObjects(f *testing.F) {
	for i := range fuzzTemplates {
		f.Add([]byte{byte(i)})                                    // the template as written
		f.Add([]byte{byte(i), 200, 201, 202, 203, 204, 205, 206}) // its first leaves swapped
		f.Add([]byte{byte(i), 130, 140, 150, 160, 170, 180, 190, 210, 220, 230, 250, 255, 129, 131, 133, 135, 137, 139})
	}
	f.Add([]byte{15, 0, 4, 0, 0, 1, 0})
	// The fault templates with the routes and objects they bear on: the VirtualService with the
	// Namespace; the policy with the HTTPRoute (its retry dropped, so the policy's layer) and the
	// Gateway-targeted one.
	f.Add(asWritten(f, 16, 15))
	f.Add(asWritten(f, 1, 17))
	f.Add(asWritten(f, 17, 1, 10))
	callers := []Caller{
		{Name: "Deployment shop/checkout", Namespace: "shop", Labels: map[string]string{"app": "checkout"}},
		{Name: "Deployment shop/linkerd", Namespace: "shop", Annotations: map[string]string{"linkerd.io/inject": "enabled"}},
		{Name: "Deployment shop/kuma", Namespace: "shop", Annotations: map[string]string{"kuma.io/sidecar-injection": "enabled"}},
		{Name: "Deployment shop/dapr", Namespace: "shop", Annotations: map[string]string{"dapr.io/enabled": "true", "dapr.io/app-id": "checkout"}},
		{Name: "Deployment shop/consul", Namespace: "shop", Annotations: map[string]string{"consul.hashicorp.com/connect-inject": "true"}},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := NewSet(Options{})
		for _, obj := range fuzzObjects(t, data) {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			_ = json.Unmarshal(obj, &meta)
			_, err := s.AddJSON(obj)
			// An error names the object it refuses (its kind, and its name when it has one).
			if err != nil && (!strings.Contains(err.Error(), meta.Kind) || !strings.Contains(err.Error(), meta.Metadata.Name)) {
				t.Fatalf("%s\nrefused with %q: which object?", obj, err)
			}
		}
		var layers []Layer
		for _, c := range callers {
			for _, callee := range []string{"orders", "orders.shop.svc.cluster.local"} {
				for _, port := range []int32{0, 8080} {
					e := s.EdgePort(c, callee, port)
					if e.Tries() < 1 {
						t.Fatalf("%s -> %s:%d: %d tries", c.Name, callee, port, e.Tries())
					}
					layers = append(layers, e.Layers...)
				}
			}
		}
		for _, v := range s.Backends() {
			if e := s.Entry(v); e.Tries() < 1 {
				t.Fatalf("entry %v: %d tries", v, e.Tries())
			}
			layers = append(layers, s.EntryLayers(v)...)
		}
		for _, l := range layers {
			if l.Tries < 1 {
				t.Fatalf("layer %+v: fewer than 1 try", l)
			}
			lt := s.LayerTime(l)
			if lt.PerTry < 0 || lt.LastTry < 0 || lt.Timeout < 0 || lt.BackoffBase < 0 || lt.BackoffMax < 0 || lt.Delay < 0 {
				t.Fatalf("layer %+v: negative time %+v", l, lt)
			}
			_ = s.TimeLayer(l)
			for _, tries := range []int64{1, 2, l.Tries, math.MaxInt64} {
				_, _ = PlanRewrite(l, tries)
			}
		}
	})
}

// FuzzDurations: each mesh's duration grammar against an independent reading of it: Gateway
// API's by its regular expression (GEP-2257) summed exactly, Linkerd's annotations by their
// grammar with big numbers (a value whose milliseconds pass a u64 is refused, one past a
// time.Duration saturated), Istio's by time.ParseDuration (whole milliseconds, at least 1ms).
func FuzzDurations(f *testing.F) {
	for _, s := range []string{"500ms", "1h30m", "99999h99999h99999h99999h", "1.5s", "0", "0s", "1d", "+5s", " 2s ", "18446744073709551615ms", "18446744073709551616ms", "9223372036854775808ms", "106751991167d", "1m30s", "500us", "-1s", "1e3s", "00001h"} {
		f.Add(s)
	}
	gwPart := regexp.MustCompile(`([0-9]{1,5})(h|ms|m|s)`)
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute, "h": time.Hour, "d": 24 * time.Hour, "": 0}
	linkerdRE := regexp.MustCompile(`^\+?([0-9]+)(ms|s|m|h|d)?$`)
	f.Fuzz(func(t *testing.T, v string) {
		// Gateway API.
		d, err := parseTime("HTTPRoute shop/r", "spec.rules[0].timeouts.request", &v, gatewayGrammar)
		if gatewayDuration.MatchString(v) {
			var want time.Duration
			for _, m := range gwPart.FindAllStringSubmatch(v, -1) {
				n, _ := strconv.Atoi(m[1])
				want += time.Duration(n) * units[m[2]]
			}
			if err != nil || d != want {
				t.Fatalf("Gateway API %q: %v, %v; want %v", v, d, err, want)
			}
		} else if err == nil || !strings.Contains(err.Error(), "HTTPRoute shop/r spec.rules[0].timeouts.request") || !strings.Contains(err.Error(), strconv.Quote(v)) {
			t.Fatalf("Gateway API %q: %v, %v; want an error naming the object, field and value", v, d, err)
		}
		// Linkerd's annotations.
		ld, ok := parseLinkerdDuration(v)
		wantOK := false
		var want time.Duration
		if m := linkerdRE.FindStringSubmatch(strings.TrimSpace(v)); m != nil {
			n, _ := new(big.Int).SetString(m[1], 10)
			unit := units[m[2]]
			ms := new(big.Int).Mul(n, big.NewInt(int64(unit/time.Millisecond)))
			switch {
			case m[2] == "":
				wantOK = n.Sign() == 0
			case !n.IsUint64() || !ms.IsUint64():
			default:
				wantOK = true
				ns := new(big.Int).Mul(n, big.NewInt(int64(unit)))
				want = time.Duration(math.MaxInt64)
				if ns.IsInt64() {
					want = time.Duration(ns.Int64())
				}
			}
		}
		if ld != want || ok != wantOK {
			t.Fatalf("Linkerd %q: %v, %v; want %v, %v", v, ld, ok, want, wantOK)
		}
		// Istio's.
		d, err = parseTime("VirtualService shop/vs", "spec.http[0].timeout", &v, goGrammar)
		pd, perr := time.ParseDuration(strings.TrimSpace(v))
		if istioOK := perr == nil && pd >= time.Millisecond && pd%time.Millisecond == 0; istioOK != (err == nil) || (istioOK && d != pd) {
			t.Fatalf("Istio %q: %v, %v; time.ParseDuration %v, %v", v, d, err, pd, perr)
		}
		if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("VirtualService shop/vs spec.http[0].timeout: %q", v)) {
			t.Fatalf("Istio %q: the error %q names no object, field or value", v, err)
		}
	})
}
