package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/retrycap/retrycap/api/v1alpha1"
	"github.com/retrycap/retrycap/internal/kubeobj"
	"github.com/retrycap/retrycap/test/internal/labyaml"
)

// admissionChain is the design's example: gateway -x3-> order -x3-> payment against cap 4, with
// order still to be deployed.
var admissionChain = labyaml.AdmissionChain("NS", "MODE", false)

// overRetryingOrder is what an engineer applies: 3 attempts to payment.
var overRetryingOrder = labyaml.Order("NS", "3")

// cacheWait bounds the wait for the manager's cache: generous, because the suite shares two cores
// with the API server, etcd and parallel builds.
const cacheWait = 30 * time.Second

var _ = Describe("admission through kubectl", func() {
	ctx := context.Background()

	// setUp applies the chain with kubectl and waits until the manager's cache (what the gate
	// reads) has the policy and both Deployments.
	setUp := func(ns, mode string) {
		r := strings.NewReplacer("NS", ns, "MODE", mode)
		_, errOut, err := Env.CP.RunKubectl(ctx, r.Replace(admissionChain), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Eventually(func(g Gomega) {
			cached := Env.Manager.GetClient()
			g.Expect(cached.Get(ctx, client.ObjectKey{Namespace: ns, Name: "checkout"}, &v1alpha1.RetryPolicy{})).To(Succeed())
			// Workloads are cached as kubeobj.CachedWorkload: read from the informers.
			ws, err := kubeobj.CachedWorkloads(ctx, Env.Manager.GetCache(), ns)
			g.Expect(err).NotTo(HaveOccurred())
			names := map[string]bool{}
			for _, w := range ws {
				names[w.Name] = true
			}
			g.Expect(names).To(HaveKey("gateway"))
			g.Expect(names).To(HaveKey("payment"))
		}, cacheWait).Should(Succeed())
	}
	orderFile := func(ns string) string {
		path := filepath.Join(GinkgoT().TempDir(), "order.yaml")
		Expect(os.WriteFile(path, []byte(strings.ReplaceAll(overRetryingOrder, "NS", ns)), 0o600)).To(Succeed())
		return path
	}

	It("kubectl apply -f of an over-retrying Deployment prints the refusal and stores nothing", func() {
		const ns = "e2e-admission"
		setUp(ns, "Reject")
		path := orderFile(ns)
		out, errOut, err := Env.CP.RunKubectl(ctx, "", "apply", "-f", path)
		Expect(err).To(HaveOccurred())
		Expect(out).To(BeEmpty())
		Expect(errOut).To(Equal(`Error from server (Forbidden): error when creating "` + path + `": admission webhook "gate.retrycap.dev" denied the request: ` +
			"RetryPolicy e2e-admission/checkout: gateway -x3-> order -x3-> payment = 9 > cap 4; order may keep payment=1\n"))
		_, errOut, err = Env.CP.RunKubectl(ctx, "", "get", "deployment", "order", "-n", ns)
		Expect(err).To(HaveOccurred())
		Expect(errOut).To(ContainSubstring(`deployments.apps "order" not found`))
	})

	It("kubectl apply -f under Rewrite prints the warning and stores the lowered attempts", func() {
		const ns = "e2e-admission-rewrite"
		setUp(ns, "Rewrite")
		out, errOut, err := Env.CP.RunKubectl(ctx, "", "apply", "-f", orderFile(ns))
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(out).To(Equal("deployment.apps/order created\n"))
		Expect(errOut).To(Equal("Warning: RetryPolicy e2e-admission-rewrite/checkout rewrote retrycap.dev/upstreams of Deployment e2e-admission-rewrite/order: " +
			"payment=3 -> payment=1 (gateway -x3-> order -x3-> payment = 9 > cap 4)\n"))
		Expect(Kubectl(ctx, "get", "deployment", "order", "-n", ns, "-o",
			`jsonpath={.spec.template.metadata.annotations.retrycap\.dev/upstreams} {.spec.template.metadata.annotations.retrycap\.dev/rewritten-from}`)).
			To(Equal("payment=1 payment=3"))
	})

	// One service under two in-cluster spellings is one node with the larger tries (api20): the
	// apply is admitted, and kubectl prints a warning naming both spellings and their columns.
	It("kubectl apply -f of two spellings of one upstream prints a warning naming both", func() {
		const ns = "e2e-admission-alias"
		setUp(ns, "Reject")
		value := "payment." + ns + "=1, payment." + ns + ".svc=1"
		order := labyaml.App{Namespace: ns, Name: "order", PartOf: "shop", Upstreams: value}.String()
		out, errOut, err := Env.CP.RunKubectl(ctx, order, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(out).To(Equal("deployment.apps/order created\n"))
		second := "payment." + ns + ".svc=1"
		Expect(errOut).To(Equal("Warning: Deployment " + ns + "/order: annotation retrycap.dev/upstreams: token \"" + second + "\" at column " +
			strconv.Itoa(strings.Index(value, second)+1) + ": upstream \"payment." + ns + ".svc\" is service payment of namespace " + ns +
			", listed already as \"payment." + ns + "\" at column 1: the graph counts one upstream with the larger attempts and calls; write it once\n"))
	})
})
