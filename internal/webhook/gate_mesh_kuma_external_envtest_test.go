package webhook_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/mesh/crds"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// kumaGateInput is mesx20's reproduction (internal/meshwatch/agree/kumaext_envtest_test.go, our
// own objects): Mesh kext with Kuma's default MeshRetry (5 retries), web -> api ->
// httpbin.extsvc.mesh.local, the MeshExternalService kuma-system/httpbin of protocol PROTO, a
// MeshRetry item of 9 retries for the MeshHTTPRoute kext/web-route, whose callee is CALLEE, and
// a Reject policy of cap CAP.
const kumaGateInput = `apiVersion: v1
kind: Namespace
metadata:
  name: kext
  labels: {kuma.io/sidecar-injection: enabled, kuma.io/mesh: kext}
---
apiVersion: v1
kind: Namespace
metadata: {name: kuma-system}
---
apiVersion: kuma.io/v1alpha1
kind: Mesh
metadata: {name: kext}
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: kext}
spec:
  selector: {app: api}
  ports: [{name: http, port: 8080, appProtocol: http}]
---
apiVersion: kuma.io/v1alpha1
kind: MeshExternalService
metadata:
  name: httpbin
  namespace: kuma-system
  labels: {kuma.io/mesh: kext}
spec:
  match: {type: HostnameGenerator, port: 80, protocol: PROTO}
  endpoints: [{address: httpbin.org, port: 80}]
---
apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata:
  name: route-retry
  namespace: kext
  labels: {kuma.io/mesh: kext}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshHTTPRoute, labels: {kuma.io/display-name: web-route, k8s.kuma.io/namespace: kext}}
    default:
      http: {numRetries: 9}
---
apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata:
  name: web-route
  namespace: kext
  labels: {kuma.io/mesh: kext}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: CALLEE, k8s.kuma.io/namespace: kext}}
    rules:
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      default: {backendRefs: [{kind: MeshService, labels: {kuma.io/display-name: api-v2}}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: kext}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {retrycap.dev/service: web, retrycap.dev/upstreams: "api=1"}
    spec: {containers: [{name: app, image: lab-app}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: kext}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata:
      labels: {app: api}
      annotations: {retrycap.dev/service: api, retrycap.dev/upstreams: httpbin.extsvc.mesh.local}
    spec: {containers: [{name: app, image: lab-app}]}
---
apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: kext, namespace: kext}
spec:
  maxAmplification: CAP
  enforcement: Reject
  entrypoints: [{service: web}]
`

// kumaGate is kumaGateInput with its three values.
func kumaGate(proto, callee string, cap int) string {
	return strings.NewReplacer("PROTO", proto, "CALLEE", callee, "CAP", fmt.Sprint(cap)).Replace(kumaGateInput)
}

