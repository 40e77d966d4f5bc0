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

// btpGateway is an Envoy Gateway BackendTrafficPolicy bookinfo/gw on the Gateway
// bookinfo-gateway with spec given (YAML lines under spec).
func btpGateway(spec string) string {
	return `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: gw, namespace: bookinfo}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: Gateway, name: bookinfo-gateway}]
` + spec
}

// analyzeOver is what retrycap analyze reports over (the cap's violations, then the time's) for
// policy p on the cluster's objects and bookinfo's three workloads (productpage -> reviews ->
// ratings, 1 attempt each), the gate's bookinfoChain.
func analyzeOver(t *testing.T, p *v1alpha1.RetryPolicy, objects []string) []string {
	t.Helper()
	p = p.DeepCopy()
	p.TypeMeta = metav1.TypeMeta{APIVersion: "retrycap.dev/v1alpha1", Kind: "RetryPolicy"}
	pjs, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	docs := []string{string(pjs)}
	for _, o := range objects {
		if o != "" {
			docs = append(docs, o)
		}
	}
	for _, w := range []struct{ name, upstreams string }{{"productpage", "reviews=1"}, {"ratings", ""}, {"reviews", "ratings=1"}} {
		docs = append(docs, strings.Replace(deploymentYAML(w.name, `{"retrycap.dev/upstreams": "`+w.upstreams+`"}`, ""),
			`"name": "`+w.name+`"`, `"name": "`+w.name+`", "namespace": "bookinfo"`, 1))
	}
	m := analyze.NewManifests()
	if errs := (analyze.Reader{}).Read(m, "in.yaml", strings.NewReader(strings.Join(docs, "\n---\n"))); len(errs) > 0 {
		t.Fatal(errs)
	}
	rep := m.Analyze()
	if len(rep.Policies) != 1 {
		t.Fatalf("analyze: %d policies", len(rep.Policies))
	}
	var over []string
	for _, v := range rep.Policies[0].Violations {
		over = append(over, v.Message)
	}
	for _, v := range rep.Policies[0].TimeViolations {
		over = append(over, v.Message)
	}
	return over
}

