// Command kubectl-retrycap is the kubectl plugin (`kubectl retrycap ...`): the commands that
// run against a cluster or in CI, `analyze`, `graph`, `observe` and `discover`, from the same constructors as the
// full retrycap CLI (internal/cli). The storm lab and the demo stay in cmd/retrycap: they link
// the embedded control plane (envtest), the manager and gonum/plot, which a plugin that users
// install on their PATH should not carry.
package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/cli"
)

func main() {
	os.Exit(cli.Execute(newRootCmd(os.Stdin, os.Stdout, os.Stderr), os.Args[1:]))
}

// newRootCmd returns the plugin with its commands, in this order.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := cli.NewRoot(stdin, stdout, stderr)
	root.AddCommand(
		cli.NewAnalyzeCmd(stdin, stdout, stderr),
		cli.NewGraphCmd(stdin, stdout, stderr),
		cli.NewObserveCmd(stdin, stdout, stderr),
		cli.NewDiscoverCmd(stdin, stdout, stderr),
	)
	return root
}
