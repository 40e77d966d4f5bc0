package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// wideColumns reads `kubectl get -o wide` output into one map per row, column name to the
// trimmed cell, by the header's column offsets (kubectl pads every cell of a column to one
// width, so a cell starts where its header does; empty cells stay empty). AGE is dropped: the
// one value that depends on timing.
func wideColumns(out string) []map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	header := lines[0]
	starts := regexp.MustCompile(`\S+( \S+)*`).FindAllStringIndex(header, -1)
	var rows []map[string]string
	for _, line := range lines[1:] {
		row := map[string]string{}
		for i, s := range starts {
			end := len(line)
			if i+1 < len(starts) && starts[i+1][0] < end {
				end = starts[i+1][0]
			}
			cell := ""
			if s[0] < len(line) {
				cell = strings.TrimSpace(line[s[0]:end])
			}
			if name := header[s[0]:s[1]]; name != "AGE" {
				row[name] = cell
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// Policies with odd but valid values, and invalid ones, applied with kubectl as a user would;
// the status and `kubectl get -o wide` of each stored one; and a selector that changes.
var _ = Describe("RetryPolicy red team (kubectl apply)", func() {
	ctx := context.Background()
	const ns = "rt19"
	apply := func(doc string) (string, string, error) {
		return Env.CP.RunKubectl(ctx, doc, "apply", "-f", "-")
	}
	policy := func(name, spec string) string {
		return "apiVersion: retrycap.dev/v1alpha1\nkind: RetryPolicy\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" + spec
	}
	deployment := func(name, team, upstreams string) string {
		return fmt.Sprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s, namespace: %s}\nspec:\n  selector: {matchLabels: {app: %s}}\n  template:\n    metadata:\n      labels: {app: %s, team: %s}\n      annotations: {retrycap.dev/upstreams: %q}\n    spec: {containers: [{name: app, image: retrycap/lab-app:v0.1.0}]}\n",
			name, ns, name, name, team, upstreams)
	}

	It("stores odd but valid values, refuses invalid ones naming field and value, and keeps the status and the columns exact", func() {
		Kubectl(ctx, "create", "namespace", ns)
		// a -x3-> b -x2-> c: amplification 6. a and b are team x, c team z.
		for _, d := range []string{deployment("a", "x", "b=3"), deployment("b", "x", "c=2"), deployment("c", "z", "")} {
			_, errOut, err := apply(d)
			Expect(err).NotTo(HaveOccurred(), errOut)
		}

		valid := map[string]string{
			"cap-1":        "  maxAmplification: 1\n",
			"cap-1000":     "  maxAmplification: 1000\n",
			"mtta-go-form": "  maxAmplification: 6\n  maxTimeToAnswer: 1h0m0.5s\n",
			"mtta-1-5h":    "  maxAmplification: 6\n  maxTimeToAnswer: 1.5h\n",
			"mtta-1500ms":  "  maxAmplification: 6\n  maxTimeToAnswer: 1500ms\n",
			"no-team":      "  maxAmplification: 3\n  selector: {matchExpressions: [{key: team, operator: DoesNotExist}]}\n",
		}
		for name, spec := range valid {
			_, errOut, err := apply(policy(name, spec))
			Expect(err).NotTo(HaveOccurred(), "%s: %s", name, errOut)
		}

		for name, c := range map[string]struct{ spec, stderr string }{
			"cap-1001": {"  maxAmplification: 1001\n", `The RetryPolicy "cap-1001" is invalid: spec.maxAmplification: Invalid value: 1001: spec.maxAmplification in body should be less than or equal to 1000`},
			"cap-0":    {"  maxAmplification: 0\n", `The RetryPolicy "cap-0" is invalid: spec.maxAmplification: Invalid value: 0: spec.maxAmplification in body should be greater than or equal to 1`},
			"mtta-0s":  {"  maxAmplification: 3\n  maxTimeToAnswer: 0s\n", `The RetryPolicy "mtta-0s" is invalid: spec.maxTimeToAnswer: Invalid value: "0s": must be between 1ms and 24h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`},
			"mtta-25h": {"  maxAmplification: 3\n  maxTimeToAnswer: 1.5h24h\n", `The RetryPolicy "mtta-25h" is invalid: spec.maxTimeToAnswer: Invalid value: "1.5h24h": must be between 1ms and 24h, written as 1 to 5 parts of up to 5 digits (and a fraction, as Go writes 1.5s) and a unit ns, us, ms, s, m or h ("1m30s", "500ms")`},
			"sel-values": {"  maxAmplification: 3\n  selector: {matchExpressions: [{key: team, operator: DoesNotExist, values: [x]}]}\n",
				"The RetryPolicy \"sel-values\" is invalid: spec.selector.matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"},
			"sel-op": {"  maxAmplification: 3\n  selector: {matchExpressions: [{key: team, operator: Maybe, values: [x]}]}\n",
				`The RetryPolicy "sel-op" is invalid: spec.selector.matchExpressions[0].operator: Invalid value: "Maybe": not a valid selector operator`},
			"mode": {"  maxAmplification: 3\n  enforcement: reject\n", "The RetryPolicy \"mode\" is invalid: \n* spec.enforcement: Unsupported value: \"reject\": supported values: \"Reject\", \"Rewrite\", \"Audit\"\n* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"},
			"typo": {"  maxAmplification: 3\n  maxAmplificaton: 4\n", `Error from server (BadRequest): error when creating "STDIN": RetryPolicy in version "v1alpha1" cannot be handled as a RetryPolicy: strict decoding error: unknown field "spec.maxAmplificaton"`},
		} {
			out, errOut, err := apply(policy(name, c.spec))
			Expect(err).To(HaveOccurred(), "%s was stored: %s", name, out)
			Expect(out).To(BeEmpty())
			Expect(errOut).To(Equal(c.stderr+"\n"), name)
		}
		_, errOut, err := apply("apiVersion: retrycap.dev/v1alpha1\nkind: ClusterRetryPolicy\nmetadata: {name: rt19-no-ns-selector}\nspec: {maxAmplification: 5}\n")
		Expect(err).To(HaveOccurred())
		Expect(errOut).To(Equal("The ClusterRetryPolicy \"rt19-no-ns-selector\" is invalid: \n* spec.namespaceSelector: Required value\n* <nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation\n"))

		// Every stored policy's columns, once the controller has reconciled them all.
		wide := func() ([]map[string]string, error) {
			out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "-n", ns, "-o", "wide")
			if err != nil {
				return nil, err
			}
			return wideColumns(out), nil
		}
		row := func(name, capacity, amp, path, worst, within, reason, maxTime, withinMax, services, edges string) map[string]string {
			return map[string]string{"NAME": name, "CAP": capacity, "AMPLIFICATION": amp, "WORST PATH": path, "WORST TIME": worst, "MODE": "Reject",
				"WITHIN CAP": within, "REASON": reason, "MAX TIME": maxTime, "WITHIN MAX TIME": withinMax, "SERVICES": services, "EDGES": edges}
		}
		Eventually(wide).Should(Equal([]map[string]string{
			row("cap-1", "1", "6", "a>b>c", "6.3s", "False", "CapExceeded", "", "", "3", "2"),
			row("cap-1000", "1000", "6", "a>b>c", "6.3s", "True", "WithinCap", "", "", "3", "2"),
			// 6.3s worst time: within 1h0m0.5s and 1.5h, over 1500ms.
			row("mtta-1-5h", "6", "6", "a>b>c", "6.3s", "True", "WithinCap", "1.5h", "True", "3", "2"),
			row("mtta-1500ms", "6", "6", "a>b>c", "6.3s", "True", "WithinCap", "1500ms", "False", "3", "2"),
			row("mtta-go-form", "6", "6", "a>b>c", "6.3s", "True", "WithinCap", "1h0m0.5s", "True", "3", "2"),
			// Every workload has a team label: nothing selected, nothing checked.
			row("no-team", "3", "0", "", "", "Unknown", "NothingSelected", "", "", "0", "0"),
		}))

		// An empty namespaceSelector selects every namespace (those the webhooks skip aside): the
		// chain of rt19 is the cluster policy's too, its services named with their namespace.
		// Deleted afterwards: its cap would judge every other test's workloads.
		DeferCleanup(func() { Kubectl(ctx, "delete", "clusterretrypolicy", "rt19-everywhere") })
		_, errOut, err = apply("apiVersion: retrycap.dev/v1alpha1\nkind: ClusterRetryPolicy\nmetadata: {name: rt19-everywhere}\nspec:\n  maxAmplification: 1000\n  namespaceSelector: {}\n  selector: {matchLabels: {team: x}}\n")
		Expect(err).NotTo(HaveOccurred(), errOut)
		Eventually(func() ([]map[string]string, error) {
			out, _, err := Env.CP.RunKubectl(ctx, "", "get", "crp", "rt19-everywhere", "-o", "wide")
			return wideColumns(out), err
		}).Should(Equal([]map[string]string{
			// team x: a and b, in rt19 only (the samples' workloads have no team label); b's
			// call to c is b's edge, so c is on the chain as the callee it is.
			row("rt19-everywhere", "1000", "6", "a.rt19>b.rt19>c.rt19", "6.3s", "True", "WithinCap", "", "", "3", "2"),
		}))

		// The selector changes from every workload to team z (c alone): a and b leave the
		// status, exact counts; c declares no upstreams, so nothing is checked.
		_, errOut, err = apply(policy("cap-1", "  maxAmplification: 1\n  selector: {matchLabels: {team: z}}\n"))
		Expect(err).NotTo(HaveOccurred(), errOut)
		Eventually(func() (string, error) {
			out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "cap-1", "-n", ns, "-o",
				`jsonpath={.status.observedGeneration} {.status.services} {.status.edges} {.status.amplification} {.status.worstPath} {.status.chains} {.status.violations} {.status.conditions[?(@.type=="WithinCap")].reason}: {.status.conditions[?(@.type=="WithinCap")].message}`)
			return out, err
		}).Should(Equal(`2 1 0 1 c [{"amplification":1,"entrypoint":"c","path":["c"]}]  NoUpstreamsDeclared: none of the 1 selected workload(s) declares retrycap.dev/upstreams: no edges, nothing to check`))
	})
})
