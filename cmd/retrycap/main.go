// Command retrycap is the retrycap CLI: `analyze` checks manifests offline (in CI); other
// subcommands (graph, storm, demo) live in their own files. Installed as kubectl-retrycap it
// also runs as `kubectl retrycap ...`.
package main

import (
	"os"
	"path/filepath"

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
	storm.SelfProxy = true
	os.Exit(Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
