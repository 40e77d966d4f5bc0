package webhook

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	jsonpatchv5 "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/publicdatatest"
)

// publicDocs are the documents of testdata/gate19/istio (SOURCES.md; taken from Istio's Go module
// at test time, from-modules.txt), each in namespace
// bookinfo, by "file#index", as YAML.
func publicDocs(t *testing.T) (names []string, docs map[string]string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(publicdatatest.Dir(t, "testdata/gate19/istio"), "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no public manifests: %v", err)
	}
	docs = map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range strings.Split(string(data), "\n---") {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("%s#%d: %v", f, i, err)
			}
			if m == nil {
				continue
			}
			md, _ := m["metadata"].(map[string]any)
			md["namespace"] = "bookinfo"
			out, err := yaml.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s#%d", filepath.Base(f), i)
			names = append(names, name)
			docs[name] = string(out)
		}
	}
	sort.Strings(names)
	return names, docs
}

// withRetries is doc (YAML) with every VirtualService http route's retries, or HTTPRoute rule's
// retry, set to attempts and the route timeout to timeout ("" leaves it).
func withRetries(t *testing.T, doc string, attempts int, perTry, timeout string) string {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	spec, _ := m["spec"].(map[string]any)
	switch m["kind"] {
	case "VirtualService":
		routes, _ := spec["http"].([]any)
		for _, r := range routes {
			rm := r.(map[string]any)
			rt := map[string]any{"attempts": attempts}
			if perTry != "" {
				rt["perTryTimeout"] = perTry
			}
			rm["retries"] = rt
			if timeout != "" {
				rm["timeout"] = timeout
			}
		}
	case "HTTPRoute":
		rules, _ := spec["rules"].([]any)
		for _, r := range rules {
			rm := r.(map[string]any)
			rt := map[string]any{"attempts": attempts}
			if perTry != "" {
				rt["perTryTimeout"] = perTry
			}
			rm["retry"] = rt
			if timeout != "" {
				rm["timeouts"] = map[string]any{"request": timeout}
			}
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// fieldRE is a field of the object and its value (or bounds) as refusals name them:
// `spec.http[0].retries.attempts: 5`, `metadata.annotations["retry.linkerd.io/limit"]: "5"`,
// `spec.rules[1]: per-try timeout 9s`, `spec.http[0] no longer takes`.
var fieldRE = regexp.MustCompile(`(spec|metadata)\.[A-Za-z0-9_.\[\]"/-]+(: \S| no longer takes)`)

var chainTimeRE = regexp.MustCompile(` = ([0-9.]+(?:ms|s|m)[0-9.smh]*) > maxTimeToAnswer`)

// worstTime is the longest chain time analyze reports over maxTimeToAnswer (0: none).
func worstTime(t *testing.T, over []string) time.Duration {
	t.Helper()
	var worst time.Duration
	for _, o := range over {
		for _, m := range chainTimeRE.FindAllStringSubmatch(o, -1) {
			d, err := time.ParseDuration(m[1])
			if err != nil {
				t.Fatalf("%q: %v", o, err)
			}
			worst = max(worst, d)
		}
	}
	return worst
}

// TestRedTeamPublicMeshObjects feeds the gate the Istio project's bookinfo samples (every
// VirtualService, HTTPRoute and ServiceEntry of samples/bookinfo/networking and gateway-api) as
// sent, with 5 attempts on every route, and with 5 attempts under a route timeout of 60s, as
// creates, under a cap of 2 and maxTimeToAnswer of 20s, in each enforcement; and odd shapes the
// API server stores (an empty http list, a match-only route, a weight-0 destination, a delegate,
// exportTo, wildcard hosts, an HTTPRoute without rules or backends); Linkerd's and Kuma's retry
// objects; and updates from one sample to another of the same name. Each decision must: not
// panic; under Reject, agree with retrycap analyze on the same objects (a denial over there,
// naming its chain; an admission not over where it was within); name the object in a refusal;
// under Rewrite, store an object Reject admits, whose worst time analyze finds no longer than as
// sent; under Audit, admit.
func TestRedTeamPublicMeshObjects(t *testing.T) {
	names, docs := publicDocs(t)
	var gateways []string
	for _, n := range names {
		if strings.Contains(docs[n], "kind: Gateway\n") {
			gateways = append(gateways, docs[n])
		}
	}
	// cluster, when not nil, is the input's own mesh (else the Istio one below).
	type input struct {
		name, object string
		cluster      []string
		// old, when not empty, is the stored version: the input is an update of it (in the
		// cluster in its place).
		old string
	}
	var inputs []input
	for _, n := range names {
		d := docs[n]
		kind := ""
		for _, k := range []string{"VirtualService", "HTTPRoute", "ServiceEntry"} {
			if strings.Contains(d, "kind: "+k+"\n") {
				kind = k
			}
		}
		if kind == "" {
			continue // DestinationRule, Gateway: no retry of their own, not sent to the gate
		}
		inputs = append(inputs, input{name: n, object: d})
		if kind != "ServiceEntry" {
			inputs = append(inputs,
				input{name: n + " attempts 5", object: withRetries(t, d, 5, "", "")},
				input{name: n + " attempts 5 per-try 9s", object: withRetries(t, d, 5, "9s", "")},
				input{name: n + " attempts 5 timeout 60s", object: withRetries(t, d, 5, "", "60s")})
		}
	}
	const vs = "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n"
	const hr = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: ratings, namespace: bookinfo}\nspec:\n"
	inputs = append(inputs, []input{
		{name: "an empty http list", object: vs + "  hosts: [ratings]\n  http: []\n"},
		{name: "http: null", object: vs + "  hosts: [ratings]\n  http: null\n"},
		{name: "a match-only route", object: vs + "  hosts: [ratings]\n  http:\n  - match: [{uri: {prefix: /a}}]\n    retries: {attempts: 5}\n"},
		{name: "a route with no destination", object: vs + "  hosts: [ratings]\n  http:\n  - route: []\n    retries: {attempts: 5}\n"},
		{name: "a weight-0 destination", object: vs + "  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}, weight: 100}, {destination: {host: reviews}, weight: 0}]\n    retries: {attempts: 5}\n"},
		{name: "every destination of weight 0", object: vs + "  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}, weight: 0}]\n    retries: {attempts: 5}\n"},
		{name: "a delegating root", object: vs + "  hosts: [ratings]\n  http:\n  - match: [{uri: {prefix: /}}]\n    delegate: {name: ratings-delegate, namespace: bookinfo}\n"},
		{name: "a delegate (no hosts) with attempts 5", object: "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: ratings-delegate, namespace: bookinfo}\nspec:\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"},
		{name: "exportTo .", object: vs + "  hosts: [ratings]\n  exportTo: [.]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"},
		{name: "exportTo another namespace", object: vs + "  hosts: [ratings]\n  exportTo: [other]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"},
		{name: "exportTo *", object: vs + "  hosts: [ratings]\n  exportTo: ['*']\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"},
		{name: "hosts *", object: vs + "  hosts: ['*']\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"},
		{name: "tcp only", object: vs + "  hosts: [ratings]\n  tcp:\n  - route: [{destination: {host: ratings}}]\n"},
		{name: "retries {} ", object: vs + "  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {}\n"},
		{name: "attempts 2^31", object: vs + "  hosts: [ratings]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 2147483647}\n"},
		{name: "the mesh gateway and an ingress", object: vs + "  hosts: [ratings]\n  gateways: [mesh, bookinfo-gateway]\n  http:\n  - route: [{destination: {host: ratings}}]\n    retries: {attempts: 5}\n"},
		{name: "an HTTPRoute without rules", object: hr + "  parentRefs: [{group: '', kind: Service, name: ratings}]\n"},
		{name: "an HTTPRoute rule without backends", object: hr + "  parentRefs: [{group: '', kind: Service, name: ratings}]\n  rules:\n  - retry: {attempts: 5}\n"},
		{name: "an HTTPRoute backend of weight 0", object: hr + "  parentRefs: [{group: '', kind: Service, name: ratings}]\n  rules:\n  - backendRefs: [{name: ratings, port: 9080, weight: 0}]\n    retry: {attempts: 5}\n"},
		{name: "an HTTPRoute on a Service of another namespace", object: hr + "  parentRefs: [{group: '', kind: Service, name: ratings, namespace: other}]\n  rules:\n  - backendRefs: [{name: ratings, namespace: other, port: 9080}]\n    retry: {attempts: 5}\n"},
	}...)
	// Linkerd: the retry and timeout annotations linkerd2's policy-test puts on a Service
	// (policy-test/tests/outbound_api_http.rs: retry.linkerd.io/http 5xx, timeout.linkerd.io/response
	// 10s; limit unset is 1 retry), and with a limit of 5.
	linkerd := []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, annotations: {linkerd.io/inject: enabled}}"}
	lsvc := func(ann string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: {name: ratings, namespace: bookinfo, annotations: {" + ann + "}}\nspec: {ports: [{name: http, port: 9080}]}"
	}
	inputs = append(inputs,
		input{name: "Linkerd Service of linkerd2's policy-test", object: lsvc(`retry.linkerd.io/http: 5xx, timeout.linkerd.io/response: 10s`), cluster: linkerd},
		input{name: "Linkerd Service with limit 5", object: lsvc(`retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "5", timeout.linkerd.io/response: 10s`), cluster: linkerd},
		input{name: "Linkerd Service with limit 5 and a retry timeout of 9s", object: lsvc(`retry.linkerd.io/http: 5xx, retry.linkerd.io/limit: "5", retry.linkerd.io/timeout: 9s`), cluster: linkerd})
	// Kuma: kumahq/kuma test/e2e_env/universal/envoyconfig/testdata/sidecars/meshretry/
	// outbound-mix.input.yaml's MeshRetry policies (numRetries 6 to one MeshService, 3 mesh-wide),
	// in their Kubernetes form.
	kuma := []string{"apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {kuma.io/sidecar-injection: enabled}}"}
	kretry := func(name, to string, n int) string {
		return fmt.Sprintf("apiVersion: kuma.io/v1alpha1\nkind: MeshRetry\nmetadata: {name: %s, namespace: kuma-system}\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: %s\n    default: {http: {numRetries: %d, retryOn: [5xx]}}\n", name, to, n)
	}
	inputs = append(inputs,
		input{name: "Kuma MeshRetry mesh-wide numRetries 3", object: kretry("global", "{kind: Mesh}", 3), cluster: kuma},
		input{name: "Kuma MeshRetry to ratings numRetries 6", object: kretry("mr-1", "{kind: MeshService, name: ratings, namespace: bookinfo}", 6), cluster: kuma})
	// A sane mesh the inputs change: each service's VirtualService of 1 try within 5s (an input
	// of the same name replaces it, as a create judged against none).
	cluster := append([]string{altIstioNS}, gateways...)
	for _, h := range []string{"productpage", "reviews", "ratings", "details"} {
		cluster = append(cluster, "apiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: "+h+", namespace: bookinfo}\nspec:\n  hosts: ["+h+"]\n  http:\n  - route: [{destination: {host: "+h+"}}]\n    timeout: 5s\n    retries: {attempts: 0}\n")
	}
	policy := func(e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
		p := timedMeshPolicy(2, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return p
	}
	idRE := regexp.MustCompile(`(?m)^kind: (\S+)$`)
	// Updates from one public sample to another of the same kind and name (reviews-v1 to
	// reviews-50-v3, ...), each as sent and with 5 attempts, both ways.
	sameName := map[string][]input{}
	for _, in := range inputs {
		if in.cluster != nil || !strings.Contains(in.name, ".yaml#") || strings.Contains(in.name, "per-try") || strings.Contains(in.name, "timeout") {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(in.object), &m); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprint(m["kind"], "/", m["metadata"].(map[string]any)["name"])
		sameName[key] = append(sameName[key], in)
	}
	for _, key := range slicesSortedKeys(sameName) {
		group := sameName[key]
		for _, a := range group {
			for _, b := range group {
				if a.name != b.name && a.object != b.object {
					inputs = append(inputs, input{name: a.name + " -> " + b.name, object: b.object, old: a.object})
				}
			}
		}
	}
	istio := cluster
	for _, in := range inputs {
		cluster := istio
		if in.cluster != nil {
			cluster = in.cluster
		}
		if in.old != "" {
			// The stored version in the cluster, in place of the one of the same name.
			var kept []string
			for _, c := range cluster {
				if !sameObject(t, c, in.old) {
					kept = append(kept, c)
				}
			}
			cluster = append(kept, in.old)
		}
		t.Run(in.name, func(t *testing.T) {
			var m map[string]any
			if err := yaml.Unmarshal([]byte(in.object), &m); err != nil {
				t.Fatal(err)
			}
			md := m["metadata"].(map[string]any)
			id := fmt.Sprintf("%s %s/%s", m["kind"], md["namespace"], md["name"])
			// An object of the cluster's of the same kind and name: an update of it.
			old := in.old
			for _, c := range cluster {
				if old != "" {
					break
				}
				if cm := idRE.FindStringSubmatch(c); cm != nil && cm[1] == m["kind"] && strings.Contains(c, "name: "+md["name"].(string)+",") {
					old = c
				}
			}
			for _, e := range []v1alpha1.Enforcement{v1alpha1.EnforcementReject, v1alpha1.EnforcementRewrite, v1alpha1.EnforcementAudit} {
				p := policy(e)
				var d MeshDecision
				func() {
					defer func() {
						if r := recover(); r != nil {
							t.Fatalf("%s: panic: %v", e, r)
						}
					}()
					d = decideOn(t, cluster, []*v1alpha1.RetryPolicy{p}, in.object, old)
				}()
				if os.Getenv("GATE19_VERBOSE") != "" {
					t.Logf("%s: allowed=%t patch=%d %s %q", e, d.Allowed, len(d.Patch), d.Message, d.Warnings)
				}
				if !d.Allowed && !strings.Contains(d.Message, id) {
					t.Errorf("%s: the refusal does not name %s: %s", e, id, d.Message)
				}
				if !d.Allowed && !fieldRE.MatchString(d.Message) {
					t.Errorf("%s: the refusal names no field and value: %s", e, d.Message)
				}
				switch e {
				case v1alpha1.EnforcementReject:
					expectAgreesWithAnalyze(t, p, cluster, in.object, old, d)
				case v1alpha1.EnforcementAudit:
					if !d.Allowed {
						t.Errorf("Audit refused: %s", d.Message)
					}
				case v1alpha1.EnforcementRewrite:
					if !d.Allowed || d.Patch == nil {
						return
					}
					ops, err := json.Marshal(d.Patch)
					if err != nil {
						t.Fatal(err)
					}
					patch, err := jsonpatchv5.DecodePatch(ops)
					if err != nil {
						t.Fatal(err)
					}
					stored, err := patch.Apply(jsonOf(t, in.object))
					if err != nil {
						t.Fatal(err)
					}
					again := decideOn(t, cluster, []*v1alpha1.RetryPolicy{policy(v1alpha1.EnforcementReject)}, string(stored), old)
					if !again.Allowed {
						t.Errorf("Rewrite stored %s, which Reject refuses: %s", stored, again.Message)
					}
					var rest []string
					for _, c := range cluster {
						if c != old {
							rest = append(rest, c)
						}
					}
					sent := worstTime(t, analyzeOver(t, p, append(slicesClone(rest), in.object)))
					if w := worstTime(t, analyzeOver(t, p, append(slicesClone(rest), string(stored)))); w > sent {
						t.Errorf("Rewrite lengthened the worst time over maxTimeToAnswer: %s as sent, %s as stored (%s)", sent, w, stored)
					}
				}
			}
		})
	}
}

// sameObject reports whether the YAML documents a and b have the same kind, namespace and name.
func sameObject(t *testing.T, a, b string) bool {
	t.Helper()
	key := func(d string) string {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatal(err)
		}
		md, _ := m["metadata"].(map[string]any)
		return fmt.Sprint(m["kind"], "/", md["namespace"], "/", md["name"])
	}
	return key(a) == key(b)
}

func slicesSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
