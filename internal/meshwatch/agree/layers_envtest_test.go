package agree_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// The retry layers added in #28 (Kuma MeshRetry, Dapr Resiliency, Consul ServiceRouter, the AWS
// SDK's environment, a manifest already injected by istioctl kube-inject), one input read three
// ways: by analyze from the manifests, by the controller into the RetryPolicy's status (through
// the real CRDs, the mesh watcher and the manager's trimmed cache), and by the workload gate on
// admission. The three must give the same numbers.
//
// The chain, worked by hand from each project's rules (docs/meshes.md):
//
//	frontend -> orders    Kuma: MeshRetry shop/orders-retry, the MeshService labelled orders in shop (Kuma's
//	                      v3 targetRef; the real CRD prunes a name), http.numRetries 2: 3 tries
//	orders   -> payment   Dapr: Resiliency shop/payments targets app payment, maxRetries 1: 2 tries
//	                      (it replaces Dapr's built-in 3 retries)
//	payment  -> ledger    Consul: ServiceRouter shop/ledger, numRetries 2 with retryOnConnectFailure: 3 tries
//	ledger   -> audit     istioctl kube-inject'ed (sidecar.istio.io/status, istio-proxy), namespace not
//	                      labelled: Istio's default 2 retries: 3 tries
//	payment  -> orders.s3.amazonaws.com   AWS_MAX_ATTEMPTS=4: 4 tries
//
// The Mesh skips Kuma's initial MeshRetry: Kuma creates mesh-retry-all-default beside any other
// MeshRetry (kumahq/kuma pkg/defaults/mesh/mesh.go), which would add its 5 retries to every hop.
//
// Worst chain frontend, orders, payment, ledger, audit: 3 x 2 x 3 x 3 = 54 (the S3 branch 24).
// Then audit calls S3 through the SDK with AWS_RETRY_MODE=standard (3 tries): 54 x 3 = 162.
var layersInput = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
  labels: {kuma.io/sidecar-injection: enabled}
---
apiVersion: kuma.io/v1alpha1
kind: Mesh
metadata: {name: default}
spec: {skipCreatingInitialPolicies: [MeshRetry]}
---
apiVersion: kuma.io/v1alpha1
kind: MeshRetry
metadata:
  name: orders-retry
  namespace: shop
  labels: {kuma.io/mesh: default}
spec:
  targetRef: {kind: Mesh}
  to:
  - targetRef: {kind: MeshService, labels: {kuma.io/display-name: orders, k8s.kuma.io/namespace: shop}}
    default:
      http: {numRetries: 2}
---
apiVersion: dapr.io/v1alpha1
kind: Resiliency
metadata: {name: payments, namespace: shop}
spec:
  policies:
    retries:
      once: {policy: constant, duration: 1s, maxRetries: 1}
  targets:
    apps:
      payment: {retry: once}
---
apiVersion: consul.hashicorp.com/v1alpha1
kind: ServiceRouter
metadata: {name: ledger, namespace: shop}
spec:
  routes:
  - match: {http: {pathPrefix: /}}
    destination: {numRetries: 2, retryOnConnectFailure: true}
---
apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: shop, namespace: shop}
spec:
  maxAmplification: 60
  enforcement: Reject
  entrypoints: [{service: frontend}]
` + deploymentsYAML

// deploymentsYAML is the chain's workloads, frontend to audit (the hops' layers are in the
// comment above layersInput).
var deploymentsYAML = "\n" + shopDeployment("frontend", "{retrycap.dev/service: frontend, retrycap.dev/upstreams: orders=1}", appOnly) +
	shopDeployment("orders", `{retrycap.dev/service: orders, retrycap.dev/upstreams: payment=1, dapr.io/enabled: "true", dapr.io/app-id: orders}`, appOnly) +
	shopDeployment("payment", `{retrycap.dev/service: payment, retrycap.dev/upstreams: "ledger=1,orders.s3.amazonaws.com", consul.hashicorp.com/connect-inject: "true"}`, `
      containers:
      - name: app
        image: lab-app
        env: [{name: AWS_REGION, value: eu-west-1}, {name: AWS_MAX_ATTEMPTS, value: "4"}]`) +
	shopDeployment("ledger", `
        retrycap.dev/service: ledger
        retrycap.dev/upstreams: audit=1
        sidecar.istio.io/status: '{"initContainers":["istio-init"],"containers":["istio-proxy"],"volumes":["istio-envoy"]}'`, `
      initContainers: [{name: istio-init, image: proxyv2}]
      containers: [{name: app, image: lab-app}, {name: istio-proxy, image: proxyv2}]`) +
	shopDeployment("audit", "{retrycap.dev/service: audit}", appOnly)

// auditToS3 is the change the gate judges: audit now calls S3 through the SDK.
var auditToS3 = "\n" + strings.TrimPrefix(shopDeployment("audit", "{retrycap.dev/service: audit, retrycap.dev/upstreams: archive.s3.amazonaws.com}", `
      containers:
      - name: app
        image: lab-app
        env: [{name: AWS_RETRY_MODE, value: standard}]`), "---\n")

// appOnly is the pod spec of a workload with only its app's container.
const appOnly = "{containers: [{name: app, image: lab-app}]}"

// shopDeployment is a YAML document ("---" first) of a Deployment shop/name, its pods labelled
// app: name, with the pod template's annotations and spec given as YAML (each a flow mapping,
// or block lines after a newline).
func shopDeployment(name, annotations, podSpec string) string {
	if strings.HasPrefix(annotations, "{") {
		annotations = " " + annotations
	}
	if strings.HasPrefix(podSpec, "{") {
		podSpec = " " + podSpec
	}
	return fmt.Sprintf(`---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[1]s, namespace: shop}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata:
      labels: {app: %[1]s}
      annotations:%[2]s
    spec:%[3]s
