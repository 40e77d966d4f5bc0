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

// An Istio ServiceEntry registering an external HTTP host (istio/istio's egress rule for
// www.googleapis.com, its VirtualService and DestinationRule removed: the golden
// public-istio-egress-serviceentry-only): bookinfo's details v2 calls it through its sidecar,
// which takes Istio's default route, 2 retries: details-v2 -x3-> www.googleapis.com = 3 > cap 2.
// Before, the manager read no ServiceEntry: the status said 1, within the cap, and the gates
// admitted what analyze refuses. analyze, the status, the workload gate and the mesh gate (on
// the ServiceEntry created again) must say 3 > cap 2.
func init() {
	moreCases = append(moreCases, struct {
		name string
		run  func(*testing.T, *operatortest.Operator)
	}{"an external host a ServiceEntry registers (Istio's egress task)", serviceEntryCase})
}

func serviceEntryCase(t *testing.T, op *operatortest.Operator) {
	const ns = "egress-se"
	fc := fileCase{name: "ServiceEntry", file: "../../cli/testdata/public/istio-egress-serviceentry-only", namespace: ns}
	// Status and workload gate: analyze's 3 > cap 2 (the policy ends in Reject, details-v2
	// deleted).
	agreeOnFile(t, op, fc)
	if t.Failed() {
		return
	}
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	c, ctx := op.Client, op.Ctx

	policy := &v1alpha1.RetryPolicy{}
	key := types.NamespacedName{Namespace: ns, Name: "details"}
	setEnforcement := func(e v1alpha1.Enforcement) {
		g.Eventually(func() error {
			if err := c.Get(ctx, key, policy); err != nil {
				return err
			}
			policy.Spec.Enforcement = e
			return c.Update(ctx, policy)
		}).Should(Succeed())
	}
	amplification := func() (int64, error) {
		var p v1alpha1.RetryPolicy
		err := c.Get(ctx, key, &p)
		return p.Status.Amplification, err
	}

	// details-v2 back (Audit admits it): 3 again.
	setEnforcement(v1alpha1.EnforcementAudit)
	var dep, se *unstructured.Unstructured
	input := readInput(t, fc)
	for _, u := range objects(t, input) {
		switch u.GetKind() {
		case "Deployment":
			dep = u
		case "ServiceEntry":
			se = u
		}
	}
	g.Expect(dep).NotTo(BeNil())
	g.Expect(se).NotTo(BeNil())
	g.Eventually(func() error { return c.Create(ctx, dep.DeepCopy()) }).Should(Succeed())
	g.Eventually(amplification).Should(Equal(int64(3)))

	// Without the ServiceEntry, www.googleapis.com is outside the mesh's registry: Istio's
	// PassthroughCluster, no retry. The status follows (the watcher saw the delete).
	g.Expect(c.Delete(ctx, se.DeepCopy())).To(Succeed())
	g.Eventually(amplification).Should(Equal(int64(1)))
	var docs []string
	for _, d := range strings.Split(input, "\n---\n") {
		if !strings.Contains(d, "kind: ServiceEntry\n") {
			docs = append(docs, d)
		}
	}
	g.Expect(docs).To(HaveLen(len(strings.Split(input, "\n---\n")) - 1))
	g.Expect(analyzeInput(t, strings.Join(docs, "\n---\n")).Amplification).To(Equal(int64(1)), "analyze without the ServiceEntry")

	// The mesh gate refuses it created again under Reject: the entry, its host and port, analyze's
	// chain (without the client hop, as the gates write it), and the VirtualService field that
	// would lower the layer.
	setEnforcement(v1alpha1.EnforcementReject)
	rep := analyzeInput(t, input)
	g.Expect(rep.Amplification).To(Equal(int64(3)))
	g.Expect(rep.Cap).To(Equal(int64(2)))
	const chain = "details-v2 -x3-> www.googleapis.com = 3 > cap 2"
	g.Expect(rep.Violations[0].Message).To(HavePrefix("client -x1-> " + chain + ";"))
	const want = `admission webhook "mesh.retrycap.dev" denied the request: RetryPolicy egress-se/details: ServiceEntry egress-se/googleapis spec.hosts[0]: www.googleapis.com (port 80 HTTP) makes ` +
		chain + "; Istio's default route retries it: a VirtualService for host www.googleapis.com may keep spec.http[].retries.attempts: 1"
	g.Eventually(func() string {
		if err := c.Create(ctx, se.DeepCopy(), client.DryRunAll); err != nil {
			return err.Error()
		}
		return ""
	}).Should(Equal(want))
	// Audit admits it; the status counts its 3 again.
	setEnforcement(v1alpha1.EnforcementAudit)
	g.Eventually(func() error { return c.Create(ctx, se.DeepCopy()) }).Should(Succeed())
	g.Eventually(amplification).Should(Equal(int64(3)))
}
