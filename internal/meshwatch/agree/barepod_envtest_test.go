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

// A bare Pod (no controller) calling S3 through the AWS SDK with AWS_MAX_ATTEMPTS=7 in its
// container env. The manager watches Pods as metadata only; the env is in the spec, which it now
// reads once per bare Pod (kubeobj/barepods.go). Before, the status took the SDK's default (5
// tries assumed): frontend -x2-> uploader -x5-> S3 = 10, within cap 10, where analyze and the
// gate, which read the spec, say 14.
const barePodInput = `
apiVersion: v1
kind: Namespace
metadata: {name: shop-barepod}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: frontend, namespace: shop-barepod}
spec:
  selector: {matchLabels: {app: frontend}}
  template:
    metadata:
      labels: {app: frontend}
      annotations: {retrycap.dev/upstreams: "uploader=2"}
    spec:
      containers: [{name: web, image: lab-app}]
---
apiVersion: v1
kind: Pod
metadata:
  name: uploader
  namespace: shop-barepod
  annotations: {retrycap.dev/upstreams: s3.eu-west-1.amazonaws.com}
spec:
  containers:
  - name: app
    image: lab-app
    env: [{name: AWS_REGION, value: eu-west-1}, {name: AWS_MAX_ATTEMPTS, value: "7"}]
---
apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: shop, namespace: shop-barepod}
spec:
  maxAmplification: 10
  entrypoints: [{service: frontend}]
`

func init() {
	moreCases = append(moreCases, struct {
		name string
		run  func(*testing.T, *operatortest.Operator)
	}{name: "a bare Pod's AWS SDK env", run: barePodAWS})
}

func barePodAWS(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	const chain = "frontend -x2-> uploader -x7-> s3.eu-west-1.amazonaws.com = 14 > cap 10"
	const fix = "Pod shop-barepod/uploader container app env AWS_MAX_ATTEMPTS: 7 -> 5"
	rep := analyzeInput(t, barePodInput)
	g.Expect(rep.Amplification).To(Equal(int64(14)))
	g.Expect(rep.Violations).To(HaveLen(1))
	g.Expect(rep.Violations[0].Message).To(Equal("client -x1-> " + chain))
	g.Expect(rep.Violations[0].Suggestion).To(Equal(fix))

	// The objects, the policy last in Audit (the Pod is admitted).
	var policy, pod *unstructured.Unstructured
	for _, u := range objects(t, barePodInput) {
		switch u.GetKind() {
		case "RetryPolicy":
			policy = u
			continue
		case "Pod":
			pod = u
		}
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	g.Expect(unstructured.SetNestedField(policy.Object, "Audit", "spec", "enforcement")).To(Succeed())
	g.Expect(c.Create(ctx, policy)).To(Succeed())

	// The status: analyze's number, path, message and fix.
	type status struct {
		Amplification       int64
		Path                string
		Message, Suggestion string
	}
	want := status{Amplification: 14, Path: strings.Join(rep.WorstPath, ">"), Message: rep.Violations[0].Message, Suggestion: fix}
	key := client.ObjectKeyFromObject(policy)
	g.Eventually(func() (status, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, key, &p); err != nil {
			return status{}, err
		}
		s := status{Amplification: p.Status.Amplification, Path: p.Status.WorstPath}
		if len(p.Status.Violations) > 0 {
			s.Message, s.Suggestion = p.Status.Violations[0].Message, p.Status.Violations[0].Suggestion
		}
		return s, nil
	}).Should(Equal(want))

	// The gate, under Reject: the Pod created again is refused with the same chain and fix.
	g.Expect(c.Get(ctx, key, policy)).To(Succeed())
	g.Expect(unstructured.SetNestedField(policy.Object, "Reject", "spec", "enforcement")).To(Succeed())
	g.Expect(c.Update(ctx, policy)).To(Succeed())
	g.Expect(c.Delete(ctx, pod.DeepCopy(), client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(func() string {
		err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		if err == nil {
			return ""
		}
		return err.Error()
	}).Should(Equal(`admission webhook "gate.retrycap.dev" denied the request: RetryPolicy shop-barepod/shop: ` + chain + "; " + fix))
}

// The fix applied: a Deployment calling S3 with AWS_MAX_ATTEMPTS=7 gets the fix in the env's
// unit; its env lowered as the fix says (nothing else changed), the status follows. The
// controller reconciled only on a change of labels or retrycap's annotations before.
const envFixInput = `
apiVersion: v1
kind: Namespace
metadata: {name: shop-envfix}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: archiver, namespace: shop-envfix}
spec:
  selector: {matchLabels: {app: archiver}}
  template:
    metadata:
      labels: {app: archiver}
      annotations: {retrycap.dev/upstreams: s3.eu-west-1.amazonaws.com}
    spec:
      containers:
      - name: app
        image: lab-app
        env: [{name: AWS_MAX_ATTEMPTS, value: "7"}]
---
apiVersion: retrycap.dev/v1alpha1
kind: RetryPolicy
metadata: {name: shop, namespace: shop-envfix}
spec:
  maxAmplification: 4
  enforcement: Audit
  entrypoints: [{service: archiver}]
`

func init() {
	moreCases = append(moreCases, struct {
		name string
		run  func(*testing.T, *operatortest.Operator)
	}{name: "an AWS SDK env fix applied", run: envFixApplied})
}

func envFixApplied(t *testing.T, op *operatortest.Operator) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx
	const fix = "Deployment shop-envfix/archiver container app env AWS_MAX_ATTEMPTS: 7 -> 4"
	rep := analyzeInput(t, envFixInput)
	g.Expect(rep.Violations).To(HaveLen(1))
	g.Expect(rep.Violations[0].Suggestion).To(Equal(fix))
	var dep *unstructured.Unstructured
	for _, u := range objects(t, envFixInput) {
		if u.GetKind() == "Deployment" {
			dep = u
		}
		g.Eventually(func() error { return c.Create(ctx, u.DeepCopy()) }).Should(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
	}
	type status struct {
		Amplification int64
		Suggestions   []string
	}
	get := func() (status, error) {
		var p v1alpha1.RetryPolicy
		if err := c.Get(ctx, client.ObjectKey{Namespace: "shop-envfix", Name: "shop"}, &p); err != nil {
			return status{}, err
		}
		s := status{Amplification: p.Status.Amplification}
		for _, v := range p.Status.Violations {
			s.Suggestions = append(s.Suggestions, v.Suggestion)
		}
		return s, nil
	}
	g.Eventually(get).Should(Equal(status{Amplification: 7, Suggestions: []string{fix}}))

	// The fix as a strategic merge patch of the env (what analyze -o patch writes).
	patch := []byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"AWS_MAX_ATTEMPTS","value":"4"}]}]}}}}`)
	g.Expect(c.Patch(ctx, dep.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, patch))).To(Succeed())
	g.Eventually(get).Should(Equal(status{Amplification: 4}))
}