`, name, annotations, podSpec)
}

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatalf("%v in\n%s", err, d)
		}
		out = append(out, u)
	}
	return out
}

func analyzeInput(t *testing.T, docs string) analyze.PolicyReport {
	t.Helper()
	m := analyze.NewManifests()
	if errs := (analyze.Reader{}).Read(m, "input.yaml", strings.NewReader(docs)); len(errs) > 0 {
		t.Fatalf("reading the input: %v", errs)
	}
	r := m.Analyze()
	if len(r.Policies) != 1 {
		t.Fatalf("analyze: %d policies, want 1 (%v)", len(r.Policies), r.Unchecked)
	}
	return r.Policies[0]
}

// newLayers is TestAgree's case of the layers added in #28 (namespace shop).
func newLayers(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	var err error

	// analyze on the manifests.
	before := analyzeInput(t, layersInput)
	g.Expect(before.Amplification).To(Equal(int64(54)), "analyze: %+v", before)
	g.Expect(before.WorstPath).To(Equal([]string{"frontend", "orders", "payment", "ledger", "audit"}))
	g.Expect(before.WorstPathFactors).To(Equal([]int64{1, 3, 2, 3, 3}))

	// The same objects in the cluster. The policy goes last: the workloads are admitted
	// without one, and the mesh watcher has read the layers once its status counts them.
	var policy *unstructured.Unstructured
	for _, u := range objects(t, layersInput) {
		if u.GetKind() == "RetryPolicy" {
			policy = u
			continue
		}
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	g.Expect(c.Create(ctx, policy)).To(Succeed())
	// setSpec sets the policy's spec fields (name, value, ...) on its current version.
	setSpec := func(fieldValues ...any) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
		for i := 0; i < len(fieldValues); i += 2 {
			g.Expect(unstructured.SetNestedField(policy.Object, fieldValues[i+1], "spec", fieldValues[i].(string))).To(Succeed())
		}
		g.Expect(c.Update(ctx, policy)).To(Succeed())
	}
	type status struct {
		Amplification int64
		Path          string
		Mesh          string
	}
	get := func() (status, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "shop"}, &p); err != nil {
			return status{}, err
		}
		s := status{Amplification: p.Status.Amplification, Path: p.Status.WorstPath}
		if m := apimeta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionMeshLayers); m != nil {
			s.Mesh = m.Message
		}
		return s, nil
	}
	const reads = "reads VirtualService networking.istio.io/v1, ServiceEntry networking.istio.io/v1, HTTPRoute gateway.networking.k8s.io/v1, GRPCRoute gateway.networking.k8s.io/v1, " +
		"BackendTrafficPolicy gateway.envoyproxy.io/v1alpha1, Mesh kuma.io/v1alpha1, MeshRetry kuma.io/v1alpha1, MeshExternalService kuma.io/v1alpha1, MeshHTTPRoute kuma.io/v1alpha1, Resiliency dapr.io/v1alpha1, ServiceRouter consul.hashicorp.com/v1alpha1, Ingress networking.k8s.io/v1"
	g.Eventually(get).Should(Equal(status{Amplification: before.Amplification, Path: strings.Join(before.WorstPath, ">"), Mesh: reads}))

	// The gate refuses audit's call to S3 with analyze's number for the whole input after it.
	afterInput := strings.Replace(layersInput, deploymentsYAML[strings.Index(deploymentsYAML, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: audit"):], strings.TrimPrefix(auditToS3, "\n"), 1)
	after := analyzeInput(t, afterInput)
	g.Expect(after.Amplification).To(Equal(int64(162)), "analyze after: %+v", after)
	g.Expect(after.Violations).NotTo(BeEmpty())
	change := objects(t, auditToS3)[0]
	var cur unstructured.Unstructured
	cur.SetGroupVersionKind(change.GroupVersionKind())
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(change), &cur)).To(Succeed())
	change.SetResourceVersion(cur.GetResourceVersion())
	err = c.Update(ctx, change.DeepCopy())
	// The gate's message is analyze's without the client hop, for the change it judges (the
	// new edge is its lever, in the SDK's unit: the container's AWS_MAX_ATTEMPTS, 3 tries to 1).
	layers := "frontend -x3-> orders: 3 = 1 (Deployment frontend) x 3 (Kuma MeshRetry shop/orders-retry numRetries 2); " +
		"orders -x2-> payment: 2 = 1 (Deployment orders) x 2 (Dapr Resiliency shop/payments retry policy once, maxRetries 1 (replaces the built-in retries)); " +
		"payment -x3-> ledger: 3 = 1 (Deployment payment) x 3 (Consul ServiceRouter shop/ledger numRetries 2); " +
		"ledger -x3-> audit: 3 = 1 (Deployment ledger) x 3 (Istio default, no VirtualService binds audit)"
	chain := "frontend -x3-> orders -x2-> payment -x3-> ledger -x3-> audit -x3-> archive.s3.amazonaws.com = 162 > cap 60"
	g.Expect(err).To(MatchError(`admission webhook "gate.retrycap.dev" denied the request: RetryPolicy shop/shop: ` + chain + "; " + layers +
		"; Deployment shop/audit container app env AWS_MAX_ATTEMPTS: unset (3) -> 1"))
	g.Expect(after.Violations[0].Message).To(Equal("client -x1-> " + chain + "; " + layers))
	g.Expect(after.Violations[0].Suggestion).To(Equal("Deployment shop/audit container app env AWS_MAX_ATTEMPTS: unset (3) -> 1"))

	// Audit mode admits it; the status then counts what analyze counts, and suggests the same fix.
	setSpec("enforcement", "Audit")
	g.Eventually(func() error {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(change), &cur)).To(Succeed())
		change.SetResourceVersion(cur.GetResourceVersion())
		return c.Update(ctx, change.DeepCopy())
	}).Should(Succeed())
	g.Eventually(get).Should(Equal(status{Amplification: after.Amplification, Path: strings.Join(after.WorstPath, ">"), Mesh: reads}))
	var p v1alpha1.RetryPolicy
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "shop"}, &p)).To(Succeed())
	g.Expect(p.Status.Violations).NotTo(BeEmpty())
	g.Expect(p.Status.Violations[0].Message).To(Equal(after.Violations[0].Message))
	g.Expect(p.Status.Violations[0].Suggestion).To(Equal(after.Violations[0].Suggestion))

	// Cap 2: the levers are the mesh objects' fields, in their own units, the same in analyze
	// and the status (Consul's numRetries cannot give 1 try: 0 is unset, Envoy's 1 retry).
	capped := analyzeInput(t, strings.Replace(afterInput, "maxAmplification: 60", "maxAmplification: 2", 1))
	const fix = "MeshRetry shop/orders-retry spec.to[0].default.http.numRetries: 2 -> 1; Resiliency shop/payments spec.policies.retries.once.maxRetries: 1 -> 0; " +
		"payment -> ledger: Consul ServiceRouter shop/ledger numRetries 2: ServiceRouter shop/ledger spec.routes[0].destination.numRetries cannot give 1 try (0 is unset, Envoy's 1 retry): " +
		"remove retryOn, retryOnConnectFailure and retryOnStatusCodes of spec.routes[0].destination; " +
		"ledger -> audit: Istio default, no VirtualService binds audit: no object declares these 3 tries, the mesh's default: declare the retries on the callee (a VirtualService route with retries.attempts: 0), or lower the default of every route that sets none (MeshConfig defaultHttpRetryPolicy.attempts: 0, ConfigMap istio-system/istio data.mesh); " +
		"Deployment shop/audit container app env AWS_MAX_ATTEMPTS: unset (3) -> 1"
	g.Expect(capped.Violations[0].Suggestion).To(Equal(fix))
	setSpec("maxAmplification", int64(2))
	g.Eventually(func() ([]string, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "shop"}, &p)
		var out []string
		for _, v := range p.Status.Violations {
			out = append(out, v.Suggestion)
		}
		return out, err
	}).Should(HaveExactElements(capped.Violations[0].Suggestion, capped.Violations[1].Suggestion))

	// The mesh gate on the MeshRetry, in its unit: raising numRetries to 3 makes 216 > 162.
	setSpec("maxAmplification", int64(162), "enforcement", "Reject")
	mr := &unstructured.Unstructured{}
	mr.SetAPIVersion("kuma.io/v1alpha1")
	mr.SetKind("MeshRetry")
	const wantMesh = `admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy shop/shop: MeshRetry shop/orders-retry spec.to[0].default.http.numRetries: 3 makes ` +
		"frontend -x4-> orders -x2-> payment -x3-> ledger -x3-> audit -x3-> archive.s3.amazonaws.com = 216 > cap 162; MeshRetry shop/orders-retry may keep numRetries: 2"
	g.Eventually(func() string {
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "shop", Name: "orders-retry"}, mr)).To(Succeed())
		to, _, _ := unstructured.NestedSlice(mr.Object, "spec", "to")
		g.Expect(unstructured.SetNestedField(to[0].(map[string]any), int64(3), "default", "http", "numRetries")).To(Succeed())
		g.Expect(unstructured.SetNestedSlice(mr.Object, to, "spec", "to")).To(Succeed())
		if err := c.Update(ctx, mr, client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}).Should(Equal(wantMesh))
}
