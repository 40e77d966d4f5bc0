package e2e

import (
	"context"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Services in the live views", func() {
	ctx := context.Background()

	It("retrycap graph resolves bookinfo's Services exactly as analyze does from the same manifests", func() {
		file := filepath.Join(Env.CP.RepoRoot, "internal", "cli", "testdata", "services", "bookinfo.yaml")
		Kubectl(ctx, "create", "namespace", "bookinfo")
		Kubectl(ctx, "apply", "-f", file)
		Eventually(func() (string, error) {
			out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "bookinfo", "-n", "bookinfo", "-o", "jsonpath={.status.amplification} {.status.worstPath}")
			return out, err
		}).Should(Equal("9 productpage>reviews>ratings"))
		for _, format := range []string{"tree", "json"} {
			live, stderr, code := run("retrycap", "graph", "-n", "bookinfo", "-o", format)
			Expect(stderr).To(BeEmpty())
			Expect(code).To(Equal(1))
			offline, _, code := run("retrycap", "analyze", "-f", file, "-o", format)
			Expect(code).To(Equal(1))
			// Without the read summary only a run over files has (it counts the 4 Services read).
			if format == "json" {
				// analyze also reports how the names resolved; the graph's JSON carries the same.
				Expect(live).To(MatchJSON(withoutReadSummary(offline, format)))
				continue
			}
			Expect(offline).To(HavePrefix("read: 1 file(s), 11 object(s): 6 workload(s) (3 declare retrycap.dev/upstreams), 4 Service(s), 1 RetryPolicy(ies)\n"))
			Expect(live).To(Equal(withoutReadSummary(offline, format)), "-o %s", format)
		}
	})

	It("retrycap graph says when a policy has nothing to check", func() {
		Kubectl(ctx, "create", "namespace", "nothing-to-check")
		_, errOut, err := Env.CP.RunKubectl(ctx, `{"apiVersion":"retrycap.dev/v1alpha1","kind":"RetryPolicy","metadata":{"name":"payments"},"spec":{"maxAmplification":4,"selector":{"matchLabels":{"team":"payments"}}}}`,
			"apply", "-n", "nothing-to-check", "-f", "-")
		Expect(err).NotTo(HaveOccurred(), "stderr: %s", errOut)
		stdout, stderr, code := run("retrycap", "graph", "-n", "nothing-to-check")
		Expect(code).To(Equal(0))
		Expect(stdout).To(Equal("RetryPolicy nothing-to-check/payments  cap 4  amplification 0  (* worst path)\n"))
		Expect(stderr).To(Equal(`RetryPolicy nothing-to-check/payments: spec.selector {"matchLabels":{"team":"payments"}} selects no workload in namespace nothing-to-check: nothing to check` + "\n"))
	})
})
