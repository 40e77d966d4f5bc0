// Command retrycap is the full retrycap CLI: `analyze` checks manifests offline (in CI),
// `graph` shows a cluster's live graph, `observe` what really happened per request from access
// logs, `discover` the upstreams telemetry saw, `storm` runs the retry-storm lab and `demo` the
// whole story on an embedded control plane. The kubectl plugin (cmd/kubectl-retrycap) carries
// only analyze, graph, observe and discover, from the same constructors in internal/cli.
package main

import (
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/retrycap/retrycap/internal/analyze/kustomize"
	"github.com/retrycap/retrycap/internal/cli"
	"github.com/retrycap/retrycap/internal/labapp"
	"github.com/retrycap/retrycap/internal/proxy"
	"github.com/retrycap/retrycap/internal/storm"
)

func main() {
	// The CLI can also be the proxy: run as retrycap-proxy (a link `retrycap storm` makes when no
	// retrycap-proxy is installed) or as the hidden `retrycap proxy ARGS...`.
	if filepath.Base(os.Args[0]) == storm.ProxyName {
		os.Exit(proxy.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "proxy" {
		os.Exit(proxy.Main(os.Args[2:], os.Stdout, os.Stderr))
	}
	// `storm --protocol grpc` runs its gRPC apps as children of this executable.
	labapp.RunGRPCChild()
	storm.SelfProxy = true
	// analyze -k builds kustomizations in process (the plugin runs kubectl kustomize).
	cli.Kustomize = kustomize.Build
	os.Exit(Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// newRootCmd returns the CLI with its commands, in this order.
func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := cli.NewRoot(stdin, stdout, stderr)
	root.AddCommand(
		cli.NewAnalyzeCmd(stdin, stdout, stderr),
		cli.NewGraphCmd(stdin, stdout, stderr),
		cli.NewObserveCmd(stdin, stdout, stderr),
		cli.NewDiscoverCmd(stdin, stdout, stderr),
		newStormCmd(stdin, stdout, stderr),
		newDemoCmd(stdin, stdout, stderr),
	)
	return root
}

// Execute runs the CLI with args and returns the process exit code.
func Execute(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(newRootCmd(stdin, stdout, stderr), args)
}
