// Command retrycap is the retrycap CLI: `analyze` checks manifests offline (in CI); other
// subcommands (graph, storm, demo) live in their own files. Installed as kubectl-retrycap it
// also runs as `kubectl retrycap ...`.
package main

import "os"

func main() {
	os.Exit(Execute(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
