package e2e

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// kubectl explain prints each line break of a description. controller-gen keeps the Go comments'
// breaks (column 100), so the descriptions broke mid-sentence until `make manifests` joined each
// paragraph's lines (hack/crddoc), as Kubernetes' own generators do.
var _ = Describe("kubectl explain", func() {
	ctx := context.Background()
	explain := func(field string) string {
		var out string
		// The API server publishes a new CRD's OpenAPI a moment after the CRD is established.
		Eventually(func() error {
			var err error
			out, _, err = Env.CP.RunKubectl(ctx, "", "explain", field)
			return err
		}).Should(Succeed(), "kubectl explain %s", field)
		return out
	}

	It("prints a field's description as whole sentences wrapped by kubectl, as for Kubernetes' own types", func() {
		Expect(explain("retrypolicy.spec.maxTimeToAnswer")).To(Equal(strings.Join([]string{
			"GROUP:      retrycap.dev",
			"KIND:       RetryPolicy",
			"VERSION:    v1alpha1",
			"",
			"FIELD: maxTimeToAnswer <string>",
			"",
			"",
			"DESCRIPTION:",
			"    MaxTimeToAnswer is the most an entrypoint's client may wait for an answer in",
			"    the worst case (every try of every hop timing out): a chain whose worst time",
			"    to answer is longer is a violation, refused at admission like one over",
			"    maxAmplification. Unset: the worst time is reported, not checked. 1ms to 24h",
			"    (the proxies' largest deadline).",
			"    ",
			"",
			"",
		}, "\n")))

		spec := explain("clusterretrypolicy.spec")
		Expect(spec).To(ContainSubstring(strings.Join([]string{
			"DESCRIPTION:",
			"    ClusterRetryPolicySpec is a RetryPolicySpec over the workloads of every",
			"    namespace namespaceSelector selects: its graph spans those namespaces, so a",
			"    chain whose hops belong to different teams' namespaces is one chain under",
			"    one cap. Inside the selected namespaces the pod-template selector applies as",
			"    in a RetryPolicy; entrypoints name \"service.namespace\".",
			"    ",
			"FIELDS:",
		}, "\n")))
		Expect(spec).To(ContainSubstring(strings.Join([]string{
			"  namespaceSelector\t<Object> -required-",
			"    NamespaceSelector selects the namespaces whose workloads the policy covers,",
			"    by the Namespace objects' labels. Required: {} selects every namespace (the",
			"    manager's own and the ones the webhooks skip are still skipped by",
			"    admission).",
			"",
		}, "\n")))
	})
})
