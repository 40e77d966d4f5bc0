package webhook

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze"
)

// TestNewRoutesGateAgreesWithAnalyze: the mesh gate on a route created, and retrycap analyze
// (the CLI's static view: what the status shows) on the cluster with it. A create the gate
// admits must leave analyze within the cap and maxTimeToAnswer, and one it denies must be over
// in analyze with the chain the gate names. Before gate18 the GAMMA rule on Istio's default and
// the VirtualService with a route of 60s were admitted while analyze said over.
func TestNewRoutesGateAgreesWithAnalyze(t *testing.T) {
	const svc = `apiVersion: v1
kind: Service
metadata: {name: ratings, namespace: bookinfo}
spec: {ports: [{name: http, port: 9080}]}`
	const reviews = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: bookinfo}
spec:
  hosts: [reviews]
  http:
  - route: [{destination: {host: reviews}}]
    retries: {attempts: 0}
`
	gamma := func(second string) string {
		return `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ratings, namespace: bookinfo}
spec:
  parentRefs: [{group: "", kind: Service, name: ratings}]
  rules:
  - matches: [{path: {value: /fast}}]
    backendRefs: [{name: ratings, port: 9080}]
    timeouts: {request: 3s}
    retry: {attempts: 1}
  - backendRefs: [{name: ratings, port: 9080}]
` + second
	}
	const vs = `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: bookinfo}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /fast}}]
    route: [{destination: {host: ratings}}]
    timeout: 3s
    retries: {attempts: 0}
  - route: [{destination: {host: ratings}}]
    timeout: 60s
    retries: {attempts: 0}
`
	for _, tc := range []struct {
		name   string
		cap    int32
		object string
		denied bool
		// message is the gate's denial, where the case pins it.
		message string
	}{
		{"a GAMMA rule on Istio's default, over the cap", 2, gamma("    timeouts: {request: 3s}\n"), true, ""},
		{"a GAMMA rule with a retry that fits", 2, gamma("    timeouts: {request: 3s}\n    retry: {attempts: 1}\n"), false, ""},
		{"a GAMMA rule of 2 tries and 60s, over the time", 2, gamma("    timeouts: {request: 60s}\n    retry: {attempts: 1}\n"), true,
			"RetryPolicy bookinfo/bookinfo: HTTPRoute bookinfo/ratings spec.rules[1]: per-try timeout unset, timeout 1m0s (a new route, the one the chain waits on longest) makes " +
				"productpage 1m0s -> reviews 1m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"},
		{"a VirtualService of one try and 60s beside 3s, over the time", 100, vs, true, ""},
		{"the same within a larger cap and time", 100, strings.Replace(vs, "60s", "15s", 1), false, ""},
		// At the entrypoint (rewrite18): the client's hop is where the chain waits.
		{"an ingress VirtualService of one route of 60s", 100, ingressVS("60s"), true,
			"RetryPolicy bookinfo/bookinfo: VirtualService bookinfo/front spec.http[0]: per-try timeout unset, timeout 1m0s (a new route, the one the chain waits on longest) makes " +
				"productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"},
		{"an ingress VirtualService of one route of 15s", 100, ingressVS("15s"), false, ""},
		{"an HTTPRoute on a Gateway of 2 tries and 60s", 100, gatewayRoute("retry: {attempts: 1}\n    timeouts: {request: 60s}"), true, ""},
		{"an HTTPRoute on a Gateway of 2 tries and 8s", 100, gatewayRoute("retry: {attempts: 1}\n    timeouts: {request: 8s}"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := timedMeshPolicy(tc.cap, v1alpha1.EnforcementReject, 20*time.Second)
			p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
			cluster := []string{altIstioNS, svc, reviews}
			d := decideOn(t, cluster, []*v1alpha1.RetryPolicy{p}, tc.object, "")
			if d.Allowed == tc.denied {
				t.Fatalf("gate: %#v, want denied %t", d, tc.denied)
			}

			p.TypeMeta = metav1.TypeMeta{APIVersion: "retrycap.dev/v1alpha1", Kind: "RetryPolicy"}
			pjs, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			docs := append([]string{string(pjs)}, cluster...)
			for _, w := range []struct{ name, upstreams string }{{"productpage", "reviews=1"}, {"ratings", ""}, {"reviews", "ratings=1"}} {
				docs = append(docs, strings.Replace(deploymentYAML(w.name, `{"retrycap.dev/upstreams": "`+w.upstreams+`"}`, ""),
					`"name": "`+w.name+`"`, `"name": "`+w.name+`", "namespace": "bookinfo"`, 1))
			}
			docs = append(docs, tc.object)
			m := analyze.NewManifests()
			if errs := (analyze.Reader{}).Read(m, "in.yaml", strings.NewReader(strings.Join(docs, "\n---\n"))); len(errs) > 0 {
				t.Fatal(errs)
			}
			rep := m.Analyze()
			if len(rep.Policies) != 1 {
				t.Fatalf("analyze: %d policies", len(rep.Policies))
			}
			pr := rep.Policies[0]
			var over []string
			for _, v := range pr.Violations {
				over = append(over, v.Message)
			}
			for _, v := range pr.TimeViolations {
				over = append(over, v.Message)
			}
			if got := len(over) > 0; got != tc.denied {
				t.Fatalf("analyze over %t (%q), the gate denied %t (%q)", got, over, tc.denied, d.Message)
			}
			// analyze writes the entrypoint's client ("client -x1-> ") and, for the cap, each
			// edge's layers after "; ": the chain itself is the gate's.
			if !tc.denied {
				return
			}
			chain, _, _ := strings.Cut(strings.TrimPrefix(over[0], "client -x1-> "), "; ")
			if tc.message != "" && d.Message != tc.message {
				t.Errorf("gate: %q\nwant %q", d.Message, tc.message)
			}
			if !strings.Contains(d.Message, chain) {
				t.Errorf("the gate's message does not name analyze's chain %q:\n%s", chain, d.Message)
			}
		})
	}
}

// ingressVS is a VirtualService bound to ingress Gateway bookinfo-gateway with one route to
// productpage of 1 try and the timeout given.
func ingressVS(timeout string) string {
	return `apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: front, namespace: bookinfo}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http:
  - route: [{destination: {host: productpage}}]
    timeout: ` + timeout + `
    retries: {attempts: 0}
`
}
