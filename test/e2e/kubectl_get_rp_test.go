package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// age matches the AGE column at the end of a row, the one value that depends on timing.
var age = regexp.MustCompile(`(?m)[0-9]+[smh]$`)

var _ = Describe("kubectl get rp", func() {
	ctx := context.Background()

	BeforeEach(func() {
		ApplySample(ctx, "incident18.yaml")
		ApplySample(ctx, "storm27.yaml")
	})

	It("shows the cap, amplification, worst path, mode and verdict of each sample", func() {
		get := func(ns string) func() (string, error) {
			return func() (string, error) {
				out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "-n", ns)
				return age.ReplaceAllString(out, "<age>"), err
			}
		}
		Eventually(get("shop")).Should(Equal(
			"NAME       CAP   AMPLIFICATION   WORST PATH           MODE     WITHIN CAP   AGE\n" +
				"checkout   3     18              gateway>catalog>db   Reject   False        <age>\n"))
		Eventually(get("payments")).Should(Equal(
			"NAME    CAP   AMPLIFICATION   WORST PATH                          MODE     WITHIN CAP   AGE\n" +
				"storm   4     27              frontend>checkout>billing>payment   Reject   False        <age>\n"))
	})

	It("shows the same graph through `kubectl retrycap graph`", func() {
		bin := GinkgoT().TempDir()
		build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-retrycap"), "./cmd/retrycap")
		build.Dir = Env.CP.RepoRoot
		out, err := build.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		// Wait until the controller has seen the sample, so the graph is the settled one.
		Eventually(func() (string, error) {
			out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "checkout", "-n", "shop", "-o", "jsonpath={.status.amplification}")
			return out, err
		}).Should(Equal("18"))

		// kubectl finds the plugin on PATH and passes the rest on; the plugin loads the
		// kubeconfig from $KUBECONFIG like kubectl does.
		kubectl := exec.Command(Env.CP.Kubectl, "retrycap", "graph", "-n", "shop")
		kubectl.Env = append(os.Environ(), "KUBECONFIG="+Env.CP.Kubeconfig, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		var stdout, stderr bytes.Buffer
		kubectl.Stdout, kubectl.Stderr = &stdout, &stderr
		err = kubectl.Run()
		var exit *exec.ExitError
		Expect(err).To(BeAssignableToTypeOf(exit), "stderr: %s", stderr.String())
		Expect(err.(*exec.ExitError).ExitCode()).To(Equal(1), "over the cap: exit 1, like analyze")
		Expect(stderr.String()).To(BeEmpty())
		Expect(stdout.String()).To(Equal(strings.Join([]string{
			"RetryPolicy shop/checkout  cap 3  amplification 18  (* worst path)",
			"gateway (client x2) *",
			"└─ -x3-> catalog *",
			"   └─ -x3-> db *",
			"",
		}, "\n")))
	})
})
