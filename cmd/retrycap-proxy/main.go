// Command retrycap-proxy is the sidecar that enforces retrycap's retry
// policy at run time; see internal/proxy and `retrycap-proxy --help`.
package main

import (
	"os"

	"github.com/retrycap/retrycap/internal/proxy"
)

func main() {
	os.Exit(proxy.Main(os.Args[1:], os.Stdout, os.Stderr))
}
