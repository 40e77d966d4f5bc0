// Command coredns is CoreDNS built with only the plugins the test node's cluster DNS uses
// (hack/node.sh runs it inside the node's network namespace): the kubernetes plugin answers
// cluster.local from the API server, the rest is CoreDNS' default Corefile for Kubernetes minus the
// plugins that reach outside the machine (forward, loop). Fewer plugins: a build of a minute or two
// instead of CoreDNS' full set (clouds, etcd, ...).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the order the plugins run in, CoreDNS' own plugin.cfg order restricted to the set
// above.
var directives = []string{
	"errors",
	"log",
	"health",
	"ready",
	"cache",
	"loadbalance",
	"kubernetes",
}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