// TestGateMeshKumaExternal (mesgate20): the mesh webhook, whose rules the manager writes from the
// served mesh APIs (meshexternalservices.kuma.io and meshhttproutes.kuma.io among them since
// mesx20), judges a MeshExternalService's protocol and a MeshHTTPRoute's callees by the chains
// they change, against a real API server, with the chain analyze reports on the same objects,
// under a RetryPolicy and a ClusterRetryPolicy.
// Before, both updates were admitted: tcp -> http made the chain 36 over cap 10, the route 10
// over cap 8.
func TestGateMeshKumaExternal(t *testing.T) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	kuma, err := crds.Kuma()
	g.Expect(err).NotTo(HaveOccurred())
	op := operatortest.Start(t, kuma...)
	c, ctx := op.Client, op.Ctx

	// analyze on the objects as they are and with each change: its chain is what the gate names.
	chainOf := func(input string) (int64, string) {
		m := analyze.NewManifests()
		if errs := (analyze.Reader{}).Read(m, "input.yaml", strings.NewReader(input)); len(errs) > 0 {
			t.Fatalf("reading the input: %v", errs)
		}
		r := m.Analyze()
		g.Expect(r.Policies).To(HaveLen(1))
		p := r.Policies[0]
		// The gate's chain starts at the entrypoint: client attempts 1 are not written.
		g.Expect(p.WorstPathFactors[0]).To(Equal(int64(1)))
		s := p.WorstPath[0]
		for k := 1; k < len(p.WorstPath); k++ {
			s += fmt.Sprintf(" -x%d-> %s", p.WorstPathFactors[k], p.WorstPath[k])
		}
		return p.Amplification, fmt.Sprintf("%s = %d", s, p.Amplification)
	}
	amp, _ := chainOf(kumaGate("tcp", "other", 10))
	g.Expect(amp).To(Equal(int64(6)))
	amp, httpChain := chainOf(kumaGate("http", "other", 10))
	g.Expect(amp).To(Equal(int64(36)))
	g.Expect(httpChain).To(Equal("web -x6-> api -x6-> httpbin.extsvc.mesh.local = 36"))
	amp, routeChain := chainOf(kumaGate("tcp", "api", 8))
	g.Expect(amp).To(Equal(int64(10)))
	g.Expect(routeChain).To(Equal("web -x10-> api -x1-> httpbin.extsvc.mesh.local = 10"))

	// The objects as analyze read them first, the policy last.
	var policy *unstructured.Unstructured
	for _, d := range strings.Split(kumaGate("tcp", "other", 10), "\n---\n") {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(d), &u.Object)).To(Succeed())
		if u.GetKind() == "RetryPolicy" {
			policy = u
			continue
		}
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	// The status counts what analyze counts on the same objects.
	g.Eventually(amplificationOf(ctx, c, &v1alpha1.RetryPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "kext", Name: "kext"}})).Should(Equal(int64(6)))

	get := func(kind, ns, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("kuma.io/v1alpha1")
		u.SetKind(kind)
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
		return u
	}
	update := func(u *unstructured.Unstructured) func() string {
		return func() string {
			if err := c.Update(ctx, u.DeepCopy(), client.DryRunAll); err != nil {
				return err.Error()
			}
			return ""
		}
	}
	setPolicy := func(cap int64, enforcement string) {
		g.Eventually(func() error {
			p := &unstructured.Unstructured{}
			p.SetGroupVersionKind(policy.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKey{Namespace: "kext", Name: "kext"}, p); err != nil {
				return err
			}
			_ = unstructured.SetNestedField(p.Object, cap, "spec", "maxAmplification")
			_ = unstructured.SetNestedField(p.Object, enforcement, "spec", "enforcement")
			return c.Update(ctx, p)
		}).Should(Succeed())
	}
	const denied = `admission webhook "mesh.retrycap.dev" denied the request: `

	// The MeshExternalService's protocol tcp -> http: Kuma's default retries its host's calls.
	mes := get("MeshExternalService", "kuma-system", "httpbin")
	g.Expect(unstructured.SetNestedField(mes.Object, "http", "spec", "match", "protocol")).To(Succeed())
	const overMES = "RetryPolicy kext/kext: MeshExternalService kuma-system/httpbin spec.match.protocol: tcp -> http makes " + "web -x6-> api -x6-> httpbin.extsvc.mesh.local = 36" +
		" > cap 10; lower MeshRetry kuma-system/mesh-retry-all-kext spec.to[0].default.http.numRetries (6 tries), or raise RetryPolicy kext/kext spec.maxAmplification: 10"
	g.Expect(overMES).To(ContainSubstring(" makes " + httpChain + " > cap 10;"))
	g.Eventually(update(mes)).Should(Equal(denied + overMES))
	setPolicy(10, "Rewrite")
	g.Eventually(update(mes)).Should(Equal(denied + overMES +
		" (refused although enforcement is Rewrite: a MeshExternalService has no retry field to lower; lower the MeshRetry's numRetries for the call)"))
	setPolicy(36, "Reject")
	g.Eventually(update(mes)).Should(BeEmpty(), "36 is within cap 36")

	// The MeshHTTPRoute's callee other -> api: the MeshRetry item for the route now covers web -> api.
	setPolicy(8, "Reject")
	route := get("MeshHTTPRoute", "kext", "web-route")
	to, _, _ := unstructured.NestedSlice(route.Object, "spec", "to")
	g.Expect(unstructured.SetNestedField(to[0].(map[string]any), "api", "targetRef", "labels", "kuma.io/display-name")).To(Succeed())
	g.Expect(unstructured.SetNestedSlice(route.Object, to, "spec", "to")).To(Succeed())
	const overRoute = "RetryPolicy kext/kext: MeshHTTPRoute kext/web-route spec.to[0].targetRef: MeshService api makes " + "web -x10-> api -x1-> httpbin.extsvc.mesh.local = 10" +
		" > cap 8; lower MeshRetry kext/route-retry spec.to[0].default.http.numRetries (10 tries), or raise RetryPolicy kext/kext spec.maxAmplification: 8"
	g.Expect(overRoute).To(ContainSubstring(" makes " + routeChain + " > cap 8;"))
	g.Eventually(update(route)).Should(Equal(denied + overRoute))
	setPolicy(10, "Reject")
	g.Eventually(update(route)).Should(BeEmpty(), "10 is within cap 10")

	// A ClusterRetryPolicy of the mesh's namespaces judges the protocol change too, on its graph
	// across them (the handler's relevance walk finds api, whose call the change raises).
	setPolicy(100, "Reject")
	crp := &v1alpha1.ClusterRetryPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kext-mesh"},
		Spec: v1alpha1.ClusterRetryPolicySpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kuma.io/mesh": "kext"}},
			RetryPolicySpec: v1alpha1.RetryPolicySpec{MaxAmplification: 10, Enforcement: v1alpha1.EnforcementReject}}}
	g.Eventually(func() error { return c.Create(ctx, crp) }).Should(Succeed())
	g.Eventually(update(mes)).Should(Equal(denied + "ClusterRetryPolicy kext-mesh: MeshExternalService kuma-system/httpbin spec.match.protocol: tcp -> http makes " +
		"web.kext -x6-> api.kext -x6-> httpbin.extsvc.mesh.local = 36 > cap 10; " +
		"lower MeshRetry kuma-system/mesh-retry-all-kext spec.to[0].default.http.numRetries (6 tries), or raise ClusterRetryPolicy kext-mesh spec.maxAmplification: 10"))
	g.Expect(c.Delete(ctx, crp)).To(Succeed())
}
