package agree_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// Kuma's MeshExternalService and a MeshRetry item for one port of a MeshService, read by the
// manager as analyze reads them (mesx20). Mesh kext has no MeshRetry named
// mesh-retry-all-kext: Kuma's default (5 retries) is assumed on every call of the mesh.
//
//	web -> api          Kuma default: 6 tries. The MeshRetry kext/api-grpc names api's port grpc
//	                    (sectionName), which api does not have: not this call's (Kuma matches the
//	                    item to that port's outbound only).
//	api -> httpbin.extsvc.mesh.local   MeshExternalService kuma-system/httpbin, protocol unset
//	                    (the CRD's default tcp): MeshRetry retries no request, 1 try.
//
// web -x6-> api -x1-> httpbin = 6 > cap 4. Before, the manager did not watch
// MeshExternalServices (both confs counted: api -x6-> httpbin) and its cache cut the item's
// sectionName (the item counted on every port of api: web -x10-> api): 60 in the status where
// analyze said 6.
const kumaExtInput = `
apiVersion: v1
kind: Namespace
metadata:
  name: kext
  labels: {kuma.io/sidecar-injection: enabled, kuma.io/mesh: kext}
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
kind: MeshRetry
metadata:
  name: api-grpc
  namespace: kext
  labels: {kuma.io/mesh: kext}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: api, k8s.kuma.io/namespace: kext}, sectionName: grpc}
    default:
      http: {numRetries: 9}
---
apiVersion: kuma.io/v1alpha1
kind: MeshExternalService
metadata:
  name: httpbin
  namespace: kuma-system
  labels: {kuma.io/mesh: kext}
spec:
  match: {type: HostnameGenerator, port: 80}
  endpoints: [{address: httpbin.org, port: 80}]
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
  maxAmplification: 4
  enforcement: Audit
  entrypoints: [{service: web}]
`

func init() {
	moreCases = append(moreCases, struct {
		name string
		run  func(*testing.T, *operatortest.Operator)
	}{name: "Kuma MeshExternalService and a MeshRetry item's sectionName", run: kumaExternal})
}

// kumaExternal: the status equals analyze's report on the same objects, as created, with the
// MeshExternalService's protocol changed to http, with it deleted, and with a MeshRetry item for
// a MeshHTTPRoute added.
func kumaExternal(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	type status struct {
		Amplification         int64
		Path                  string
		Messages, Suggestions []string
	}
	fromAnalyze := func(input string) status {
		rep := analyzeInput(t, input)
		s := status{Amplification: rep.Amplification, Path: strings.Join(rep.WorstPath, ">")}
		for _, v := range rep.Violations {
			s.Messages = append(s.Messages, v.Message)
			s.Suggestions = append(s.Suggestions, v.Suggestion)
		}
		return s
	}
	get := func() (status, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKey{Namespace: "kext", Name: "kext"}, &p); err != nil {
			return status{}, err
		}
		s := status{Amplification: p.Status.Amplification, Path: p.Status.WorstPath}
		for _, v := range p.Status.Violations {
			s.Messages = append(s.Messages, v.Message)
			s.Suggestions = append(s.Suggestions, v.Suggestion)
		}
		return s, nil
	}

	const defaultLayer = "Kuma default MeshRetry mesh-retry-all-kext (5 retries), assumed: Mesh kext is in the input and no MeshRetry mesh-retry-all-kext is (Kuma creates it beside the others)"
	want := fromAnalyze(kumaExtInput)
	g.Expect(want.Amplification).To(Equal(int64(6)))
	g.Expect(want.Path).To(Equal("web>api>httpbin.extsvc.mesh.local"))
	g.Expect(want.Messages).To(Equal([]string{"client -x1-> web -x6-> api -x1-> httpbin.extsvc.mesh.local = 6 > cap 4; " +
		"web -x6-> api: 6 = 1 (Deployment web) x 6 (" + defaultLayer + ")"}))

	if err := c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "kuma-system"}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var policy, mes *unstructured.Unstructured
	for _, u := range objects(t, kumaExtInput) {
		switch u.GetKind() {
		case "RetryPolicy":
			policy = u
			continue
		case "MeshExternalService":
			mes = u
		}
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	g.Eventually(get).Should(Equal(want))

	// The API server stored the CRD's default protocol.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(mes.GroupVersionKind())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(mes), stored)).To(Succeed())
	proto, _, _ := unstructured.NestedString(stored.Object, "spec", "match", "protocol")
	g.Expect(proto).To(Equal("tcp"))

	// protocol http: Kuma's default retries the call, 6 x 6.
	httpInput := strings.Replace(kumaExtInput, "match: {type: HostnameGenerator, port: 80}", "match: {type: HostnameGenerator, port: 80, protocol: http}", 1)
	wantHTTP := fromAnalyze(httpInput)
	g.Expect(wantHTTP.Amplification).To(Equal(int64(36)))
	g.Expect(unstructured.SetNestedField(stored.Object, "http", "spec", "match", "protocol")).To(Succeed())
	g.Expect(c.Update(ctx, stored)).To(Succeed())
	g.Eventually(get).Should(Equal(wantHTTP))

	// Deleted: neither knows its protocol, both count the larger conf and say so.
	goneInput := strings.Replace(kumaExtInput, kumaExtInput[strings.Index(kumaExtInput, "apiVersion: kuma.io/v1alpha1\nkind: MeshExternalService"):strings.Index(kumaExtInput, "apiVersion: apps/v1")], "", 1)
	wantGone := fromAnalyze(goneInput)
	g.Expect(wantGone.Amplification).To(Equal(int64(36)))
	g.Expect(wantGone.Messages[0]).To(ContainSubstring("(MeshExternalService httpbin is not in the input: its protocol taken as http or grpc, an upper bound)"))
	g.Expect(c.Delete(ctx, stored)).To(Succeed())
	g.Eventually(get).Should(Equal(wantGone))

	// A MeshRetry item naming the MeshHTTPRoute web-route, whose one callee is api: 10 tries on
	// web -> api (the route's 9 retries, over the default's 5 on the route's requests), none
	// more on api -> httpbin. Before, MeshHTTPRoutes were read by neither: the item counted on
	// every call of the mesh, 10 x 10.
	routeDocs := `
apiVersion: kuma.io/v1alpha1
kind: MeshHTTPRoute
metadata:
  name: web-route
  namespace: kext
  labels: {kuma.io/mesh: kext}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: api, k8s.kuma.io/namespace: kext}}
    rules:
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      default: {backendRefs: [{kind: MeshService, labels: {kuma.io/display-name: api-v2}}]}
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
`
	routeInput := goneInput + "---\n" + routeDocs
	wantRoute := fromAnalyze(routeInput)
	g.Expect(wantRoute.Amplification).To(Equal(int64(60)))
	g.Expect(wantRoute.Messages[0]).To(HavePrefix("client -x1-> web -x10-> api -x6-> httpbin.extsvc.mesh.local = 60 > cap 4; " +
		"web -x10-> api: 10 = 1 (Deployment web) x 10 (Kuma MeshRetry kext/route-retry numRetries 9 for MeshHTTPRoute kext/web-route, whose rules may not take every call: counted as if it covers this call, an upper bound)"))
	for _, u := range objects(t, routeDocs) {
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	g.Eventually(get).Should(Equal(wantRoute))
}
