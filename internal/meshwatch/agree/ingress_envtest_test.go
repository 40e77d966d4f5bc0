package agree_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// ingress-nginx (mesh/ingressnginx.go) on analyze's hand-written inputs: an Ingress's backend is
// a north-south entrypoint whose client attempts ingress-nginx's tries multiply. analyze, the
// status and the gate must agree; the status needs the manager to read the Ingresses and the
// IngressClasses (meshwatch: ingresses.networking.k8s.io, IngressClasses beside it). Before, the
// status counted no Ingress: 2 where analyze says 6, 1 where it says 5.
//
//   - class nginx, no IngressClass in the cluster (assumed ingress-nginx), its default 3 tries:
//     client -x3-> frontend -x2-> api = 6 > cap 4; a traefik Ingress beside it is not modelled.
//   - an IngressClass public of controller k8s.io/ingress-nginx, proxy-next-upstream-tries "5":
//     5 > cap 2, the fix the Ingress's annotation.
//
// Renamed: namespace shop is the new layers' case's.
func init() {
	fileCases = append(fileCases,
		fileCase{name: "an ingress-nginx Ingress, default tries", file: "../../cli/testdata/inputs/ingress-nginx.yaml",
			rename: [2]string{"shop", "shop-nginx"}},
		fileCase{name: "an ingress-nginx Ingress of an IngressClass, tries annotated", file: "../../cli/testdata/inputs/ingress-nginx-tries.yaml",
			rename: [2]string{"shop", "shop-nginx-tries"}},
	)
}

// ingressGateInput: an ingress-nginx Ingress (class nginx, assumed) with 2 tries in front of a
// frontend that calls api once: 2 <= cap 4, admitted. Raising the tries to 5 makes 5 > 4.
const ingressGateInput = `
apiVersion: v1
kind: Namespace
metadata: {name: shop-nginx-gate}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: shop-nginx-gate}
spec:
  selector: {matchLabels: {app: frontend}}
  template:
    metadata:
      labels: {app: frontend}
      annotations: {retrycap.dev/upstreams: "api=1"}
    spec: {containers: [{name: web, image: web:v1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api, namespace: shop-nginx-gate}
spec:
  selector: {matchLabels: {app: api}}
  template:
    metadata:
      labels: {app: api}
    spec: {containers: [{name: api, image: api:v1}]}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop-nginx-gate
  annotations: {nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"}
spec:
  ingressClassName: nginx
  rules:
  - http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: frontend, port: {number: 80}}}}
---
apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: shop, namespace: shop-nginx-gate}
spec: {maxAmplification: 4, enforcement: Reject}
`

func init() {
	moreCases = append(moreCases, struct {
		name string
		run  func(*testing.T, *operatortest.Operator)
	}{name: "the mesh gate on an ingress-nginx Ingress", run: ingressGate})
}

// ingressGate: the mesh gate judges an Ingress change (ingresses.networking.k8s.io is among the
// mesh webhook's rules) with analyze's chain for the changed input.
func ingressGate(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	before := analyzeInput(t, ingressGateInput)
	g.Expect(before.Amplification).To(Equal(int64(2)))
	g.Expect(before.Violations).To(BeEmpty())
	const raised = `{nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "5"}`
	afterInput := strings.Replace(ingressGateInput, `{nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "2"}`, raised, 1)
	after := analyzeInput(t, afterInput)
	g.Expect(after.Violations).To(HaveLen(1))
	const chain = "client -x5-> frontend -x1-> api = 5 > cap 4"
	g.Expect(after.Violations[0].Message).To(HavePrefix(chain + "; "))

	var ing *unstructured.Unstructured
	for _, u := range objects(t, ingressGateInput) {
		if u.GetKind() == "Ingress" {
			ing = u
		}
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	key := client.ObjectKeyFromObject(ing)
	g.Eventually(func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, types.NamespacedName{Namespace: "shop-nginx-gate", Name: "shop"}, &p)
		return p.Status.Amplification, err
	}).Should(Equal(before.Amplification))

	// The Ingress's tries raised to 5: refused, in the annotation's unit.
	var got string
	g.Eventually(func() string {
		cur := &unstructured.Unstructured{}
		cur.SetGroupVersionKind(ing.GroupVersionKind())
		g.Expect(c.Get(ctx, key, cur)).To(Succeed())
		cur.SetAnnotations(map[string]string{"nginx.ingress.kubernetes.io/proxy-next-upstream-tries": "5"})
		got = ""
		if err := c.Update(ctx, cur, client.DryRunAll); err != nil {
			got = err.Error()
		}
		return got
	}).Should(HavePrefix(`admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy shop-nginx-gate/shop: `))
	// analyze's chain and number for the changed input, and its lever: analyze's fix lowers
	// "5" to "4" (after.Violations[0].Suggestion), the gate says what may be kept.
	g.Expect(after.Violations[0].Suggestion).To(Equal(`Ingress shop-nginx-gate/web metadata.annotations["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"]: "5" -> "4"`))
	g.Expect(got).To(Equal(`admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy shop-nginx-gate/shop: ` +
		`Ingress shop-nginx-gate/web metadata.annotations["nginx.ingress.kubernetes.io/proxy-next-upstream-tries"]: "5" makes ` + chain +
		`; Ingress shop-nginx-gate/web may keep nginx.ingress.kubernetes.io/proxy-next-upstream-tries: "4"`))
}