// expectAgreesWithAnalyze fails t unless the gate's decision d on object (stored version old,
// "" on a create) agrees with retrycap analyze on the cluster (which holds old) for policy p
// under Reject: a denial is over in analyze with object, naming the chain analyze names; an
// admission leaves analyze over only where it was over without the change.
func expectAgreesWithAnalyze(t *testing.T, p *v1alpha1.RetryPolicy, cluster []string, object, old string, d MeshDecision) {
	t.Helper()
	var without []string
	for _, o := range cluster {
		if o != old {
			without = append(without, o)
		}
	}
	after := analyzeOver(t, p, append(slicesClone(without), object))
	before := analyzeOver(t, p, cluster)
	if !d.Allowed {
		if len(after) == 0 {
			t.Fatalf("the gate denied (%q), analyze is within with the object", d.Message)
		}
		// analyze writes the entrypoint's client ("client -x1-> ") and, for the cap, each
		// edge's layers after "; ": the chain itself is the gate's.
		for _, a := range after {
			chain, _, _ := strings.Cut(strings.TrimPrefix(a, "client -x1-> "), "; ")
			if strings.Contains(d.Message, chain) {
				return
			}
		}
		t.Fatalf("the gate's message names none of analyze's chains %q:\n%s", after, d.Message)
	}
	if len(after) > 0 && len(before) == 0 {
		t.Fatalf("the gate admitted, analyze is over with the object (%q) and was within without it", after)
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestDecideMeshGatewayBackendTrafficPolicyTimeout: an Envoy Gateway BackendTrafficPolicy on
// the Gateway (not on a route) with a timeout and no retry: no layer of tries of its own, so it
// changes no count; its requestTimeout is the route timeout of every route of the Gateway that
// sets none (envoyproxy/gateway backendtrafficpolicy.go: a Gateway's policy applies to a route
// whose own sets no traffic features), judged against maxTimeToAnswer as a route's policy's is.
// A route's own timeouts.request wins over it, and a policy on the route replaces it. Each case
// is checked against retrycap analyze on the same objects.
func TestDecideMeshGatewayBackendTrafficPolicyTimeout(t *testing.T) {
	timeout := func(d string) string { return "  timeout: {http: {requestTimeout: " + d + "}}\n" }
	route := gatewayRoute("retry: {attempts: 1}") // 2 tries, no timeout of its own
	timed := func(e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
		p := timedMeshPolicy(100, e, 20*time.Second)
		p.Spec.Retry.PerTryTimeout = &metav1.Duration{Duration: 2 * time.Minute}
		return p
	}
	const (
		chain60  = " makes client -x2-> productpage 2m0s -> reviews 2m0s -> ratings ? = 1m0s > maxTimeToAnswer 20s"
		newBound = "RetryPolicy bookinfo/bookinfo: BackendTrafficPolicy bookinfo/gw spec.timeout.http.requestTimeout: per-try timeout unset, timeout 1m0s (a new bound, the one the chain waits on longest)" + chain60
		raised   = "RetryPolicy bookinfo/bookinfo: BackendTrafficPolicy bookinfo/gw spec.timeout.http.requestTimeout: timeout 10s -> 1m0s" + chain60
		notTries = " (refused although enforcement is Rewrite: retrycap lowers retries, not timeouts; lower the timeout)"
	)
	routeBTP := `apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: web, namespace: bookinfo}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: web}]
` + timeout("10s")
	for _, tc := range []struct {
		name        string
		policy      *v1alpha1.RetryPolicy
		cluster     []string
		object, old string
		want        MeshDecision
	}{
		{name: "60s created, the chain waits on it: Reject", policy: timed(v1alpha1.EnforcementReject), cluster: []string{route},
			object: btpGateway(timeout("60s")), want: MeshDecision{Message: newBound}},
		{name: "60s created: Rewrite refuses (a timeout)", policy: timed(v1alpha1.EnforcementRewrite), cluster: []string{route},
			object: btpGateway(timeout("60s")), want: MeshDecision{Message: newBound + notTries}},
		{name: "60s created: Audit warns", policy: timed(v1alpha1.EnforcementAudit), cluster: []string{route},
			object: btpGateway(timeout("60s")), want: MeshDecision{Allowed: true, Warnings: []string{newBound + " (admitted: enforcement is Audit)"}}},
		{name: "10s created: admitted", policy: timed(v1alpha1.EnforcementReject), cluster: []string{route},
			object: btpGateway(timeout("10s")), want: MeshDecision{Allowed: true}},
		{name: "raised 10s -> 60s: Reject", policy: timed(v1alpha1.EnforcementReject), cluster: []string{route, btpGateway(timeout("10s"))},
			object: btpGateway(timeout("60s")), old: btpGateway(timeout("10s")), want: MeshDecision{Message: raised}},
		{name: "lowered 60s -> 30s, still over: admitted (a repair)", policy: timed(v1alpha1.EnforcementReject), cluster: []string{route, btpGateway(timeout("60s"))},
			object: btpGateway(timeout("30s")), old: btpGateway(timeout("60s")), want: MeshDecision{Allowed: true}},
		{
			// The rule's own request timeout of 3s wins over the Gateway's 60s.
			name: "60s on the Gateway under a rule of 3s: admitted", policy: timed(v1alpha1.EnforcementReject),
			cluster: []string{gatewayRoute("retry: {attempts: 1}\n    timeouts: {request: 3s}")},
			object:  btpGateway(timeout("60s")), want: MeshDecision{Allowed: true},
		},
		{
			// The route's own policy (10s) replaces the Gateway's.
			name: "60s on the Gateway under a route's policy of 10s: admitted", policy: timed(v1alpha1.EnforcementReject),
			cluster: []string{route, routeBTP}, object: btpGateway(timeout("60s")), want: MeshDecision{Allowed: true},
		},
		{
			// No count effect: the chain is 2 tries (the rule's retry), within a cap of 2, and a
			// timeout adds none, under every enforcement.
			name: "a timeout alone within the cap of 2: admitted", policy: meshPolicy("bookinfo", 2, v1alpha1.EnforcementReject), cluster: []string{route},
			object: btpGateway(timeout("60s")), want: MeshDecision{Allowed: true},
		},
		{
			// Over a cap of 1 already (the rule's 2 tries): the policy adds no try, so it
			// raises nothing and is admitted; the rule's retry is the one to lower.
			name: "a timeout alone under a cap already exceeded: admitted, no count raised", policy: meshPolicy("bookinfo", 1, v1alpha1.EnforcementRewrite), cluster: []string{route},
			object: btpGateway(timeout("60s")), want: MeshDecision{Allowed: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideOn(t, tc.cluster, []*v1alpha1.RetryPolicy{tc.policy}, tc.object, tc.old)
			expectMeshDecision(t, d, tc.want)
			if tc.policy.Spec.Enforcement == v1alpha1.EnforcementReject {
				expectAgreesWithAnalyze(t, tc.policy, tc.cluster, tc.object, tc.old, d)
			}
		})
	}
}
