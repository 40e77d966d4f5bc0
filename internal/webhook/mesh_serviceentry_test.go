package webhook

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/annotations"
	"github.com/retrycap/retrycap/internal/mesh"
	"github.com/retrycap/retrycap/internal/workload"
)

// serviceEntryYAML is Istio's egress task's ServiceEntry for www.googleapis.com, port 80 of the
// protocol given (the golden public-istio-egress-serviceentry-only).
func serviceEntryYAML(protocol string) string {
	return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: googleapis, namespace: bookinfo}
spec:
  hosts: [www.googleapis.com]
  location: MESH_EXTERNAL
  resolution: DNS
  ports:
  - {number: 80, name: http-port, protocol: ` + protocol + `}
`
}

// TestDecideMeshServiceEntry: a ServiceEntry has no retry field, yet registering an external
// HTTP host gives a sidecar's call to it Istio's default route, 3 tries. Before, the gate judged
// no layer of it (the layer names no object): created under a cap of 2 it was admitted while
// analyze says 3 > cap 2.
func TestDecideMeshServiceEntry(t *testing.T) {
	istioNS := "apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {istio-injection: enabled}}"
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: "details-v2"}}
	dep.Spec.Template.Annotations = map[string]string{annotations.Upstreams: "www.googleapis.com:80=1"}
	w, _ := workload.FromObject(dep)
	policy := func(cap int32, e v1alpha1.Enforcement) *v1alpha1.RetryPolicy {
		return &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: "details"},
			Spec: v1alpha1.RetryPolicySpec{MaxAmplification: cap, Enforcement: e}}
	}
	const over = "RetryPolicy bookinfo/details: ServiceEntry bookinfo/googleapis spec.hosts[0]: www.googleapis.com (port 80 HTTP) makes " +
		"details-v2 -x3-> www.googleapis.com = 3 > cap 2; Istio's default route retries it: a VirtualService for host www.googleapis.com may keep spec.http[].retries.attempts: 1"
	// Istio's egress task in Gateway API form: an HTTPRoute whose parent is the entry, its
	// rule's retry.attempts 3. The entry makes it the call's layer: 4 tries, named with its field.
	route := `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: googleapis, namespace: bookinfo}
spec:
  parentRefs: [{kind: ServiceEntry, group: networking.istio.io, name: googleapis}]
  rules:
  - retry: {attempts: 3}
