package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/analyze"
)

// NewAnalyzeCmd returns `analyze`: the offline check of manifests.
func NewAnalyzeCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var files, kustomizations []string
	var output, namespace string
	var recursive bool
	var istioDefault int64
	var meshed, nsLabels []string
	var failOnInversion bool
	cmd := &cobra.Command{
		Use:   "analyze (-f PATH | -k DIR)...",
		Short: "Check manifests offline: amplification per RetryPolicy, worst paths, violations and fixes",
		Long: `analyze reads Deployments, StatefulSets, DaemonSets, CronJobs, Jobs, ReplicaSets, bare Pods,
Services and RetryPolicies (a Pod, Job or ReplicaSet a controller owns is covered by its owner)
(also inside any List, such as apps/v1 DeploymentList) from files, directories (*.yaml, *.yml,
*.json; only the files directly in them unless -R, as kubectl -f), kustomizations (-k DIR, built
as kustomize build does: in process in the retrycap CLI, by kubectl kustomize in the plugin) or
"-" (stdin), multi-document YAML or JSON, and prints first what it read (objects, workloads and how
many declare upstreams, Services, mesh objects, ignored kinds, every warning), then for every
RetryPolicy its cap, amplification, worst path, worst-case load and the violations with the attempts
that would fit. ClusterRetryPolicies are reported the same way over the namespaces they select, by
the labels of the Namespace objects in the input (or --namespace-labels); a namespace with workloads
whose labels are not given is not guessed: it is reported as not checked (exit 2). A file that is
not a Kubernetes manifest (app config, a JSON patch, an unrendered Helm template) is skipped with a
warning.

Outputs: table and tree (the summary first, on stdout); json (the summary inside, and on stderr;
on bad input a document of the errors, each with its file, object, field and value);
dot, mermaid, patch (the whole combined fix: one merge patch per object, applied together they
bring every chain within its cap) and sarif (SARIF 2.1.0, for code-scanning UIs), the summary on
stderr.

Each policy also gets its worst time to answer (every try of every hop timing out, backoff
included; "unbounded" where no timeout bounds a chain), the chains over spec.maxTimeToAnswer and
the timeout inversions (a caller's per-try timeout shorter than its callee's worst time): see
docs/concepts.md.

Exit status: 0 when something was checked and every policy is within its cap; 1 when one is over
its cap, has a retry cycle or a chain over its maxTimeToAnswer (or, with --fail-on-inversion, a
timeout inversion); 2 on bad input (the file and the 1-based index of the document
among its non-empty documents, and for an invalid annotation the workload, token and column), and
when nothing was checked: no policy, a policy that selects no workload, or a policy none of whose
workloads declares upstreams (the reason is printed). See docs/analyze.md.`,
		Example: `  retrycap analyze -f deploy/
  retrycap analyze -R -f deploy/ -o sarif > retrycap.sarif
  retrycap analyze -k overlays/prod -o patch > fix.yaml
  kustomize build overlays/prod | retrycap analyze -f - -o json
  retrycap analyze -k config/samples -o dot | dot -Tsvg > graph.svg`,
		Args: noArgs("files and directories are given with -f (-f ARG), a kustomization with -k"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 && len(kustomizations) == 0 {
				return &ExitError{Code: ExitBadInput, Msg: "analyze: -f PATH or -k DIR is required (a file, a directory, - for stdin, or a kustomization directory)"}
			}
			render, ok := renderers[output]
			if !ok && output != "patch" {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: unknown output %q (table, json, dot, mermaid, tree, patch, sarif)", output)}
			}
			if err := checkNamespace("analyze", namespace); err != nil {
				return err
			}
			if err := stdinOnce("analyze", "-f -", files); err != nil {
				return err
			}
			if recursive && len(files) == 0 {
				return &ExitError{Code: ExitBadInput, Msg: "analyze: -R reads the directories given with -f, and no -f is given"}
			}
			rd := analyze.Reader{DefaultNamespace: namespace, Stdin: stdin, Recursive: recursive}
			m := analyze.NewManifests()
			// Files rarely carry the Mesh "default" that Kuma's control plane creates at start:
			// counting no Kuma layer for its callers would be a false green (docs/meshes.md).
			m.MeshOptions.KumaDefaultMesh = true
			if cmd.Flags().Changed("istio-default-retries") {
				if istioDefault < 0 {
					return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: --istio-default-retries %d: must be 0 or more", istioDefault)}
				}
				m.MeshOptions.IstioDefaultRetries = &istioDefault
			}
			errs := rd.ReadPathsInto(m, files)
			for _, k := range kustomizations {
				errs = append(errs, rd.ReadKustomization(m, k, Kustomize)...)
			}
			// A namespace given twice: the last value won without a word.
			once := func(flag string) func(ns, v string) error {
				seen := map[string]string{}
				return func(ns, v string) error {
					if first, dup := seen[ns]; dup {
						return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: --%s %q: namespace %s given twice (first %q)", flag, v, ns, first)}
					}
					seen[ns] = v
					return nil
				}
			}
			meshedOnce, labelsOnce := once("meshed-namespace"), once("namespace-labels")
			for _, nm := range meshed {
				ns, name, ok := strings.Cut(nm, "=")
				if !ok || ns == "" {
					return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: --meshed-namespace %q: want NAMESPACE=istio or NAMESPACE=linkerd", nm)}
				}
				if err := meshedOnce(ns, nm); err != nil {
					return err
				}
				if err := m.SetMeshedNamespace(ns, name); err != nil {
					return &ExitError{Code: ExitBadInput, Msg: "analyze: --meshed-namespace: " + err.Error()}
				}
			}
			for _, nl := range nsLabels {
				// "shop" without "=" was read as "shop has no labels" (that is "shop="): a typo
				// of "shop=team=a" must not stand for a namespace's labels.
				ns, labels, found := strings.Cut(nl, "=")
				if !found || ns == "" {
					return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: --namespace-labels %q: want NAMESPACE=KEY=VALUE,...", nl)}
				}
				if err := labelsOnce(ns, nl); err != nil {
					return err
				}
				if err := m.SetNamespaceLabels(ns, labels); err != nil {
					return &ExitError{Code: ExitBadInput, Msg: "analyze: --namespace-labels: " + err.Error()}
				}
			}
			for _, err := range errs {
				fmt.Fprintln(stderr, "error:", err)
			}
			if len(errs) > 0 {
				// The file a CI job uploads, the document a script parses, says why nothing was
				// checked, rather than being empty.
				var err error
				switch output {
				case "sarif":
					err = analyze.RenderSARIFErrors(stdout, errs)
				case "json":
					err = analyze.RenderJSONErrors(stdout, errs)
				}
				if err != nil {
					return &ExitError{Code: ExitBadInput, Msg: err.Error()}
				}
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: %d error(s) in the input", len(errs))}
			}
			rep := m.Analyze()
			rep.SetFailOnInversion(failOnInversion)
			summaryTo := stderr
			if output == "table" || output == "tree" {
				summaryTo = stdout
			}
			if err := analyze.RenderSummary(summaryTo, rep); err != nil {
				return &ExitError{Code: ExitBadInput, Msg: err.Error()}
			}
			if len(rep.Policies) == 0 {
				return &ExitError{Code: ExitBadInput, Msg: "analyze: nothing checked: " + rep.Unchecked[0]}
			}
			var err error
			if output == "patch" {
				patches, notes := m.Plan()
				err = analyze.RenderPatch(stdout, patches, notes)
			} else {
				err = render(stdout, rep)
			}
			if err != nil {
				return &ExitError{Code: ExitBadInput, Msg: err.Error()}
			}
			// Over the cap wins: what was checked and failed is the answer (exit 1); exit 2 says
			// only that something was not checked while nothing checked failed.
			if rep.OverCap() || rep.OverMaxTime() {
				return &ExitError{Code: ExitOverCap}
			}
			if len(rep.Unchecked) > 0 {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: nothing checked for %d of %d %s (see \"not checked\" above)", uncheckedPolicies(rep), len(rep.Policies), policyNoun(rep))}
			}
			if n := rep.TimeoutInversions(); failOnInversion && n > 0 {
				return &ExitError{Code: ExitOverCap, Msg: fmt.Sprintf("analyze: %d timeout inversion(s) (--fail-on-inversion)", n)}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory or - for stdin; repeatable")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "read the directories given with -f recursively")
	cmd.Flags().StringArrayVarP(&kustomizations, "kustomize", "k", nil, "a kustomization directory, built as kustomize build does; repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, dot, mermaid, tree, patch or sarif")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of objects that do not name one")
	cmd.Flags().Int64Var(&istioDefault, "istio-default-retries", 0, "Istio's default retries (MeshConfig defaultHttpRetryPolicy.attempts) for routes that set none; unset: the MeshConfigs in the input (ConfigMaps istio-system/istio and istio-system/istio-<rev>, the most of them), else Istio's 2")
	cmd.Flags().StringArrayVar(&nsLabels, "namespace-labels", nil, "NAMESPACE=KEY=VALUE,...: the namespace's labels, for ClusterRetryPolicies' namespaceSelector (when its Namespace object is not in the input; it wins over one that is; NAMESPACE= for none); repeatable")
	cmd.Flags().BoolVar(&failOnInversion, "fail-on-inversion", false, "exit 1 on a timeout inversion (a caller's per-try timeout shorter than its callee's worst time), an error in SARIF; without it they are warnings")
	cmd.Flags().StringArrayVar(&meshed, "meshed-namespace", nil, "NAMESPACE=istio|linkerd: the namespace has sidecar injection on (when its Namespace object is not in the input; it wins over one that is); repeatable")
	return cmd
}

// Kustomize builds a kustomization for analyze -k. The kubectl plugin keeps the default, the
// real `kubectl kustomize` (there wherever the plugin is, and what kubectl -k runs); the full CLI
// sets it to internal/analyze/kustomize.Build, the same library in process, which the plugin
// does not link (it would double its size).
var Kustomize = KubectlKustomize

// KubectlKustomize runs `kubectl kustomize dir` and returns its output.
func KubectlKustomize(dir string) ([]byte, error) {
	path, err := exec.LookPath("kubectl")
	if err != nil {
		return nil, errors.New("-k runs kubectl kustomize, and kubectl is not on PATH (or: kustomize build DIR | retrycap analyze -f -)")
	}
	var out, stderr bytes.Buffer
	cmd := exec.Command(path, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl kustomize: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	// What kubectl kustomize printed (deprecation notices) goes at the head of the output as
	// comment lines, which analyze summarises in one warning.
	var head bytes.Buffer
	for _, l := range strings.Split(stderr.String(), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			head.WriteString(analyze.ChatterPrefix + l + "\n")
		}
	}
	return append(head.Bytes(), out.Bytes()...), nil
}

var renderers = map[string]func(io.Writer, *analyze.Report) error{
	"table":   analyze.RenderTable,
	"json":    analyze.RenderJSON,
	"dot":     analyze.RenderDOT,
	"mermaid": analyze.RenderMermaid,
	"tree":    analyze.RenderTree,
	"sarif":   analyze.RenderSARIF,
}

// policyNoun is "RetryPolicy(ies)", or "policies" when the report has ClusterRetryPolicies.
func policyNoun(rep *analyze.Report) string {
	for _, p := range rep.Policies {
		if p.Kind == analyze.KindCluster {
			return "policies"
		}
	}
	return "RetryPolicy(ies)"
}

// uncheckedPolicies is how many of rep's policies have a "not checked" line (a cluster policy may
// have two: namespaces of unknown labels, and then nothing selected).
func uncheckedPolicies(rep *analyze.Report) int {
	n := 0
	for i := range rep.Policies {
		t := rep.Policies[i].Title()
		for _, u := range rep.Unchecked {
			if strings.HasPrefix(u, t+" ") || strings.HasPrefix(u, t+":") {
				n++
				break
			}
		}
	}
	return max(n, 1)
}
