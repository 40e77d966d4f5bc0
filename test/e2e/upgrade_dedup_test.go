package e2e

// The same upgrade as upgrade_test.go, over a dedupUpstreams name that this release's CRD refuses
// ("Payment": the injector never accepted it, and skipped every pod of such a policy while Ready
// was green). Stored under the previous release's CRDs, it still reads, Ready names it, an
// update that leaves it alone passes (CRD validation ratcheting) and one that writes another
// refused name does not.

import (
	"context"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("upgrading over a policy stored with a dedupUpstreams name this release refuses", func() {
	ctx := context.Background()
	const ns = "e2e-upgrade-dedup"
	crds := func(dir string) string { return filepath.Join(Env.CP.RepoRoot, dir) }
	enforced := func(patterned bool) {
		probe := `{"apiVersion":"retrycap.dev/v1alpha1","kind":"RetryPolicy","metadata":{"name":"probe","namespace":"default"},"spec":{"maxAmplification":4,"retry":{"dedupUpstreams":["Payment"]}}}`
		Eventually(func() bool {
			_, _, err := Env.CP.RunKubectl(ctx, probe, "create", "--dry-run=server", "-f", "-")
			return err != nil
		}).Should(Equal(patterned), "the API server enforcing the CRDs (pattern: %v)", patterned)
	}
	apply := func(yaml string) {
		_, errOut, err := Env.CP.RunKubectl(ctx, yaml, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), "stderr: %s", errOut)
	}
	ready := func() (string, error) {
		out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "legacy", "-n", ns, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`)
		return out, err
	}

	It("reads it, names it in Ready, lets an update that leaves it pass, refuses another, and the injector skips the pods", func() {
		Kubectl(ctx, "replace", "--save-config", "-f", crds("test/e2e/testdata/crds-before-bounds"))
		DeferCleanup(func() {
			for _, obj := range [][]string{{"pod", "legacy-0", "-n", ns}, {"deployment", "legacy", "-n", ns}, {"retrypolicy", "legacy", "-n", ns}} {
				Kubectl(ctx, append([]string{"delete", "--ignore-not-found", "--wait=false"}, obj...)...)
			}
			Kubectl(ctx, "replace", "--save-config", "-f", crds("config/crd/bases"))
			enforced(true)
		})
		enforced(false)
		apply(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `","labels":{"retrycap.dev/injection":"enabled"}}}`)
		apply(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"legacy","namespace":"` + ns + `"},"spec":{"selector":{"matchLabels":{"app":"legacy"}},` +
			`"template":{"metadata":{"labels":{"app":"legacy"}},"spec":{"containers":[{"name":"app","image":"app"}]}}}}`)
		apply(`{"apiVersion":"retrycap.dev/v1alpha1","kind":"RetryPolicy","metadata":{"name":"legacy","namespace":"` + ns + `"},` +
			`"spec":{"maxAmplification":4,"retry":{"dedupUpstreams":["payment","Payment"]}}}`)

		By("applying this release's CRDs over it")
		Kubectl(ctx, "apply", "-f", crds("config/crd/bases"))
		enforced(true)

		By("the stored name still reads, and Ready names it")
		Expect(Kubectl(ctx, "get", "rp", "legacy", "-n", ns, "-o", "jsonpath={.spec.retry.dedupUpstreams}")).To(Equal(`["payment","Payment"]`))
		Eventually(ready).Should(Equal(`analysed 1 selected workload(s): 1 service(s), 0 edge(s); warning: spec.retry.dedupUpstreams "Payment": is not an upstream name: "Payment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed (the injector skips this policy's pods until it is fixed)`))

		By("an update that leaves it alone passes (ratcheting)")
		_, errOut, err := Env.CP.RunKubectl(ctx, "", "label", "rp", "legacy", "-n", ns, "owner=payments")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Expect(errOut).To(BeEmpty(), "a pattern ratcheted is not warned of (a CEL rule is)")

		By("writing another refused name is refused, naming the field and the value")
		_, errOut, err = Env.CP.RunKubectl(ctx, "", "patch", "rp", "legacy", "-n", ns, "--type=merge", "-p", `{"spec":{"retry":{"dedupUpstreams":["payment","Ledger"]}}}`)
		Expect(err).To(HaveOccurred())
		Expect(errOut).To(Equal(`The RetryPolicy "legacy" is invalid: spec.retry.dedupUpstreams[1]: Invalid value: "Ledger": spec.retry.dedupUpstreams[1] in body should match '^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$'` + "\n"))

		By("the injector skips its pods with InvalidPolicy, naming the policy, the field and the value")
		apply(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"legacy-0","namespace":"` + ns + `","labels":{"app":"legacy"}},"spec":{"containers":[{"name":"app","image":"app"}]}}`)
		Expect(Kubectl(ctx, "get", "pod", "legacy-0", "-n", ns, "-o", `jsonpath={.metadata.annotations.retrycap\.dev/injection-skipped}`)).To(Equal(
			`InvalidPolicy: RetryPolicy ` + ns + `/legacy: spec.retry.dedupUpstreams "Payment": is not an upstream name: "Payment" is not a service name, name.namespace or host: only lower-case letters, digits and '-' are allowed`))

		By("fixing it clears Ready")
		Kubectl(ctx, "patch", "rp", "legacy", "-n", ns, "--type=merge", "-p", `{"spec":{"retry":{"dedupUpstreams":["payment"]}}}`)
		Eventually(ready).Should(Equal("analysed 2 selected workload(s): 2 service(s), 0 edge(s)"), "the Deployment and the bare Pod")
	})
})
