package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/analyze"
)

// NewAnalyzeCmd returns `analyze`: the offline check of manifests.
func NewAnalyzeCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var files []string
	var output, namespace string
	cmd := &cobra.Command{
		Use:   "analyze -f PATH...",
		Short: "Check manifests offline: amplification per RetryPolicy, worst paths, violations and fixes",
		Long: `analyze reads Deployments, StatefulSets, DaemonSets, bare Pods and RetryPolicies from
files, directories (recursively: *.yaml, *.yml, *.json) or "-" (stdin), multi-document YAML or JSON,
ignoring other kinds, and prints for every RetryPolicy its cap, amplification, worst path,
worst-case load, and the violations with the attempts that would fit.

Exit status: 0 when every policy is within its cap; 1 when one is over its cap or has a retry
cycle; 2 on bad input (the file and the 1-based index of the document among its non-empty
documents, and for an invalid annotation the workload, token and column).`,
		Example: `  retrycap analyze -f deploy/
  kustomize build overlays/prod | retrycap analyze -f - -o json
  retrycap analyze -f config/samples -o dot | dot -Tsvg > graph.svg`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return &ExitError{Code: ExitBadInput, Msg: "analyze: -f PATH is required (a file, a directory or - for stdin)"}
			}
			render, ok := renderers[output]
			if !ok {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: unknown output %q (table, json, dot, mermaid, tree)", output)}
			}
			m, errs := analyze.Reader{DefaultNamespace: namespace, Stdin: stdin}.ReadPaths(files)
			for _, err := range errs {
				fmt.Fprintln(stderr, "error:", err)
			}
			if len(errs) > 0 {
				return &ExitError{Code: ExitBadInput, Msg: fmt.Sprintf("analyze: %d error(s) in the input", len(errs))}
			}
			if len(m.Policies) == 0 {
				return &ExitError{Code: ExitBadInput, Msg: "analyze: no RetryPolicy (retrycap.dev/v1alpha1) in the input: nothing to check against"}
			}
			rep := m.Analyze()
			if err := render(stdout, rep); err != nil {
				return &ExitError{Code: ExitBadInput, Msg: err.Error()}
			}
			if !rep.WithinCap {
				return &ExitError{Code: ExitOverCap}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "file, directory (recursive) or - for stdin; repeatable")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json, dot, mermaid or tree")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "default", "namespace of objects that do not name one")
	return cmd
}

var renderers = map[string]func(io.Writer, *analyze.Report) error{
	"table":   analyze.RenderTable,
	"json":    analyze.RenderJSON,
	"dot":     analyze.RenderDOT,
	"mermaid": analyze.RenderMermaid,
	"tree":    analyze.RenderTree,
}
