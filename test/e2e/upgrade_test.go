package e2e

// The upgrade a platform engineer runs over policies stored by the previous release: the CRDs
// of the release before the duration bounds (issue 25) are installed, policies with durations
// the new CRDs refuse are stored, then this checkout's CRDs are applied over them with
// `kubectl apply` (what `kubectl apply -k config/default` and `helm upgrade` do: the chart ships
// the CRDs in templates/, so Helm upgrades them). testdata/crds-before-bounds holds that
// release's CRDs as generated (commit 21cf658), so the test needs no git history.
//
// The suite's API server is shared: the spec puts this checkout's CRDs back (and waits until
// the API server enforces them) whatever happens, and deletes what it created.

import (
	"context"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("upgrading over policies stored before the duration bounds", func() {
	ctx := context.Background()
	const (
		ns        = "e2e-upgrade"
		clusterNS = "e2e-upgrade-cluster"
		written   = `, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`
		skipNote  = " (the injector skips this policy's pods until it is fixed)"
	)
	crds := func(dir string) string {
		return filepath.Join(Env.CP.RepoRoot, dir)
	}
	// enforced waits until the API server validates with the CRDs just written (a CRD update
	// reaches the request handlers asynchronously): a server-side dry run of a per-try timeout
	// of 99999h is refused by the bounded CRDs and accepted by the old ones.
	enforced := func(bounded bool) {
		probe := `{"apiVersion":"retrycap.dev/v1alpha1","kind":"RetryPolicy","metadata":{"name":"probe","namespace":"default"},"spec":{"maxAmplification":4,"retry":{"perTryTimeout":"99999h"}}}`
		Eventually(func() bool {
			_, _, err := Env.CP.RunKubectl(ctx, probe, "create", "--dry-run=server", "-f", "-")
			return err != nil
		}).Should(Equal(bounded), "the API server enforcing the CRDs (bounded: %v)", bounded)
	}
	apply := func(yaml string) {
		_, errOut, err := Env.CP.RunKubectl(ctx, yaml, "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), "stderr: %s", errOut)
	}
	ready := func(kind, name string, args ...string) func() (string, error) {
		return func() (string, error) {
			out, _, err := Env.CP.RunKubectl(ctx, "", append([]string{"get", kind, name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].message}`}, args...)...)
			return out, err
		}
	}
	skipped := func(namespace, pod string) string {
		return Kubectl(ctx, "get", "pod", pod, "-n", namespace, "-o", `jsonpath={.metadata.annotations.retrycap\.dev/injection-skipped}`)
	}

	It("keeps them readable and relabelable, reports each out-of-range value, refuses another, the injector skips their pods and the gate keeps their cap", func() {
		// The previous release, as its `kubectl apply -k` left it (last-applied included).
		Kubectl(ctx, "replace", "--save-config", "-f", crds("test/e2e/testdata/crds-before-bounds"))
		DeferCleanup(func() {
			for _, obj := range [][]string{
				{"pod", "legacy-0", "-n", ns}, {"pod", "legacy-0", "-n", clusterNS}, {"pod", "fixed-0", "-n", ns},
				{"deployment", "legacy", "-n", ns}, {"deployment", "order", "-n", ns}, {"deployment", "legacy", "-n", clusterNS},
				{"retrypolicy", "legacy", "-n", ns}, {"clusterretrypolicy", "e2e-upgrade-legacy"},
			} {
				Kubectl(ctx, append([]string{"delete", "--ignore-not-found", "--wait=false"}, obj...)...)
			}
			Kubectl(ctx, "replace", "--save-config", "-f", crds("config/crd/bases"))
			enforced(true)
		})
		enforced(false)

		for _, n := range []string{ns, clusterNS} {
			apply(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + n + `","labels":{"retrycap.dev/injection":"enabled","e2e-upgrade":"` + n + `"}}}`)
			apply(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"legacy","namespace":"` + n + `"},"spec":{"selector":{"matchLabels":{"app":"legacy"}},` +
				`"template":{"metadata":{"labels":{"app":"legacy","team":"legacy"}},"spec":{"containers":[{"name":"app","image":"app"}]}}}}`)
		}
		apply(`{"apiVersion":"retrycap.dev/v1alpha1","kind":"RetryPolicy","metadata":{"name":"legacy","namespace":"` + ns + `"},` +
			`"spec":{"maxAmplification":4,"selector":{"matchLabels":{"team":"legacy"}},"retry":{"perTryTimeout":"99999h"}}}`)
		apply(`{"apiVersion":"retrycap.dev/v1alpha1","kind":"ClusterRetryPolicy","metadata":{"name":"e2e-upgrade-legacy"},` +
			`"spec":{"maxAmplification":4,"namespaceSelector":{"matchLabels":{"e2e-upgrade":"` + clusterNS + `"}},"circuitBreaker":{"openFor":"48h"}}}`)

		By("applying this release's CRDs over them, as kubectl apply -k config/default and helm upgrade do")
		Kubectl(ctx, "apply", "-f", crds("config/crd/bases"))
		enforced(true)
		// The three-way merge replaced the old rule (the list is keyed by the rule's text): only
		// the bounded one is left, else the old, weaker message would still be in force beside it.
		Expect(Kubectl(ctx, "get", "crd", "retrypolicies.retrycap.dev", "-o",
			`jsonpath={.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.retry.properties.perTryTimeout.x-kubernetes-validations[*].message}`)).
			To(Equal("must be between 1ms and 1h" + written))

		By("(a) the stored values are still read, and Ready names each field and value out of bounds")
		Expect(Kubectl(ctx, "get", "rp", "legacy", "-n", ns, "-o", "jsonpath={.spec.retry.perTryTimeout}")).To(Equal("99999h"))
		Expect(Kubectl(ctx, "get", "clusterretrypolicy", "e2e-upgrade-legacy", "-o", "jsonpath={.spec.circuitBreaker.openFor}")).To(Equal("48h"))
		Eventually(ready("rp", "legacy", "-n", ns)).Should(Equal("analysed 1 selected workload(s): 1 service(s), 0 edge(s)" +
			"; warning: spec.retry.perTryTimeout 99999h: must be between 1ms and 1h" + skipNote))
		Eventually(ready("clusterretrypolicy", "e2e-upgrade-legacy")).Should(Equal("analysed 1 selected workload(s): 1 service(s), 0 edge(s)" +
			"; warning: spec.circuitBreaker.openFor 48h: must be between 1ms and 1h" + skipNote))

		By("(b) an update that leaves the stored value alone is allowed (CRD validation ratcheting)")
		// The API server accepts them with a warning naming the field and the value it kept
		// (kubectl prints it on stderr): the stored value is said at every write.
		rpWarning := `Warning: spec.retry.perTryTimeout: Invalid value: "99999h": must be between 1ms and 1h` + written + "\n"
		crpWarning := `Warning: spec.circuitBreaker.openFor: Invalid value: "48h": must be between 1ms and 1h` + written + "\n"
		for _, tc := range []struct {
			args []string
			warn string
		}{
			{[]string{"label", "rp", "legacy", "-n", ns, "owner=payments"}, rpWarning},
			{[]string{"label", "clusterretrypolicy", "e2e-upgrade-legacy", "owner=platform"}, crpWarning},
			{[]string{"patch", "rp", "legacy", "-n", ns, "--type=merge", "-p", `{"spec":{"maxAmplification":5}}`}, rpWarning},
			{[]string{"patch", "clusterretrypolicy", "e2e-upgrade-legacy", "--type=merge", "-p", `{"spec":{"maxAmplification":5,"circuitBreaker":{"failures":7}}}`}, crpWarning},
		} {
			_, errOut, err := Env.CP.RunKubectl(ctx, "", tc.args...)
			Expect(err).NotTo(HaveOccurred(), "kubectl %v: %s", tc.args, errOut)
			Expect(errOut).To(Equal(tc.warn), "kubectl %v", tc.args)
		}
		Expect(Kubectl(ctx, "get", "rp", "legacy", "-n", ns, "-o", "jsonpath={.metadata.labels.owner} {.spec.maxAmplification} {.spec.retry.perTryTimeout}")).
			To(Equal("payments 5 99999h"))
		Expect(Kubectl(ctx, "get", "clusterretrypolicy", "e2e-upgrade-legacy", "-o", "jsonpath={.metadata.labels.owner} {.spec.maxAmplification} {.spec.circuitBreaker.failures} {.spec.circuitBreaker.openFor}")).
			To(Equal("platform 5 7 48h"))

		By("(c) changing the stored value to another out of bounds is refused, naming the field and the value")
		_, errOut, err := Env.CP.RunKubectl(ctx, "", "patch", "rp", "legacy", "-n", ns, "--type=merge", "-p", `{"spec":{"retry":{"perTryTimeout":"88888h"}}}`)
		Expect(err).To(HaveOccurred())
		Expect(errOut).To(Equal(`The RetryPolicy "legacy" is invalid: spec.retry.perTryTimeout: Invalid value: "88888h": must be between 1ms and 1h` + written + "\n"))
		_, errOut, err = Env.CP.RunKubectl(ctx, "", "patch", "clusterretrypolicy", "e2e-upgrade-legacy", "--type=merge", "-p", `{"spec":{"circuitBreaker":{"openFor":"2h"}}}`)
		Expect(err).To(HaveOccurred())
		Expect(errOut).To(Equal(`The ClusterRetryPolicy "e2e-upgrade-legacy" is invalid: spec.circuitBreaker.openFor: Invalid value: "2h": must be between 1ms and 1h` + written + "\n"))

		By("(d) the injector skips the policies' pods with InvalidPolicy, naming the policy, the field and the value")
		pod := func(namespace, name string) {
			apply(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"` + name + `","namespace":"` + namespace + `","labels":{"app":"legacy","team":"legacy"}},` +
				`"spec":{"containers":[{"name":"app","image":"app"}]}}`)
		}
		pod(ns, "legacy-0")
		pod(clusterNS, "legacy-0")
		Expect(skipped(ns, "legacy-0")).To(Equal("InvalidPolicy: RetryPolicy " + ns + "/legacy: spec.retry.perTryTimeout 99999h: must be between 1ms and 1h"))
		Expect(skipped(clusterNS, "legacy-0")).To(Equal("InvalidPolicy: ClusterRetryPolicy e2e-upgrade-legacy: spec.circuitBreaker.openFor 48h: must be between 1ms and 1h"))

		By("the gate still enforces the cap of such a policy: its durations do not change the amplification")
		// Eventually: the gate reads the policy from the manager's cache, which may not yet hold
		// the patch to cap 5 above (a CI run got "cap 4"). Every try is refused (9 is over both
		// caps), so repeating it creates nothing.
		Eventually(func() string {
			_, errOut, err := Env.CP.RunKubectl(ctx, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"order","namespace":"`+ns+`"},"spec":{"selector":{"matchLabels":{"app":"order"}},`+
				`"template":{"metadata":{"labels":{"app":"order","team":"legacy"},"annotations":{"retrycap.dev/upstreams":"payment=9"}},"spec":{"containers":[{"name":"app","image":"app"}]}}}}`, "apply", "-f", "-")
			if err == nil {
				return "admitted"
			}
			return errOut
		}).Should(Equal(`Error from server (Forbidden): error when creating "STDIN": admission webhook "gate.retrycap.dev" denied the request: ` +
			"RetryPolicy " + ns + "/legacy: order -x9-> payment = 9 > cap 5; order may keep payment=5\n"))

		By("fixing the value (docs/upgrading.md): Ready is clean and new pods get the proxy")
		Kubectl(ctx, "patch", "rp", "legacy", "-n", ns, "--type=merge", "-p", `{"spec":{"retry":{"perTryTimeout":"1h"}}}`)
		Eventually(ready("rp", "legacy", "-n", ns)).Should(Equal("analysed 2 selected workload(s): 2 service(s), 0 edge(s)"))
		pod(ns, "fixed-0")
		Expect(skipped(ns, "fixed-0")).To(BeEmpty())
		Expect(strings.Fields(Kubectl(ctx, "get", "pod", "fixed-0", "-n", ns, "-o", "jsonpath={.spec.initContainers[*].name}"))).To(Equal([]string{"retrycap-proxy"}))
	})
})