`
	for _, tc := range []struct {
		name    string
		policy  *v1alpha1.RetryPolicy
		cluster string // another object of the Set
		object  string
		old     string
		want    MeshDecision
	}{
		{name: "a route parented to the entry: its field named", policy: policy(2, v1alpha1.EnforcementReject), cluster: route, object: serviceEntryYAML("HTTP"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/details: ServiceEntry bookinfo/googleapis spec.hosts[0]: www.googleapis.com makes " +
				"details-v2 -x4-> www.googleapis.com = 4 > cap 2; HTTPRoute bookinfo/googleapis spec.rules[0].retry.attempts gives 4 tries: lower it there"}},
		{name: "Reject: refused, naming the host, the port and the VirtualService field", policy: policy(2, v1alpha1.EnforcementReject),
			object: serviceEntryYAML("HTTP"), want: MeshDecision{Message: over}},
		{name: "Rewrite: refused, never rewritten", policy: policy(2, v1alpha1.EnforcementRewrite), object: serviceEntryYAML("HTTP"),
			want: MeshDecision{Message: over + " (refused although enforcement is Rewrite: a ServiceEntry has no retry field to lower; declare the retries in a VirtualService for the host)"}},
		{name: "Audit: admitted with the warning", policy: policy(2, v1alpha1.EnforcementAudit), object: serviceEntryYAML("HTTP"),
			want: MeshDecision{Allowed: true, Warnings: []string{over + " (admitted: enforcement is Audit)"}}},
		{name: "within the cap", policy: policy(3, v1alpha1.EnforcementReject), object: serviceEntryYAML("HTTP"), want: MeshDecision{Allowed: true}},
		{name: "an HTTPS port: Istio does not retry it", policy: policy(2, v1alpha1.EnforcementReject), object: serviceEntryYAML("HTTPS"), want: MeshDecision{Allowed: true}},
		{name: "TCP to HTTP: raised", policy: policy(2, v1alpha1.EnforcementReject), object: serviceEntryYAML("HTTP"), old: serviceEntryYAML("TCP"),
			want: MeshDecision{Message: over}},
		{name: "HTTP to TCP: a lowering passes", policy: policy(2, v1alpha1.EnforcementReject), object: serviceEntryYAML("TCP"), old: serviceEntryYAML("HTTP"),
			want: MeshDecision{Allowed: true}},
		{name: "cap 1: attempts 0 fits", policy: policy(1, v1alpha1.EnforcementReject), object: serviceEntryYAML("HTTP"),
			want: MeshDecision{Message: "RetryPolicy bookinfo/details: ServiceEntry bookinfo/googleapis spec.hosts[0]: www.googleapis.com (port 80 HTTP) makes " +
				"details-v2 -x3-> www.googleapis.com = 3 > cap 1; Istio's default route retries it: a VirtualService for host www.googleapis.com may keep spec.http[].retries.attempts: 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := mesh.NewSet(mesh.Options{})
			for _, o := range []string{istioNS, tc.cluster} {
				if o == "" {
					continue
				}
				if _, err := set.AddManifest([]byte(o)); err != nil {
					t.Fatal(err)
				}
			}
			in := MeshInput{Policies: []*v1alpha1.RetryPolicy{tc.policy}, Workloads: []*workload.Parsed{workload.Parse(w)}, Set: set, Object: jsonOf(t, tc.object)}
			if tc.old != "" {
				in.Old = jsonOf(t, tc.old)
				if _, err := set.AddJSON(in.Old); err != nil {
					t.Fatal(err)
				}
			}
			expectMeshDecision(t, DecideMesh(in), tc.want)
		})
	}
}

// TestDecideMeshServiceEntryNothingFits: a caller's own 2 attempts times Istio's default route
// of the entry, under cap 1: even a VirtualService of attempts 0 leaves 2. The message said
// "lower the callers' attempts"; it names the caller's entry and the cap (wgate19). At 1 attempt
// the callers are no lever: the cap alone is named.
func TestDecideMeshServiceEntryNothingFits(t *testing.T) {
	istioNS := "apiVersion: v1\nkind: Namespace\nmetadata: {name: bookinfo, labels: {istio-injection: enabled}}"
	policy := &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: "details"},
		Spec: v1alpha1.RetryPolicySpec{MaxAmplification: 1, Enforcement: v1alpha1.EnforcementReject}}
	const head = "RetryPolicy bookinfo/details: ServiceEntry bookinfo/googleapis spec.hosts[0]: www.googleapis.com (port 80 HTTP) makes details-v2 -x"
	for _, tc := range []struct{ upstreams, want string }{
		{"www.googleapis.com:80=2", head + "6-> www.googleapis.com = 6 > cap 1; Istio's default route retries it: even a VirtualService for host www.googleapis.com " +
			"with spec.http[].retries.attempts: 0 does not fit: lower Deployment bookinfo/details-v2 retrycap.dev/upstreams www.googleapis.com:80=2, " +
			"or raise RetryPolicy bookinfo/details spec.maxAmplification: 1"},
	} {
		t.Run(tc.upstreams, func(t *testing.T) {
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "bookinfo", Name: "details-v2"}}
			dep.Spec.Template.Annotations = map[string]string{annotations.Upstreams: tc.upstreams}
			w, _ := workload.FromObject(dep)
			set := mesh.NewSet(mesh.Options{})
			if _, err := set.AddManifest([]byte(istioNS)); err != nil {
				t.Fatal(err)
			}
			in := MeshInput{Policies: []*v1alpha1.RetryPolicy{policy}, Workloads: []*workload.Parsed{workload.Parse(w)}, Set: set, Object: jsonOf(t, serviceEntryYAML("HTTP"))}
			expectMeshDecision(t, DecideMesh(in), MeshDecision{Message: tc.want})
		})
	}
}
