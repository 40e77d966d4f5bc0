package agree_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/analyze"
	"github.com/retrycap/retrycap/internal/operator/operatortest"
)

// A chain of two edges whose layers are Gateway API rules (GAMMA routes parented to the callee's
// Service, no retry: Istio's 3 tries, 2 the fewest the CRD lets a rule give): frontend -x2x3->
// cart -x1x3-> db = 18 > cap 4, the fewest 1x2 x 1x2 = 4. analyze -o patch's output, applied to
// the API server as merge patches (what kubectl patch --type merge does with each document),
// brings the status to 4, within the cap, with no violation; the status's fix before it is
// analyze's. Before (mesh.Split one layer per edge, a planner blind to the rules' fewest), the
// patch left 3 x 2 = 6 > 4 (analyze's testdata/mesh/gamma-chain-floors.yaml, same chain).
const splitInput = `apiVersion: v1
kind: Namespace
metadata:
  name: shop-split
  labels: {istio-injection: enabled}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: cart, namespace: shop-split}
spec:
  parentRefs: [{group: "", kind: Service, name: cart, port: 80}]
  rules:
  - backendRefs: [{name: cart, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: db, namespace: shop-split}
spec:
  parentRefs: [{group: "", kind: Service, name: db, port: 80}]
  rules:
  - backendRefs: [{name: db, port: 80}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: shop-split}
spec:
  selector: {matchLabels: {app: frontend}}
  template:
    metadata:
      labels: {app: frontend}
      annotations: {retrycap.dev/upstreams: "cart=2"}
    spec: {containers: [{name: web, image: web:v1}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cart, namespace: shop-split}
spec:
  selector: {matchLabels: {app: cart}}
  template:
    metadata:
      labels: {app: cart}
      annotations: {retrycap.dev/upstreams: "db=1"}
    spec: {containers: [{name: cart, image: cart:v1}]}
---
apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: shop, namespace: shop-split}
spec:
  maxAmplification: 4
  enforcement: Audit
  entrypoints: [{service: frontend, clientAttempts: 1}]
`

func init() {
	moreCases = append(moreCases, struct {
		name string
		run  func(*testing.T, *operatortest.Operator)
	}{name: "a chain of two Gateway API rules: -o patch applied", run: splitPatchApplied})
}

func splitPatchApplied(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const fix = "frontend: cart=1; HTTPRoute shop-split/cart spec.rules[0].retry.attempts: unset (2) -> 1; HTTPRoute shop-split/db spec.rules[0].retry.attempts: unset (2) -> 1"
	rep := analyzeInput(t, splitInput)
	g.Expect(rep.Amplification).To(Equal(int64(18)))
	g.Expect(rep.Violations).To(HaveLen(1))
	g.Expect(rep.Violations[0].Suggestion).To(Equal(fix))

	// analyze -o patch, rendered as the CLI prints it; no note: analyze says it fits.
	m := analyze.NewManifests()
	g.Expect((analyze.Reader{}).Read(m, "input.yaml", strings.NewReader(splitInput))).To(BeEmpty())
	patches, notes := m.Plan()
	g.Expect(notes).To(BeEmpty())
	var rendered bytes.Buffer
	g.Expect(analyze.RenderPatch(&rendered, patches, notes)).To(Succeed())

	for _, u := range objects(t, splitInput) {
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	type status struct {
		Amplification int64
		Suggestions   []string
	}
	get := func() (status, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop-split", Name: "shop"}, &p); err != nil {
			return status{}, err
		}
		s := status{Amplification: p.Status.Amplification}
		for _, v := range p.Status.Violations {
			s.Suggestions = append(s.Suggestions, v.Suggestion)
		}
		return s, nil
	}
	g.Eventually(get).Should(Equal(status{Amplification: 18, Suggestions: []string{fix}}))

	// Each document of the output is a merge patch of the object it names.
	applied := 0
	for _, doc := range strings.Split(rendered.String(), "\n---\n") {
		var obj map[string]any
		g.Expect(yaml.Unmarshal([]byte(doc), &obj)).To(Succeed(), doc)
		js, err := yaml.YAMLToJSON([]byte(doc))
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: obj}
		g.Expect(c.Patch(ctx, u, client.RawPatch(types.MergePatchType, js))).To(Succeed(), doc)
		applied++
	}
	g.Expect(applied).To(Equal(3)) // frontend's annotation, the two rules
	g.Eventually(get).Should(Equal(status{Amplification: 4}))
}
