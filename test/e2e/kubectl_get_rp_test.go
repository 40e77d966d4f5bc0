package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// age matches the AGE column at the end of a row, the one value that depends on timing.
var age = regexp.MustCompile(`(?m)[0-9]+[smh]$`)

// The retrycap CLI, built once, installed as both retrycap and kubectl-retrycap in binDir.
var (
	buildCLI sync.Once
	binDir   string
)

func cliDir() string {
	buildCLI.Do(func() {
		dir := filepath.Join(Env.Dir, "retrycap-cli")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		for _, name := range []string{"retrycap", "kubectl-retrycap"} {
			build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/retrycap")
			build.Dir = Env.CP.RepoRoot
			out, err := build.CombinedOutput()
			Expect(err).NotTo(HaveOccurred(), string(out))
		}
		binDir = dir
	})
	return binDir
}

// run runs a command (a path, or retrycap / kubectl-retrycap) with KUBECONFIG pointing at the
// suite's control plane and the CLI first on PATH, and returns stdout, stderr and the exit code.
func run(name string, args ...string) (string, string, int) {
	if !filepath.IsAbs(name) {
		name = filepath.Join(cliDir(), name)
	}
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+Env.CP.Kubeconfig, "PATH="+cliDir()+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred())
	}
	return stdout.String(), stderr.String(), code
}

var _ = Describe("kubectl get rp and kubectl retrycap graph", func() {
	ctx := context.Background()

	BeforeEach(func() {
		ApplySample(ctx, "incident18.yaml")
		ApplySample(ctx, "storm27.yaml")
		// The graph commands read the same objects the controller does; wait for the
		// controller so that every view below is of the settled samples.
		for _, p := range [][3]string{{"shop", "checkout", "18"}, {"payments", "storm", "27"}} {
			Eventually(func() (string, error) {
				out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", p[1], "-n", p[0], "-o", "jsonpath={.status.amplification}")
				return out, err
			}).Should(Equal(p[2]), "status.amplification of %s/%s", p[0], p[1])
		}
	})

	It("kubectl get rp shows the cap, amplification, worst path, worst time, mode and verdict of each sample", func() {
		get := func(ns string) func() (string, error) {
			return func() (string, error) {
				out, _, err := Env.CP.RunKubectl(ctx, "", "get", "rp", "-n", ns)
				return age.ReplaceAllString(out, "<age>"), err
			}
		}
		Eventually(get("shop")).Should(Equal(
			"NAME       CAP   AMPLIFICATION   WORST PATH           WORST TIME   MODE     WITHIN CAP   AGE\n" +
				"checkout   3     18              gateway>catalog>db   12.6s        Reject   False        <age>\n"))
		Eventually(get("payments")).Should(Equal(
			"NAME    CAP   AMPLIFICATION   WORST PATH                          WORST TIME   MODE     WITHIN CAP   AGE\n" +
				"storm   4     27              frontend>checkout>billing>payment   6.3s         Reject   False        <age>\n"))
	})

	It("kubectl retrycap graph prints the tree with the factors and the worst path marked", func() {
		// kubectl finds the plugin on PATH; the plugin loads $KUBECONFIG like kubectl does.
		stdout, stderr, code := run(Env.CP.Kubectl, "retrycap", "graph", "-n", "shop")
		Expect(stderr).To(BeEmpty())
		Expect(code).To(Equal(1), "over the cap: exit 1, like analyze")
		Expect(stdout).To(Equal(strings.Join([]string{
			"RetryPolicy shop/checkout  cap 3  amplification 18  (* worst path)",
			"gateway (client x2) *",
			"└─ -x3-> catalog *",
			"   └─ -x3-> db *",
			"",
		}, "\n")))
		help, _, code := run(Env.CP.Kubectl, "retrycap", "graph", "--help")
		Expect(code).To(Equal(0))
		Expect(help).To(ContainSubstring("\nUsage:\n  kubectl retrycap graph [POLICY] [-n NAMESPACE | -A] [flags]\n"))
	})

	It("retrycap graph renders the live cluster exactly as analyze renders the sample files", func() {
		for _, sample := range []struct{ ns, file string }{{"shop", "incident18.yaml"}, {"payments", "storm27.yaml"}} {
			for _, format := range []string{"tree", "json", "dot", "mermaid"} {
				live, stderr, code := run("retrycap", "graph", "-n", sample.ns, "-o", format)
				Expect(stderr).To(BeEmpty())
				Expect(code).To(Equal(1))
				offline, _, code := run("retrycap", "analyze", "-f", SamplePath(sample.file), "-o", format)
				Expect(code).To(Equal(1))
				if format == "json" {
					Expect(parseJSON(live)).To(Equal(parseJSON(withoutReadSummary(offline, format))), "%s -o json", sample.ns)
					continue
				}
				Expect(live).To(Equal(withoutReadSummary(offline, format)), "%s -o %s", sample.ns, format)
			}
		}
	})

	It("retrycap graph -A shows every namespace's policies; a missing policy is an error", func() {
		stdout, _, code := run("retrycap", "graph", "-A", "-o", "json")
		Expect(code).To(Equal(1))
		var rep struct {
			Policies []struct {
				Namespace, Name string
				Amplification   int64
			}
		}
		Expect(json.Unmarshal([]byte(stdout), &rep)).To(Succeed())
		// Other tests may add policies in their own namespaces: look at the samples' only.
		found := map[string]int64{}
		for _, p := range rep.Policies {
			found[p.Namespace+"/"+p.Name] = p.Amplification
		}
		Expect(found).To(HaveKeyWithValue("shop/checkout", int64(18)))
		Expect(found).To(HaveKeyWithValue("payments/storm", int64(27)))

		stdout, stderr, code := run("retrycap", "graph", "nope", "-n", "shop")
		Expect(code).To(Equal(2))
		Expect(stdout).To(BeEmpty())
		Expect(stderr).To(Equal("retrycap: graph: RetryPolicy shop/nope not found (nor a ClusterRetryPolicy nope selecting namespace shop)\n"))

		stdout, stderr, code = run("retrycap", "graph", "-n", "default")
		Expect(code).To(Equal(0))
		Expect(stdout).To(BeEmpty())
		Expect(stderr).To(Equal("No RetryPolicy or ClusterRetryPolicy found in namespace default; -A looks in every namespace.\n"))
	})
})

// withoutReadSummary is analyze's output without what only a run over files has: the read
// summary that heads the human formats ("read: ..." and its warnings, up to the first blank
// line) and the JSON's "summary", "warnings" and "unchecked" members. The rest is the report
// the live graph renders too.
func withoutReadSummary(out, format string) string {
	switch format {
	case "tree", "table":
		if strings.HasPrefix(out, "read: ") {
			if i := strings.Index(out, "\n\n"); i >= 0 {
				return out[i+2:]
			}
		}
		return out
	case "json":
		var doc map[string]json.RawMessage
		Expect(json.Unmarshal([]byte(out), &doc)).To(Succeed())
		delete(doc, "summary")
		delete(doc, "warnings")
		delete(doc, "unchecked")
		b, err := json.Marshal(doc)
		Expect(err).NotTo(HaveOccurred())
		return string(b)
	}
	return out
}

func parseJSON(s string) any {
	var v any
	Expect(json.Unmarshal([]byte(s), &v)).To(Succeed())
	return v
}
